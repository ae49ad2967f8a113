//! A reply's `usage` object read in full: prompt and completion tokens, the cached and
//! cache-written prompt tokens (`prompt_tokens_details`), reasoning tokens
//! (`completion_tokens_details`), `total_tokens`, and the output tokens billed:
//! `max(completion, total − prompt)`, since Gemini's OpenAI-compatible endpoint counts its
//! thinking tokens only in the total. A count that is negative, not a number, or
//! inconsistent is recorded as missing with a [`UsageWarning`]; the raw body keeps what was
//! sent, and no count can make a cost negative.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Token usage; `None` fields mean the server did not say. The fields after the first two are
/// absent from records written before they existed (serde defaults).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens (`prompt_tokens`; cached ones included, as OpenAI counts them).
    pub input_tokens: Option<u64>,
    /// Completion tokens as reported (`completion_tokens`).
    pub output_tokens: Option<u64>,
    /// Prompt tokens read from the provider's cache (`prompt_tokens_details.cached_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input_tokens: Option<u64>,
    /// Prompt tokens written to the cache (`prompt_tokens_details.cache_write_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<u64>,
    /// Reasoning tokens (`completion_tokens_details.reasoning_tokens`), part of the output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
    /// `total_tokens` as reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_tokens: Option<u64>,
    /// Output tokens billed: `max(completion, total − prompt)` (see `output_rule`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub billed_output_tokens: Option<u64>,
    /// Which rule gave `billed_output_tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_rule: Option<OutputRule>,
    /// What was wrong with the reported usage, if anything (recorded, never billed negative).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warning: Option<UsageWarning>,
}

/// Which rule gave the billed output tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputRule {
    /// `completion_tokens` (it was at least `total − prompt`, or no total came).
    Completion,
    /// `total_tokens − prompt_tokens`, larger than `completion_tokens` (thinking counted only
    /// in the total, as Gemini's compatible endpoint reports it).
    TotalMinusPrompt,
}

/// What was wrong with a reply's usage.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UsageWarning {
    /// A count was negative (recorded as missing).
    Negative,
    /// A count was not a number (recorded as missing).
    NotNumeric,
    /// Cached (or cache-written) prompt tokens above the prompt tokens: the cached share is
    /// capped at the prompt when priced.
    CachedAbovePrompt,
    /// `total_tokens` below `prompt_tokens`: the total is not used for billing.
    TotalBelowPrompt,
}

impl UsageWarning {
    /// One line for the trajectory.
    pub fn describe(self) -> &'static str {
        match self {
            UsageWarning::Negative => {
                "a usage count was negative: recorded as missing (see reply.raw for what was sent)"
            }
            UsageWarning::NotNumeric => {
                "a usage count was not a number: recorded as missing (see reply.raw for what was sent)"
            }
            UsageWarning::CachedAbovePrompt => {
                "cached prompt tokens above prompt tokens: priced as if every prompt token was cached"
            }
            UsageWarning::TotalBelowPrompt => {
                "total_tokens below prompt_tokens: output billed from completion_tokens"
            }
        }
    }
}

/// One count of a usage object: `Ok(None)` when absent or null, `Err` when present but not a
/// non-negative number.
fn count(obj: &Value, keys: &[&str]) -> Result<Option<u64>, UsageWarning> {
    for k in keys {
        match obj.get(*k) {
            None | Some(Value::Null) => continue,
            Some(v) => {
                if let Some(n) = v.as_u64() {
                    return Ok(Some(n));
                }
                return match v.as_f64() {
                    Some(f) if f.is_finite() && f >= 0.0 && f <= u64::MAX as f64 => {
                        Ok(Some(f.round() as u64))
                    }
                    Some(f) if f < 0.0 => Err(UsageWarning::Negative),
                    _ => Err(UsageWarning::NotNumeric),
                };
            }
        }
    }
    Ok(None)
}

/// Read a `usage` object (OpenAI's names, and `input_tokens`/`output_tokens` as some servers
/// send them).
pub fn parse_usage(usage: &Value) -> Usage {
    let mut warning = None;
    let mut take = |obj: Option<&Value>, keys: &[&str]| match obj.map(|o| count(o, keys)) {
        Some(Ok(v)) => v,
        Some(Err(w)) => {
            warning.get_or_insert(w);
            None
        }
        None => None,
    };
    let prompt_details = usage
        .get("prompt_tokens_details")
        .or_else(|| usage.get("input_tokens_details"));
    let completion_details = usage
        .get("completion_tokens_details")
        .or_else(|| usage.get("output_tokens_details"));
    let input_tokens = take(Some(usage), &["prompt_tokens", "input_tokens"]);
    let output_tokens = take(Some(usage), &["completion_tokens", "output_tokens"]);
    let cached_input_tokens = take(prompt_details, &["cached_tokens"]);
    let cache_write_tokens = take(prompt_details, &["cache_write_tokens"]);
    let reasoning_tokens = take(completion_details, &["reasoning_tokens"]);
    let total_tokens = take(Some(usage), &["total_tokens"]);
    let mut u = Usage {
        input_tokens,
        output_tokens,
        cached_input_tokens,
        cache_write_tokens,
        reasoning_tokens,
        total_tokens,
        warning,
        ..Usage::default()
    };
    let cached = cached_input_tokens.unwrap_or(0) + cache_write_tokens.unwrap_or(0);
    if u.warning.is_none() && input_tokens.is_some_and(|p| cached > p) {
        u.warning = Some(UsageWarning::CachedAbovePrompt);
    }
    if u.warning.is_none() && matches!((total_tokens, input_tokens), (Some(t), Some(p)) if t < p) {
        u.warning = Some(UsageWarning::TotalBelowPrompt);
    }
    let from_total = match (total_tokens, input_tokens) {
        (Some(t), Some(p)) => t.checked_sub(p),
        _ => None,
    };
    (u.billed_output_tokens, u.output_rule) = match (output_tokens, from_total) {
        (Some(c), Some(t)) if t > c => (Some(t), Some(OutputRule::TotalMinusPrompt)),
        (None, Some(t)) => (Some(t), Some(OutputRule::TotalMinusPrompt)),
        (Some(c), _) => (Some(c), Some(OutputRule::Completion)),
        (None, None) => (None, None),
    };
    u
}

impl Usage {
    /// Whether any count was reported.
    pub fn reported(&self) -> bool {
        self.input_tokens.is_some() || self.output_tokens.is_some() || self.total_tokens.is_some()
    }

    /// Output tokens billed: `billed_output_tokens` when recorded, else the completion tokens
    /// (records written before it existed, and in-process models).
    pub fn billed_output(&self) -> u64 {
        self.billed_output_tokens
            .or(self.output_tokens)
            .unwrap_or(0)
    }

    /// Prompt tokens split for pricing: (uncached, cached read, cache written), each capped
    /// so that their sum is the prompt tokens.
    pub fn input_split(&self) -> (u64, u64, u64) {
        let prompt = self.input_tokens.unwrap_or(0);
        let cached = self.cached_input_tokens.unwrap_or(0).min(prompt);
        let written = self.cache_write_tokens.unwrap_or(0).min(prompt - cached);
        (prompt - cached - written, cached, written)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn openai_details_are_read() {
        // OpenAI's chat completion object (platform.openai.com/docs/api-reference/chat/object):
        // usage.prompt_tokens_details.cached_tokens, completion_tokens_details.reasoning_tokens.
        let u = parse_usage(&json!({
            "prompt_tokens": 2006, "completion_tokens": 300, "total_tokens": 2306,
            "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 256, "audio_tokens": 0,
                "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}
        }));
        assert_eq!(u.input_tokens, Some(2006));
        assert_eq!(u.cached_input_tokens, Some(1920));
        assert_eq!(u.reasoning_tokens, Some(256));
        assert_eq!(u.total_tokens, Some(2306));
        assert_eq!(u.billed_output_tokens, Some(300));
        assert_eq!(u.output_rule, Some(OutputRule::Completion));
        assert_eq!(u.warning, None);
        assert_eq!(u.input_split(), (86, 1920, 0));
    }

    #[test]
    fn thinking_counted_only_in_the_total_is_billed() {
        // Gemini's OpenAI-compatible endpoint: prompt 9, completion 1, total 103, thinking
        // counted only in the total (the case issue 48 quotes).
        let u =
            parse_usage(&json!({"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 103}));
        assert_eq!(u.billed_output_tokens, Some(94));
        assert_eq!(u.output_rule, Some(OutputRule::TotalMinusPrompt));
        assert_eq!(u.billed_output(), 94);
    }

    #[test]
    fn bad_counts_are_warned_and_never_negative() {
        let neg = parse_usage(&json!({"prompt_tokens": -5, "completion_tokens": 3}));
        assert_eq!(neg.input_tokens, None);
        assert_eq!(neg.warning, Some(UsageWarning::Negative));
        assert_eq!(neg.billed_output(), 3);
        let text = parse_usage(&json!({"prompt_tokens": "ten", "completion_tokens": 3}));
        assert_eq!(text.warning, Some(UsageWarning::NotNumeric));
        let over = parse_usage(&json!({"prompt_tokens": 10, "completion_tokens": 3,
            "prompt_tokens_details": {"cached_tokens": 50}}));
        assert_eq!(over.warning, Some(UsageWarning::CachedAbovePrompt));
        assert_eq!(over.cached_input_tokens, Some(50));
        assert_eq!(over.input_split(), (0, 10, 0));
        let low =
            parse_usage(&json!({"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 4}));
        assert_eq!(low.warning, Some(UsageWarning::TotalBelowPrompt));
        assert_eq!(low.billed_output_tokens, Some(3));
        let nan = parse_usage(&json!({"prompt_tokens": 1e300, "completion_tokens": 3}));
        assert_eq!(nan.warning, Some(UsageWarning::NotNumeric));
    }

    #[test]
    fn old_records_still_read() {
        let u: Usage =
            serde_json::from_value(json!({"input_tokens": 10, "output_tokens": 2})).unwrap();
        assert_eq!(u.billed_output(), 2);
        assert_eq!(u.input_split(), (10, 0, 0));
        let back = serde_json::to_value(u).unwrap();
        assert_eq!(back, json!({"input_tokens": 10, "output_tokens": 2}));
    }
}
