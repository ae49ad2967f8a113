//! Run options against our own OpenAI-compatible server: the API key never reaches any file or
//! output, provider quirk flags shape the requests, budgets stop runs cleanly, and a warm
//! response cache replays a run without a single request.

use crate::support;

use std::path::Path;
use std::sync::{Arc, Mutex};

use axum::{extract::State, http::HeaderMap, routing::post, Json, Router};
use serde_json::{json, Value};

#[derive(Default)]
struct Seen {
    bodies: Vec<Value>,
    headers: Vec<HeaderMap>,
}

type Shared = Arc<Mutex<Seen>>;

async fn completions(
    State(seen): State<Shared>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Json<Value> {
    let mut s = seen.lock().unwrap();
    s.bodies.push(body);
    s.headers.push(headers);
    let n = s.bodies.len();
    let action = ["move_left", "do", "move_up", "noop"][n % 4];
    Json(
        json!({"id": "x", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
            "tool_calls": [{"id": format!("call_{n}"), "type": "function", "function": {"name": "interact_many",
                "arguments": format!("{{\"actions\":[\"{action}\"]}}")}}]}}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}}),
    )
}

async fn server() -> (String, Shared) {
    let seen: Shared = Arc::default();
    let app = Router::new()
        .route("/v1/chat/completions", post(completions))
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://127.0.0.1:{port}/v1"), seen)
}

async fn vlm_eval(args: &[&str], key: Option<&str>) -> std::process::Output {
    // support::command() leaves the OpenAI variables out.
    let mut cmd = tokio::process::Command::from(support::command());
    cmd.args(args);
    if let Some(k) = key {
        cmd.env("OPENAI_API_KEY", k);
    }
    cmd.output().await.unwrap()
}

fn all_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            all_files(&p, out)
        } else {
            out.push(p)
        }
    }
}

fn tmp(name: &str) -> std::path::PathBuf {
    support::scratch(&format!("opts-{name}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_stays_secret_and_quirk_flags_shape_requests() {
    let (base, seen) = server().await;
    let out = tmp("secret");
    let key = "sk-test-SECRET-0123456789";
    let o = vlm_eval(
        &[
            "--model",
            "m",
            "--base-url",
            &base,
            "--seeds",
            "2",
            "--steps",
            "2",
            "--out",
            out.to_str().unwrap(),
            "--run-name",
            "r",
            "--max-tokens",
            "64",
            "--max-tokens-field",
            "max_tokens",
            "--no-tool-choice",
            "--seed-param",
            "--header",
            "HTTP-Referer: https://example.org",
            "--image-detail",
            "low",
        ],
        Some(key),
    )
    .await;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = seen.lock().unwrap();
    assert_eq!(s.bodies.len(), 4);
    for (b, h) in s.bodies.iter().zip(&s.headers) {
        assert_eq!(h["authorization"], format!("Bearer {key}").as_str());
        assert_eq!(h["http-referer"], "https://example.org");
        assert_eq!(b["max_tokens"], 64);
        assert!(b.get("max_completion_tokens").is_none());
        assert!(b.get("tool_choice").is_none(), "--no-tool-choice");
        assert!(
            b["seed"] == 0 || b["seed"] == 1,
            "--seed-param sends the env seed: {}",
            b["seed"]
        );
        let user = b["messages"].as_array().unwrap().last().unwrap();
        assert_eq!(user["content"][1]["image_url"]["detail"], "low");
    }
    let mut files = Vec::new();
    all_files(&out, &mut files);
    assert!(files.len() > 10);
    for f in files {
        let bytes = std::fs::read(&f).unwrap();
        assert!(
            !String::from_utf8_lossy(&bytes).contains("SECRET"),
            "key in {}",
            f.display()
        );
    }
    for stream in [&o.stdout, &o.stderr] {
        assert!(!String::from_utf8_lossy(stream).contains("SECRET"));
    }
    let _ = std::fs::remove_dir_all(&out);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budgets_stop_cleanly_and_a_warm_cache_replays_without_requests() {
    let (base, seen) = server().await;
    let out = tmp("budget");
    let dir = out.to_str().unwrap();
    // 110 tokens per call: the third call crosses 250, so no fourth turn starts anywhere.
    let o = vlm_eval(
        &[
            "--model",
            "m",
            "--base-url",
            &base,
            "--seeds",
            "2",
            "--steps",
            "5",
            "--concurrency",
            "1",
            "--max-tokens-total",
            "250",
            "--out",
            dir,
            "--run-name",
            "b",
            "--quiet",
        ],
        None,
    )
    .await;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("b/summary.json")).unwrap())
            .unwrap();
    assert_eq!(summary["budget_stopped"], 2, "{summary}");
    assert_eq!(seen.lock().unwrap().bodies.len(), 3);
    let ep: Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("b/episodes/seed_0/episode.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(ep["termination"], "budget");
    assert_eq!(ep["turns"], 3);

    // Cache: the first run fills it, the second (forced) makes no request and matches exactly.
    let cache = out.join("cache");
    let args = |name: &'static str| -> Vec<String> {
        [
            "--model",
            "m",
            "--base-url",
            &base,
            "--seeds",
            "3",
            "--steps",
            "3",
            "--out",
            dir,
            "--run-name",
            name,
            "--quiet",
            "--cache",
            cache.to_str().unwrap(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let before = seen.lock().unwrap().bodies.len();
    let a1: Vec<String> = args("c1");
    let o = vlm_eval(&a1.iter().map(|s| s.as_str()).collect::<Vec<_>>(), None).await;
    assert!(o.status.success());
    let after_first = seen.lock().unwrap().bodies.len();
    assert_eq!(after_first - before, 9);
    let a2: Vec<String> = args("c2");
    let o = vlm_eval(&a2.iter().map(|s| s.as_str()).collect::<Vec<_>>(), None).await;
    assert!(o.status.success());
    assert_eq!(
        seen.lock().unwrap().bodies.len(),
        after_first,
        "warm cache: no requests"
    );
    for seed in 0..3 {
        let read = |run: &str| -> Value {
            let mut v: Value = serde_json::from_str(
                &std::fs::read_to_string(
                    out.join(format!("{run}/episodes/seed_{seed}/episode.json")),
                )
                .unwrap(),
            )
            .unwrap();
            v.as_object_mut().unwrap().remove("wall_s");
            v
        };
        let mut c1 = read("c1");
        let mut c2 = read("c2");
        let (s1, s2) = (take_spent(&mut c1), take_spent(&mut c2));
        assert_eq!(c1, c2, "seed {seed}");
        // The first run paid for its 3 turns; the replay sent nothing and spent nothing.
        assert_eq!(s1["requests"], 3, "{s1}");
        assert_eq!(s1["input_tokens"], 300, "{s1}");
        assert_eq!(s2["requests"], 0, "{s2}");
        assert_eq!(s2["input_tokens"], 0, "{s2}");
    }
    let _ = std::fs::remove_dir_all(&out);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_file_and_errors_exit_codes() {
    let out = tmp("keyfile");
    std::fs::create_dir_all(&out).unwrap();
    let o = vlm_eval(
        &[
            "--model",
            "gpt-4o-mini",
            "--api-key-file",
            "/nonexistent/key",
        ],
        None,
    )
    .await;
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("/nonexistent/key"));
    // A dead endpoint: every episode errors → exit 1, or 0 with --allow-errors.
    let dead = "http://127.0.0.1:9/v1";
    let base = [
        "--model",
        "m",
        "--base-url",
        dead,
        "--seeds",
        "1",
        "--steps",
        "1",
        "--max-retries",
        "0",
        "--quiet",
    ];
    let o = vlm_eval(
        &[
            &base[..],
            &["--out", out.to_str().unwrap(), "--run-name", "e1"],
        ]
        .concat(),
        None,
    )
    .await;
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let ep: Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("e1/episodes/seed_0/episode.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(ep["termination"], "error");
    assert!(
        ep["error"].as_str().unwrap().contains("connect"),
        "{}",
        ep["error"]
    );
    let o = vlm_eval(
        &[
            &base[..],
            &[
                "--out",
                out.to_str().unwrap(),
                "--run-name",
                "e2",
                "--allow-errors",
            ],
        ]
        .concat(),
        None,
    )
    .await;
    assert_eq!(o.status.code(), Some(0));
    let _ = std::fs::remove_dir_all(&out);
}

/// Remove and return an episode.json's `spent`.
fn take_spent(episode: &mut Value) -> Value {
    episode.as_object_mut().unwrap().remove("spent").unwrap()
}
