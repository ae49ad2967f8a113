//! `vlm-eval bench parse`: the parser's time on adversarial replies of growing size, as
//! milliseconds per 100 KB of reply (a linear parser keeps that figure flat as the size grows).
//!
//! Shapes are what broken or looping models produce, and what would make a careless parser
//! superlinear: repeated markers on one line or on many lines, unclosed tags, deep brackets,
//! long escaped strings, arguments encoded as JSON strings several times over, many tool calls
//! (as calls and as JSON in the text), wide objects, long lists and long prose. Each is timed
//! through [`parse_reply`] (with the reply bound) and [`parse_reply_unbounded`] (the whole reply,
//! so the stages' own linearity shows beyond the bound). Times are the parsing thread's CPU
//! time: on a shared machine, wall time also counts the waits for a free core.

use std::sync::OnceLock;
use std::time::Instant;

use serde::Serialize;
use serde_json::{json, Value};

use super::{parse_reply, parse_reply_unbounded, Protocol, ReplyBuf, ToolCall};

/// One measurement.
#[derive(Clone, Debug, Serialize)]
pub struct ParseBenchRow {
    /// Shape name.
    pub shape: &'static str,
    /// `tool` or `text`.
    pub protocol: &'static str,
    /// Whether the reply bound applied (`false`: the whole reply was parsed).
    pub bounded: bool,
    /// Reply size: text plus tool-call arguments, bytes.
    pub bytes: usize,
    /// Median CPU time of one parse, milliseconds.
    pub ms: f64,
    /// Fastest parse (CPU time), milliseconds.
    pub min_ms: f64,
    /// `ms` per 100 KB of reply.
    pub ms_per_100kb: f64,
    /// Actions the parse found (a check that the shape was read at all).
    pub actions: usize,
}

fn text(t: String) -> ReplyBuf {
    ReplyBuf {
        text: Some(t),
        ..ReplyBuf::default()
    }
}

fn repeat_to(unit: &str, size: usize) -> String {
    unit.repeat((size / unit.len()).max(1))
}

fn call(arguments: Value) -> ToolCall {
    ToolCall {
        id: "call_0".into(),
        name: "interact_many".into(),
        arguments,
    }
}

/// The adversarial replies of about `size` bytes, by name.
pub fn shapes(size: usize) -> Vec<(&'static str, ReplyBuf)> {
    let mut out = vec![
        (
            "repeated ACTION: on one line",
            text(repeat_to("ACTION: ", size)),
        ),
        (
            "repeated Action: lines",
            text(repeat_to("Action: look around\n", size)),
        ),
        (
            "blank - Action: list lines",
            text(repeat_to("- Action:\n", size)),
        ),
        ("unclosed <action> tags", text(repeat_to("<action>", size))),
        ("lone < signs", text(repeat_to("< ", size))),
        ("deep [ brackets", text(repeat_to("[", size))),
        ("deep {\"a\": objects", text(repeat_to("{\"a\":", size))),
    ];
    // A long string full of escapes inside a tool-call-like object in the text.
    let escapes = repeat_to("\\\"\\\\\\n\\u00e9", size.saturating_sub(40));
    out.push((
        "long escaped string",
        text(format!(
            "{{\"actions\": [\"do\"], \"reasoning\": \"{escapes}\"}}"
        )),
    ));
    // Arguments encoded as a JSON string, then that string encoded again, five times.
    let mut nested = json!(["noop", "x".repeat(size.saturating_sub(300))]);
    for _ in 0..5 {
        nested = Value::String(nested.to_string());
    }
    out.push((
        "arguments encoded 5 times",
        ReplyBuf {
            tool_calls: vec![call(json!({"actions": nested}))],
            ..ReplyBuf::default()
        },
    ));
    let one = json!({"actions": ["noop"], "reasoning": "keep going"}).to_string();
    out.push((
        "many tool calls",
        ReplyBuf {
            tool_calls: (0..(size / one.len()).max(1))
                .map(|_| call(Value::String(one.clone())))
                .collect(),
            ..ReplyBuf::default()
        },
    ));
    out.push((
        "many tool calls as JSON in text",
        text(repeat_to(
            "<tool_call>{\"name\": \"interact_many\", \"arguments\": {\"actions\": [\"noop\"]}}</tool_call>\n",
            size,
        )),
    ));
    let wide: Vec<String> = (0..size / 12).map(|i| format!("\"k{i}\": {i}")).collect();
    out.push((
        "wide object",
        text(format!(
            "{{\"function\": {{\"arguments\": {{{}}}}}}}",
            wide.join(", ")
        )),
    ));
    out.push(("long list", text(repeat_to("- move_left\n", size))));
    out.push((
        "long prose",
        text(repeat_to(
            "I will move then go and think about the tree, place it; ",
            size,
        )),
    ));
    out.push(("non-ASCII text", text(repeat_to("é→ ", size))));
    out
}

/// CPU time of the calling thread, seconds (wall time where there is no per-thread clock).
pub fn thread_cpu_s() -> f64 {
    #[cfg(unix)]
    {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes one timespec through a valid, exclusive pointer.
        if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } == 0 {
            return ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9;
        }
    }
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_secs_f64()
}

/// Bytes of text and tool-call arguments.
fn reply_bytes(reply: &ReplyBuf) -> usize {
    reply.text.as_deref().map_or(0, str::len)
        + reply
            .tool_calls
            .iter()
            .map(|c| match &c.arguments {
                Value::String(s) => s.len(),
                other => other.to_string().len(),
            })
            .sum::<usize>()
}

/// Time every shape (whose name contains `only`, if given) at every size, both protocols,
/// bounded and not (median and minimum of `repeats`).
pub fn bench_parse(sizes: &[usize], repeats: usize, only: Option<&str>) -> Vec<ParseBenchRow> {
    let mut rows = Vec::new();
    for &size in sizes {
        for (shape, reply) in shapes(size) {
            if only.is_some_and(|o| !shape.contains(o)) {
                continue;
            }
            let bytes = reply_bytes(&reply);
            for (protocol, p) in [("tool", Protocol::Tool), ("text", Protocol::Text)] {
                for bounded in [true, false] {
                    let mut times = Vec::with_capacity(repeats.max(1));
                    let mut actions = 0;
                    for _ in 0..repeats.max(1) {
                        let t = thread_cpu_s();
                        let parsed = if bounded {
                            parse_reply(&reply, p, 8)
                        } else {
                            parse_reply_unbounded(&reply, p, 8)
                        };
                        times.push((thread_cpu_s() - t) * 1000.0);
                        actions = parsed.actions.len();
                    }
                    times.sort_by(f64::total_cmp);
                    let ms = times[times.len() / 2];
                    rows.push(ParseBenchRow {
                        shape,
                        protocol,
                        bounded,
                        bytes,
                        ms,
                        min_ms: times[0],
                        ms_per_100kb: ms * 100_000.0 / bytes.max(1) as f64,
                        actions,
                    });
                }
            }
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_have_their_size_and_parse() {
        for (name, reply) in shapes(20_000) {
            let bytes = reply_bytes(&reply);
            assert!((10_000..=40_000).contains(&bytes), "{name}: {bytes}");
            // Never panics, bounded or not, under either protocol.
            for p in [Protocol::Tool, Protocol::Text] {
                let a = parse_reply(&reply, p, 8);
                let b = parse_reply_unbounded(&reply, p, 8);
                assert_eq!(a.actions, b.actions, "{name}: under the bound both agree");
            }
        }
    }
}
