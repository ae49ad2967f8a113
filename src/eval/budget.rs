//! Run budgets (`--max-cost`, `--max-tokens-total`): once spent, no new turn starts and the
//! episodes end cleanly with `termination: budget`.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::model::prices::Price;
use crate::model::Usage;
use crate::results::formats::UsageCounts;

/// Shared spending limits of one run.
#[derive(Debug, Default)]
pub struct Budget {
    max_cost_usd: Option<f64>,
    max_tokens: Option<u64>,
    spent_tokens: AtomicU64,
    spent_micro_usd: AtomicU64,
}

impl Budget {
    /// Limits (None = unlimited).
    pub fn new(max_cost_usd: Option<f64>, max_tokens: Option<u64>) -> Budget {
        Budget {
            max_cost_usd,
            max_tokens,
            ..Budget::default()
        }
    }

    /// Whether any limit is set.
    pub fn is_limited(&self) -> bool {
        self.max_cost_usd.is_some() || self.max_tokens.is_some()
    }

    /// Count tokens and their cost (USD, when priced).
    pub fn add(&self, tokens: u64, usd: Option<f64>) {
        self.spent_tokens.fetch_add(tokens, Ordering::Relaxed);
        if let Some(usd) = usd.filter(|c| c.is_finite() && *c > 0.0) {
            let micro = (usd * 1e6).round() as u64;
            self.spent_micro_usd.fetch_add(micro, Ordering::Relaxed);
        }
    }

    /// Whether a limit has been reached.
    pub fn exhausted(&self) -> bool {
        let tokens = self.spent_tokens.load(Ordering::Relaxed);
        let cost = self.spent_micro_usd.load(Ordering::Relaxed) as f64 / 1e6;
        self.max_tokens.is_some_and(|m| tokens >= m) || self.max_cost_usd.is_some_and(|m| cost >= m)
    }

    /// Spent so far: (tokens, USD).
    pub fn spent(&self) -> (u64, f64) {
        (
            self.spent_tokens.load(Ordering::Relaxed),
            self.spent_micro_usd.load(Ordering::Relaxed) as f64 / 1e6,
        )
    }
}

/// One answer's usage as the spend counts it, priced at `price` (None: unpriced).
pub fn usage_counts(u: &Usage, price: Option<&Price>) -> UsageCounts {
    // Cached and written shares capped at the prompt, as they are priced (the trajectory
    // keeps what was reported).
    let (_, cached, cache_write) = u.input_split();
    UsageCounts {
        input: u.input_tokens.unwrap_or(0),
        cached,
        cache_write,
        reasoning: u.reasoning_tokens.unwrap_or(0),
        output: u.billed_output(),
        from_total: u.output_rule == Some(crate::model::usage::OutputRule::TotalMinusPrompt),
        warned: u.warning.is_some(),
        cost_usd: price.map(|p| p.cost(u)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_trip_once_reached() {
        let b = Budget::new(Some(0.001), None);
        let price = Price::flat("m", 0.15, 0.15, 0.60);
        let u = Usage {
            input_tokens: Some(1000),
            output_tokens: Some(100),
            ..Usage::default()
        };
        let c = usage_counts(&u, Some(&price));
        assert_eq!((c.input, c.output), (1000, 100));
        b.add(c.input + c.output, c.cost_usd); // 150 + 60 µUSD
        assert!(!b.exhausted());
        for _ in 0..4 {
            b.add(c.input + c.output, c.cost_usd);
        }
        assert!(b.exhausted(), "{:?}", b.spent());
        let t = Budget::new(None, Some(2000));
        t.add(1100, None);
        assert!(!t.exhausted());
        t.add(1100, None);
        assert!(t.exhausted());
        assert!(!Budget::new(None, None).is_limited());
    }
}
