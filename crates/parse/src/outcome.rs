//! Reply-format outcomes, for every protocol: was a reply in the exact form asked for, usable
//! only after lenient recovery, or not usable at all?
//!
//! | protocol / parser | `exact` | `repaired` | `invalid` |
//! |---|---|---|---|
//! | tool | one tool call named `interact_many` whose arguments are a strict JSON object with `actions` (1..=max canonical names, exact case) and optionally a string `reasoning`, nothing else | actions found any other way: broken or truncated JSON, aliases or case variants, other tool names or keys, several calls, too many actions, JSON or markers or lists or prose in the text | no action |
//! | text | the last non-blank line is `ACTION: <name>` (a display name such as `Move West`, or a canonical name such as `move_left`) and names the action taken | any other usable reply (markers elsewhere, lists, aliases, prose, tool calls) | no action |
//! | balrog | the stripped reply is exactly one of BALROG's 17 action names | BALROG accepts it only after its filter removed characters (`Do.`, `` `Sleep` ``) | anything else (BALROG plays Noop) |
//!
//! With `--parser strict` a repaired reply is rejected: the fallback (`noop`) is played and
//! the turn counts as `invalid` (`repair_rejected` marks it).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::balrog::{balrog_exact, parse_balrog};
use super::{display_name, parse_reply, Parsed, Protocol, Reply, TOOL_NAME};
use vlm_eval_crafter::rules::Action;

/// How a reply's format was judged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// The exact form asked for.
    Exact,
    /// Usable only after lenient recovery.
    Repaired,
    /// No usable action.
    Invalid,
}

/// Which rule judges replies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum ParserMode {
    /// Recover actions from almost any reply (see the parse module's stages).
    #[default]
    Lenient,
    /// Accept only exact replies; a repaired one plays the fallback and counts as invalid.
    Strict,
    /// BALROG's rule: strip, keep letters, whitespace and `:`, exact action name.
    Balrog,
}

impl ParserMode {
    /// Its name in run.json and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            ParserMode::Lenient => "lenient",
            ParserMode::Strict => "strict",
            ParserMode::Balrog => "balrog",
        }
    }
}

/// A parsed reply with its format outcome (serialised flat: the parse fields, `outcome`, and
/// `repair_rejected` when strict parsing threw a repairable reply away).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Judged {
    /// What was parsed (actions empty when nothing is played).
    #[serde(flatten)]
    pub parsed: Parsed,
    /// The format outcome.
    pub outcome: Outcome,
    /// Strict parsing rejected a reply the lenient parser could have used.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub repair_rejected: bool,
}

impl Judged {
    /// No usable action: the caller plays the fallback.
    pub fn is_invalid(&self) -> bool {
        self.outcome == Outcome::Invalid
    }
}

/// Parse and judge a reply under a parser mode.
pub fn judge_reply<'a>(
    reply: impl Into<Reply<'a>>,
    protocol: Protocol,
    max_actions: usize,
    mode: ParserMode,
) -> Judged {
    let reply = reply.into();
    if mode == ParserMode::Balrog {
        let parsed = parse_balrog(&reply);
        let outcome = if parsed.actions.is_empty() {
            Outcome::Invalid
        } else if balrog_exact(&reply) {
            Outcome::Exact
        } else {
            Outcome::Repaired
        };
        return Judged {
            parsed,
            outcome,
            repair_rejected: false,
        };
    }
    let mut parsed = parse_reply(reply, protocol, max_actions);
    let outcome = classify(&reply, protocol, max_actions, &parsed);
    if mode == ParserMode::Strict && outcome == Outcome::Repaired {
        parsed.actions.clear();
        return Judged {
            parsed,
            outcome: Outcome::Invalid,
            repair_rejected: true,
        };
    }
    Judged {
        parsed,
        outcome,
        repair_rejected: false,
    }
}

/// The outcome of a lenient parse.
pub fn classify(
    reply: &Reply<'_>,
    protocol: Protocol,
    max_actions: usize,
    parsed: &Parsed,
) -> Outcome {
    if parsed.actions.is_empty() {
        return Outcome::Invalid;
    }
    let exact = match protocol {
        Protocol::Tool => {
            exact_tool_call(reply, max_actions).is_some_and(|actions| actions == parsed.actions)
        }
        Protocol::Text => exact_text(reply).is_some_and(|a| parsed.actions == [a]),
    };
    if exact {
        Outcome::Exact
    } else {
        Outcome::Repaired
    }
}

/// The actions of a reply that is exactly one well-formed `interact_many` call.
fn exact_tool_call(reply: &Reply<'_>, max_actions: usize) -> Option<Vec<Action>> {
    let [call] = reply.tool_calls else {
        return None;
    };
    if call.name != TOOL_NAME {
        return None;
    }
    let args: Value = match &call.arguments {
        Value::String(s) => serde_json::from_str(s).ok()?,
        v @ Value::Object(_) => v.clone(),
        _ => return None,
    };
    let obj = args.as_object()?;
    if obj.keys().any(|k| k != "actions" && k != "reasoning") {
        return None;
    }
    if obj.get("reasoning").is_some_and(|r| !r.is_string()) {
        return None;
    }
    let list = obj.get("actions")?.as_array()?;
    if list.is_empty() || list.len() > max_actions.max(1) {
        return None;
    }
    list.iter()
        .map(|v| v.as_str().and_then(Action::from_name))
        .collect()
}

/// The action of a reply whose last non-blank line is exactly `ACTION: <name>`.
fn exact_text(reply: &Reply<'_>) -> Option<Action> {
    if !reply.tool_calls.is_empty() {
        return None;
    }
    let text = reply.text?;
    let last = text.lines().rev().find(|l| !l.trim().is_empty())?.trim();
    let name = last.strip_prefix("ACTION: ")?;
    Action::ALL
        .into_iter()
        .find(|&a| display_name(a) == name || a.name() == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ReplyBuf, ToolCall};
    use serde_json::json;

    fn call(name: &str, args: Value) -> ReplyBuf {
        ReplyBuf {
            tool_calls: vec![ToolCall {
                id: "c".into(),
                name: name.into(),
                arguments: args,
            }],
            ..ReplyBuf::default()
        }
    }

    fn text(t: &str) -> ReplyBuf {
        ReplyBuf {
            text: Some(t.into()),
            ..ReplyBuf::default()
        }
    }

    fn outcome(r: &ReplyBuf, p: Protocol, mode: ParserMode) -> Outcome {
        judge_reply(r, p, 8, mode).outcome
    }

    #[test]
    fn tool_calls() {
        use Outcome::*;
        let t = |r: &ReplyBuf| outcome(r, Protocol::Tool, ParserMode::Lenient);
        let good = json!("{\"actions\": [\"move_left\", \"do\"], \"reasoning\": \"tree\"}");
        assert_eq!(t(&call("interact_many", good)), Exact);
        assert_eq!(
            t(&call("interact_many", json!({"actions": ["noop"]}))),
            Exact
        );
        // The cut-off call of issue 13 is usable but not clean.
        assert_eq!(
            t(&call("interact_many", json!("{\"actions\": [\"do\""))),
            Repaired
        );
        assert_eq!(
            t(&call(
                "interact_many",
                json!("{\"actions\": [\"Move West\"]}")
            )),
            Repaired
        );
        assert_eq!(
            t(&call("interact_many", json!("{\"action\": \"do\"}"))),
            Repaired
        );
        assert_eq!(
            t(&call("interact", json!("{\"actions\": [\"do\"]}"))),
            Repaired
        );
        assert_eq!(
            t(&call(
                "interact_many",
                json!({"actions": ["do"], "why": "x"})
            )),
            Repaired
        );
        let nine = json!({"actions": vec!["noop"; 9]});
        assert_eq!(t(&call("interact_many", nine)), Repaired, "over the limit");
        assert_eq!(t(&text("ACTION: move_left")), Repaired);
        assert_eq!(
            t(&call("interact_many", json!("{\"actions\": []}"))),
            Invalid
        );
        assert_eq!(t(&text("hmm")), Invalid);
    }

    #[test]
    fn qwen35_xml_tool_calls_in_text_are_repaired() {
        // Qwen3.5's XML form, returned as text by a server that does not parse it.
        let t = "Wood first.\n\n<tool_call>\n<function=interact_many>\n<parameter=actions>\n[\"do\", \"move_left\"]\n</parameter>\n</function>\n</tool_call>";
        let j = judge_reply(&text(t), Protocol::Tool, 4, ParserMode::Lenient);
        assert_eq!(j.parsed.actions, vec![Action::Do, Action::MoveLeft]);
        assert_eq!(j.parsed.source, crate::ParseSource::ToolJsonInText);
        assert_eq!(j.outcome, Outcome::Repaired);
        assert_eq!(j.parsed.reasoning.as_deref(), Some("Wood first."));
        let strict = judge_reply(&text(t), Protocol::Tool, 4, ParserMode::Strict);
        assert!(strict.is_invalid() && strict.repair_rejected);
    }

    #[test]
    fn text_replies() {
        use Outcome::*;
        let t = |s: &str| outcome(&text(s), Protocol::Text, ParserMode::Lenient);
        assert_eq!(t("The tree is west.\nACTION: Move West"), Exact);
        assert_eq!(t("ACTION: move_left\n"), Exact);
        assert_eq!(t("ACTION: Move West because the tree"), Repaired);
        assert_eq!(t("I will Move West now"), Repaired);
        assert_eq!(t("move west"), Repaired);
        assert_eq!(t("Collect Wood"), Repaired);
        assert_eq!(t("1. Do"), Repaired);
        assert_eq!(t("action: Do"), Repaired);
        assert_eq!(t("ACTION: fly"), Invalid);
    }

    #[test]
    fn strict_rejects_repairs_and_balrog_judges_by_its_rule() {
        let r = judge_reply(&text("move west"), Protocol::Text, 1, ParserMode::Strict);
        assert!(r.parsed.actions.is_empty() && r.repair_rejected && r.is_invalid());
        let r = judge_reply(&text("ACTION: Do"), Protocol::Text, 1, ParserMode::Strict);
        assert_eq!(
            (r.outcome, r.parsed.actions.as_slice()),
            (Outcome::Exact, &[Action::Do][..])
        );
        let b = |s: &str| outcome(&text(s), Protocol::Text, ParserMode::Balrog);
        assert_eq!(b("Move West"), Outcome::Exact);
        assert_eq!(b("Move West."), Outcome::Repaired);
        assert_eq!(b("ACTION: Move West"), Outcome::Invalid);
        assert_eq!(b("move west"), Outcome::Invalid);
        let v = serde_json::to_value(judge_reply(
            &text("Do"),
            Protocol::Text,
            1,
            ParserMode::Balrog,
        ))
        .unwrap();
        assert_eq!(v["outcome"], "exact");
        assert_eq!(v["actions"], json!(["do"]));
        assert!(v.get("repair_rejected").is_none());
    }
}
