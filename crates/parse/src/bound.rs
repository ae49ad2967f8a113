//! What one reply may give the parser: its text is read up to [`MAX_TEXT`] bytes (the first
//! and the last half of that, so a reasoning preamble and a closing `ACTION:` both survive), at
//! most [`MAX_CALLS`] tool calls, each with at most [`MAX_ARGS`] bytes of string arguments.
//! Structured searches (tool-call JSON, nested payloads) also run on a work budget
//! proportional to what was read ([`fuel_for`]). Whatever the bound cuts is recorded as a
//! [`Cut`] in the parsed result, so a model stuck in a repetition loop costs the parser a
//! bounded, linear amount of work and leaves a trace.

use serde::Serialize;
use serde_json::Value;

use crate::{Reply, ReplyBuf, ToolCall};

/// Most reply-text bytes read: the first half and the last half of it.
pub const MAX_TEXT: usize = 64 * 1024;
/// Most tool calls read.
pub const MAX_CALLS: usize = 256;
/// Most bytes of one tool call's string arguments read (the start; the lenient reader closes
/// what the cut leaves open).
pub const MAX_ARGS: usize = 16 * 1024;

/// What the bound cut from a reply (absent when nothing was).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Cut {
    /// Bytes of reply text.
    pub text_bytes: usize,
    /// Bytes of it read (its start and its end; the middle was skipped).
    pub text_read: usize,
    /// Tool calls in the reply.
    pub tool_calls: usize,
    /// Tool calls read (the first ones).
    pub tool_calls_read: usize,
    /// Tool calls whose string arguments were cut to their first [`MAX_ARGS`] bytes.
    pub arguments_cut: usize,
    /// The structured search ran out of its work budget before it had looked everywhere.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub search_stopped: bool,
}

/// The reply cut to the bound (`None`: it fits and is read as it is), and what was cut.
pub(super) fn bound_reply(reply: Reply<'_>) -> (Option<ReplyBuf>, Option<Cut>) {
    let text = reply.text.unwrap_or("");
    let calls = reply.tool_calls.len();
    let long_args = reply
        .tool_calls
        .iter()
        .take(MAX_CALLS)
        .filter(|c| matches!(&c.arguments, Value::String(s) if s.len() > MAX_ARGS))
        .count();
    if text.len() <= MAX_TEXT && calls <= MAX_CALLS && long_args == 0 {
        return (None, None);
    }
    let kept_text = head_and_tail(text, MAX_TEXT);
    let tool_calls: Vec<ToolCall> = reply
        .tool_calls
        .iter()
        .take(MAX_CALLS)
        .map(|c| ToolCall {
            id: c.id.clone(),
            name: c.name.clone(),
            arguments: match &c.arguments {
                Value::String(s) if s.len() > MAX_ARGS => {
                    Value::String(s[..floor_boundary(s, MAX_ARGS)].to_string())
                }
                other => other.clone(),
            },
        })
        .collect();
    let cut = Cut {
        text_bytes: text.len(),
        text_read: kept_text.as_ref().map_or(text.len(), |t| t.len()),
        tool_calls: calls,
        tool_calls_read: tool_calls.len(),
        arguments_cut: long_args,
        search_stopped: false,
    };
    let bounded = ReplyBuf {
        text: kept_text.or_else(|| reply.text.map(str::to_string)),
        tool_calls,
        reasoning: reply.reasoning.map(str::to_string),
    };
    (Some(bounded), Some(cut))
}

/// `text` cut to about `max` bytes: its first and last halves joined by a blank line (`None`
/// when it fits).
fn head_and_tail(text: &str, max: usize) -> Option<String> {
    if text.len() <= max {
        return None;
    }
    let half = max / 2;
    let head = &text[..floor_boundary(text, half)];
    let tail = &text[ceil_boundary(text, text.len() - half)..];
    Some(format!("{head}\n\n{tail}"))
}

/// The largest char boundary ≤ `at`.
fn floor_boundary(s: &str, at: usize) -> usize {
    let mut k = at.min(s.len());
    while !s.is_char_boundary(k) {
        k -= 1;
    }
    k
}

/// The smallest char boundary ≥ `at`.
fn ceil_boundary(s: &str, at: usize) -> usize {
    let mut k = at.min(s.len());
    while !s.is_char_boundary(k) {
        k += 1;
    }
    k
}

/// The work budget of the structured search for a reply of this size (bytes of text and
/// arguments read): a few passes over it, plus a floor for small replies.
pub(super) fn fuel_for(reply: &Reply<'_>) -> usize {
    let args: usize = reply
        .tool_calls
        .iter()
        .map(|c| match &c.arguments {
            Value::String(s) => s.len(),
            other => other.to_string().len().min(16 * MAX_ARGS),
        })
        .sum();
    let text = reply.text.map_or(0, str::len);
    8 * (text + args) + (1 << 16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_replies_pass_untouched() {
        let (r, cut) = bound_reply(Reply::text("ACTION: noop"));
        assert_eq!((r, cut), (None, None));
    }

    #[test]
    fn long_text_keeps_its_start_and_end() {
        let text = format!("é{}ACTION: do", "ACTION: ".repeat(40_000));
        let (r, cut) = bound_reply(Reply::text(&text));
        let r = r.unwrap();
        let kept = r.text.as_deref().unwrap();
        assert!(kept.starts_with("éACTION: ") && kept.ends_with("ACTION: do"));
        assert!(kept.len() <= MAX_TEXT + 2);
        let cut = cut.unwrap();
        assert_eq!((cut.text_bytes, cut.text_read), (text.len(), kept.len()));
        assert_eq!((cut.tool_calls, cut.arguments_cut), (0, 0));
        // Char boundaries are respected on both sides of the cut.
        let wide = "é".repeat(MAX_TEXT);
        let kept = head_and_tail(&wide, MAX_TEXT).unwrap();
        assert!(kept.len() <= MAX_TEXT + 2);
    }

    #[test]
    fn the_parse_records_the_cut_and_still_finds_the_action() {
        use super::super::{parse_reply, Protocol, Unknowns};
        use vlm_eval_crafter::Action;
        // A model stuck repeating "ACTION: " that finally says what it does.
        let text = format!(
            "Let me think.{}\nACTION: Move West",
            "ACTION: ".repeat(40_000)
        );
        let p = parse_reply(Reply::text(&text), Protocol::Text, 1);
        assert_eq!(p.actions, [Action::MoveLeft]);
        let cut = p.cut.clone().unwrap();
        assert_eq!(cut.text_bytes, text.len());
        assert!(
            cut.text_read < MAX_TEXT + 8 && !cut.search_stopped,
            "{cut:?}"
        );
        let json = serde_json::to_value(&p).unwrap();
        assert_eq!(json["cut"]["text_bytes"], text.len());
        assert!(json["cut"].get("search_stopped").is_none());
        // A reply that fits leaves no trace.
        let p = parse_reply(Reply::text("ACTION: Move West"), Protocol::Text, 1);
        assert_eq!(p.cut, None);
        assert!(serde_json::to_value(&p).unwrap().get("cut").is_none());

        // The work budget: spent, handed to a child search and back, then gone for good.
        let mut unk = Unknowns::with_fuel(10);
        assert!(unk.charge(4));
        let mut child = unk.child();
        assert!(child.charge(6) && !child.charge(1));
        unk.absorb(child, false);
        assert!(unk.out_of_fuel && !unk.charge(0));
    }

    #[test]
    fn many_tool_calls_and_long_arguments_are_cut() {
        let call = |args: Value| ToolCall {
            id: "c".into(),
            name: "interact_many".into(),
            arguments: args,
        };
        let mut calls = vec![call(Value::String(format!(
            "{{\"actions\": [\"do\"], \"reasoning\": \"{}\"}}",
            "x".repeat(MAX_ARGS)
        )))];
        calls.extend((0..1000).map(|_| call(serde_json::json!({"actions": ["noop"]}))));
        let reply = Reply {
            tool_calls: &calls,
            ..Reply::default()
        };
        let (r, cut) = bound_reply(reply);
        let r = r.unwrap();
        assert_eq!(r.tool_calls.len(), MAX_CALLS);
        assert_eq!(
            r.tool_calls[0].arguments.as_str().map(str::len),
            Some(MAX_ARGS)
        );
        let cut = cut.unwrap();
        assert_eq!(
            (cut.tool_calls, cut.tool_calls_read, cut.arguments_cut),
            (1001, MAX_CALLS, 1)
        );
    }
}
