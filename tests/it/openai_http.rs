//! The OpenAI backend over real local HTTP: a recording axum server of our own replays canned
//! responses (good, odd and broken) and keeps every request body, and the built-in
//! `MockServer` is checked end to end through `OpenAiModel`.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use base64::Engine as _;
use serde_json::{json, Value};
use vlm_eval::model::mock::MockServer;
use vlm_eval::model::openai::{OpenAiConfig, OpenAiModel};
use vlm_eval::model::{
    BoxFuture, ChatModel, ChatReply, ChatRequest, Message, ModelError, Part, Role, ToolCall,
    ToolChoice, ToolSpec, Usage,
};

const KEY: &str = "sk-test-SECRET-7f3a9c";

/// One canned answer.
#[derive(Clone)]
struct Canned {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: String,
    delay: Duration,
}

fn canned(status: u16, body: impl Into<String>) -> Canned {
    Canned {
        status,
        headers: vec![("content-type", "application/json".into())],
        body: body.into(),
        delay: Duration::ZERO,
    }
}

fn ok(message: Value) -> Canned {
    canned(
        200,
        json!({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1_732_000_000,
            "model": "m", "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        })
        .to_string(),
    )
}

#[derive(Default)]
struct Recorder {
    bodies: Mutex<Vec<String>>,
    headers: Mutex<Vec<HeaderMap>>,
    queue: Mutex<VecDeque<Canned>>,
    hits: AtomicUsize,
}

impl Recorder {
    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
    fn body(&self, i: usize) -> Value {
        serde_json::from_str(&self.bodies.lock().unwrap()[i]).unwrap()
    }
}

async fn record(State(rec): State<Arc<Recorder>>, headers: HeaderMap, body: Bytes) -> Response {
    rec.hits.fetch_add(1, Ordering::SeqCst);
    rec.bodies
        .lock()
        .unwrap()
        .push(String::from_utf8_lossy(&body).into_owned());
    rec.headers.lock().unwrap().push(headers);
    let next = rec.queue.lock().unwrap().pop_front();
    let Some(c) = next else {
        return (StatusCode::INTERNAL_SERVER_ERROR, "no canned response left").into_response();
    };
    tokio::time::sleep(c.delay).await;
    let mut response = (StatusCode::from_u16(c.status).unwrap(), c.body).into_response();
    for (k, v) in c.headers {
        response.headers_mut().insert(k, v.parse().unwrap());
    }
    response
}

/// Start the recording server; returns its API base and the recorder.
async fn serve(answers: Vec<Canned>) -> (String, Arc<Recorder>) {
    let rec = Arc::new(Recorder::default());
    rec.queue.lock().unwrap().extend(answers);
    let app = Router::new()
        .route("/v1/chat/completions", post(record))
        .with_state(rec.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}/v1/"), rec)
}

fn config(base_url: &str) -> OpenAiConfig {
    OpenAiConfig {
        api_key: Some(KEY.into()),
        request_timeout: Duration::from_secs(10),
        max_retries: 0,
        image_detail: Some("low".into()),
        extra_headers: vec![("X-Title".into(), "vlm-eval-test".into())],
        ..OpenAiConfig::new(base_url, "test-model")
    }
}

fn model(cfg: OpenAiConfig) -> OpenAiModel {
    OpenAiModel::new(cfg).unwrap()
}

fn png() -> Vec<u8> {
    let mut img = image::RgbImage::new(4, 4);
    img.put_pixel(1, 2, image::Rgb([200, 10, 30]));
    let mut out = std::io::Cursor::new(Vec::new());
    img.write_to(&mut out, image::ImageFormat::Png).unwrap();
    out.into_inner()
}

fn full_request() -> ChatRequest {
    ChatRequest {
        messages: vec![
            Message::text(Role::System, "You play Crafter."),
            Message::text(Role::User, "first turn"),
            Message {
                role: Role::Assistant,
                content: vec![],
                tool_calls: vec![ToolCall {
                    id: "call_a".into(),
                    name: "act".into(),
                    arguments: json!({"actions": ["move_left"]}),
                }],
                tool_call_id: None,
                extra: Default::default(),
            },
            Message {
                role: Role::Tool,
                content: vec![Part::Text("moved".into())],
                tool_calls: vec![],
                tool_call_id: Some("call_a".into()),
                extra: Default::default(),
            },
            Message {
                role: Role::User,
                content: vec![Part::Text("What now?".into()), Part::Png(Arc::new(png()))],
                tool_calls: vec![],
                tool_call_id: None,
                extra: Default::default(),
            },
        ],
        tools: vec![ToolSpec {
            name: "act".into(),
            description: "Perform actions".into(),
            parameters: json!({"type": "object", "properties": {"actions": {"type": "array"}},
                "required": ["actions"]}),
        }],
        tool_choice: Some(ToolChoice::Required),
        temperature: Some(0.2),
        max_tokens: Some(256),
        seed: Some(42),
        prompt_cache_key: None,
    }
}

fn simple_request() -> ChatRequest {
    ChatRequest {
        messages: vec![Message::text(Role::User, "hi")],
        ..ChatRequest::default()
    }
}

/// The key must not leak through any error text.
fn assert_clean(err: &ModelError) {
    let text = format!("{err} {err:?}");
    assert!(!text.contains(KEY), "key leaked: {text}");
}

#[tokio::test]
async fn request_body_and_headers_on_the_wire() {
    let (url, rec) = serve(vec![ok(json!({"role": "assistant", "content": "ok"}))]).await;
    let m = model(config(&url));
    let reply = m.chat(&full_request()).await.unwrap();
    assert_eq!(reply.text.as_deref(), Some("ok"));

    let body = rec.body(0);
    assert_eq!(body["model"], "test-model");
    let msgs = body["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 5);
    assert_eq!(
        msgs[0],
        json!({"role": "system", "content": "You play Crafter."})
    );
    assert_eq!(msgs[1], json!({"role": "user", "content": "first turn"}));
    assert_eq!(msgs[2]["role"], "assistant");
    let call = &msgs[2]["tool_calls"][0];
    assert_eq!(call["id"], "call_a");
    assert_eq!(call["type"], "function");
    assert_eq!(call["function"]["name"], "act");
    let args: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({"actions": ["move_left"]}));
    assert_eq!(
        msgs[3],
        json!({"role": "tool", "content": "moved", "tool_call_id": "call_a"})
    );
    let parts = msgs[4]["content"].as_array().unwrap();
    assert_eq!(parts[0], json!({"type": "text", "text": "What now?"}));
    assert_eq!(parts[1]["type"], "image_url");
    assert_eq!(parts[1]["image_url"]["detail"], "low");
    let url = parts[1]["image_url"]["url"].as_str().unwrap();
    let b64 = url.strip_prefix("data:image/png;base64,").unwrap();
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap();
    assert_eq!(decoded, png());

    assert_eq!(body["tools"][0]["type"], "function");
    assert_eq!(body["tools"][0]["function"]["name"], "act");
    assert_eq!(
        body["tools"][0]["function"]["parameters"]["required"],
        json!(["actions"])
    );
    assert_eq!(body["tool_choice"], "required");
    assert_eq!(body["temperature"], 0.2);
    assert_eq!(body["max_completion_tokens"], 256);
    assert_eq!(body["seed"], 42);
    assert!(body.get("stream").is_none() || body["stream"] == false);

    let headers = rec.headers.lock().unwrap()[0].clone();
    assert_eq!(headers["authorization"], format!("Bearer {KEY}").as_str());
    assert_eq!(headers["x-title"], "vlm-eval-test");
    assert!(headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("application/json"));
}

#[tokio::test]
async fn options_no_key_and_legacy_max_tokens() {
    let (url, rec) = serve(vec![ok(json!({"content": "ok"}))]).await;
    let cfg = OpenAiConfig {
        api_key: None,
        use_max_completion_tokens: false,
        send_tool_choice: false,
        ..config(&url)
    };
    model(cfg).chat(&full_request()).await.unwrap();
    let body = rec.body(0);
    assert_eq!(body["max_tokens"], 256);
    assert!(body.get("max_completion_tokens").is_none());
    assert!(body.get("tool_choice").is_none());
    assert!(rec.headers.lock().unwrap()[0]
        .get("authorization")
        .is_none());
}

#[tokio::test]
async fn lenient_reply_shapes_parse() {
    let choice = |message: Value, extra: Value| {
        let mut body = json!({"choices": [{"message": message, "finish_reason": "tool_calls"}]});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        canned(200, body.to_string())
    };
    let answers = vec![
        // 0: standard tool call, string arguments, with usage.
        ok(json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_x",
            "type": "function", "function": {"name": "act", "arguments": "{\"actions\":[\"noop\"]}"}}]})),
        // 1: object arguments, no id, no type.
        choice(
            json!({"role": "assistant", "tool_calls": [{"function": {"name": "act",
                "arguments": {"actions": ["do"]}}}]}),
            json!({}),
        ),
        // 2: text only, usage missing, id/object/model missing, float created.
        choice(json!({"role": "assistant", "content": "just text"}), json!({"created": 1.7e9})),
        // 3: content as a parts array.
        choice(
            json!({"role": "assistant", "content": [{"type": "text", "text": "part one, "},
                {"type": "text", "text": "part two"}]}),
            json!({"usage": null}),
        ),
        // 4: vLLM-style reasoning (both fields), odd finish reason, extras.
        canned(
            200,
            json!({"id": "x", "object": "chat.completion", "created": 1, "model": "m",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "a",
                "reasoning_content": "step by step", "reasoning": "dup"}, "finish_reason": "eos",
                "stop_reason": null, "token_ids": null}],
                "usage": {"prompt_tokens": 7, "completion_tokens": 2, "prompt_tokens_details": null},
                "kv_transfer_params": null})
            .to_string(),
        ),
    ];
    let (url, _rec) = serve(answers).await;
    let m = model(config(&url));
    let req = simple_request();

    let r = m.chat(&req).await.unwrap();
    assert_eq!(r.text, None);
    assert_eq!(r.tool_calls.len(), 1);
    assert_eq!(r.tool_calls[0].id, "call_x");
    assert_eq!(r.tool_calls[0].arguments, json!("{\"actions\":[\"noop\"]}"));
    assert_eq!(
        r.usage,
        Usage {
            input_tokens: Some(10),
            output_tokens: Some(5),
            total_tokens: Some(15),
            billed_output_tokens: Some(5),
            output_rule: Some(vlm_eval::model::usage::OutputRule::Completion),
            ..Usage::default()
        }
    );
    assert_eq!(r.retries, 0);
    assert!(r.latency_ms > 0.0);
    assert_eq!(r.raw["id"], "chatcmpl-1");

    let r = m.chat(&req).await.unwrap();
    assert_eq!(r.tool_calls[0].id, "call_0");
    assert_eq!(r.tool_calls[0].arguments, json!({"actions": ["do"]}));
    assert_eq!(r.finish_reason.as_deref(), Some("tool_calls"));

    let r = m.chat(&req).await.unwrap();
    assert_eq!(r.text.as_deref(), Some("just text"));
    assert!(r.tool_calls.is_empty());
    assert_eq!(r.usage, Usage::default());

    let r = m.chat(&req).await.unwrap();
    assert_eq!(r.text.as_deref(), Some("part one, part two"));
    assert_eq!(r.usage, Usage::default());

    let r = m.chat(&req).await.unwrap();
    assert_eq!(r.reasoning.as_deref(), Some("step by step"));
    assert_eq!(r.finish_reason.as_deref(), Some("eos"));
    assert_eq!(r.usage.input_tokens, Some(7));
}

#[tokio::test]
async fn garbage_body_is_bad_response_and_not_retried() {
    let (url, rec) = serve(vec![canned(200, "not json")]).await;
    let err = model(OpenAiConfig {
        max_retries: 2,
        ..config(&url)
    })
    .chat(&simple_request())
    .await
    .unwrap_err();
    assert!(matches!(err, ModelError::BadResponse(_)), "{err:?}");
    assert!(err.to_string().contains("not json"), "{err}");
    assert_eq!(rec.hits(), 1);
    assert_clean(&err);
}

#[tokio::test]
async fn html_502_keeps_status_and_a_short_excerpt() {
    let mut html = canned(
        502,
        "<html><head><title>502 Bad Gateway</title></head><body><center>nginx</center></body></html>",
    );
    html.headers = vec![("content-type", "text/html".into())];
    let mut long = canned(503, format!("<div>{}</div>", "overloaded ".repeat(100)));
    long.headers = vec![("content-type", "text/html".into())];
    let (url, rec) = serve(vec![html, long]).await;
    let m = model(config(&url));

    let err = m.chat(&simple_request()).await.unwrap_err();
    match &err {
        ModelError::Http { status, message } => {
            assert_eq!(*status, 502);
            assert_eq!(message, "502 Bad Gateway");
        }
        other => panic!("expected HTTP error, got {other:?}"),
    }
    assert_clean(&err);

    let err = m.chat(&simple_request()).await.unwrap_err();
    match &err {
        ModelError::Http { status, message } => {
            assert_eq!(*status, 503);
            assert!(message.chars().count() <= 200, "{message}");
            assert!(message.starts_with("overloaded overloaded"), "{message}");
            assert!(!message.contains('<'));
        }
        other => panic!("expected HTTP error, got {other:?}"),
    }
    assert_eq!(rec.hits(), 2);
}

#[tokio::test]
async fn vllm_and_integer_code_errors_keep_status() {
    let vllm = r#"{"object":"error","message":"This model's maximum context length is 4096 tokens","type":"BadRequestError","param":null,"code":400}"#;
    let llama = r#"{"error":{"code":400,"message":"the request exceeds the available context size","type":"exceed_context_size_error"}}"#;
    let (url, rec) = serve(vec![canned(400, vllm), canned(400, llama)]).await;
    let m = model(OpenAiConfig {
        max_retries: 3,
        ..config(&url)
    });

    let err = m.chat(&simple_request()).await.unwrap_err();
    match &err {
        ModelError::Http { status, message } => {
            assert_eq!(*status, 400);
            assert!(message.contains("maximum context length"), "{message}");
            assert!(message.contains("code 400"), "{message}");
        }
        other => panic!("expected HTTP error, got {other:?}"),
    }
    let err = m.chat(&simple_request()).await.unwrap_err();
    assert!(
        matches!(&err, ModelError::Http { status: 400, message } if message.contains("context size")),
        "{err:?}"
    );
    assert_eq!(
        rec.hits(),
        2,
        "4xx other than 408/409/429 must not be retried"
    );
}

#[tokio::test]
async fn plain_text_429_is_retried_after_retry_after() {
    let mut limited = canned(429, "Too Many Requests");
    limited.headers = vec![
        ("content-type", "text/plain".into()),
        ("retry-after", "1".into()),
    ];
    let (url, rec) = serve(vec![limited, ok(json!({"content": "finally"}))]).await;
    let started = Instant::now();
    let reply = model(OpenAiConfig {
        max_retries: 2,
        ..config(&url)
    })
    .chat(&simple_request())
    .await
    .unwrap();
    let waited = started.elapsed();
    assert_eq!(reply.text.as_deref(), Some("finally"));
    assert_eq!(reply.retries, 1);
    assert_eq!(rec.hits(), 2);
    assert!(waited >= Duration::from_millis(950), "{waited:?}");
    assert!(waited < Duration::from_secs(8), "{waited:?}");
    assert!(reply.latency_ms >= 950.0, "{}", reply.latency_ms);
}

#[tokio::test]
async fn retries_run_out_with_the_last_status() {
    let mut busy = canned(
        503,
        r#"{"error":{"message":"busy","type":"server_error","code":null}}"#,
    );
    busy.headers.push(("retry-after", "0".into()));
    let (url, rec) = serve(vec![busy.clone(), busy.clone(), busy]).await;
    let err = model(OpenAiConfig {
        max_retries: 2,
        ..config(&url)
    })
    .chat(&simple_request())
    .await
    .unwrap_err();
    match &err {
        ModelError::Http { status, message } => {
            assert_eq!(*status, 503);
            assert!(
                message.contains("busy") && message.contains("after 2 retries"),
                "{message}"
            );
        }
        other => panic!("expected HTTP error, got {other:?}"),
    }
    assert_eq!(rec.hits(), 3);
}

#[tokio::test]
async fn a_hang_times_out_per_attempt() {
    let mut slow = ok(json!({"content": "too late"}));
    slow.delay = Duration::from_secs(5);
    let (url, rec) = serve(vec![slow.clone(), slow.clone(), slow]).await;
    let timeout = Duration::from_millis(300);

    let started = Instant::now();
    let err = model(OpenAiConfig {
        request_timeout: timeout,
        ..config(&url)
    })
    .chat(&simple_request())
    .await
    .unwrap_err();
    assert!(matches!(err, ModelError::Timeout(_)), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(3));
    assert_eq!(rec.hits(), 1);
    assert_clean(&err);

    let err = model(OpenAiConfig {
        request_timeout: timeout,
        max_retries: 1,
        ..config(&url)
    })
    .chat(&simple_request())
    .await
    .unwrap_err();
    assert!(matches!(err, ModelError::Timeout(_)), "{err:?}");
    assert_eq!(rec.hits(), 3, "a timeout is retried");
}

#[tokio::test]
async fn refused_connection_is_a_connect_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let err = model(OpenAiConfig {
        max_retries: 1,
        ..config(&format!("http://{addr}/v1"))
    })
    .chat(&simple_request())
    .await
    .unwrap_err();
    assert!(matches!(err, ModelError::Connect(_)), "{err:?}");
    assert!(err.to_string().contains("after 1 retries"), "{err}");
    assert_clean(&err);
}

#[tokio::test]
async fn api_key_echoed_by_the_server_is_redacted() {
    let body = json!({"error": {"message": format!("Incorrect API key provided: {KEY}."),
        "type": "invalid_request_error", "param": null, "code": "invalid_api_key"}});
    // An echo that the 200-character cut would slice through the middle of the key.
    let long = format!("{}{KEY} is invalid", "a ".repeat(95));
    let (url, _rec) = serve(vec![canned(401, body.to_string()), canned(403, long)]).await;
    let m = model(config(&url));
    let err = m.chat(&simple_request()).await.unwrap_err();
    assert!(
        matches!(err, ModelError::Http { status: 401, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("[redacted]"), "{err}");
    assert_clean(&err);
    let err = m.chat(&simple_request()).await.unwrap_err();
    assert!(
        matches!(err, ModelError::Http { status: 403, .. }),
        "{err:?}"
    );
    assert!(
        !err.to_string().contains(&KEY[..8]),
        "partial key leaked: {err}"
    );
}

/// A responder that records what it was asked and answers with a fixed reply.
struct Scripted {
    reply: ChatReply,
    seen: Mutex<Vec<ChatRequest>>,
}

impl ChatModel for Scripted {
    fn name(&self) -> &str {
        "scripted"
    }
    fn chat<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<ChatReply, ModelError>> {
        self.seen.lock().unwrap().push(request.clone());
        let reply = self.reply.clone();
        Box::pin(async move { Ok(reply) })
    }
}

/// A responder that always fails with an HTTP-style error.
struct Failing;

impl ChatModel for Failing {
    fn name(&self) -> &str {
        "failing"
    }
    fn chat<'a>(&'a self, _: &'a ChatRequest) -> BoxFuture<'a, Result<ChatReply, ModelError>> {
        Box::pin(async {
            Err(ModelError::Http {
                status: 429,
                message: "slow down".into(),
            })
        })
    }
}

#[tokio::test]
async fn mock_server_round_trips_through_openai_model() {
    let scripted = Arc::new(Scripted {
        reply: ChatReply {
            text: Some("I will go left.".into()),
            tool_calls: vec![ToolCall {
                id: "call_1".into(),
                name: "act".into(),
                arguments: json!("{\"actions\":[\"move_left\"]}"),
            }],
            ..ChatReply::default()
        },
        seen: Mutex::new(Vec::new()),
    });
    let server = MockServer::start(scripted.clone()).await.unwrap();
    assert!(server.base_url().starts_with("http://127.0.0.1:"));
    let m = model(OpenAiConfig {
        image_detail: None,
        ..config(&server.base_url())
    });
    // Object arguments in history come back as strings, so send string ones here.
    let mut request = full_request();
    request.messages[2].tool_calls[0].arguments = json!("{\"actions\":[\"move_left\"]}");

    let reply = m.chat(&request).await.unwrap();
    assert_eq!(reply.text, scripted.reply.text);
    assert_eq!(reply.tool_calls, scripted.reply.tool_calls);
    assert_eq!(reply.finish_reason.as_deref(), Some("tool_calls"));
    assert!(reply.usage.input_tokens.unwrap() >= 85, "{:?}", reply.usage);
    assert!(reply.usage.output_tokens.unwrap() > 0);
    assert_eq!(reply.raw["model"], "test-model");
    assert_eq!(server.requests_served(), 1);

    let seen = scripted.seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        vec![request],
        "the responder sees exactly what was sent"
    );
}

#[tokio::test]
async fn mock_server_rejects_malformed_requests_and_forwards_errors() {
    let server = MockServer::start(Arc::new(Failing)).await.unwrap();
    let http = reqwest::Client::new();
    let endpoint = format!("{}/chat/completions", server.base_url());
    for body in [
        "not json",
        r#"{"messages": []}"#,
        r#"{"messages": [{"role": "robot"}]}"#,
    ] {
        let resp = http.post(&endpoint).body(body).send().await.unwrap();
        assert_eq!(resp.status().as_u16(), 400, "{body}");
        let json: Value = serde_json::from_slice(&resp.bytes().await.unwrap()).unwrap();
        assert!(json["error"]["message"].is_string(), "{json}");
        assert_eq!(json["error"]["type"], "invalid_request_error");
    }
    assert_eq!(server.requests_served(), 3);

    let err = model(config(&server.base_url()))
        .chat(&simple_request())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ModelError::Http { status: 429, message } if message.contains("slow down")),
        "{err:?}"
    );

    let base = server.base_url();
    drop(server);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let err = model(config(&base))
        .chat(&simple_request())
        .await
        .unwrap_err();
    assert!(matches!(err, ModelError::Connect(_)), "{err:?}");
}

/// Servers that write headers and body in two sends without TCP_NODELAY (Python's
/// `http.server`) cost no delayed-ACK stall on plain HTTP: the client's connections ask for
/// quick ACKs (Linux). The same bench with quick ACKs off shows the stall it avoids, so the
/// server really is of that kind.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn two_write_servers_cost_no_delayed_ack_stall() {
    use vlm_eval::model::http_bench::{bench_http, ServerWrites};
    let rows = bench_http(20, 3).await.unwrap();
    let row = |server, quickack| {
        rows.iter()
            .find(|r| r.server == server && r.quickack == quickack)
            .unwrap()
            .clone()
    };
    for server in [ServerWrites::Once, ServerWrites::Twice] {
        // ≈ 0.1 ms on an idle loopback; 10 ms leaves room for a loaded machine.
        let r = row(server, true);
        assert!(r.p50_ms < 10.0, "{server:?} with quick ACKs: {r:?}");
    }
    let stalled = row(ServerWrites::Twice, false);
    assert!(
        stalled.p50_ms > 20.0,
        "without quick ACKs the two-write server should stall (≈ 40 ms): {stalled:?}"
    );
}
