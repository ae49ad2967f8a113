//! The main command against a real OpenAI-compatible HTTP server of our own (not a mock of the
//! model trait): what every request carries, and how tool-call, text-only, garbage and
//! over-long replies are handled.

use crate::support;

use std::sync::{Arc, Mutex};

use axum::{extract::State, routing::post, Json, Router};
use serde_json::{json, Value};

type Seen = Arc<Mutex<Vec<Value>>>;

fn reply(n: usize) -> Value {
    let message = match n {
        0 => json!({"role": "assistant", "content": null, "tool_calls": [{
            "id": "call_a", "type": "function",
            "function": {"name": "interact_many", "arguments": "{\"actions\":[\"move_left\",\"do\"],\"reasoning\":\"wood\"}"}}]}),
        1 => json!({"role": "assistant", "content": "I will go west.\nACTION: move_left"}),
        2 => json!({"role": "assistant", "content": "lorem ipsum dolor"}),
        _ => json!({"role": "assistant", "content": "", "tool_calls": [{
            "function": {"name": "interact_many", "arguments": {"actions": vec!["noop"; 10]}}}]}),
    };
    json!({"id": "x", "object": "chat.completion", "created": 1, "model": "test-model",
           "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
           "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}})
}

async fn completions(State(seen): State<Seen>, Json(body): Json<Value>) -> Json<Value> {
    let n = {
        let mut s = seen.lock().unwrap();
        s.push(body);
        s.len() - 1
    };
    Json(reply(n))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_and_replies_through_a_real_http_server() {
    let seen: Seen = Arc::default();
    let app = Router::new()
        .route("/v1/chat/completions", post(completions))
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let out = support::scratch("endpoint");
    let base = format!("http://127.0.0.1:{port}/v1");
    let args = [
        "--model",
        "test-model",
        "--base-url",
        base.as_str(),
        "--seed-list",
        "5",
        "--steps",
        "4",
    ];
    let status = support::tokio_command()
        .args(args)
        .args(["--out", out.to_str().unwrap(), "--run-name", "r", "--quiet"])
        .output()
        .await
        .unwrap();
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );

    let bodies = seen.lock().unwrap().clone();
    assert_eq!(bodies.len(), 4);
    for (i, b) in bodies.iter().enumerate() {
        let messages = b["messages"].as_array().unwrap();
        assert_eq!(messages[0]["role"], "system", "request {i}");
        let user = messages.last().unwrap();
        assert_eq!(user["role"], "user");
        let parts = user["content"].as_array().expect("user content as parts");
        assert!(
            parts.iter().any(|p| p["type"] == "text"),
            "request {i}: text part"
        );
        let image = parts
            .iter()
            .find(|p| p["type"] == "image_url")
            .expect("image part");
        assert!(image["image_url"]["url"]
            .as_str()
            .unwrap()
            .starts_with("data:image/png;base64,iVBOR"));
        assert_eq!(b["tools"][0]["function"]["name"], "interact_many");
        assert_eq!(b["tool_choice"], "required");
        assert_eq!(b["model"], "test-model");
    }
    // History: the first turn's tool call and its result come back in the second request.
    let second = bodies[1]["messages"].as_array().unwrap();
    assert!(second
        .iter()
        .any(|m| m["role"] == "assistant" && m["tool_calls"][0]["id"] == "call_a"));
    assert!(second
        .iter()
        .any(|m| m["role"] == "tool" && m["tool_call_id"] == "call_a"));
    // The garbage reply of turn 3 is reported in the next observation.
    let last_user = bodies[3]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert!(last_user["content"][0]["text"]
        .as_str()
        .unwrap()
        .starts_with("Note: your last reply contained no valid action"));

    let run = out.join("r/episodes/seed_5");
    let ep: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("episode.json")).unwrap()).unwrap();
    assert_eq!(ep["turns"], 4);
    assert_eq!(ep["invalid_actions"], 1, "garbage reply counted");
    assert_eq!(ep["truncated_actions"], 2, "10 actions cut to 8");
    assert_eq!(ep["input_tokens"], 400);
    let lines: Vec<Value> = std::fs::read_to_string(run.join("trajectory.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let executed = |t: usize| -> Vec<String> {
        lines[t]["executed"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["action"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(executed(0), ["move_left", "do"]);
    assert_eq!(lines[0]["parsed"]["source"], "tool_call");
    assert_eq!(executed(1), ["move_left"], "text-only reply parsed");
    assert_eq!(lines[1]["parsed"]["source"], "text");
    assert_eq!(executed(2), ["noop"], "garbage → one noop");
    assert_eq!(lines[2]["invalid"], true);
    assert_eq!(executed(3).len(), 8);
    let _ = std::fs::remove_dir_all(&out);
}
