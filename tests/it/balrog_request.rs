//! `run --preset balrog` sends, at every call, the request BALROG's naive agent sends. A local
//! HTTP server records our request bodies and answers scripted replies (valid names, replies
//! BALROG's filter repairs, invalid and empty ones); tests/python/balrog_requests.py then plays
//! the same episode with BALROG's own evaluator, agent, prompt builder and client from
//! ../shared/balrog and compares every request: roles, every text, the image (by its pixels),
//! the history window past its 32 events, the stored action texts, the feedback sentence and
//! the sampling fields. It also checks that our run judged the same replies invalid.
//! Skips with a printed reason without ../shared/balrog, the crafter venv or crafter's textures.

use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};

use axum::{extract::State, routing::post, Json, Router};
use serde_json::{json, Value};
use vlm_eval::crafter::TextureSet;

use crate::balrog_support;
use crate::support;
use balrog_support::{crafter_python, shared_balrog};

/// Replies, played in order: exact names, filter-repaired ones, invalid ones (BALROG plays Noop
/// and gives feedback), and ones that filter to nothing (BALROG stores no action for them).
const REPLIES: [&str; 20] = [
    "Move West",
    "Do",
    "  Move North \n",
    "Do.",
    "move west",
    "I will Move West now",
    "Move East",
    "123",
    "",
    "`Move South`",
    "Sleep",
    "Noop",
    "Move West\nbecause",
    "Dó",
    "Place Table",
    "Make Wood Pickaxe",
    "ACTION: Do",
    "Do",
    "Move East",
    "1. Do",
];
const STEPS: usize = 45;
const SEED: i64 = 7;

type Seen = Arc<Mutex<Vec<Value>>>;

async fn completions(State(seen): State<Seen>, Json(body): Json<Value>) -> Json<Value> {
    let n = {
        let mut s = seen.lock().unwrap();
        s.push(body);
        s.len() - 1
    };
    let text = REPLIES[n % REPLIES.len()];
    Json(
        json!({"id": "x", "object": "chat.completion", "created": 1, "model": "test-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 2, "total_tokens": 102}}),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_equal_balrogs_naive_agent_at_every_call() {
    let Some(shared) = shared_balrog() else {
        println!("SKIP: ../shared/balrog (BALROG's reference files) not present");
        return;
    };
    let Some(python) = crafter_python() else {
        println!("SKIP: .venv-crafter/bin/python with crafter==1.8.3 not present");
        return;
    };
    if TextureSet::discover(None).map(|(t, _)| t.kind()).ok() != Some("official") {
        println!("SKIP: crafter's official textures not found (set CRAFTER_ASSETS)");
        return;
    }
    let seen: Seen = Arc::default();
    let app = Router::new()
        .route("/v1/chat/completions", post(completions))
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let out = support::scratch("balrog-req");
    let base = format!("http://127.0.0.1:{port}/v1");
    let reference = shared.join("reference");
    let status = support::tokio_command()
        .args([
            "--preset",
            "balrog",
            "--model",
            "test-model",
            "--base-url",
            &base,
        ])
        .args([
            "--seed-list",
            &SEED.to_string(),
            "--steps",
            &STEPS.to_string(),
        ])
        .arg("--balrog-src")
        .arg(&reference)
        .arg("--out")
        .arg(&out)
        .args(["--run-name", "r", "--quiet"])
        .env_remove("BALROG_SRC")
        .status()
        .await
        .unwrap();
    assert!(status.success());
    let ours: Vec<Value> = seen.lock().unwrap().clone();
    assert_eq!(ours.len(), STEPS, "one request per model step");

    let case = out.join("case.json");
    let replies: Vec<&str> = (0..STEPS).map(|i| REPLIES[i % REPLIES.len()]).collect();
    std::fs::write(
        &case,
        json!({"seed": SEED, "steps": STEPS, "model": "test-model", "replies": replies, "ours": ours})
            .to_string(),
    )
    .unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/balrog_requests.py");
    let result = Command::new(&python)
        .arg(&script)
        .arg(&shared)
        .arg(&case)
        .output()
        .unwrap();
    assert!(
        result.status.success(),
        "{}",
        String::from_utf8_lossy(&result.stderr)
    );
    let report: Value = serde_json::from_slice(&result.stdout).unwrap();
    assert_eq!(report["balrog"], STEPS, "{report}");
    assert_eq!(report["compared"], STEPS, "{report}");
    assert_eq!(
        report["mismatch_count"], 0,
        "requests differ from BALROG's: {:#}",
        report["mismatches"]
    );

    // Every request carries one image, the current frame, at 256 px; the window overflowed.
    let last = &ours[STEPS - 1]["messages"];
    let images: usize = last
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            m["content"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|p| p["type"] == "image_url")
                .count()
        })
        .sum();
    assert_eq!(images, 1);
    assert_eq!(last[0]["role"], "user", "the instruction is a user message");
    assert!(
        last.as_array().unwrap().len() < STEPS,
        "the window dropped old events"
    );

    // Our run judged exactly BALROG's invalid replies invalid, and counted them.
    let episode: Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("r/episodes/seed_7/episode.json")).unwrap(),
    )
    .unwrap();
    let failed = report["failed_candidates"].as_array().unwrap().len();
    assert_eq!(episode["invalid_actions"], failed, "{report}");
    assert_eq!(episode["format"]["invalid"], failed);
    assert_eq!(episode["turns"], STEPS);
    assert_eq!(episode["score"].as_f64(), report["score"].as_f64());
    let run: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("r/run.json")).unwrap()).unwrap();
    assert_eq!(run["config"]["preset"], "balrog");
    assert_eq!(run["config"]["parser"], "balrog");
    assert_eq!(run["balrog"]["drift"], json!([]));
    println!(
        "{STEPS} requests equal to BALROG's naive agent ({failed} invalid replies, feedback included)"
    );
    if std::env::var_os("KEEP").is_none() {
        let _ = std::fs::remove_dir_all(&out);
    }
}
