//! Qwen3.5's XML tool calls (the Qwen3-Coder form), read as vLLM's `qwen3_xml` /
//! `qwen3_coder` tool parsers read them:
//!
//! ```text
//! <tool_call>
//! <function=NAME>
//! <parameter=KEY>
//! VALUE
//! </parameter>
//! </function>
//! </tool_call>
//! ```
//!
//! A value loses one leading and one trailing newline; it becomes JSON when it parses as JSON
//! other than a bare string (`["do", "noop"]`, `3`, `true`), else stays a string. A call whose
//! `</parameter>`, `</function>` or `</tool_call>` is missing (a reply cut by the token limit)
//! still yields what it holds. The text before the first call is the reply's content.

use serde_json::{Map, Value};

use crate::ToolCall;

/// Most calls read from one reply (the rest is ignored).
const MAX_CALLS: usize = 64;

/// Split Qwen3.5 XML tool calls out of `text`: `(content before the first call, calls)`.
/// `None` when the text holds no `<function=` call.
pub fn parse_xml_tool_calls(text: &str) -> Option<(String, Vec<ToolCall>)> {
    let first = text.find("<function=")?;
    let content_end = text[..first]
        .rfind("<tool_call>")
        .filter(|&k| text[k + "<tool_call>".len()..first].trim().is_empty())
        .unwrap_or(first);
    let mut calls = Vec::new();
    let mut rest = &text[first..];
    while let Some(k) = rest.find("<function=") {
        if calls.len() == MAX_CALLS {
            break;
        }
        let body = &rest[k + "<function=".len()..];
        let end = body.find("</function>").unwrap_or(body.len());
        let (name, params) = match body[..end].find('>') {
            Some(g) => (&body[..g], &body[g + 1..end]),
            None => (&body[..end], ""),
        };
        calls.push(ToolCall {
            id: format!("call_{}", calls.len()),
            name: name.trim().to_string(),
            arguments: Value::Object(parameters(params)),
        });
        rest = &body[end..];
    }
    Some((text[..content_end].trim().to_string(), calls))
}

/// The `<parameter=K>V</parameter>` pairs of one function body, in order.
fn parameters(body: &str) -> Map<String, Value> {
    let mut out = Map::new();
    let mut rest = body;
    while let Some(k) = rest.find("<parameter=") {
        let after = &rest[k + "<parameter=".len()..];
        let Some(g) = after.find('>') else {
            break;
        };
        let key = after[..g].trim().to_string();
        let val_start = &after[g + 1..];
        // The value ends at `</parameter>`, else at the next `<parameter=`, else at the end.
        let end = val_start
            .find("</parameter>")
            .or_else(|| val_start.find("<parameter="))
            .unwrap_or(val_start.len());
        out.insert(key, value(&val_start[..end]));
        rest = &val_start[end..];
    }
    out
}

fn value(raw: &str) -> Value {
    let v = raw.strip_prefix('\n').unwrap_or(raw);
    let v = v.strip_suffix('\n').unwrap_or(v);
    match serde_json::from_str::<Value>(v.trim()) {
        Ok(j) if !j.is_string() => j,
        _ => Value::String(v.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_the_qwen35_form() {
        let t = "I will chop.\n\n<tool_call>\n<function=interact_many>\n<parameter=actions>\n[\"do\", \"noop\"]\n</parameter>\n<parameter=reasoning>\nA tree: 2 steps.\n</parameter>\n</function>\n</tool_call>";
        let (content, calls) = parse_xml_tool_calls(t).unwrap();
        assert_eq!(content, "I will chop.");
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].name, "interact_many");
        assert_eq!(
            calls[0].arguments,
            json!({"actions": ["do", "noop"], "reasoning": "A tree: 2 steps."})
        );
    }

    #[test]
    fn several_calls_and_a_cut_reply() {
        let t = "<tool_call>\n<function=a>\n<parameter=x>\n1\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=b>\n<parameter=y>\nmove_left";
        let (content, calls) = parse_xml_tool_calls(t).unwrap();
        assert_eq!(content, "");
        assert_eq!(
            calls.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        assert_eq!(calls[0].arguments, json!({"x": 1}));
        assert_eq!(calls[1].arguments, json!({"y": "move_left"}));
        assert!(parse_xml_tool_calls("<tool_call>{\"name\": \"a\"}</tool_call>").is_none());
    }
}
