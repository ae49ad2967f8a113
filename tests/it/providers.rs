//! The OpenAI-compatible endpoints of Gemini and Anthropic, as local servers built from their
//! documented bodies and headers, played by the real binary:
//!
//! - Gemini 3 (https://ai.google.dev/gemini-api/docs/openai and
//!   https://ai.google.dev/gemini-api/docs/thought-signatures, "OpenAI compatibility"): every
//!   tool call carries `extra_content.google.thought_signature`, and a later request whose
//!   history lacks the signature it issued is refused with 400 and Gemini's array body
//!   ("Function call is missing a thought_signature in functionCall parts…", as quoted in
//!   https://github.com/TokenRhythm/opensquilla/issues/225). Its 429 is an array too
//!   (https://github.com/n4ze3m/page-assist/issues/406) whose `details` hold a
//!   `google.rpc.RetryInfo` `retryDelay` (https://github.com/voideditor/void/issues/557), and
//!   its message may say "Please retry in 55.5s." (https://github.com/dcdpr/jp/pull/1061).
//!   `reasoning_effort` is accepted (Gemini's OpenAI page, "Thinking").
//! - Anthropic (https://docs.claude.com/en/api/openai-sdk, https://docs.claude.com/en/api/errors,
//!   https://docs.claude.com/en/api/rate-limits): 529 `overloaded_error` with
//!   `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, and rate
//!   limits reported by `anthropic-ratelimit-*-reset` RFC 3339 times.
//!
//! LiteLLM also adds `provider_specific_fields` to a message; the Gemini server adds it too, to
//! show that any unmodelled field comes back, not only the signature.

use crate::support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{extract::State, routing::post, Json, Router};
use serde_json::{json, Value};

#[derive(Default)]
struct Gemini {
    bodies: Vec<Value>,
    /// Signatures checked in histories (so a pass cannot be vacuous).
    checked: usize,
    /// 400s sent for a missing signature.
    refused: usize,
}

type Shared = Arc<Mutex<Gemini>>;

fn signature(call_id: &str) -> String {
    format!("CiQB{call_id}/sig==")
}

/// Gemini's OpenAI-compatible endpoint: answers a tool call with a thought signature, and
/// refuses a history whose tool calls lack theirs.
async fn gemini(State(state): State<Shared>, Json(body): Json<Value>) -> Response {
    let mut s = state.lock().unwrap();
    let n = s.bodies.len();
    s.bodies.push(body.clone());
    for (pos, m) in body["messages"].as_array().unwrap().iter().enumerate() {
        for call in m["tool_calls"].as_array().into_iter().flatten() {
            let id = call["id"].as_str().unwrap_or_default();
            let sent = &call["extra_content"]["google"]["thought_signature"];
            if sent != &json!(signature(id)) {
                s.refused += 1;
                let message = format!(
                    "Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance. Additional data, function call `default_api:interact_many` , position {pos}. Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details."
                );
                let error = json!([{"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}]);
                return (StatusCode::BAD_REQUEST, Json(error)).into_response();
            }
            s.checked += 1;
            assert_eq!(m["provider_specific_fields"], json!({"turn": id}));
        }
    }
    let id = format!("call_g{n}");
    Json(json!({
        "id": format!("chatcmpl-{n}"), "object": "chat.completion", "created": 1,
        "model": "gemini-3-flash-preview",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null,
            "provider_specific_fields": {"turn": id},
            "tool_calls": [{
                "id": id, "type": "function",
                "function": {"name": "interact_many", "arguments": "{\"actions\":[\"move_left\"]}"},
                "extra_content": {"google": {"thought_signature": signature(&id)}}
            }]}}],
        "usage": {"prompt_tokens": 900, "completion_tokens": 12, "total_tokens": 1000}
    }))
    .into_response()
}

async fn serve(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://127.0.0.1:{port}/v1")
}

fn read_json(path: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn trajectory(run: &std::path::Path, seed: i64) -> Vec<Value> {
    std::fs::read_to_string(run.join(format!("episodes/seed_{seed}/trajectory.jsonl")))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_thought_signatures_come_back_in_every_later_request() {
    let state: Shared = Arc::default();
    let base = serve(
        Router::new()
            .route("/v1/chat/completions", post(gemini))
            .with_state(state.clone()),
    )
    .await;
    let out = support::scratch("providers-gemini");
    let o = support::tokio_command()
        .args(["--model", "gemini-3-flash-preview", "--base-url", &base])
        .args(["--seed-list", "3", "--steps", "6", "--history", "3"])
        .args(["--reasoning-effort", "low", "--prompt-cache-key", "on"])
        .args(["--out", out.to_str().unwrap(), "--run-name", "g", "--quiet"])
        .output()
        .await
        .unwrap();
    let s = state.lock().unwrap();
    assert!(
        o.status.success(),
        "{}\nrefused: {}",
        String::from_utf8_lossy(&o.stderr),
        s.refused
    );
    assert_eq!(s.refused, 0);
    assert_eq!(s.bodies.len(), 6);
    // Turns 2..6 carry 1, 2, 3, 3, 3 earlier tool calls, each with its signature.
    assert_eq!(s.checked, 1 + 2 + 3 + 3 + 3);
    let key = s.bodies[0]["prompt_cache_key"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        key.starts_with("vlm-eval-") && key.ends_with("-s3"),
        "{key}"
    );
    for b in &s.bodies {
        assert_eq!(b["reasoning_effort"], "low");
        assert_eq!(b["prompt_cache_key"], key.as_str(), "one key per episode");
    }
    let run = out.join("g");
    let info = read_json(&run.join("run.json"));
    assert_eq!(info["config"]["reasoning_effort"], "low");
    assert_eq!(info["config"]["history_layout"], "window");
    assert_eq!(info["config"]["prompt_cache_key"], true);
    // The raw reply in the trajectory keeps the fields too.
    let lines = trajectory(&run, 3);
    let raw_call = &lines[0]["reply"]["raw"]["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(
        raw_call["extra_content"]["google"]["thought_signature"],
        signature("call_g0")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gemini_server_refuses_a_history_without_its_signature() {
    // The oracle is live: a history whose tool call lacks the signature is refused, with the
    // array body read like an object body.
    let state: Shared = Arc::default();
    let base = serve(
        Router::new()
            .route("/v1/chat/completions", post(gemini))
            .with_state(state.clone()),
    )
    .await;
    let client = reqwest::Client::new();
    let body = json!({"model": "m", "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "tool_calls": [{"id": "call_x", "type": "function",
            "function": {"name": "interact_many", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_x", "content": "ok"}]});
    let r = client
        .post(format!("{base}/chat/completions"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let text = r.text().await.unwrap();
    let excerpt = vlm_eval::model::openai::error_excerpt(&text);
    assert!(
        excerpt.starts_with("Function call is missing a thought_signature"),
        "{excerpt}"
    );
    assert_eq!(state.lock().unwrap().refused, 1);
}

/// Answers, in turn: Gemini's 429 array with `RetryInfo` 47 s; Gemini's 429 whose message says
/// "Please retry in 0.05s."; Anthropic's 529; Anthropic's 429 with only its reset headers;
/// then a normal reply.
async fn faults(State(n): State<Arc<Mutex<usize>>>, Json(_): Json<Value>) -> Response {
    let i = {
        let mut n = n.lock().unwrap();
        *n += 1;
        *n - 1
    };
    match i {
        0 => (
            StatusCode::TOO_MANY_REQUESTS,
            Json(json!([{"error": {"code": 429,
                "message": "Resource has been exhausted (e.g. check quota).",
                "status": "RESOURCE_EXHAUSTED",
                "details": [
                    {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []},
                    {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "47s"}]}}])),
        )
            .into_response(),
        1 => (
            StatusCode::TOO_MANY_REQUESTS,
            Json(json!([{"error": {"code": 429,
                "message": "You exceeded your current quota. Please retry in 0.05s.",
                "status": "RESOURCE_EXHAUSTED"}}])),
        )
            .into_response(),
        2 => (
            StatusCode::from_u16(529).unwrap(),
            Json(json!({"type": "error",
                "error": {"type": "overloaded_error", "message": "Overloaded"}})),
        )
            .into_response(),
        3 => {
            let reset = SystemTime::now() + Duration::from_secs(30);
            let secs = reset.duration_since(UNIX_EPOCH).unwrap().as_secs();
            let mut h = HeaderMap::new();
            h.insert("anthropic-ratelimit-requests-limit", HeaderValue::from_static("50"));
            h.insert("anthropic-ratelimit-requests-remaining", HeaderValue::from_static("0"));
            h.insert(
                "anthropic-ratelimit-requests-reset",
                HeaderValue::from_str(&rfc3339(secs)).unwrap(),
            );
            (
                StatusCode::TOO_MANY_REQUESTS,
                h,
                Json(json!({"type": "error",
                    "error": {"type": "rate_limit_error", "message": "Number of requests has exceeded your rate limit"}})),
            )
                .into_response()
        }
        _ => Json(json!({"choices": [{"index": 0, "finish_reason": "stop", "message": {
                "role": "assistant", "content": "ACTION: noop"}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 2}}))
        .into_response(),
    }
}

/// `YYYY-MM-DDTHH:MM:SSZ` of Unix seconds (civil from days, Howard Hinnant's algorithm).
fn rfc3339(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_and_anthropic_error_answers_are_retried_after_their_hints() {
    let base = serve(
        Router::new()
            .route("/v1/chat/completions", post(faults))
            .with_state(Arc::new(Mutex::new(0usize))),
    )
    .await;
    let out = support::scratch("providers-faults");
    let o = support::tokio_command()
        .args(["--model", "claude-sonnet-4-5", "--base-url", &base])
        .args(["--seed-list", "0", "--steps", "1", "--max-retries", "6"])
        .args(["--max-retry-wait", "0.2"])
        .args(["--out", out.to_str().unwrap(), "--run-name", "f", "--quiet"])
        .output()
        .await
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let line = &trajectory(&out.join("f"), 0)[0];
    let attempts = line["attempts"].as_array().expect("attempts recorded");
    assert_eq!(attempts.len(), 5, "{attempts:#?}");
    let statuses: Vec<&Value> = attempts.iter().map(|a| &a["status"]).collect();
    assert_eq!(
        statuses,
        [
            &json!(429),
            &json!(429),
            &json!(529),
            &json!(429),
            &Value::Null
        ]
    );
    let wait = |i: usize| &attempts[i]["wait"];
    // RetryInfo: 47 s asked, cut to --max-retry-wait.
    assert_eq!(wait(0)["after"], "error.details.retryDelay");
    assert_eq!(wait(0)["hint_ms"], 47_000.0);
    assert_eq!(wait(0)["capped"], true);
    // "Please retry in 0.05s." in the message.
    assert_eq!(wait(1)["after"], "error.message");
    assert_eq!(wait(1)["hint_ms"], 50.0);
    assert!(wait(1).get("capped").is_none());
    // 529 overloaded: retried like a 503, with backoff (no hint).
    assert_eq!(wait(2)["after"], "backoff");
    assert!(attempts[2]["error"]
        .as_str()
        .unwrap()
        .contains("overloaded_error"));
    // Anthropic's reset time, 30 s ahead (whole seconds), without retry-after.
    assert_eq!(wait(3)["after"], "anthropic-ratelimit-requests-reset");
    let hint = wait(3)["hint_ms"].as_f64().unwrap();
    assert!((20_000.0..=31_000.0).contains(&hint), "{hint}");
    assert_eq!(wait(3)["capped"], true);
    // The array body is read like an object body.
    assert!(
        attempts[0]["error"]
            .as_str()
            .unwrap()
            .contains("Resource has been exhausted (e.g. check quota). (code 429)"),
        "{}",
        attempts[0]["error"]
    );
}

#[test]
fn an_unknown_reasoning_effort_is_one_line_and_exit_2() {
    let o = support::vlm_eval(&["--model", "mock", "--reasoning-effort", "extreme"]);
    assert_eq!(o.status.code(), Some(2));
    let err = support::stderr(&o);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("--reasoning-effort"), "{err}");
}
