//! Run summaries: `summary.json`, `summary.csv` and `achievements.csv` from the episodes in a
//! run folder.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::formats::{EpisodeResult, FormatCounts, Spend, Termination};
use crate::crafter::ACHIEVEMENT_NAMES;

use super::metrics::{crafter_score, mean, percentile, standard_error};

/// Problems reading a run.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    /// A file is not what it should be.
    #[error("{path} is corrupt or from an incompatible version: {message}")]
    Corrupt { path: String, message: String },
    /// The path does not exist (`message`: "no such folder: " and what to pass instead).
    #[error("{path}: {message}")]
    Missing { path: String, message: String },
    /// A value that is out of its range or contradicts another (`field` names it).
    #[error("{path}: {field} {message}")]
    Invalid {
        path: String,
        field: String,
        message: String,
    },
    /// A run folder with no finished episode yet: still playing, or interrupted before one
    /// finished (`state` says which and what to do).
    #[error("{path} has no finished episode yet ({state})")]
    NotReady { path: String, state: String },
    /// Writing a summary failed.
    #[error("cannot write {path}: {message}")]
    Write { path: String, message: String },
}

/// Read every complete episode (`episodes/seed_*/episode.json`) of a run, sorted by seed.
pub fn read_episodes(run: &Path) -> Result<Vec<EpisodeResult>, ReadError> {
    let dir = run.join("episodes");
    let mut out = Vec::new();
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(source) => {
            return Err(ReadError::Io {
                path: dir.display().to_string(),
                source,
            })
        }
    };
    for entry in entries.flatten() {
        let path = entry.path().join("episode.json");
        if !path.is_file() {
            continue;
        }
        let text = std::fs::read_to_string(&path).map_err(|source| ReadError::Io {
            path: path.display().to_string(),
            source,
        })?;
        let ep: EpisodeResult = serde_json::from_str(&text).map_err(|e| ReadError::Corrupt {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        let folder = entry.file_name().to_string_lossy().into_owned();
        if let Some(s) = folder
            .strip_prefix("seed_")
            .and_then(|s| s.parse::<i64>().ok())
        {
            if s != ep.seed {
                return Err(ReadError::Corrupt {
                    path: path.display().to_string(),
                    message: format!(
                        "it records seed {}, but its folder is {folder}: the folder was renamed or the file copied from another episode; delete the folder and rerun the run's command to play seed {s} again",
                        ep.seed
                    ),
                });
            }
        }
        out.push(ep);
    }
    out.sort_by_key(|e| e.seed);
    Ok(out)
}

/// `summary.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Model name.
    pub model: String,
    /// Episodes found.
    pub episodes: usize,
    /// Episodes that ended without an error or a budget stop (the metrics below are over these).
    pub completed: usize,
    /// Episodes that ended in an error.
    pub errors: usize,
    /// Episodes stopped by `--max-cost` / `--max-tokens-total`.
    #[serde(default)]
    pub budget_stopped: usize,
    /// Mean progression in percent (unique achievements / 22).
    pub progression_mean: f64,
    /// Standard error of the progression mean, percent.
    pub progression_se: f64,
    /// Crafter score (Hafner 2021) in percent.
    pub crafter_score: f64,
    /// Mean unique achievements per episode.
    pub score_mean: f64,
    /// Mean episode return.
    pub return_mean: f64,
    /// Mean env steps per episode.
    pub steps_mean: f64,
    /// Mean model turns per episode.
    pub turns_mean: f64,
    /// Fraction of episodes ending in death.
    pub death_rate: f64,
    /// Fraction of turns whose reply had no usable action.
    pub invalid_action_rate: f64,
    /// Fraction of turns whose reply was in the exact form asked for (`format.exact`), over the
    /// completed episodes that recorded format counts; None when none did (older runs).
    #[serde(default)]
    pub format_exact_rate: Option<f64>,
    /// Fraction of turns whose reply was usable only after lenient recovery (`format.repaired`),
    /// over the same turns; None when no episode recorded format counts.
    #[serde(default)]
    pub format_repaired_rate: Option<f64>,
    /// Total prompt tokens (None if any episode lacks usage).
    pub input_tokens: Option<u64>,
    /// Total completion tokens.
    pub output_tokens: Option<u64>,
    /// Total cost in USD (None without a price).
    pub cost_usd: Option<f64>,
    /// Median model-call latency, ms.
    pub latency_p50_ms: f64,
    /// 95th percentile latency, ms.
    pub latency_p95_ms: f64,
    /// Client retries in total.
    pub retries: u64,
    /// Time the client spent waiting between attempts in total, seconds.
    #[serde(default)]
    pub retry_wait_s: f64,
    /// Sum of episode wall times, seconds.
    pub episode_wall_s: f64,
    /// Per-achievement unlock rate, percent of completed episodes.
    pub achievement_rates: BTreeMap<String, f64>,
    /// Seeds of the episodes found.
    pub seeds: Vec<i64>,
    /// What the run spent over every episode (completed, errored or stopped by a budget, and
    /// earlier tries a rerun replaced) and every request, failed ones included; unlike the
    /// metrics above it is not limited to completed episodes.
    #[serde(default)]
    pub spent: Spend,
}

fn sum_opt(mut values: impl Iterator<Item = Option<u64>>) -> Option<u64> {
    values.try_fold(0, |acc, v| v.map(|v| acc + v))
}

/// Summarise episodes.
pub fn summarize(model: &str, episodes: &[EpisodeResult]) -> Summary {
    let done: Vec<&EpisodeResult> = episodes
        .iter()
        .filter(|e| e.termination != Termination::Error)
        .collect();
    let n = done.len().max(1) as f64;
    let prog: Vec<f64> = done.iter().map(|e| 100.0 * e.progression).collect();
    let rates: BTreeMap<String, f64> = ACHIEVEMENT_NAMES
        .iter()
        .map(|name| {
            let k = done
                .iter()
                .filter(|e| e.achievements.get(*name).copied().unwrap_or(0) > 0)
                .count();
            (
                name.to_string(),
                if done.is_empty() {
                    0.0
                } else {
                    100.0 * k as f64 / n
                },
            )
        })
        .collect();
    let rate_values: Vec<f64> = rates.values().copied().collect();
    let latencies: Vec<f64> = episodes
        .iter()
        .flat_map(|e| e.latency_ms.calls.iter().copied())
        .collect();
    let turns: u32 = done.iter().map(|e| e.turns).sum();
    let invalid: u32 = done.iter().map(|e| e.invalid_actions).sum();
    let formats: Vec<FormatCounts> = done.iter().filter_map(|e| e.format).collect();
    let format_turns: u32 = formats.iter().map(FormatCounts::turns).sum();
    let format_rate = |count: fn(&FormatCounts) -> u32| {
        (format_turns > 0)
            .then(|| formats.iter().map(count).sum::<u32>() as f64 / format_turns as f64)
    };
    let costs: Option<f64> = episodes
        .iter()
        .map(|e| e.cost_usd)
        .try_fold(0.0, |acc, c| c.map(|c| acc + c));
    Summary {
        model: model.to_string(),
        episodes: episodes.len(),
        completed: done.len(),
        errors: episodes
            .iter()
            .filter(|e| e.termination == Termination::Error)
            .count(),
        budget_stopped: episodes
            .iter()
            .filter(|e| e.termination == Termination::Budget)
            .count(),
        progression_mean: mean(&prog),
        progression_se: standard_error(&prog),
        crafter_score: if done.is_empty() {
            0.0
        } else {
            crafter_score(&rate_values)
        },
        score_mean: mean(&done.iter().map(|e| e.score as f64).collect::<Vec<_>>()),
        return_mean: mean(&done.iter().map(|e| e.episode_return).collect::<Vec<_>>()),
        steps_mean: mean(&done.iter().map(|e| e.num_steps as f64).collect::<Vec<_>>()),
        turns_mean: mean(&done.iter().map(|e| e.turns as f64).collect::<Vec<_>>()),
        death_rate: done
            .iter()
            .filter(|e| e.termination == Termination::Death)
            .count() as f64
            / n,
        invalid_action_rate: if turns == 0 {
            0.0
        } else {
            invalid as f64 / turns as f64
        },
        format_exact_rate: format_rate(|f| f.exact),
        format_repaired_rate: format_rate(|f| f.repaired),
        input_tokens: sum_opt(episodes.iter().map(|e| e.input_tokens)),
        output_tokens: sum_opt(episodes.iter().map(|e| e.output_tokens)),
        cost_usd: if episodes.is_empty() { None } else { costs },
        latency_p50_ms: percentile(&latencies, 0.5),
        latency_p95_ms: percentile(&latencies, 0.95),
        retries: episodes.iter().map(|e| e.retries as u64).sum(),
        retry_wait_s: episodes.iter().map(|e| e.retry_wait_ms).sum::<f64>() / 1000.0,
        episode_wall_s: episodes.iter().map(|e| e.wall_s).sum(),
        achievement_rates: rates,
        seeds: episodes.iter().map(|e| e.seed).collect(),
        spent: Spend::total(&episodes.iter().map(|e| e.spend_all()).collect::<Vec<_>>()),
    }
}

/// The CSV columns of `summary.csv` (one row per run).
pub const SUMMARY_COLUMNS: [&str; 27] = [
    "model",
    "episodes",
    "completed",
    "errors",
    "progression_mean",
    "progression_se",
    "crafter_score",
    "score_mean",
    "return_mean",
    "steps_mean",
    "turns_mean",
    "death_rate",
    "invalid_action_rate",
    "format_exact_rate",
    "format_repaired_rate",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "latency_p50_ms",
    "latency_p95_ms",
    "retries",
    "spent_requests",
    "spent_input_tokens",
    "spent_output_tokens",
    "spent_cost_usd",
    "spent_retries",
    "spent_cached_input_tokens",
];

impl Summary {
    /// Values in `SUMMARY_COLUMNS` order.
    pub fn csv_row(&self) -> Vec<String> {
        let opt = |v: Option<u64>| v.map(|x| x.to_string()).unwrap_or_default();
        let rate = |v: Option<f64>| v.map(|x| format!("{x:.4}")).unwrap_or_default();
        vec![
            self.model.clone(),
            self.episodes.to_string(),
            self.completed.to_string(),
            self.errors.to_string(),
            format!("{:.4}", self.progression_mean),
            format!("{:.4}", self.progression_se),
            format!("{:.4}", self.crafter_score),
            format!("{:.4}", self.score_mean),
            format!("{:.4}", self.return_mean),
            format!("{:.2}", self.steps_mean),
            format!("{:.2}", self.turns_mean),
            format!("{:.4}", self.death_rate),
            format!("{:.4}", self.invalid_action_rate),
            rate(self.format_exact_rate),
            rate(self.format_repaired_rate),
            opt(self.input_tokens),
            opt(self.output_tokens),
            self.cost_usd.map(|c| format!("{c:.6}")).unwrap_or_default(),
            format!("{:.1}", self.latency_p50_ms),
            format!("{:.1}", self.latency_p95_ms),
            self.retries.to_string(),
            self.spent.requests.to_string(),
            self.spent.input_tokens.to_string(),
            self.spent.output_tokens.to_string(),
            self.spent
                .cost_usd
                .map(|c| format!("{c:.6}"))
                .unwrap_or_default(),
            self.spent.retries.to_string(),
            self.spent.cached_input_tokens.to_string(),
        ]
    }
}

/// Write a CSV file (header, then rows) atomically.
pub fn write_csv(path: &Path, header: &[&str], rows: &[Vec<String>]) -> Result<(), ReadError> {
    let err = |e: &dyn std::fmt::Display| ReadError::Write {
        path: path.display().to_string(),
        message: e.to_string(),
    };
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(header).map_err(|e| err(&e))?;
    for r in rows {
        w.write_record(r).map_err(|e| err(&e))?;
    }
    let bytes = w.into_inner().map_err(|e| err(&e))?;
    super::store::write_atomic(path, &bytes).map_err(|e| err(&e))
}

/// Write `summary.json`, `summary.csv` and `achievements.csv` into a run folder.
pub fn write_summary(
    run: &Path,
    summary: &Summary,
    episodes: &[EpisodeResult],
) -> Result<Vec<PathBuf>, ReadError> {
    let json = run.join("summary.json");
    super::store::write_json(&json, summary).map_err(|e| ReadError::Write {
        path: json.display().to_string(),
        message: e.to_string(),
    })?;
    let csv_path = run.join("summary.csv");
    write_csv(&csv_path, &SUMMARY_COLUMNS, &[summary.csv_row()])?;
    let ach = run.join("achievements.csv");
    let rows: Vec<Vec<String>> = ACHIEVEMENT_NAMES
        .iter()
        .map(|name| {
            let steps: Vec<f64> = episodes
                .iter()
                .filter_map(|e| e.unlock_step.get(*name))
                .map(|&s| s as f64)
                .collect();
            vec![
                name.to_string(),
                format!(
                    "{:.2}",
                    summary.achievement_rates.get(*name).copied().unwrap_or(0.0)
                ),
                steps.len().to_string(),
                if steps.is_empty() {
                    String::new()
                } else {
                    format!("{:.1}", mean(&steps))
                },
            ]
        })
        .collect();
    write_csv(
        &ach,
        &[
            "achievement",
            "unlock_rate_percent",
            "episodes_unlocked",
            "mean_unlock_step",
        ],
        &rows,
    )?;
    Ok(vec![json, csv_path, ach])
}
