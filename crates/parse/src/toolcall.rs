//! Tool-call extraction: actions from tool calls, and tool-call-like JSON found in text.

use serde_json::{Map, Value};

use super::lenient::Lenient;
use super::names::normalize_action;
use super::text::parse_action_list;
use super::{
    clip, first_key, get_ci, non_empty, reasoning_of, tool_name_matches, Found, Hit, ParseSource,
    Unknowns, ACTION_KEYS, ARG_KEYS, ITEM_KEYS, MAX_DEPTH, MAX_JSON_STARTS, MAX_UNKNOWN_CHARS,
    REASONING_KEYS,
};
use crate::{Reply, ToolCall};
use vlm_eval_crafter::rules::Action;

/// Parse a tool-argument string: strict JSON, then lenient; a non-JSON string stays a string.
pub(super) fn parse_args_string(s: &str, depth: usize) -> Value {
    let t = strip_fence(s);
    if t.is_empty() {
        return Value::Null;
    }
    if let Ok(v) = serde_json::from_str::<Value>(t) {
        if let Value::String(inner) = &v {
            let i = inner.trim_start();
            if depth < 2 && (i.starts_with('{') || i.starts_with('[')) {
                return parse_args_string(inner, depth + 1);
            }
        }
        return v;
    }
    match t.find(['{', '[']) {
        Some(p) => Lenient::new(t, p).value(0).unwrap_or(Value::Null),
        None => Value::String(t.to_string()),
    }
}

/// Remove a surrounding Markdown code fence (```json … ```).
pub(super) fn strip_fence(s: &str) -> &str {
    let t = s.trim();
    let Some(rest) = t.strip_prefix("```") else {
        return t;
    };
    let rest = match rest.find('\n') {
        Some(k) => &rest[k + 1..],
        None => rest.trim_start_matches(|c: char| c.is_ascii_alphabetic()),
    };
    let rest = match rest.rfind("```") {
        Some(k) => &rest[..k],
        None => rest,
    };
    rest.trim()
}

/// Collect actions from a JSON payload value (array, string, id, or `{"action": …}` items).
pub(super) fn collect(v: &Value, out: &mut Vec<Action>, unk: &mut Unknowns, depth: usize) {
    if depth > MAX_DEPTH || !unk.charge(1) {
        return;
    }
    match v {
        Value::String(s) => collect_str(s, out, unk, depth),
        Value::Number(n) => match n.as_i64().and_then(Action::from_id) {
            Some(a) => out.push(a),
            None => unk.push(&n.to_string()),
        },
        Value::Array(xs) => {
            for x in xs {
                collect(x, out, unk, depth + 1);
            }
        }
        Value::Object(m) => match first_key(m, &ITEM_KEYS) {
            Some(inner) => collect(inner, out, unk, depth + 1),
            None if unk.full() => {}
            None => {
                // Only the start of a big object is shown: serialise a few of its entries.
                let few: serde_json::Map<String, Value> = m
                    .iter()
                    .take(8)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                if unk.charge(few.len()) {
                    unk.push(&clip(&Value::Object(few).to_string(), MAX_UNKNOWN_CHARS));
                }
            }
        },
        Value::Bool(_) | Value::Null => {}
    }
}

pub(super) fn collect_str(s: &str, out: &mut Vec<Action>, unk: &mut Unknowns, depth: usize) {
    if let Some(a) = normalize_action(s) {
        out.push(a);
        return;
    }
    let t = strip_fence(s);
    if (t.starts_with('[') || t.starts_with('{')) && unk.charge(t.len()) {
        let v = parse_args_string(t, 0);
        if !matches!(v, Value::String(_)) {
            collect(&v, out, unk, depth + 1);
            return;
        }
    }
    let (acts, bad) = parse_action_list(t, false, false);
    out.extend(acts);
    for b in bad {
        unk.push(&b);
    }
}

/// Extract actions from a tool-call-like value; `None` when it carries no action payload.
pub(super) fn extract(v: &Value, name_ok: bool, depth: usize, unk: &mut Unknowns) -> Option<Found> {
    if depth > MAX_DEPTH || !unk.charge(1) {
        return None;
    }
    match v {
        Value::Object(m) => extract_object(m, name_ok, depth, unk),
        Value::Array(_) | Value::Number(_) if name_ok => {
            let mut actions = Vec::new();
            collect(v, &mut actions, unk, depth + 1);
            Some(Found {
                actions,
                reasoning: None,
            })
        }
        Value::String(s) if name_ok => {
            if !unk.charge(s.len()) {
                return None;
            }
            let parsed = parse_args_string(s, 0);
            if !matches!(parsed, Value::String(_) | Value::Null) {
                return extract(&parsed, name_ok, depth + 1, unk);
            }
            let mut actions = Vec::new();
            collect_str(s, &mut actions, unk, depth + 1);
            Some(Found {
                actions,
                reasoning: None,
            })
        }
        _ => None,
    }
}

pub(super) fn extract_object(
    m: &Map<String, Value>,
    name_ok: bool,
    depth: usize,
    unk: &mut Unknowns,
) -> Option<Found> {
    // A few passes over the keys below (the lookups are by hash when the keys allow).
    if !unk.charge(1 + 4 * m.len()) {
        return None;
    }
    let keys = Keys::of(m);
    // {"tool_calls": [...]}
    if let Some(Value::Array(calls)) = keys.get("tool_calls") {
        let mut all: Option<Found> = None;
        for c in calls {
            if let Some(f) = extract(c, false, depth + 1, unk) {
                merge(&mut all, f);
            }
        }
        return all;
    }
    // {"type": "function", "function": {...}}
    if let Some(f @ Value::Object(_)) = keys.get("function") {
        return extract(f, name_ok, depth + 1, unk);
    }
    let own_reasoning = keys.reasoning();
    let name = keys
        .get("name")
        .or_else(|| keys.get("tool_name"))
        .or_else(|| keys.get("function"))
        .and_then(Value::as_str);
    let args = keys.first(&ARG_KEYS);
    let mut name_ok = name_ok;
    if name.is_some() || args.is_some() {
        if let Some(n) = name {
            name_ok = tool_name_matches(n);
        }
        if let Some(a) = args {
            let parsed;
            let a = match a {
                Value::String(s) if unk.charge(s.len()) => {
                    parsed = parse_args_string(s, 0);
                    &parsed
                }
                Value::String(_) => return None,
                other => other,
            };
            if let Some(mut f) = extract(a, name_ok, depth + 1, unk) {
                f.reasoning = f.reasoning.or(own_reasoning);
                return Some(f);
            }
        }
        if let Some(a) = name.and_then(normalize_action) {
            let reasoning = args
                .and_then(Value::as_object)
                .and_then(|a| Keys::of(a).reasoning())
                .or(own_reasoning);
            return Some(Found {
                actions: vec![a],
                reasoning,
            });
        }
    }
    let payload = keys.first(&ACTION_KEYS).or_else(|| {
        if !name_ok {
            return None;
        }
        m.iter()
            .find(|(k, _)| {
                let k = k.to_ascii_lowercase();
                k.contains("action") || k.contains("command") || k.contains("move")
            })
            .map(|(_, v)| v)
            .or_else(|| {
                let mut rest = m
                    .iter()
                    .filter(|(k, _)| !REASONING_KEYS.contains(&k.to_ascii_lowercase().as_str()));
                match (rest.next(), rest.next()) {
                    (Some((_, v)), None) => Some(v),
                    _ => None,
                }
            })
    })?;
    let mut actions = Vec::new();
    collect(payload, &mut actions, unk, depth + 1);
    Some(Found {
        actions,
        reasoning: own_reasoning,
    })
}

/// Case-insensitive, trimmed key lookups in one object ([`get_ci`]'s rule), by hash when every
/// key is already lower case and trimmed (so a wide object costs one pass, not one per lookup).
#[derive(Clone, Copy)]
struct Keys<'v> {
    m: &'v Map<String, Value>,
    exact: bool,
}

impl<'v> Keys<'v> {
    fn of(m: &'v Map<String, Value>) -> Keys<'v> {
        let exact = m
            .keys()
            .all(|k| k.trim().len() == k.len() && !k.bytes().any(|b| b.is_ascii_uppercase()));
        Keys { m, exact }
    }

    /// The value of `key` (lower case).
    fn get(&self, key: &str) -> Option<&'v Value> {
        if self.exact {
            self.m.get(key)
        } else {
            get_ci(self.m, key)
        }
    }

    /// The first of `keys` present.
    fn first(&self, keys: &[&str]) -> Option<&'v Value> {
        keys.iter().find_map(|k| self.get(k))
    }

    /// The reasoning argument ([`reasoning_of`]'s rule).
    fn reasoning(&self) -> Option<String> {
        REASONING_KEYS
            .iter()
            .filter_map(|k| self.get(k))
            .find_map(|v| non_empty(v.as_str()))
    }
}

pub(super) fn merge(acc: &mut Option<Found>, f: Found) {
    match acc {
        Some(a) => {
            a.actions.extend(f.actions);
            if a.reasoning.is_none() {
                a.reasoning = f.reasoning;
            }
        }
        None => *acc = Some(f),
    }
}

pub(super) fn stage_tool_calls(reply: &Reply<'_>, body: &str, unk: &mut Unknowns) -> Option<Hit> {
    let mut all: Option<Found> = None;
    for call in reply.tool_calls {
        if let Some(f) = from_tool_call(call, unk) {
            merge(&mut all, f);
        }
    }
    let f = all.filter(|f| !f.actions.is_empty())?;
    Some(Hit {
        actions: f.actions,
        source: ParseSource::ToolCall,
        reasoning: f.reasoning,
        preceding: body.trim().to_string(),
    })
}

pub(super) fn from_tool_call(call: &ToolCall, unk: &mut Unknowns) -> Option<Found> {
    let args = match &call.arguments {
        Value::String(s) if unk.charge(s.len()) => parse_args_string(s, 0),
        Value::String(_) => Value::Null,
        other => other.clone(),
    };
    let name_ok = tool_name_matches(&call.name);
    let found = extract(&args, name_ok, 0, unk);
    match found {
        Some(f) if !f.actions.is_empty() => Some(f),
        other => match normalize_action(&call.name) {
            Some(a) => Some(Found {
                actions: vec![a],
                reasoning: args.as_object().and_then(reasoning_of),
            }),
            None => other,
        },
    }
}

/// Qwen3.5 XML tool calls (`<tool_call><function=NAME><parameter=K>…`) in the text, as a
/// server returns them when it does not parse that form itself; read like tool calls.
pub(super) fn stage_xml_in_text(body: &str, unk: &mut Unknowns) -> Option<Hit> {
    if !unk.charge(body.len() / 64 + 1) {
        return None;
    }
    let (content, calls) = crate::toolxml::parse_xml_tool_calls(body)?;
    let mut all: Option<Found> = None;
    for call in &calls {
        if let Some(f) = from_tool_call(call, unk) {
            merge(&mut all, f);
        }
    }
    let f = all.filter(|f| !f.actions.is_empty())?;
    Some(Hit {
        actions: f.actions,
        source: ParseSource::ToolJsonInText,
        reasoning: f.reasoning,
        preceding: content,
    })
}

pub(super) fn stage_json_in_text(body: &str, unk: &mut Unknowns) -> Option<Hit> {
    let bytes = body.as_bytes();
    let mut i = 0;
    let mut starts = 0;
    // Candidates that run unclosed to the end are retried from the next bracket (values
    // nested in them were searched already), within a work budget of about one more pass so
    // that brace-heavy garbage stays linear.
    let mut budget = bytes.len() + 4096;
    let mut all: Option<Found> = None;
    let mut first_start: Option<usize> = None;
    // Out of search budget: what was found so far stands, the rest is not searched.
    while i < bytes.len() && starts < MAX_JSON_STARTS && !unk.out_of_fuel {
        let Some(off) = bytes[i..].iter().position(|&b| b == b'{' || b == b'[') else {
            break;
        };
        let p = i + off;
        starts += 1;
        let mut lex = Lenient::new(body, p);
        let v = lex.value(0);
        let end = lex.i.max(p + 1);
        let mut local = unk.child();
        let found = v.as_ref().and_then(|v| find_payload(v, 0, &mut local));
        unk.absorb(local, found.is_some());
        if let Some(f) = found {
            if !f.actions.is_empty() {
                first_start.get_or_insert(p);
                merge(&mut all, f);
            }
            i = end;
        } else if end < bytes.len() {
            // A closed value without a payload (nested ones were searched): skip it.
            i = end;
        } else {
            budget = budget.saturating_sub(end - p);
            if budget == 0 {
                break;
            }
            i = p + 1;
        }
    }
    let f = all?;
    let start = first_start.unwrap_or(0);
    let preceding = body[..start]
        .trim_end()
        .trim_end_matches("<tool_call>")
        .trim_end_matches("```json")
        .trim_end_matches("```");
    Some(Hit {
        actions: f.actions,
        source: ParseSource::ToolJsonInText,
        reasoning: f.reasoning,
        preceding: preceding.to_string(),
    })
}

/// A tool-call-like payload in a JSON value from prose: the value itself, an array of action
/// strings, or the first such payload nested inside it.
pub(super) fn find_payload(v: &Value, depth: usize, unk: &mut Unknowns) -> Option<Found> {
    if depth > MAX_DEPTH || !unk.charge(1) {
        return None;
    }
    match v {
        Value::Object(m) => extract(v, false, depth, unk).or_else(|| {
            m.values()
                .filter(|x| x.is_object() || x.is_array())
                .find_map(|x| find_payload(x, depth + 1, unk))
        }),
        Value::Array(xs) if !unk.charge(xs.len()) => None,
        Value::Array(xs) => string_array_actions(xs)
            .map(|actions| Found {
                actions,
                reasoning: None,
            })
            .or_else(|| {
                xs.iter()
                    .filter(|x| x.is_object() || x.is_array())
                    .find_map(|x| find_payload(x, depth + 1, unk))
            }),
        _ => None,
    }
}

/// A JSON array in prose counts only if every element is a string naming an action.
pub(super) fn string_array_actions(xs: &[Value]) -> Option<Vec<Action>> {
    if xs.is_empty() {
        return None;
    }
    xs.iter()
        .map(|x| x.as_str().and_then(normalize_action))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Lenient JSON reader
// ---------------------------------------------------------------------------------------------
