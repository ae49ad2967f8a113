//! Who answers: one trait over chat models, with our own request and reply types (messages
//! with text and image parts, tools, sampling options → text, tool calls, usage, latency).
//! A backend never sees the game.

pub mod attempts;
pub mod baseline;
pub mod extra;
pub mod http_bench;
pub mod image_tokens;
pub mod limit;
pub mod local;
pub mod mock;
pub mod openai;
pub mod prices;
pub mod request_tokens;
pub mod usage;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use attempts::{Attempt, CallFailure, Wait};
pub use extra::WireExtra;
pub use usage::{OutputRule, Usage, UsageWarning};
/// Tool calls and Qwen3.5's XML tool-call reader live with the reply parser (`crates/parse`).
pub use vlm_eval_parse::{toolxml, ToolCall};

/// A message's author.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

/// One piece of message content.
#[derive(Clone, Debug, PartialEq)]
pub enum Part {
    /// Plain text.
    Text(String),
    /// A PNG image (raw file bytes; backends encode it, e.g. as a data URL).
    Png(Arc<Vec<u8>>),
}

/// One chat message.
#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    /// Author.
    pub role: Role,
    /// Content parts (may be empty for an assistant message with only tool calls).
    pub content: Vec<Part>,
    /// Tool calls (assistant messages).
    pub tool_calls: Vec<ToolCall>,
    /// The call this message answers (tool messages).
    pub tool_call_id: Option<String>,
    /// Fields the server sent on this (assistant) message and its tool calls that we do not
    /// model, sent back verbatim (e.g. Gemini's thought signatures).
    pub extra: WireExtra,
}

impl Message {
    /// A message with text only.
    pub fn text(role: Role, text: impl Into<String>) -> Message {
        Message {
            role,
            content: vec![Part::Text(text.into())],
            tool_calls: Vec::new(),
            tool_call_id: None,
            extra: WireExtra::default(),
        }
    }

    /// All text parts joined by newlines.
    pub fn joined_text(&self) -> String {
        let texts: Vec<&str> = self
            .content
            .iter()
            .filter_map(|p| match p {
                Part::Text(t) => Some(t.as_str()),
                Part::Png(_) => None,
            })
            .collect();
        texts.join("\n")
    }

    /// Number of image parts.
    pub fn image_count(&self) -> usize {
        self.content
            .iter()
            .filter(|p| matches!(p, Part::Png(_)))
            .count()
    }
}

/// A function tool offered to the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// Function name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// JSON schema of its arguments.
    pub parameters: Value,
}

/// How the model may use tools.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolChoice {
    Auto,
    Required,
    None,
}

/// A chat request in our own terms.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct ChatRequest {
    /// Conversation, system message first.
    pub messages: Vec<Message>,
    /// Tools offered (empty for the text protocol).
    pub tools: Vec<ToolSpec>,
    /// Tool choice (omitted when `None`).
    pub tool_choice: Option<ToolChoice>,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// Maximum output tokens.
    pub max_tokens: Option<u32>,
    /// API seed (sent only when the user asks).
    pub seed: Option<i64>,
    /// OpenAI's `prompt_cache_key`: routes requests that share it to the same prompt cache
    /// (one per episode; sent only when set).
    pub prompt_cache_key: Option<String>,
}

/// What the model said, with accounting.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChatReply {
    /// Assistant text, if any.
    pub text: Option<String>,
    /// Tool calls, in order.
    pub tool_calls: Vec<ToolCall>,
    /// Reasoning text some servers return separately (`reasoning_content` / `reasoning`).
    pub reasoning: Option<String>,
    /// Finish reason as sent.
    pub finish_reason: Option<String>,
    /// Token usage.
    pub usage: Usage,
    /// Wall time of the call, milliseconds (all attempts).
    pub latency_ms: f64,
    /// Retries made before this reply.
    pub retries: u32,
    /// Time spent waiting between attempts (backoff and `Retry-After`), milliseconds.
    pub retry_wait_ms: f64,
    /// Every HTTP attempt of the call, the successful one last (empty for models that make
    /// no HTTP requests).
    pub attempts: Vec<Attempt>,
    /// The raw response body (for the trajectory log).
    pub raw: Value,
}

impl ChatReply {
    /// The fields of the raw reply's message and tool calls that we do not model, to send
    /// back with this turn (see [`WireExtra`]).
    pub fn wire_extra(&self) -> WireExtra {
        WireExtra::from_response(&self.raw)
    }

    /// What the reply parser reads of it: the text, the tool calls and the separate reasoning.
    pub fn as_reply(&self) -> vlm_eval_parse::Reply<'_> {
        vlm_eval_parse::Reply {
            text: self.text.as_deref(),
            tool_calls: &self.tool_calls,
            reasoning: self.reasoning.as_deref(),
        }
    }
}

impl<'a> From<&'a ChatReply> for vlm_eval_parse::Reply<'a> {
    fn from(r: &'a ChatReply) -> vlm_eval_parse::Reply<'a> {
        r.as_reply()
    }
}

/// Why a model call failed.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The server answered with an error status.
    #[error("HTTP {status}: {message}")]
    Http { status: u16, message: String },
    /// No answer in time.
    #[error("timed out after {0:.0} s")]
    Timeout(f64),
    /// The connection failed.
    #[error("connection failed: {0}")]
    Connect(String),
    /// The body could not be understood.
    #[error("unreadable response: {0}")]
    BadResponse(String),
    /// Bad configuration (missing key, bad URL, …).
    #[error("{0}")]
    Config(String),
}

/// A boxed, sendable future.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Anything that answers chat requests.
pub trait ChatModel: Send + Sync {
    /// Model name as recorded in results.
    fn name(&self) -> &str;
    /// Answer one request.
    fn chat<'a>(&'a self, request: &'a ChatRequest)
        -> BoxFuture<'a, Result<ChatReply, ModelError>>;
    /// Answer one request; a failure keeps the attempts it made (their retries, waits and
    /// billed usage). Models that make no HTTP requests keep the default.
    fn chat_traced<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<ChatReply, CallFailure>> {
        Box::pin(async move { self.chat(request).await.map_err(CallFailure::from) })
    }
    /// The current limit on requests in flight, for models that adapt one (for display).
    fn concurrency_limit(&self) -> Option<usize> {
        None
    }
}
