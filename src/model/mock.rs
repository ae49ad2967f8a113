//! An in-process OpenAI-compatible HTTP server that answers with any [`ChatModel`].
//!
//! It serves `POST /v1/chat/completions` on 127.0.0.1 (ephemeral port), so the whole HTTP
//! path (request building, transport, lenient parsing) can be exercised end to end without a
//! network: each request body is turned back into our [`ChatRequest`] (images decoded to PNG
//! bytes), answered by the responder, and the [`ChatReply`] sent back OpenAI-shaped with
//! plausible token counts.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use base64::Engine as _;
use serde_json::{json, Map, Value};
use tokio::sync::oneshot;

use super::openai::arguments_string;
use super::{
    ChatModel, ChatReply, ChatRequest, Message, ModelError, Part, Role, ToolCall, ToolChoice,
    ToolSpec, Usage,
};

/// Largest request body accepted (long histories of base64 frames get big).
const BODY_LIMIT: usize = 64 * 1024 * 1024;
/// Prompt tokens charged per image by the usage estimate.
pub const TOKENS_PER_IMAGE: u64 = 85;

struct ServerState {
    responder: Arc<dyn ChatModel>,
    served: AtomicU64,
}

/// A running mock server; dropped → shut down.
pub struct MockServer {
    addr: SocketAddr,
    state: Arc<ServerState>,
    shutdown: Option<oneshot::Sender<()>>,
}

impl std::fmt::Debug for MockServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MockServer")
            .field("addr", &self.addr)
            .field("responder", &self.state.responder.name())
            .finish()
    }
}

impl MockServer {
    /// Start serving POST /v1/chat/completions on 127.0.0.1:0 in the current tokio runtime;
    /// each request is converted into our [`ChatRequest`], answered by `responder.chat(&req)`,
    /// and the reply converted into an OpenAI-shaped response with estimated usage.
    pub async fn start(responder: Arc<dyn ChatModel>) -> std::io::Result<MockServer> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(ServerState {
            responder,
            served: AtomicU64::new(0),
        });
        let router = Router::new()
            .route("/v1/chat/completions", post(handle))
            .fallback(|| async {
                error_response(StatusCode::NOT_FOUND, "not found", "not_found_error")
            })
            .layer(DefaultBodyLimit::max(BODY_LIMIT))
            .with_state(state.clone());
        let (tx, rx) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let served = axum::serve(listener, router).with_graceful_shutdown(async move {
                let _ = rx.await;
            });
            if let Err(e) = served.await {
                tracing::warn!("mock server stopped: {e}");
            }
        });
        Ok(MockServer {
            addr,
            state,
            shutdown: Some(tx),
        })
    }

    /// API base for clients: `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Chat-completion requests received so far (including rejected ones).
    pub fn requests_served(&self) -> u64 {
        self.state.served.load(Ordering::Relaxed)
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

async fn handle(State(state): State<Arc<ServerState>>, body: Bytes) -> Response {
    let n = state.served.fetch_add(1, Ordering::Relaxed) + 1;
    let json: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return error_response(
                StatusCode::BAD_REQUEST,
                &format!("body is not valid JSON: {e}"),
                "invalid_request_error",
            )
        }
    };
    let request = match request_from_openai_json(&json) {
        Ok(r) => r,
        Err(e) => return error_response(StatusCode::BAD_REQUEST, &e, "invalid_request_error"),
    };
    let model = json
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or(state.responder.name())
        .to_string();
    match state.responder.chat(&request).await {
        Ok(mut reply) => {
            let estimate = estimate_usage(&request, &reply);
            reply.usage = Usage {
                input_tokens: reply.usage.input_tokens.or(estimate.input_tokens),
                output_tokens: reply.usage.output_tokens.or(estimate.output_tokens),
                ..reply.usage
            };
            let mut out = reply_to_openai_json(&reply, &model);
            out["id"] = json!(format!("chatcmpl-mock-{n}"));
            (StatusCode::OK, Json(out)).into_response()
        }
        Err(e) => {
            let status = match &e {
                ModelError::Http { status, .. } => {
                    StatusCode::from_u16(*status).unwrap_or(StatusCode::BAD_GATEWAY)
                }
                ModelError::Timeout(_) => StatusCode::GATEWAY_TIMEOUT,
                ModelError::Connect(_) | ModelError::BadResponse(_) => StatusCode::BAD_GATEWAY,
                ModelError::Config(_) => StatusCode::INTERNAL_SERVER_ERROR,
            };
            error_response(status, &e.to_string(), "server_error")
        }
    }
}

fn error_response(status: StatusCode, message: &str, kind: &str) -> Response {
    let body = json!({"error": {"message": message, "type": kind, "param": null, "code": null}});
    (status, Json(body)).into_response()
}

/// Convert an OpenAI chat-completions request body into our [`ChatRequest`].
///
/// Accepts string, null or parts-array content; `image_url` parts must be base64 data URLs
/// (decoded back to the image bytes); `developer` counts as `system`; a named
/// `tool_choice` object counts as `required`.
pub fn request_from_openai_json(body: &Value) -> Result<ChatRequest, String> {
    let obj = body
        .as_object()
        .ok_or("request body is not a JSON object")?;
    let raw_messages = obj
        .get("messages")
        .and_then(Value::as_array)
        .ok_or("missing 'messages' array")?;
    if raw_messages.is_empty() {
        return Err("'messages' is empty".into());
    }
    let messages = raw_messages
        .iter()
        .enumerate()
        .map(|(i, m)| parse_message(m).map_err(|e| format!("messages[{i}]: {e}")))
        .collect::<Result<Vec<_>, _>>()?;

    let mut tools = Vec::new();
    if let Some(list) = obj.get("tools") {
        let list = list.as_array().ok_or("'tools' is not an array")?;
        for (i, tool) in list.iter().enumerate() {
            let function = tool.get("function").unwrap_or(tool);
            let name = function
                .get("name")
                .and_then(Value::as_str)
                .ok_or(format!("tools[{i}]: missing function name"))?;
            tools.push(ToolSpec {
                name: name.to_string(),
                description: function
                    .get("description")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                parameters: function
                    .get("parameters")
                    .cloned()
                    .unwrap_or_else(|| json!({})),
            });
        }
    }

    let tool_choice = match obj.get("tool_choice") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(match s.as_str() {
            "auto" => ToolChoice::Auto,
            "required" => ToolChoice::Required,
            "none" => ToolChoice::None,
            other => return Err(format!("unknown tool_choice {other:?}")),
        }),
        Some(Value::Object(_)) => Some(ToolChoice::Required),
        Some(_) => return Err("'tool_choice' has the wrong type".into()),
    };

    let number = |key: &str| obj.get(key).filter(|v| !v.is_null());
    let temperature = match number("temperature") {
        None => None,
        Some(v) => Some(v.as_f64().ok_or("'temperature' is not a number")? as f32),
    };
    let max_tokens = match number("max_completion_tokens").or_else(|| number("max_tokens")) {
        None => None,
        Some(v) => {
            let n = v
                .as_u64()
                .ok_or("max tokens is not a non-negative integer")?;
            Some(u32::try_from(n).map_err(|_| "max tokens is too large")?)
        }
    };
    let seed = match number("seed") {
        None => None,
        Some(v) => Some(v.as_i64().ok_or("'seed' is not an integer")?),
    };

    Ok(ChatRequest {
        messages,
        tools,
        tool_choice,
        temperature,
        max_tokens,
        seed,
        prompt_cache_key: None,
    })
}

fn parse_message(m: &Value) -> Result<Message, String> {
    let role = match m.get("role").and_then(Value::as_str) {
        Some("system") | Some("developer") => Role::System,
        Some("user") => Role::User,
        Some("assistant") => Role::Assistant,
        Some("tool") => Role::Tool,
        Some(other) => return Err(format!("unknown role {other:?}")),
        None => return Err("missing role".into()),
    };
    let content = match m.get("content") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => vec![Part::Text(s.clone())],
        Some(Value::Array(parts)) => parts
            .iter()
            .enumerate()
            .map(|(j, p)| parse_part(p).map_err(|e| format!("content[{j}]: {e}")))
            .collect::<Result<Vec<_>, _>>()?,
        Some(_) => return Err("content must be a string, null or an array".into()),
    };
    let mut tool_calls = Vec::new();
    if let Some(calls) = m.get("tool_calls").filter(|v| !v.is_null()) {
        let calls = calls.as_array().ok_or("'tool_calls' is not an array")?;
        for (j, call) in calls.iter().enumerate() {
            let function = call
                .get("function")
                .ok_or(format!("tool_calls[{j}]: no function"))?;
            let name = function
                .get("name")
                .and_then(Value::as_str)
                .ok_or(format!("tool_calls[{j}]: no function name"))?;
            tool_calls.push(ToolCall {
                id: call
                    .get("id")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("call_{j}")),
                name: name.to_string(),
                arguments: function
                    .get("arguments")
                    .cloned()
                    .unwrap_or(Value::String(String::new())),
            });
        }
    }
    let tool_call_id = m
        .get("tool_call_id")
        .and_then(Value::as_str)
        .map(str::to_string);
    if role == Role::Tool && tool_call_id.is_none() {
        return Err("tool message without tool_call_id".into());
    }
    Ok(Message {
        role,
        content,
        tool_calls,
        tool_call_id,
        extra: Default::default(),
    })
}

fn parse_part(part: &Value) -> Result<Part, String> {
    match part.get("type").and_then(Value::as_str) {
        Some("text") => Ok(Part::Text(
            part.get("text")
                .and_then(Value::as_str)
                .ok_or("text part without text")?
                .to_string(),
        )),
        Some("image_url") => {
            let image = part
                .get("image_url")
                .ok_or("image part without image_url")?;
            let url = image
                .as_str()
                .or_else(|| image.get("url").and_then(Value::as_str))
                .ok_or("image_url without url")?;
            decode_data_url(url).map(|bytes| Part::Png(Arc::new(bytes)))
        }
        Some(other) => Err(format!("unsupported content part type {other:?}")),
        None => Err("content part without type".into()),
    }
}

/// Bytes of a `data:image/…;base64,…` URL.
fn decode_data_url(url: &str) -> Result<Vec<u8>, String> {
    let rest = url
        .strip_prefix("data:")
        .ok_or("only data: image URLs are supported")?;
    let (meta, data) = rest.split_once(',').ok_or("data URL without ','")?;
    if !meta.starts_with("image/") || !meta.ends_with(";base64") {
        return Err(format!("data URL must be image/*;base64 (got {meta:?})"));
    }
    base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .map_err(|e| format!("bad base64 in data URL: {e}"))
}

/// Plausible token counts: prompt = text chars / 4 + 85 per image; completion = output
/// chars / 4 (text, tool names and arguments), rounded up.
pub fn estimate_usage(request: &ChatRequest, reply: &ChatReply) -> Usage {
    let mut prompt_chars = 0usize;
    let mut images = 0u64;
    for m in &request.messages {
        for part in &m.content {
            match part {
                Part::Text(t) => prompt_chars += t.chars().count(),
                Part::Png(_) => images += 1,
            }
        }
        for call in &m.tool_calls {
            prompt_chars += call.name.chars().count();
            prompt_chars += arguments_string(&call.arguments).chars().count();
        }
    }
    let mut output_chars = reply.text.as_deref().map_or(0, |t| t.chars().count());
    for call in &reply.tool_calls {
        output_chars += call.name.chars().count();
        output_chars += arguments_string(&call.arguments).chars().count();
    }
    Usage {
        input_tokens: Some(prompt_chars.div_ceil(4) as u64 + TOKENS_PER_IMAGE * images),
        output_tokens: Some(output_chars.div_ceil(4) as u64),
        ..Usage::default()
    }
}

/// Convert our [`ChatReply`] into an OpenAI chat-completions response body.
///
/// `finish_reason` is the reply's own, else `tool_calls`/`stop`; tool-call arguments are
/// sent as JSON strings; `reasoning` goes into `reasoning_content`; `usage` holds whatever
/// counts the reply has (omitted when it has none).
pub fn reply_to_openai_json(reply: &ChatReply, model: &str) -> Value {
    let mut message = Map::new();
    message.insert("role".into(), json!("assistant"));
    message.insert("content".into(), json!(reply.text));
    if !reply.tool_calls.is_empty() {
        let calls: Vec<Value> = reply
            .tool_calls
            .iter()
            .map(|c| {
                json!({
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": arguments_string(&c.arguments)},
                })
            })
            .collect();
        message.insert("tool_calls".into(), Value::Array(calls));
    }
    if let Some(r) = &reply.reasoning {
        message.insert("reasoning_content".into(), json!(r));
    }
    let finish = reply.finish_reason.clone().unwrap_or_else(|| {
        if reply.tool_calls.is_empty() {
            "stop".into()
        } else {
            "tool_calls".into()
        }
    });
    let created = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let mut out = json!({
        "id": "chatcmpl-mock",
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "message": Value::Object(message), "finish_reason": finish}],
    });
    let Usage {
        input_tokens,
        output_tokens,
        ..
    } = reply.usage;
    if input_tokens.is_some() || output_tokens.is_some() {
        let mut usage = Map::new();
        if let Some(p) = input_tokens {
            usage.insert("prompt_tokens".into(), json!(p));
        }
        if let Some(c) = output_tokens {
            usage.insert("completion_tokens".into(), json!(c));
        }
        if let (Some(p), Some(c)) = (input_tokens, output_tokens) {
            usage.insert("total_tokens".into(), json!(p + c));
        }
        out["usage"] = Value::Object(usage);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::openai::{parse_response, request_body, OpenAiConfig};

    fn sample() -> ChatRequest {
        ChatRequest {
            messages: vec![
                Message::text(Role::System, "sys"),
                Message {
                    role: Role::User,
                    content: vec![
                        Part::Text("frame".into()),
                        Part::Png(Arc::new(vec![137, 80, 78, 71, 0, 255])),
                    ],
                    tool_calls: vec![],
                    tool_call_id: None,
                    extra: Default::default(),
                },
                Message {
                    role: Role::Assistant,
                    content: vec![Part::Text("thinking".into())],
                    tool_calls: vec![ToolCall {
                        id: "call_9".into(),
                        name: "act".into(),
                        arguments: json!("{\"actions\":[\"noop\"]}"),
                    }],
                    tool_call_id: None,
                    extra: Default::default(),
                },
                Message {
                    role: Role::Tool,
                    content: vec![Part::Text("done".into())],
                    tool_calls: vec![],
                    tool_call_id: Some("call_9".into()),
                    extra: Default::default(),
                },
            ],
            tools: vec![ToolSpec {
                name: "act".into(),
                description: "act".into(),
                parameters: json!({"type": "object"}),
            }],
            tool_choice: Some(ToolChoice::Auto),
            temperature: Some(0.25),
            max_tokens: Some(100),
            seed: Some(-3),
            prompt_cache_key: None,
        }
    }

    #[test]
    fn request_round_trips_through_openai_json() {
        let cfg = OpenAiConfig::new("http://127.0.0.1:1/v1", "m");
        let body = request_body(&cfg, &sample()).unwrap();
        assert_eq!(request_from_openai_json(&body).unwrap(), sample());
        let cfg = OpenAiConfig {
            use_max_completion_tokens: false,
            ..cfg
        };
        let body = request_body(&cfg, &sample()).unwrap();
        assert_eq!(
            request_from_openai_json(&body).unwrap().max_tokens,
            Some(100)
        );
    }

    #[test]
    fn malformed_requests_are_rejected() {
        for bad in [
            json!([]),
            json!({}),
            json!({"messages": []}),
            json!({"messages": [{"content": "x"}]}),
            json!({"messages": [{"role": "robot", "content": "x"}]}),
            json!({"messages": [{"role": "tool", "content": "x"}]}),
            json!({"messages": [{"role": "user", "content": 5}]}),
            json!({"messages": [{"role": "user", "content": [{"type": "image_url",
                "image_url": {"url": "https://example.com/a.png"}}]}]}),
            json!({"messages": [{"role": "user", "content": [{"type": "image_url",
                "image_url": {"url": "data:image/png;base64,@@@"}}]}]}),
            json!({"messages": [{"role": "user", "content": "x"}], "tool_choice": "maybe"}),
            json!({"messages": [{"role": "user", "content": "x"}], "seed": "1"}),
        ] {
            assert!(request_from_openai_json(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn reply_json_parses_back() {
        let reply = ChatReply {
            text: Some("hi".into()),
            tool_calls: vec![ToolCall {
                id: "c".into(),
                name: "act".into(),
                arguments: json!({"a": [1]}),
            }],
            reasoning: Some("why".into()),
            usage: Usage {
                input_tokens: Some(5),
                output_tokens: Some(2),
                ..Usage::default()
            },
            ..ChatReply::default()
        };
        let body = reply_to_openai_json(&reply, "m");
        assert_eq!(body["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(body["usage"]["total_tokens"], 7);
        let back = parse_response(body).unwrap();
        assert_eq!(back.text, reply.text);
        assert_eq!(back.reasoning, reply.reasoning);
        assert_eq!(
            (back.usage.input_tokens, back.usage.output_tokens),
            (reply.usage.input_tokens, reply.usage.output_tokens)
        );
        assert_eq!(back.usage.total_tokens, Some(7));
        assert_eq!(back.tool_calls[0].arguments, json!("{\"a\":[1]}"));
        let plain = reply_to_openai_json(&ChatReply::default(), "m");
        assert_eq!(plain["choices"][0]["finish_reason"], "stop");
        assert!(plain.get("usage").is_none());
        assert!(plain["choices"][0]["message"]["content"].is_null());
    }

    #[test]
    fn usage_estimate_counts_text_and_images() {
        let reply = ChatReply {
            text: Some("abcdefgh".into()),
            ..ChatReply::default()
        };
        let usage = estimate_usage(&sample(), &reply);
        // sys 3 + frame 5 + thinking 8 + act 3 + args 20 + done 4 = 43 chars → 11, + 85.
        assert_eq!(usage.input_tokens, Some(11 + TOKENS_PER_IMAGE));
        assert_eq!(usage.output_tokens, Some(2));
    }
}
