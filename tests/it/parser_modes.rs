//! `--parser strict|lenient` end to end against an OpenAI-compatible server of our own that
//! answers, turn by turn, an exact tool call, prose with a marker, a truncated tool call and
//! garbage: lenient (the default outside presets) plays the repaired replies and counts them
//! `repaired`; strict plays the fallback (noop) for them and counts them `invalid`. Both record
//! the parser in run.json, the counts in episode.json and the rates in summary.json/csv.

use crate::support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use axum::{extract::State, routing::post, Json, Router};
use serde_json::{json, Value};

fn reply(n: usize) -> Value {
    let message = match n % 4 {
        0 => json!({"role": "assistant", "content": null, "tool_calls": [{
            "id": "call_a", "type": "function",
            "function": {"name": "interact_many", "arguments": "{\"actions\":[\"move_left\"]}"}}]}),
        1 => json!({"role": "assistant", "content": "I will go west.\nACTION: move_left"}),
        2 => json!({"role": "assistant", "content": null, "tool_calls": [{
            "id": "call_b", "type": "function",
            "function": {"name": "interact_many", "arguments": "{\"actions\": [\"do\""}}]}),
        _ => json!({"role": "assistant", "content": "lorem ipsum dolor"}),
    };
    json!({"id": "x", "object": "chat.completion", "created": 1, "model": "test-model",
           "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
           "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}})
}

async fn completions(State(n): State<Arc<AtomicUsize>>, Json(_): Json<Value>) -> Json<Value> {
    Json(reply(n.fetch_add(1, Ordering::SeqCst)))
}

fn json_file(path: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_rejects_repaired_replies_and_lenient_plays_them() {
    let out = support::scratch("parser-modes");
    for (name, parser) in [("lenient", None), ("strict", Some("strict"))] {
        let counter = Arc::new(AtomicUsize::new(0));
        let app = Router::new()
            .route("/v1/chat/completions", post(completions))
            .with_state(counter.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        let base = format!("http://127.0.0.1:{port}/v1");
        let mut args = vec![
            "--model",
            "test-model",
            "--base-url",
            &base,
            "--seed-list",
            "5",
            "--steps",
            "8",
            "--concurrency",
            "1",
            "--out",
            out.to_str().unwrap(),
            "--run-name",
            name,
            "--quiet",
        ];
        if let Some(p) = parser {
            args.extend(["--parser", p]);
        }
        let o = support::tokio_command().args(&args).output().await.unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(counter.load(Ordering::SeqCst), 8);

        let dir = out.join(name);
        assert_eq!(json_file(&dir.join("run.json"))["config"]["parser"], name);
        let ep = json_file(&dir.join("episodes/seed_5/episode.json"));
        let lines: Vec<Value> =
            std::fs::read_to_string(dir.join("episodes/seed_5/trajectory.jsonl"))
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
        assert_eq!(lines.len(), 8);
        let outcomes: Vec<&str> = lines
            .iter()
            .map(|t| t["parsed"]["outcome"].as_str().unwrap())
            .collect();
        let played: Vec<Vec<&str>> = lines
            .iter()
            .map(|t| {
                t["executed"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|e| e["action"].as_str().unwrap())
                    .collect()
            })
            .collect();
        let summary = json_file(&dir.join("summary.json"));
        let csv = std::fs::read_to_string(dir.join("summary.csv")).unwrap();
        let (header, row) = csv.split_once('\n').unwrap();
        let col = |k: &str| {
            let i = header.split(',').position(|h| h == k).unwrap();
            row.trim().split(',').nth(i).unwrap().to_string()
        };
        if name == "lenient" {
            assert_eq!(outcomes[..4], ["exact", "repaired", "repaired", "invalid"]);
            assert_eq!(
                played[..4],
                [
                    vec!["move_left"],
                    vec!["move_left"],
                    vec!["do"],
                    vec!["noop"]
                ]
            );
            assert_eq!(
                ep["format"],
                json!({"exact": 2, "repaired": 4, "invalid": 2})
            );
            assert_eq!(ep["invalid_actions"], 2);
            assert_eq!(summary["format_repaired_rate"], 0.5);
            assert_eq!(col("format_repaired_rate"), "0.5000");
        } else {
            assert_eq!(outcomes[..4], ["exact", "invalid", "invalid", "invalid"]);
            assert_eq!(
                played[..4],
                [vec!["move_left"], vec!["noop"], vec!["noop"], vec!["noop"]]
            );
            assert_eq!(lines[1]["parsed"]["repair_rejected"], true);
            assert!(lines[3]["parsed"].get("repair_rejected").is_none());
            assert_eq!(
                ep["format"],
                json!({"exact": 2, "repaired": 0, "invalid": 6})
            );
            assert_eq!(ep["invalid_actions"], 6);
            assert_eq!(summary["format_repaired_rate"], 0.0);
            assert_eq!(col("format_repaired_rate"), "0.0000");
        }
        assert_eq!(summary["format_exact_rate"], 0.25);
        assert_eq!(col("format_exact_rate"), "0.2500");
    }
}
