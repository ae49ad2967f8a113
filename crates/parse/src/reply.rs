//! What the parser reads: a reply's text, its tool calls and any reasoning the server returned
//! apart. [`Reply`] borrows them from whatever the caller holds (the harness's `ChatReply`, a
//! string from Python); [`ReplyBuf`] owns them (the reply bound's cut copy, tests).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A tool call made by the assistant.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Call id (generated when the server sent none).
    pub id: String,
    /// Function name.
    pub name: String,
    /// Arguments as sent: usually a JSON string, sometimes an object.
    pub arguments: Value,
}

/// One reply as the parser sees it, borrowed.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Reply<'a> {
    /// Assistant text, if any.
    pub text: Option<&'a str>,
    /// Tool calls, in order.
    pub tool_calls: &'a [ToolCall],
    /// Reasoning text some servers return separately (`reasoning_content` / `reasoning`).
    pub reasoning: Option<&'a str>,
}

impl<'a> Reply<'a> {
    /// A reply that is only text (no tool calls, no separate reasoning).
    pub fn text(text: &'a str) -> Reply<'a> {
        Reply {
            text: Some(text),
            ..Reply::default()
        }
    }
}

/// One reply as the parser sees it, owned.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReplyBuf {
    /// Assistant text, if any.
    pub text: Option<String>,
    /// Tool calls, in order.
    pub tool_calls: Vec<ToolCall>,
    /// Reasoning text returned apart from the text.
    pub reasoning: Option<String>,
}

impl ReplyBuf {
    /// The borrowed view the parser takes.
    pub fn as_reply(&self) -> Reply<'_> {
        Reply {
            text: self.text.as_deref(),
            tool_calls: &self.tool_calls,
            reasoning: self.reasoning.as_deref(),
        }
    }
}

impl<'a> From<&'a ReplyBuf> for Reply<'a> {
    fn from(r: &'a ReplyBuf) -> Reply<'a> {
        r.as_reply()
    }
}
