//! Run budgets (`--max-cost`, `--max-tokens-total`): once spent, no new turn starts and the
//! episodes end cleanly with `termination: budget`.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::model::Usage;

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

    /// Count one reply's usage (unknown usage counts as nothing).
    pub fn add(&self, usage: &Usage, prices: Option<(f64, f64)>) {
        let (i, o) = (
            usage.input_tokens.unwrap_or(0),
            usage.output_tokens.unwrap_or(0),
        );
        self.spent_tokens.fetch_add(i + o, Ordering::Relaxed);
        if let Some((pin, pout)) = prices {
            let micro = (i as f64 * pin + o as f64 * pout).round() as u64; // USD/1M × tokens = µUSD
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_trip_once_reached() {
        let b = Budget::new(Some(0.001), None);
        let u = Usage {
            input_tokens: Some(1000),
            output_tokens: Some(100),
        };
        b.add(&u, Some((0.15, 0.60))); // 150 + 60 µUSD
        assert!(!b.exhausted());
        for _ in 0..4 {
            b.add(&u, Some((0.15, 0.60)));
        }
        assert!(b.exhausted(), "{:?}", b.spent());
        let t = Budget::new(None, Some(2000));
        t.add(&u, None);
        assert!(!t.exhausted());
        t.add(&u, None);
        assert!(t.exhausted());
        assert!(!Budget::new(None, None).is_limited());
    }
}
