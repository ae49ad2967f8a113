//! The history of one model call: every HTTP attempt it made, what came back, and the wait
//! before the next one (with the hint that set it). Kept for calls that succeed and for calls
//! that fail, so a failed turn still shows its retries, waits and billed usage.

use serde::{Deserialize, Serialize};

use super::{ModelError, Usage};

/// One HTTP request of a model call.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    /// HTTP status of an error answer (absent for a success and for transport faults).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Why it failed (absent for the attempt that succeeded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// How long it took, milliseconds.
    pub ms: f64,
    /// Usage the server reported for it (it was billed), when it reported any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// The wait that followed it before the next attempt (absent for the last attempt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait: Option<Wait>,
}

/// A wait between two attempts.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Wait {
    /// Time actually waited, milliseconds.
    pub ms: f64,
    /// What set it: the header whose hint was followed (`retry-after`, `retry-after-ms`,
    /// `llm_provider-retry-after`, `x-ratelimit-reset-requests`, `x-ratelimit-reset-tokens`),
    /// or `backoff` (exponential backoff with full jitter, when no hint came).
    pub after: String,
    /// The hint's own value, milliseconds (absent for `backoff`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint_ms: Option<f64>,
    /// The hint was longer than `--max-retry-wait` and was cut to it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub capped: bool,
}

/// Retries made: attempts after the first.
pub fn retries(attempts: &[Attempt]) -> u32 {
    attempts.len().saturating_sub(1) as u32
}

/// Time waited between attempts, milliseconds.
pub fn waited_ms(attempts: &[Attempt]) -> f64 {
    attempts
        .iter()
        .filter_map(|a| a.wait.as_ref())
        .map(|w| w.ms)
        .sum()
}

/// A model call that failed for good, with the attempts it made.
#[derive(Debug)]
pub struct CallFailure {
    /// The final error.
    pub error: ModelError,
    /// Every HTTP attempt made (empty for models that make none).
    pub attempts: Vec<Attempt>,
}

impl CallFailure {
    /// Retries made before giving up.
    pub fn retries(&self) -> u32 {
        retries(&self.attempts)
    }

    /// Time waited between attempts, milliseconds.
    pub fn retry_wait_ms(&self) -> f64 {
        waited_ms(&self.attempts)
    }
}

impl From<ModelError> for CallFailure {
    fn from(error: ModelError) -> CallFailure {
        CallFailure {
            error,
            attempts: Vec::new(),
        }
    }
}

impl std::fmt::Display for CallFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_json_shape() {
        let attempts = vec![
            Attempt {
                status: Some(429),
                error: Some("HTTP 429: slow down".into()),
                ms: 2.0,
                usage: None,
                wait: Some(Wait {
                    ms: 1000.5,
                    after: "llm_provider-retry-after".into(),
                    hint_ms: Some(1000.0),
                    capped: false,
                }),
            },
            Attempt {
                ms: 40.0,
                usage: Some(Usage {
                    input_tokens: Some(10),
                    output_tokens: Some(2),
                    ..Usage::default()
                }),
                ..Attempt::default()
            },
        ];
        assert_eq!(retries(&attempts), 1);
        assert_eq!(retries(&[]), 0);
        assert_eq!(waited_ms(&attempts), 1000.5);
        let json = serde_json::to_value(&attempts).unwrap();
        assert_eq!(
            json,
            serde_json::json!([
                {"status": 429, "error": "HTTP 429: slow down", "ms": 2.0,
                 "wait": {"ms": 1000.5, "after": "llm_provider-retry-after", "hint_ms": 1000.0}},
                {"ms": 40.0, "usage": {"input_tokens": 10, "output_tokens": 2}}
            ])
        );
        let back: Vec<Attempt> = serde_json::from_value(json).unwrap();
        assert_eq!(back, attempts);
    }
}
