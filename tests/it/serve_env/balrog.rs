//! Sessions opened with `"preset": "balrog"` return BALROG's own observation texts (compared
//! with BALROG's wrapper on Python crafter through tests/python/balrog_observations.py), its
//! feedback before the view after a reply it rejects, and judge `text` by its rule.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

use serde_json::{json, Value};
use vlm_eval::agent::balrog::BalrogTexts;
use vlm_eval::serve::ServeConfig;

use super::balrog_support::{crafter_python, shared_balrog};
use super::{server, textures, Http};

const REPLIES: [&str; 8] = [
    "Move West",
    "Do",
    "move north",
    "Move North.",
    "Noop",
    "I think: Do",
    "Move East",
    "Sleep",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn balrog_sessions_speak_balrogs_protocol() {
    let (Some(shared), Some(python)) = (shared_balrog(), crafter_python()) else {
        println!("SKIP: ../shared/balrog or the crafter venv not present");
        return;
    };
    if textures().kind() != "official" {
        println!("SKIP: crafter's official textures not found (set CRAFTER_ASSETS)");
        return;
    }
    let texts = BalrogTexts::load(&shared.join("reference")).unwrap();
    let feedback = texts.feedback("Noop");
    let s = server(ServeConfig {
        balrog: Some(Arc::new(texts)),
        ..ServeConfig::default()
    })
    .await;
    let http = Http::new(&s);
    let seed = 5;
    let (id, created) = http
        .create(json!({"seed": seed, "preset": "balrog", "frames": "none"}))
        .await;
    assert_eq!(created["options"]["parser"], "balrog", "{created}");
    assert_eq!(created["options"]["image_size"], 256);
    assert_eq!(created["step"], 1, "BALROG's reset plays one Noop");
    let mut got = vec![created["balrog"].clone()];
    let (mut played, mut invalid) = (Vec::new(), Vec::new());
    for i in 0..40 {
        let text = REPLIES[i % REPLIES.len()];
        let v = http
            .ok(
                &format!("/v1/sessions/{id}/step"),
                &json!({"text": text, "frames": "none"}),
            )
            .await;
        let action = v["actions"][0].as_str().unwrap().to_string();
        let bad = v["invalid"].as_bool().unwrap();
        // BALROG's rule: strip, keep letters, whitespace and ':', exact name.
        let accepted = matches!(
            text,
            "Move West" | "Do" | "Move North." | "Noop" | "Move East" | "Sleep"
        );
        assert_eq!(bad, !accepted, "{text}");
        assert_eq!(
            v["parsed"]["outcome"],
            if !accepted {
                "invalid"
            } else if text.ends_with('.') {
                "repaired"
            } else {
                "exact"
            }
        );
        assert_eq!(v["note"].as_str(), bad.then_some(feedback.as_str()));
        played.push(vlm_eval::crafter::Action::from_name(&action).unwrap().id());
        invalid.push(bad);
        got.push(v["balrog"].clone());
        if v["done"] == true {
            break;
        }
    }
    let mut child = Command::new(&python)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/balrog_observations.py"))
        .arg(&shared)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    writeln!(
        child.stdin.take().unwrap(),
        "{}",
        json!({"seed": seed, "actions": played})
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let reference: Value = serde_json::from_slice(&out.stdout).unwrap();
    let expected = reference["obs"].as_array().unwrap();
    assert_eq!(expected.len(), got.len());
    for (k, (g, e)) in got.iter().zip(expected).enumerate() {
        let mut long = e["long_term_context"].as_str().unwrap().to_string();
        if k > 0 && invalid[k - 1] {
            long = format!("{feedback}{long}");
        }
        assert_eq!(
            g["long_term_context"].as_str().unwrap(),
            long,
            "observation {k}"
        );
        assert_eq!(
            g["short_term_context"], e["short_term_context"],
            "observation {k}"
        );
    }
    println!("{} balrog session observations equal BALROG's", got.len());

    // A server without a BALROG checkout refuses balrog sessions, naming the flag.
    let plain = server(ServeConfig::default()).await;
    let (status, v) = Http::new(&plain)
        .post("/v1/sessions", &json!({"seed": 1, "preset": "balrog"}))
        .await;
    assert_eq!(status, 400);
    assert!(v["error"].as_str().unwrap().contains("--balrog-src"), "{v}");
}

/// An unknown preset or parser is a 400 naming the valid ones (no checkout or textures needed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_presets_are_refused_listing_the_presets() {
    let plain = server(ServeConfig::default()).await;
    let (status, v) = Http::new(&plain)
        .post("/v1/sessions", &json!({"seed": 1, "preset": "balrg"}))
        .await;
    assert_eq!(status, 400);
    let e = v["error"].as_str().unwrap();
    assert!(
        e.contains("unknown preset 'balrg'") && e.contains("vlm-eval, balrog"),
        "{v}"
    );
    let (status, _) = Http::new(&plain)
        .post("/v1/sessions", &json!({"seed": 1, "preset": "vlm-eval"}))
        .await;
    assert_eq!(status, 200, "a known preset opens a session");
}
