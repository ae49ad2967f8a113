//! What each row of a comparison spent (`summary.json` `spent`: every request of every
//! episode, errored and budget-stopped ones included), shown apart from the per-episode
//! metrics, which are over completed episodes.

use super::compare::{Group, GroupBy, Table};

/// The spend table for the terminal and for CSV (`<stem>.spend.csv`).
pub fn spend_tables(groups: &[Group], by: GroupBy) -> (Table, Table) {
    let lead = match by {
        GroupBy::Run => "run",
        GroupBy::Model => "model",
    };
    let mut shown = Table {
        header: [
            lead,
            "requests",
            "retries",
            "input tokens",
            "cached input",
            "output tokens",
            "cost",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
        rows: Vec::new(),
    };
    let mut csv = Table {
        header: [
            lead,
            "spent_requests",
            "spent_retries",
            "spent_input_tokens",
            "spent_cached_input_tokens",
            "spent_output_tokens",
            "spent_cost_usd",
            "replies_without_usage",
            "spent_cache_write_tokens",
            "spent_reasoning_tokens",
            "output_from_total",
            "usage_warnings",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
        rows: Vec::new(),
    };
    for g in groups {
        let p = &g.summary.spent;
        let missing = if p.replies_without_usage > 0 {
            format!(" ({} replies without usage)", p.replies_without_usage)
        } else {
            String::new()
        };
        shown.rows.push(vec![
            g.label.clone(),
            p.requests.to_string(),
            p.retries.to_string(),
            format!("{}{missing}", p.input_tokens),
            cached_share(p.cached_input_tokens, p.input_tokens),
            p.output_tokens.to_string(),
            p.cost_usd
                .map(|c| format!("${c:.4}"))
                .unwrap_or_else(|| "unknown".into()),
        ]);
        csv.rows.push(vec![
            g.label.clone(),
            p.requests.to_string(),
            p.retries.to_string(),
            p.input_tokens.to_string(),
            p.cached_input_tokens.to_string(),
            p.output_tokens.to_string(),
            p.cost_usd.map(|c| format!("{c:.6}")).unwrap_or_default(),
            p.replies_without_usage.to_string(),
            p.cache_write_tokens.to_string(),
            p.reasoning_tokens.to_string(),
            p.output_from_total.to_string(),
            p.usage_warnings.to_string(),
        ]);
    }
    (shown, csv)
}

/// Cached input tokens and their share of the input, e.g. `1920 (96%)`.
pub fn cached_share(cached: u64, input: u64) -> String {
    if input == 0 {
        return cached.to_string();
    }
    format!("{cached} ({:.0}%)", 100.0 * cached as f64 / input as f64)
}
