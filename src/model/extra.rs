//! Fields of an assistant message and of its tool calls that we do not model, kept exactly as
//! the server sent them so that they go back verbatim in every later request that includes
//! that turn. Gemini 3's OpenAI-compatible endpoint needs this: each tool call carries
//! `extra_content.google.thought_signature`, and a later request whose history lacks it is
//! refused with 400 ("function call … is missing a thought_signature"); other servers add
//! their own (`reasoning_details`, `provider_specific_fields`, …).

use serde_json::{Map, Value};

/// The unmodelled fields of one assistant message (see the module doc).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WireExtra {
    /// The message's own unmodelled fields.
    pub message: Map<String, Value>,
    /// Each tool call's unmodelled fields, in the order of the message's tool calls (shorter
    /// when the last calls have none).
    pub tool_calls: Vec<Map<String, Value>>,
}

/// Message keys we model (read or write ourselves), never echoed as extras. `refusal` and
/// `annotations` are response-only in OpenAI's schema; `reasoning_content` / `reasoning` are
/// read into the reply's reasoning and, as before, not sent back.
const MESSAGE_KEYS: [&str; 9] = [
    "role",
    "content",
    "tool_calls",
    "function_call",
    "tool_call_id",
    "reasoning_content",
    "reasoning",
    "refusal",
    "annotations",
];

/// Tool-call keys we model.
const CALL_KEYS: [&str; 3] = ["id", "type", "function"];

impl WireExtra {
    /// No field to send back.
    pub fn is_empty(&self) -> bool {
        self.message.is_empty() && self.tool_calls.iter().all(Map::is_empty)
    }

    /// Keep only the first `n` tool calls' fields (the conversation keeps one call).
    pub fn truncate_calls(&mut self, n: usize) {
        self.tool_calls.truncate(n);
    }

    /// The unmodelled fields of a chat-completions response's first choice's message: its keys
    /// other than the modelled ones (nulls dropped), and those of each tool call that parses
    /// (one with a function name, as the reply parser keeps them), in order.
    pub fn from_response(body: &Value) -> WireExtra {
        let Some(message) = body
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
            .and_then(|c| c.get("message"))
            .and_then(Value::as_object)
        else {
            return WireExtra::default();
        };
        let unknown = |obj: &Map<String, Value>, known: &[&str]| -> Map<String, Value> {
            obj.iter()
                .filter(|(k, v)| !known.contains(&k.as_str()) && !v.is_null())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        };
        let mut tool_calls: Vec<Map<String, Value>> = message
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|call| {
                let function = call.get("function").unwrap_or(call);
                function.get("name").and_then(Value::as_str).is_some()
            })
            .map(|call| {
                call.as_object()
                    .map(|o| unknown(o, &CALL_KEYS))
                    .unwrap_or_default()
            })
            .collect();
        while tool_calls.last().is_some_and(Map::is_empty) {
            tool_calls.pop();
        }
        WireExtra {
            message: unknown(message, &MESSAGE_KEYS),
            tool_calls,
        }
    }

    /// Add the fields to a request message's JSON (and to its `tool_calls` entries), never
    /// replacing a key the message already has.
    pub fn apply(&self, message: &mut Value) {
        let Some(obj) = message.as_object_mut() else {
            return;
        };
        for (k, v) in &self.message {
            obj.entry(k.clone()).or_insert_with(|| v.clone());
        }
        if let Some(calls) = obj.get_mut("tool_calls").and_then(Value::as_array_mut) {
            for (call, extra) in calls.iter_mut().zip(&self.tool_calls) {
                if let Some(call) = call.as_object_mut() {
                    for (k, v) in extra {
                        call.entry(k.clone()).or_insert_with(|| v.clone());
                    }
                }
            }
        }
    }

    /// As JSON for logs and cache keys: `{"message": {…}, "tool_calls": [{…}]}`.
    pub fn to_json(&self) -> Value {
        serde_json::json!({"message": self.message, "tool_calls": self.tool_calls})
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keeps_unknown_fields_and_sends_them_back() {
        // Shape from https://ai.google.dev/gemini-api/docs/thought-signatures (OpenAI
        // compatibility section): the signature rides on the tool call.
        let body = json!({"choices": [{"message": {
        "role": "assistant", "content": null, "refusal": null, "annotations": [],
        "reasoning_content": "hmm", "reasoning_details": [{"type": "x"}],
        "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"},
             "extra_content": {"google": {"thought_signature": "SIG=="}}},
            {"function": {"arguments": "{}"}, "extra_content": {"dropped": true}},
            {"id": "b", "type": "function", "function": {"name": "g", "arguments": "{}"}}
        ]}}]});
        let extra = WireExtra::from_response(&body);
        assert_eq!(
            Value::Object(extra.message.clone()),
            json!({"reasoning_details": [{"type": "x"}]})
        );
        // The nameless call is skipped as the parser skips it; the trailing empty one is cut.
        assert_eq!(extra.tool_calls.len(), 1);
        assert_eq!(
            extra.tool_calls[0]["extra_content"]["google"]["thought_signature"],
            "SIG=="
        );
        let mut sent = json!({"role": "assistant", "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"id": "b", "type": "function", "function": {"name": "g", "arguments": "{}"}}]});
        extra.apply(&mut sent);
        assert_eq!(
            sent["tool_calls"][0]["extra_content"],
            json!({"google": {"thought_signature": "SIG=="}})
        );
        assert!(sent["tool_calls"][1].get("extra_content").is_none());
        assert_eq!(sent["reasoning_details"], json!([{"type": "x"}]));
        assert!(!extra.is_empty());
        assert!(WireExtra::from_response(&json!({"choices": [{"message": {
            "role": "assistant", "content": "hi", "refusal": null}}]}))
        .is_empty());
        assert!(WireExtra::from_response(&json!([1])).is_empty());
    }
}
