//! The wire format of the OpenAI backend: our [`ChatRequest`] to a chat-completions JSON body
//! (through async-openai's typed builders) and a response body, parsed leniently, to our
//! [`ChatReply`].

use async_openai::error::OpenAIError;
use async_openai::types::chat::{
    ChatCompletionMessageToolCall, ChatCompletionMessageToolCalls,
    ChatCompletionRequestAssistantMessageArgs, ChatCompletionRequestMessage,
    ChatCompletionRequestMessageContentPartImageArgs,
    ChatCompletionRequestMessageContentPartTextArgs, ChatCompletionRequestSystemMessageArgs,
    ChatCompletionRequestToolMessageArgs, ChatCompletionRequestUserMessageArgs,
    ChatCompletionRequestUserMessageContent, ChatCompletionRequestUserMessageContentPart,
    ChatCompletionTool, ChatCompletionToolChoiceOption, ChatCompletionTools,
    CreateChatCompletionRequestArgs, FunctionCall, FunctionObjectArgs, ImageDetail, ImageUrlArgs,
    ToolChoiceOptions,
};
use base64::Engine as _;
use serde_json::Value;

use super::errors::{excerpt_text, json_error_summary};
use super::OpenAiConfig;
use crate::model::{
    ChatReply, ChatRequest, Message, ModelError, Part, Role, ToolCall, ToolChoice, ToolSpec, Usage,
};

pub(crate) fn parse_detail(detail: Option<&str>) -> Result<Option<ImageDetail>, ModelError> {
    let Some(d) = detail else { return Ok(None) };
    match d.trim().to_ascii_lowercase().as_str() {
        "low" => Ok(Some(ImageDetail::Low)),
        "high" => Ok(Some(ImageDetail::High)),
        "auto" => Ok(Some(ImageDetail::Auto)),
        "original" => Ok(Some(ImageDetail::Original)),
        other => Err(ModelError::Config(format!(
            "image detail must be low, high, auto or original (got {other:?})"
        ))),
    }
}

/// A `data:image/png;base64,…` URL for PNG bytes.
pub fn png_data_url(png: &[u8]) -> String {
    format!(
        "data:image/png;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(png)
    )
}

fn build_error(e: OpenAIError) -> ModelError {
    ModelError::Config(format!("cannot build request: {e}"))
}

fn only_text(message: &Message, what: &str) -> Result<String, ModelError> {
    if message.image_count() > 0 {
        return Err(ModelError::Config(format!(
            "{what} messages cannot carry images (only user messages can)"
        )));
    }
    Ok(message.joined_text())
}

/// Tool-call arguments as the JSON string OpenAI expects.
pub fn arguments_string(arguments: &Value) -> String {
    match arguments {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn convert_message(
    message: &Message,
    detail: Option<ImageDetail>,
) -> Result<ChatCompletionRequestMessage, ModelError> {
    Ok(match message.role {
        Role::System => ChatCompletionRequestSystemMessageArgs::default()
            .content(only_text(message, "system")?)
            .build()
            .map_err(build_error)?
            .into(),
        Role::User => {
            let content = match message.content.as_slice() {
                [Part::Text(t)] => ChatCompletionRequestUserMessageContent::Text(t.clone()),
                parts => {
                    let mut array = Vec::with_capacity(parts.len());
                    for part in parts {
                        array.push(match part {
                            Part::Text(t) => ChatCompletionRequestUserMessageContentPart::Text(
                                ChatCompletionRequestMessageContentPartTextArgs::default()
                                    .text(t.clone())
                                    .build()
                                    .map_err(build_error)?,
                            ),
                            Part::Png(png) => {
                                let mut url = ImageUrlArgs::default();
                                url.url(png_data_url(png));
                                if let Some(d) = detail.clone() {
                                    url.detail(d);
                                }
                                ChatCompletionRequestUserMessageContentPart::ImageUrl(
                                    ChatCompletionRequestMessageContentPartImageArgs::default()
                                        .image_url(url.build().map_err(build_error)?)
                                        .build()
                                        .map_err(build_error)?,
                                )
                            }
                        });
                    }
                    ChatCompletionRequestUserMessageContent::Array(array)
                }
            };
            ChatCompletionRequestUserMessageArgs::default()
                .content(content)
                .build()
                .map_err(build_error)?
                .into()
        }
        Role::Assistant => {
            let text = only_text(message, "assistant")?;
            let mut args = ChatCompletionRequestAssistantMessageArgs::default();
            if !text.is_empty() || message.tool_calls.is_empty() {
                args.content(text);
            }
            if !message.tool_calls.is_empty() {
                let calls = message
                    .tool_calls
                    .iter()
                    .map(|call| {
                        ChatCompletionMessageToolCalls::Function(ChatCompletionMessageToolCall {
                            id: call.id.clone(),
                            function: FunctionCall {
                                name: call.name.clone(),
                                arguments: arguments_string(&call.arguments),
                            },
                        })
                    })
                    .collect::<Vec<_>>();
                args.tool_calls(calls);
            }
            args.build().map_err(build_error)?.into()
        }
        Role::Tool => {
            let id = message
                .tool_call_id
                .clone()
                .ok_or_else(|| ModelError::Config("tool message without tool_call_id".into()))?;
            ChatCompletionRequestToolMessageArgs::default()
                .content(only_text(message, "tool")?)
                .tool_call_id(id)
                .build()
                .map_err(build_error)?
                .into()
        }
    })
}

fn convert_tools(tools: &[ToolSpec]) -> Result<Vec<ChatCompletionTools>, ModelError> {
    tools
        .iter()
        .map(|t| {
            let function = FunctionObjectArgs::default()
                .name(t.name.clone())
                .description(t.description.clone())
                .parameters(t.parameters.clone())
                .build()
                .map_err(build_error)?;
            Ok(ChatCompletionTools::Function(ChatCompletionTool {
                function,
            }))
        })
        .collect()
}

/// The `tools` array of a request body, exactly as [`request_body`] sends it.
pub fn tools_json(tools: &[ToolSpec]) -> Result<Value, ModelError> {
    serde_json::to_value(convert_tools(tools)?)
        .map_err(|e| ModelError::Config(format!("cannot encode tools: {e}")))
}

/// Build the OpenAI JSON body for a request (typed async-openai builders, then
/// `serde_json::to_value`).
///
/// `tool_choice` is sent only when `config.send_tool_choice` is set and tools are offered
/// (OpenAI rejects a `tool_choice` without `tools`).
pub fn request_body(config: &OpenAiConfig, request: &ChatRequest) -> Result<Value, ModelError> {
    let detail = parse_detail(config.image_detail.as_deref())?;
    let messages = request
        .messages
        .iter()
        .map(|m| convert_message(m, detail.clone()))
        .collect::<Result<Vec<_>, _>>()?;
    let mut args = CreateChatCompletionRequestArgs::default();
    args.model(config.model.clone()).messages(messages);
    if !request.tools.is_empty() {
        args.tools(convert_tools(&request.tools)?);
        if config.send_tool_choice {
            if let Some(choice) = request.tool_choice {
                args.tool_choice(ChatCompletionToolChoiceOption::Mode(match choice {
                    ToolChoice::Auto => ToolChoiceOptions::Auto,
                    ToolChoice::Required => ToolChoiceOptions::Required,
                    ToolChoice::None => ToolChoiceOptions::None,
                }));
            }
        }
    }
    if let Some(t) = request.temperature {
        args.temperature(t);
    }
    if let Some(n) = request.max_tokens {
        if config.use_max_completion_tokens {
            args.max_completion_tokens(n);
        } else {
            args.max_tokens(n);
        }
    }
    if let Some(seed) = request.seed {
        args.seed(seed);
    }
    let typed = args.build().map_err(build_error)?;
    let mut body = serde_json::to_value(&typed)
        .map_err(|e| ModelError::Config(format!("cannot encode: {e}")))?;
    if let Some(effort) = &config.reasoning_effort {
        body["reasoning_effort"] = Value::from(effort.as_str());
    }
    if let Some(key) = &request.prompt_cache_key {
        body["prompt_cache_key"] = Value::from(key.as_str());
    }
    // Fields of earlier assistant turns that we do not model go back as the server sent them.
    for (message, sent) in request
        .messages
        .iter()
        .zip(body["messages"].as_array_mut().into_iter().flatten())
    {
        if !message.extra.is_empty() {
            message.extra.apply(sent);
        }
    }
    if config.content_parts {
        for m in body["messages"].as_array_mut().into_iter().flatten() {
            if let Some(text) = m.get("content").and_then(Value::as_str).map(str::to_string) {
                m["content"] = serde_json::json!([{"type": "text", "text": text}]);
            }
        }
    }
    // `to_value` widens the f32 temperature to f64 (0.2 → 0.20000000298023224); send the
    // shortest decimal of the f32 instead, as `to_string` of the typed request would.
    if let Some(t) = request.temperature {
        if let Ok(short) = t.to_string().parse::<f64>() {
            body["temperature"] = Value::from(short);
        }
    }
    Ok(body)
}

/// Lenient parse of a chat-completions response body into a [`ChatReply`] (raw kept).
///
/// Tolerates unknown fields; missing `id`/`object`/`model`; any `created`; any or no
/// `finish_reason`; tool calls without `type` or `id` (ids become `call_<n>`); `arguments` as
/// a string or an object; `content` as null, a string or a parts array (text parts joined);
/// `reasoning_content` or `reasoning`; legacy `function_call`; missing or null `usage`.
pub fn parse_response(body: Value) -> Result<ChatReply, ModelError> {
    let Some(root) = body.as_object() else {
        return Err(ModelError::BadResponse(format!(
            "response is not a JSON object: {}",
            excerpt_text(&body.to_string())
        )));
    };
    let choice = match root.get("choices").and_then(Value::as_array) {
        Some(choices) if !choices.is_empty() => &choices[0],
        _ => {
            let why = json_error_summary(&body).unwrap_or_else(|| body.to_string());
            return Err(ModelError::BadResponse(format!(
                "response has no choices: {}",
                excerpt_text(&why)
            )));
        }
    };
    let empty = Value::Null;
    let message = choice.get("message").unwrap_or(&empty);

    let text = content_text(message.get("content").unwrap_or(&empty));
    let reasoning = ["reasoning_content", "reasoning"]
        .iter()
        .find_map(|k| content_text(message.get(*k).unwrap_or(&empty)));

    let mut tool_calls = Vec::new();
    if let Some(calls) = message.get("tool_calls").and_then(Value::as_array) {
        for call in calls {
            if let Some(parsed) = parse_tool_call(call, tool_calls.len()) {
                tool_calls.push(parsed);
            }
        }
    }
    if tool_calls.is_empty() {
        if let Some(call) = message.get("function_call") {
            let wrapped = serde_json::json!({ "function": call });
            tool_calls.extend(parse_tool_call(&wrapped, 0));
        }
    }

    let finish_reason = choice
        .get("finish_reason")
        .and_then(Value::as_str)
        .map(str::to_string);
    let usage = root.get("usage").map(parse_usage).unwrap_or_default();

    Ok(ChatReply {
        text,
        tool_calls,
        reasoning,
        finish_reason,
        usage,
        latency_ms: 0.0,
        retries: 0,
        retry_wait_ms: 0.0,
        attempts: Vec::new(),
        raw: body,
    })
}

/// Text of a content value: a string, or the text parts of an array joined (null → None).
fn content_text(content: &Value) -> Option<String> {
    match content {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => {
            let texts: Vec<&str> = parts
                .iter()
                .filter_map(|p| match p {
                    Value::String(s) => Some(s.as_str()),
                    Value::Object(o) => o.get("text").and_then(Value::as_str),
                    _ => None,
                })
                .collect();
            (!texts.is_empty()).then(|| texts.concat())
        }
        _ => None,
    }
}

fn parse_tool_call(call: &Value, index: usize) -> Option<ToolCall> {
    let function = call.get("function").unwrap_or(call);
    let name = function.get("name").and_then(Value::as_str)?.to_string();
    let arguments = match function.get("arguments") {
        None | Some(Value::Null) => Value::String(String::new()),
        Some(v) => v.clone(),
    };
    let id = match call.get("id") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        _ => format!("call_{index}"),
    };
    Some(ToolCall {
        id,
        name,
        arguments,
    })
}

/// The usage a response body (success or error) reports, when it reports any count.
pub(crate) fn response_usage(body: &Value) -> Option<Usage> {
    let usage = parse_usage(body.get("usage")?);
    usage.reported().then_some(usage)
}

fn parse_usage(usage: &Value) -> Usage {
    crate::model::usage::parse_usage(usage)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ToolSpec;
    use serde_json::json;
    use std::sync::Arc;

    fn config() -> OpenAiConfig {
        OpenAiConfig {
            api_key: Some("sk-unit-SECRET-123".into()),
            image_detail: Some("low".into()),
            ..OpenAiConfig::new("http://127.0.0.1:9/v1/", "test-model")
        }
    }

    fn sample_request() -> ChatRequest {
        ChatRequest {
            messages: vec![
                Message::text(Role::System, "rules"),
                Message {
                    role: Role::User,
                    content: vec![
                        Part::Text("look".into()),
                        Part::Png(Arc::new(vec![1, 2, 3])),
                    ],
                    tool_calls: vec![],
                    tool_call_id: None,
                    extra: Default::default(),
                },
                Message {
                    role: Role::Assistant,
                    content: vec![],
                    tool_calls: vec![ToolCall {
                        id: "c1".into(),
                        name: "act".into(),
                        arguments: json!({"a": 1}),
                    }],
                    tool_call_id: None,
                    extra: Default::default(),
                },
                Message {
                    role: Role::Tool,
                    content: vec![Part::Text("ok".into())],
                    tool_calls: vec![],
                    tool_call_id: Some("c1".into()),
                    extra: Default::default(),
                },
                Message::text(Role::User, "again"),
            ],
            tools: vec![ToolSpec {
                name: "act".into(),
                description: "do it".into(),
                parameters: json!({"type": "object", "properties": {}}),
            }],
            tool_choice: Some(ToolChoice::Required),
            temperature: Some(0.5),
            max_tokens: Some(64),
            seed: Some(7),
            prompt_cache_key: None,
        }
    }

    #[test]
    fn body_has_every_piece() {
        let body = request_body(&config(), &sample_request()).unwrap();
        let msgs = body["messages"].as_array().unwrap();
        assert_eq!(msgs[0], json!({"role": "system", "content": "rules"}));
        assert_eq!(
            msgs[1]["content"][0],
            json!({"type": "text", "text": "look"})
        );
        assert_eq!(
            msgs[1]["content"][1]["image_url"],
            json!({"url": "data:image/png;base64,AQID", "detail": "low"})
        );
        assert_eq!(
            msgs[2]["tool_calls"][0]["function"]["arguments"],
            "{\"a\":1}"
        );
        assert_eq!(msgs[2]["tool_calls"][0]["type"], "function");
        assert!(msgs[2].get("content").is_none());
        assert_eq!(msgs[3]["tool_call_id"], "c1");
        assert_eq!(msgs[4]["content"], "again");
        assert_eq!(body["tool_choice"], "required");
        assert_eq!(body["max_completion_tokens"], 64);
        assert!(body.get("max_tokens").is_none());
        assert_eq!(body["seed"], 7);
        assert_eq!(body["temperature"], 0.5);
        assert_eq!(body["model"], "test-model");
        assert_eq!(body["tools"][0]["function"]["name"], "act");
    }

    #[test]
    fn body_options_switch() {
        let cfg = OpenAiConfig {
            use_max_completion_tokens: false,
            send_tool_choice: false,
            image_detail: None,
            ..config()
        };
        let mut req = sample_request();
        req.temperature = Some(0.2);
        let body = request_body(&cfg, &req).unwrap();
        assert_eq!(body["temperature"], json!(0.2), "not the widened f32");
        assert_eq!(body["max_tokens"], 64);
        assert!(body.get("max_completion_tokens").is_none());
        assert!(body.get("tool_choice").is_none());
        assert!(body["messages"][1]["content"][1]["image_url"]
            .get("detail")
            .is_none());
        let mut no_tools = sample_request();
        no_tools.tools.clear();
        let body = request_body(&config(), &no_tools).unwrap();
        assert!(body.get("tools").is_none() && body.get("tool_choice").is_none());
    }

    #[test]
    fn body_rejects_bad_messages() {
        let mut req = sample_request();
        req.messages[3].tool_call_id = None;
        assert!(matches!(
            request_body(&config(), &req),
            Err(ModelError::Config(_))
        ));
        let mut req = sample_request();
        req.messages[0].content.push(Part::Png(Arc::new(vec![0])));
        assert!(matches!(
            request_body(&config(), &req),
            Err(ModelError::Config(_))
        ));
        let cfg = OpenAiConfig {
            image_detail: Some("medium".into()),
            ..config()
        };
        assert!(request_body(&cfg, &sample_request()).is_err());
    }

    #[test]
    fn parses_lenient_shapes() {
        let reply = parse_response(json!({
            "created": 1.5,
            "choices": [{"message": {
                "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
                "reasoning_content": "think",
                "reasoning": "other",
                "tool_calls": [
                    {"function": {"name": "f", "arguments": {"x": 1}}},
                    {"id": "", "type": "function", "function": {"name": "g", "arguments": "{}"}},
                    {"function": {"arguments": "{}"}}
                ]
            }, "finish_reason": "eos"}],
            "usage": null
        }))
        .unwrap();
        assert_eq!(reply.text.as_deref(), Some("ab"));
        assert_eq!(reply.reasoning.as_deref(), Some("think"));
        assert_eq!(reply.tool_calls.len(), 2);
        assert_eq!(reply.tool_calls[0].id, "call_0");
        assert_eq!(reply.tool_calls[0].arguments, json!({"x": 1}));
        assert_eq!(reply.tool_calls[1].id, "call_1");
        assert_eq!(reply.finish_reason.as_deref(), Some("eos"));
        assert_eq!(reply.usage, Usage::default());
    }

    #[test]
    fn parses_legacy_function_call_and_float_usage() {
        let reply = parse_response(json!({"choices": [{"message": {
            "content": null, "function_call": {"name": "f", "arguments": "{}"}},
            "finish_reason": null}],
            "usage": {"prompt_tokens": 10.0, "completion_tokens": 3}}))
        .unwrap();
        assert_eq!(reply.text, None);
        assert_eq!(reply.tool_calls[0].name, "f");
        assert_eq!(reply.finish_reason, None);
        assert_eq!(reply.usage.input_tokens, Some(10));
        assert_eq!(reply.usage.output_tokens, Some(3));
    }

    #[test]
    fn rejects_bodies_without_choices() {
        let err = parse_response(json!({"error": {"message": "overloaded"}})).unwrap_err();
        assert!(err.to_string().contains("overloaded"), "{err}");
        assert!(parse_response(json!([1, 2])).is_err());
        assert!(parse_response(json!({"choices": []})).is_err());
    }
}
