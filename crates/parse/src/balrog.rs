//! BALROG's reply rule (naive agent, commit af7d1f1): the client strips the reply
//! (`str.strip()`), the agent keeps only ASCII letters, whitespace and `:` (`[^a-zA-Z\s:]`
//! removed), and the environment accepts the result only if it is exactly, case-sensitively,
//! one of the 17 action names ("Noop", "Move West", …, "Make Iron Sword"); anything else plays
//! Noop. Whitespace is Python's (`str.isspace`), which also counts U+001C..U+001F.

use super::{display_name, ParseSource, Parsed, MAX_UNKNOWN_CHARS};
use crate::Reply;
use vlm_eval_crafter::rules::Action;

/// Python's `str.isspace` for one character.
pub fn py_isspace(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Python's `str.strip()` without arguments.
pub fn py_strip(s: &str) -> &str {
    s.trim_matches(py_isspace)
}

/// The reply as BALROG's naive agent hands it on: stripped, then filtered to ASCII letters,
/// whitespace and `:`. This is also the action text its history stores.
pub fn balrog_completion(text: &str) -> String {
    py_strip(text)
        .chars()
        .filter(|&c| c.is_ascii_alphabetic() || c == ':' || py_isspace(c))
        .collect()
}

/// The action BALROG's environment accepts for a completion (exact display name), if any.
pub fn balrog_action(completion: &str) -> Option<Action> {
    Action::ALL
        .into_iter()
        .find(|&a| display_name(a) == completion)
}

/// Parse a reply by BALROG's rule: one action or nothing.
pub(super) fn parse_balrog(reply: &Reply<'_>) -> Parsed {
    let completion = balrog_completion(reply.text.unwrap_or(""));
    let action = balrog_action(&completion);
    let unknown = match action {
        None if !completion.trim().is_empty() => {
            vec![super::clip(completion.trim(), MAX_UNKNOWN_CHARS)]
        }
        _ => Vec::new(),
    };
    Parsed {
        actions: action.into_iter().collect(),
        reasoning: None,
        source: if action.is_some() {
            ParseSource::Text
        } else {
            ParseSource::None
        },
        unknown,
        truncated: 0,
        // BALROG's rule reads the whole reply (one linear character filter): nothing is cut.
        cut: None,
    }
}

/// Whether BALROG accepts the reply without its character filter changing anything (the
/// stripped reply is already an action name).
pub(super) fn balrog_exact(reply: &Reply<'_>) -> bool {
    balrog_action(py_strip(reply.text.unwrap_or(""))).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(text: &str) -> Reply<'_> {
        Reply::text(text)
    }

    #[test]
    fn strip_then_filter_then_exact_match() {
        let ok = |t: &str| parse_balrog(&reply(t)).actions;
        assert_eq!(ok("Move West"), [Action::MoveLeft]);
        assert_eq!(ok("  Do\n"), [Action::Do]);
        assert_eq!(ok("Do."), [Action::Do], "the filter drops the dot");
        assert_eq!(ok("`Make Wood Pickaxe`"), [Action::MakeWoodPickaxe]);
        assert!(ok("move west").is_empty(), "case-sensitive");
        assert!(ok("Do .").is_empty(), "the space before the dot stays");
        assert!(ok("1. Do").is_empty());
        assert!(ok("Move West\nbecause").is_empty());
        assert!(ok("move_left").is_empty());
        assert!(ok("").is_empty());
        assert_eq!(
            ok("\u{1f}Sleep\u{1c}"),
            [Action::Sleep],
            "Python strips U+001C..U+001F"
        );
        assert_eq!(
            balrog_completion(" I will Move West now! "),
            "I will Move West now"
        );
        assert_eq!(balrog_completion("123"), "");
        assert_eq!(balrog_completion("Dó"), "D");
    }

    #[test]
    fn exact_only_without_filtering() {
        assert!(balrog_exact(&reply(" Noop\n")));
        assert!(!balrog_exact(&reply("Noop.")));
        assert!(!balrog_exact(&reply("noop")));
    }
}
