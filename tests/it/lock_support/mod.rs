//! Shared by the run-folder lock tests: an OpenAI-compatible server on 127.0.0.1 that holds
//! each request until the test lets it through (so a `run` can be kept mid-run for as long as a
//! test needs, with no timing), and helpers to start the real binary against it. Built on
//! `tests/support` (the binary, scratch folders): a test binary using it also declares
//! `mod support;`.

#![allow(dead_code)]

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::response::IntoResponse;
use axum::routing::post;
use axum::Router;
use serde_json::{json, Value};

/// A valid completion calling the game tool with one `noop`.
fn completion() -> String {
    json!({
        "id": "chatcmpl-l", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "interact_many",
                "arguments": "{\"actions\":[\"noop\"],\"reasoning\":\"wait\"}"}}]}}],
        "usage": {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25}
    })
    .to_string()
}

struct GateState {
    /// Requests received so far.
    seen: AtomicUsize,
    /// Requests 1..=allowed are answered; later ones wait.
    allowed: tokio::sync::watch::Sender<usize>,
}

async fn gated(State(s): State<Arc<GateState>>) -> axum::response::Response {
    let n = s.seen.fetch_add(1, Ordering::SeqCst) + 1;
    let mut rx = s.allowed.subscribe();
    let _ = rx.wait_for(|&allowed| allowed >= n).await;
    let mut r = completion().into_response();
    r.headers_mut()
        .insert("content-type", "application/json".parse().unwrap());
    r
}

/// The gated server (stopped when dropped).
pub struct GatedServer {
    /// Base URL (`http://127.0.0.1:PORT/v1`).
    pub url: String,
    state: Arc<GateState>,
    rt: Option<tokio::runtime::Runtime>,
}

impl GatedServer {
    /// Start it, answering the first `allowed` requests.
    pub fn start(allowed: usize) -> GatedServer {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let state = Arc::new(GateState {
            seen: AtomicUsize::new(0),
            allowed: tokio::sync::watch::channel(allowed).0,
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(gated))
            .with_state(state.clone());
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        rt.spawn(async move { axum::serve(listener, app).await.unwrap() });
        GatedServer {
            url,
            state,
            rt: Some(rt),
        }
    }

    /// Requests received so far.
    pub fn seen(&self) -> usize {
        self.state.seen.load(Ordering::SeqCst)
    }

    /// Answer requests up to number `n` (waiting ones go on at once).
    pub fn allow(&self, n: usize) {
        self.state.allowed.send_replace(n);
    }

    /// Answer every request from now on.
    pub fn open(&self) {
        self.allow(usize::MAX);
    }

    /// Wait until `n` requests have arrived (a guard against a hang, not a timing check).
    pub fn wait_seen(&self, n: usize) {
        wait_until(&format!("{n} requests at the server"), || self.seen() >= n);
    }
}

impl Drop for GatedServer {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

/// Poll `done` until it holds; panic naming `what` after two minutes (a hang guard).
pub fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "gave up waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `support::command()` with `args` and the lock tests' environment: no log lines, no texture
/// download.
fn lock_command(args: &[&str]) -> Command {
    let mut cmd = crate::support::command();
    cmd.args(args)
        .env_remove("VLM_EVAL_LOG")
        .env("VLM_EVAL_NO_FETCH", "1");
    cmd
}

/// Run the binary to the end (in [`lock_command`]'s environment).
pub fn vlm_eval(args: &[&str]) -> Output {
    lock_command(args).output().expect("run vlm-eval")
}

/// Start the binary in the background (stdout and stderr captured).
pub fn spawn(args: &[&str]) -> Child {
    lock_command(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start vlm-eval")
}

/// `run` flags against the server: `seeds` seeds of `steps` turns into `out/name`.
pub fn run_args(
    url: &str,
    out: &Path,
    name: &str,
    seeds: u32,
    steps: u32,
    extra: &[&str],
) -> Vec<String> {
    let mut args: Vec<String> = [
        "run",
        "--model",
        "test-model",
        "--base-url",
        url,
        "--seeds",
        &seeds.to_string(),
        "--steps",
        &steps.to_string(),
        "--modality",
        "text",
        "--max-retries",
        "0",
        "--out",
        out.to_str().unwrap(),
        "--run-name",
        name,
        "--quiet",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// `&[String]` → `Vec<&str>`.
pub fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// The `error:` line of a failed command's stderr (other lines may be warnings).
pub fn error_line(o: &Output) -> String {
    let e = crate::support::stderr(o);
    e.lines()
        .find(|l| l.starts_with("error: "))
        .unwrap_or_else(|| panic!("no error line in: {e}"))
        .to_string()
}

/// Read a JSON file.
pub fn read_json(path: &Path) -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    )
    .unwrap()
}

/// Check a finished run folder: every planned episode complete with `steps` turns, each
/// trajectory holding turns 0..steps once each, in order (no turn played twice), and the
/// summary's spend counting exactly `requests` requests.
pub fn check_single_writer(run: &Path, seeds: u32, steps: u32, requests: usize) {
    for seed in 0..seeds {
        let dir = run.join("episodes").join(format!("seed_{seed}"));
        let ep = read_json(&dir.join("episode.json"));
        assert_eq!(ep["turns"], json!(steps), "seed {seed}: {ep}");
        let turns: Vec<u64> = std::fs::read_to_string(dir.join("trajectory.jsonl"))
            .unwrap()
            .lines()
            .map(|l| {
                serde_json::from_str::<Value>(l).unwrap()["turn"]
                    .as_u64()
                    .unwrap()
            })
            .collect();
        assert_eq!(
            turns,
            (0..steps as u64).collect::<Vec<_>>(),
            "seed {seed}: trajectory turns"
        );
    }
    let summary = read_json(&run.join("summary.json"));
    assert_eq!(summary["spent"]["requests"], json!(requests), "{summary}");
}
