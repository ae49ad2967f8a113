//! Result formats shared by the writer (`eval`) and the readers (`report`): `episode.json`
//! and `summary.json` (DESIGN §4).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Why an episode ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Termination {
    /// The player died.
    Death,
    /// The game's length limit was reached.
    Length,
    /// The turn budget (`--steps`) was used up.
    TurnBudget,
    /// A model call failed for good.
    Error,
    /// A cost or token budget stopped the run.
    Budget,
}

impl Termination {
    /// Every termination, in declaration order.
    pub const ALL: [Termination; 5] = [
        Termination::Death,
        Termination::Length,
        Termination::TurnBudget,
        Termination::Error,
        Termination::Budget,
    ];

    /// The name episode.json uses (`death`, `length`, `turn_budget`, `error`, `budget`).
    pub fn as_str(self) -> &'static str {
        match self {
            Termination::Death => "death",
            Termination::Length => "length",
            Termination::TurnBudget => "turn_budget",
            Termination::Error => "error",
            Termination::Budget => "budget",
        }
    }
}

impl std::fmt::Display for Termination {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Latency statistics of an episode's model calls, milliseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// All calls' latencies in turn order.
    pub calls: Vec<f64>,
}

/// Turns by reply-format outcome (`parsed.outcome` in the trajectory; docs/FORMATS.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FormatCounts {
    /// Replies in the exact form asked for.
    pub exact: u32,
    /// Replies usable only after lenient recovery.
    pub repaired: u32,
    /// Replies with no usable action (the fallback was played).
    pub invalid: u32,
}

impl FormatCounts {
    /// Turns counted.
    pub fn turns(&self) -> u32 {
        self.exact + self.repaired + self.invalid
    }
}

/// `episode.json`: one episode's result (BALROG field names where they exist).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EpisodeResult {
    /// Env seed.
    pub seed: i64,
    /// crafter's world seed for this episode.
    pub world_seed: u32,
    /// Model name.
    pub model: String,
    /// Unique achievements unlocked / 22.
    pub progression: f64,
    /// Unique achievements unlocked.
    pub score: u32,
    /// Achievement counts (all 22 names).
    pub achievements: BTreeMap<String, u32>,
    /// Env step at which each unlocked achievement first happened.
    pub unlock_step: BTreeMap<String, u32>,
    /// Env steps taken.
    pub num_steps: u32,
    /// Sum of crafter's rewards.
    pub episode_return: f64,
    /// Model turns taken.
    pub turns: u32,
    /// Why it ended.
    pub termination: Termination,
    /// Turns whose reply had no usable action (a noop was played).
    pub invalid_actions: u32,
    /// Action strings that could not be understood.
    pub unknown_actions: u32,
    /// Actions cut because a reply exceeded the per-turn limit.
    pub truncated_actions: u32,
    /// Turns by reply-format outcome (absent in episodes written before vlm-eval recorded it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<FormatCounts>,
    /// Prompt tokens (None when the server did not report usage).
    pub input_tokens: Option<u64>,
    /// Completion tokens.
    pub output_tokens: Option<u64>,
    /// Retries made by the client.
    pub retries: u32,
    /// Time the client spent waiting between attempts (backoff, `Retry-After`), milliseconds.
    #[serde(default)]
    pub retry_wait_ms: f64,
    /// Model call latency.
    pub latency_ms: Latency,
    /// Cost in USD (None without a price).
    pub cost_usd: Option<f64>,
    /// The error that ended the episode, if any.
    pub error: Option<String>,
    /// Wall time of the episode, seconds.
    pub wall_s: f64,
    /// What the episode spent: every HTTP request, failed turns and billed failed attempts
    /// included (absent in files from before it existed; see [`EpisodeResult::spend`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spent: Option<Spend>,
    /// What earlier tries of this seed spent (errored or budget-stopped episodes that a rerun
    /// of the run folder replaced); absent when there were none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spent_before: Option<Spend>,
    /// Which frame files were written and the hash over every frame's hash (absent in episodes
    /// written before vlm-eval recorded frame hashes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frames: Option<crate::results::frames::EpisodeFrames>,
}

impl EpisodeResult {
    /// Everything spent on this seed: this try and the earlier ones it replaced.
    pub fn spend_all(&self) -> Spend {
        let this = self.spend();
        Spend::total(self.spent_before.iter().chain([&this]))
    }

    /// What this try of the episode spent: `spent` when recorded, else what older files allow to
    /// reconstruct (one request per turn plus retries, the turns' tokens and cost).
    pub fn spend(&self) -> Spend {
        self.spent.clone().unwrap_or_else(|| Spend {
            requests: self.turns as u64
                + self.retries as u64
                + u64::from(self.termination == Termination::Error),
            input_tokens: self.input_tokens.unwrap_or(0),
            output_tokens: self.output_tokens.unwrap_or(0),
            cost_usd: self.cost_usd,
            retries: self.retries as u64,
            ..Spend::default()
        })
    }
}

/// Spend: requests sent and what they were billed, over everything that was sent.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Spend {
    /// HTTP requests sent, retries included (replies replayed from `--cache` send none).
    pub requests: u64,
    /// Prompt tokens billed: the usage of every request whose answer reported it (the reply
    /// of an in-process model counts as one such answer). Cached ones included.
    pub input_tokens: u64,
    /// Output tokens billed: per answer `max(completion, total − prompt)` (reasoning and
    /// thinking included); the completion tokens in records written before that rule.
    pub output_tokens: u64,
    /// USD for those tokens at the run's prices (null without a price).
    pub cost_usd: Option<f64>,
    /// Retries among `requests`.
    pub retries: u64,
    /// Successful answers that reported no usage (their tokens are missing above).
    #[serde(default)]
    pub replies_without_usage: u64,
    /// Prompt tokens among `input_tokens` read from the provider's cache.
    #[serde(default)]
    pub cached_input_tokens: u64,
    /// Prompt tokens among `input_tokens` written to the provider's cache.
    #[serde(default)]
    pub cache_write_tokens: u64,
    /// Reasoning tokens among `output_tokens`, where reported.
    #[serde(default)]
    pub reasoning_tokens: u64,
    /// Answers whose output was billed as `total − prompt` (above their completion tokens).
    #[serde(default)]
    pub output_from_total: u64,
    /// Answers whose usage was negative, not numeric or inconsistent (see the trajectory).
    #[serde(default)]
    pub usage_warnings: u64,
}

/// The counts of one answer's usage that [`Spend`] sums (kept here so that `results` needs no
/// model types): prompt, cached, cache-written, reasoning and billed output tokens, whether
/// the output came from the total, whether the usage was faulty, and its cost.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct UsageCounts {
    /// Prompt tokens.
    pub input: u64,
    /// Cached prompt tokens.
    pub cached: u64,
    /// Cache-written prompt tokens.
    pub cache_write: u64,
    /// Reasoning tokens.
    pub reasoning: u64,
    /// Billed output tokens.
    pub output: u64,
    /// The output was billed as `total − prompt`.
    pub from_total: bool,
    /// The usage was faulty.
    pub warned: bool,
    /// USD at the run's price (None without one).
    pub cost_usd: Option<f64>,
}

impl Spend {
    /// An empty spend, its cost 0 when priced (`priced`) and null otherwise.
    pub fn start(priced: bool) -> Spend {
        Spend {
            cost_usd: priced.then_some(0.0),
            ..Spend::default()
        }
    }

    /// Count the usage one answer reported.
    pub fn add_usage(&mut self, u: &UsageCounts) {
        self.input_tokens += u.input;
        self.output_tokens += u.output;
        self.cached_input_tokens += u.cached;
        self.cache_write_tokens += u.cache_write;
        self.reasoning_tokens += u.reasoning;
        self.output_from_total += u64::from(u.from_total);
        self.usage_warnings += u64::from(u.warned);
        self.cost_usd = self.cost_usd.zip(u.cost_usd).map(|(a, b)| a + b);
    }

    /// Count one HTTP request: `retry` when it repeated an earlier one, the usage its answer
    /// reported (`None`: none reported), and whether it succeeded.
    pub fn add_request(&mut self, retry: bool, usage: Option<&UsageCounts>, ok: bool) {
        self.requests += 1;
        self.retries += u64::from(retry);
        match usage {
            Some(u) => self.add_usage(u),
            None if ok => self.replies_without_usage += 1,
            None => {}
        }
    }

    /// The sum of several spends (cost null if any is null).
    pub fn total<'a>(spends: impl IntoIterator<Item = &'a Spend>) -> Spend {
        let mut t = Spend {
            cost_usd: Some(0.0),
            ..Spend::default()
        };
        let mut any = false;
        for s in spends {
            any = true;
            t.requests += s.requests;
            t.input_tokens += s.input_tokens;
            t.output_tokens += s.output_tokens;
            t.retries += s.retries;
            t.replies_without_usage += s.replies_without_usage;
            t.cached_input_tokens += s.cached_input_tokens;
            t.cache_write_tokens += s.cache_write_tokens;
            t.reasoning_tokens += s.reasoning_tokens;
            t.output_from_total += s.output_from_total;
            t.usage_warnings += s.usage_warnings;
            t.cost_usd = t.cost_usd.zip(s.cost_usd).map(|(a, b)| a + b);
        }
        if !any {
            t.cost_usd = None;
        }
        t
    }
}

fn percentile_sorted(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let pos = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

/// Latency statistics of a list of calls.
pub fn latency_stats(calls: Vec<f64>) -> Latency {
    let mut sorted = calls.clone();
    sorted.sort_by(f64::total_cmp);
    let mean = if calls.is_empty() {
        0.0
    } else {
        calls.iter().sum::<f64>() / calls.len() as f64
    };
    Latency {
        mean,
        p50: percentile_sorted(&sorted, 0.5),
        p95: percentile_sorted(&sorted, 0.95),
        calls,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn termination_prints_as_episode_json_names_it() {
        for t in Termination::ALL {
            let json = serde_json::to_value(t).unwrap();
            assert_eq!(json.as_str(), Some(t.as_str()));
            assert_eq!(t.to_string(), t.as_str());
            let back: Termination = serde_json::from_value(json).unwrap();
            assert_eq!(back, t);
        }
        assert_eq!(Termination::TurnBudget.to_string(), "turn_budget");
    }
}
