//! Comparison tables over several runs: the main metrics table, the per-achievement unlock-rate
//! matrix and paired per-seed progression deltas (`vlm-eval compare`).

use std::collections::{BTreeMap, BTreeSet};

use crate::crafter::ACHIEVEMENT_NAMES;
use crate::results::formats::{EpisodeResult, Termination};

use super::baseline::unfinished_seeds;
use super::protocol::{protocol_differences, protocol_of};
use super::stats::{mean, paired_bootstrap_ci, sign_flip_p_value, Interval, PValue};
use crate::results::run::RunData;
use crate::results::summary::{summarize, Summary};

/// How rows are formed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupBy {
    /// One row per run folder.
    Run,
    /// One row per model, pooling the episodes of its runs.
    Model,
}

/// The rows of a comparison: one run, or the pooled runs of one model.
#[derive(Clone, Debug)]
pub struct Group {
    /// Row label (run name or model).
    pub label: String,
    /// Model name.
    pub model: String,
    /// Names of the runs pooled into this row.
    pub runs: Vec<String>,
    /// Complete episodes (with an `episode.json`).
    pub episodes: Vec<EpisodeResult>,
    /// Planned seeds without an `episode.json` in any run of the row.
    pub unfinished: Vec<i64>,
    /// Summary of `episodes`.
    pub summary: Summary,
    /// The protocol (`report::protocol`) of each run pooled into this row.
    pub protocols: Vec<serde_json::Value>,
    /// Seeds left out of a pooled row because an earlier run of the row had already finished
    /// them, by run name: a seed counts once per row (the first run given that finished it),
    /// so that a run given twice, a copy, or a repeat on the same seeds does not shrink the
    /// standard error as if its episodes were new ones.
    pub duplicate_seeds: Vec<(String, Vec<i64>)>,
}

impl Group {
    /// Episodes planned: complete ones plus unfinished ones.
    pub fn planned(&self) -> usize {
        self.episodes.len() + self.unfinished.len()
    }

    /// Mean progression (percent) per seed over non-error episodes (replicates averaged).
    pub fn progression_by_seed(&self) -> BTreeMap<i64, f64> {
        let mut acc: BTreeMap<i64, Vec<f64>> = BTreeMap::new();
        for e in self
            .episodes
            .iter()
            .filter(|e| e.termination != Termination::Error)
        {
            acc.entry(e.seed).or_default().push(100.0 * e.progression);
        }
        acc.into_iter().map(|(s, v)| (s, mean(&v))).collect()
    }
}

/// Form the rows: by run (labels made unique with the folder path when names repeat) or by
/// model (first-seen order).
pub fn group_runs(runs: &[RunData], by: GroupBy) -> Vec<Group> {
    let mut groups: Vec<Group> = Vec::new();
    for run in runs {
        let model = run.model();
        let label = match by {
            GroupBy::Run => {
                let name = run.name();
                if runs.iter().filter(|r| r.name() == name).count() > 1 {
                    run.dir.display().to_string()
                } else {
                    name
                }
            }
            GroupBy::Model => model.clone(),
        };
        let unfinished = unfinished_seeds(run);
        match groups.iter_mut().find(|g| g.label == label) {
            Some(g) => {
                g.runs.push(run.name());
                g.protocols.push(protocol_of(&run.info));
                let done: BTreeSet<i64> = g.episodes.iter().map(|e| e.seed).collect();
                let (again, new): (Vec<&EpisodeResult>, Vec<&EpisodeResult>) =
                    run.episodes.iter().partition(|e| done.contains(&e.seed));
                if !again.is_empty() {
                    g.duplicate_seeds
                        .push((run.name(), again.iter().map(|e| e.seed).collect()));
                }
                g.episodes.extend(new.into_iter().cloned());
                g.unfinished.extend(unfinished);
            }
            None => groups.push(Group {
                label,
                model,
                runs: vec![run.name()],
                episodes: run.episodes.clone(),
                unfinished,
                summary: summarize("", &[]),
                protocols: vec![protocol_of(&run.info)],
                duplicate_seeds: Vec::new(),
            }),
        }
    }
    for g in &mut groups {
        g.episodes.sort_by_key(|e| e.seed);
        // A seed one pooled run finished is not unfinished for the row; each is counted once.
        let done: BTreeSet<i64> = g.episodes.iter().map(|e| e.seed).collect();
        let open: BTreeSet<i64> = g
            .unfinished
            .iter()
            .copied()
            .filter(|s| !done.contains(s))
            .collect();
        g.unfinished = open.into_iter().collect();
        g.summary = summarize(&g.model, &g.episodes);
    }
    groups
}

/// Protocol differences of each row from the first row's first run (`report::protocol`):
/// per row, the differing settings as `(key, "key: this vs first")`, over all its pooled runs.
pub fn protocol_marks(groups: &[Group]) -> Vec<Vec<(&'static str, String)>> {
    let Some(reference) = groups.first().and_then(|g| g.protocols.first()) else {
        return Vec::new();
    };
    groups
        .iter()
        .map(|g| {
            let mut out: Vec<(&'static str, String)> = Vec::new();
            for p in &g.protocols {
                for (k, line) in protocol_differences(p, reference) {
                    if !out.iter().any(|(seen, _)| *seen == k) {
                        out.push((k, line));
                    }
                }
            }
            out
        })
        .collect()
}

/// Columns `--metrics` can choose, in display order (all are shown by default).
pub const COLUMNS: [&str; 13] = [
    "episodes",
    "progression",
    "crafter_score",
    "return",
    "score",
    "steps",
    "death_rate",
    "invalid_rate",
    "format_exact_rate",
    "format_repaired_rate",
    "tokens",
    "cost",
    "latency_p50",
];

/// Parse a `--metrics` list; unknown names are an error listing the valid ones.
pub fn parse_columns(list: Option<&[String]>) -> Result<Vec<&'static str>, String> {
    let Some(list) = list else {
        return Ok(COLUMNS.to_vec());
    };
    let mut out = Vec::new();
    for name in list {
        let name = name.trim();
        match COLUMNS.iter().find(|c| **c == name) {
            Some(c) if !out.contains(c) => out.push(*c),
            Some(_) => {}
            None => {
                return Err(format!(
                    "unknown metric '{name}' in --metrics: valid names are {}",
                    COLUMNS.join(", ")
                ))
            }
        }
    }
    if out.is_empty() {
        return Err(format!(
            "--metrics is empty: give one or more of {}",
            COLUMNS.join(", ")
        ));
    }
    Ok(out)
}

/// A table as a header and rows of cells.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Table {
    /// Column names.
    pub header: Vec<String>,
    /// Rows.
    pub rows: Vec<Vec<String>>,
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|x| x.to_string()).unwrap_or_default()
}

/// Display cells and CSV cells (name, value) of one column for one row.
fn cells(col: &str, g: &Group) -> (String, Vec<(&'static str, String)>) {
    let s = &g.summary;
    match col {
        "episodes" => {
            let mut shown = format!("{}/{}", s.completed, g.planned());
            if s.errors > 0 {
                shown.push_str(&format!(" ({} errors)", s.errors));
            }
            if !g.unfinished.is_empty() {
                shown.push_str(&format!(" ({} unfinished)", g.unfinished.len()));
            }
            let csv = vec![
                ("episodes_completed", s.completed.to_string()),
                ("episodes_errors", s.errors.to_string()),
                ("episodes_unfinished", g.unfinished.len().to_string()),
                ("episodes_planned", g.planned().to_string()),
            ];
            (shown, csv)
        }
        "progression" => (
            format!("{:.1} ± {:.1}", s.progression_mean, s.progression_se),
            vec![
                ("progression_mean", format!("{:.4}", s.progression_mean)),
                ("progression_se", format!("{:.4}", s.progression_se)),
            ],
        ),
        "crafter_score" => (
            format!("{:.2}", s.crafter_score),
            vec![("crafter_score", format!("{:.4}", s.crafter_score))],
        ),
        "return" => (
            format!("{:.2}", s.return_mean),
            vec![("return_mean", format!("{:.4}", s.return_mean))],
        ),
        "score" => (
            format!("{:.2}", s.score_mean),
            vec![("score_mean", format!("{:.4}", s.score_mean))],
        ),
        "steps" => (
            format!("{:.1}", s.steps_mean),
            vec![("steps_mean", format!("{:.2}", s.steps_mean))],
        ),
        "death_rate" => (
            format!("{:.0}%", 100.0 * s.death_rate),
            vec![("death_rate", format!("{:.4}", s.death_rate))],
        ),
        "invalid_rate" => (
            format!("{:.1}%", 100.0 * s.invalid_action_rate),
            vec![(
                "invalid_action_rate",
                format!("{:.4}", s.invalid_action_rate),
            )],
        ),
        "format_exact_rate" | "format_repaired_rate" => {
            let v = if col == "format_exact_rate" {
                s.format_exact_rate
            } else {
                s.format_repaired_rate
            };
            (
                v.map(|x| format!("{:.1}%", 100.0 * x))
                    .unwrap_or_else(|| "n/a".into()),
                vec![(
                    if col == "format_exact_rate" {
                        "format_exact_rate"
                    } else {
                        "format_repaired_rate"
                    },
                    opt(v.map(|x| format!("{x:.4}"))),
                )],
            )
        }
        "tokens" => (
            match (s.input_tokens, s.output_tokens) {
                (Some(i), Some(o)) => format!("{i} in / {o} out"),
                _ => "unknown".into(),
            },
            vec![
                ("input_tokens", opt(s.input_tokens)),
                ("output_tokens", opt(s.output_tokens)),
            ],
        ),
        "cost" => (
            s.cost_usd
                .map(|c| format!("${c:.4}"))
                .unwrap_or_else(|| "unknown".into()),
            vec![("cost_usd", opt(s.cost_usd.map(|c| format!("{c:.6}"))))],
        ),
        _ => (
            format!("{:.0} ms", s.latency_p50_ms),
            vec![("latency_p50_ms", format!("{:.1}", s.latency_p50_ms))],
        ),
    }
}

/// The main table for the terminal and for CSV (CSV splits `mean ± SE` and counts into
/// separate numeric columns). The CSV ends with `protocol_differs`: the settings in which the
/// row's protocol differs from the first row's, `;`-separated (empty when the same); the
/// terminal table ends with a `protocol` column (`≠ preset, parser`, else empty) only when
/// some row differs.
pub fn main_tables(groups: &[Group], by: GroupBy, columns: &[&str]) -> (Table, Table) {
    let marks = protocol_marks(groups);
    let any_differs = marks.iter().any(|m| !m.is_empty());
    let lead: Vec<&str> = match by {
        GroupBy::Run => vec!["run", "model"],
        GroupBy::Model => vec!["model", "runs"],
    };
    let mut shown = Table {
        header: lead.iter().map(|s| s.to_string()).collect(),
        rows: Vec::new(),
    };
    let mut csv = shown.clone();
    for col in columns {
        shown.header.push(
            match *col {
                "progression" => "progression % ± SE",
                "crafter_score" => "crafter score %",
                "invalid_rate" => "invalid actions",
                "format_exact_rate" => "exact replies",
                "format_repaired_rate" => "repaired replies",
                "latency_p50" => "latency p50",
                "death_rate" => "deaths",
                c => c,
            }
            .to_string(),
        );
    }
    for (i, g) in groups.iter().enumerate() {
        let second = match by {
            GroupBy::Run => g.model.clone(),
            GroupBy::Model => g.runs.len().to_string(),
        };
        let mut row = vec![g.label.clone(), second];
        let mut csv_row = row.clone();
        for col in columns {
            let (cell, csv_cells) = cells(col, g);
            row.push(cell);
            for (name, value) in csv_cells {
                if i == 0 {
                    csv.header.push(name.to_string());
                }
                csv_row.push(value);
            }
        }
        let keys: Vec<&str> = marks
            .get(i)
            .map(|m| m.iter().map(|(k, _)| *k).collect())
            .unwrap_or_default();
        if any_differs {
            row.push(if keys.is_empty() {
                String::new()
            } else {
                format!("≠ {}", keys.join(", "))
            });
        }
        csv_row.push(keys.join(";"));
        shown.rows.push(row);
        csv.rows.push(csv_row);
    }
    if any_differs {
        shown.header.push("protocol".into());
    }
    csv.header.push("protocol_differs".into());
    (shown, csv)
}

/// Per-achievement unlock rates (percent of non-error episodes), one column per row group.
pub fn achievement_table(groups: &[Group]) -> Table {
    let mut header = vec!["achievement".to_string()];
    header.extend(groups.iter().map(|g| g.label.clone()));
    let rows = ACHIEVEMENT_NAMES
        .iter()
        .map(|name| {
            let mut row = vec![name.to_string()];
            row.extend(groups.iter().map(|g| {
                format!(
                    "{:.1}",
                    g.summary
                        .achievement_rates
                        .get(*name)
                        .copied()
                        .unwrap_or(0.0)
                )
            }));
            row
        })
        .collect();
    Table { header, rows }
}

/// One paired comparison of a row group against the first one.
#[derive(Clone, Debug, PartialEq)]
pub struct Paired {
    /// The group compared.
    pub label: String,
    /// The reference group (the first).
    pub reference: String,
    /// Seeds both have.
    pub shared: usize,
    /// Seeds only the reference has.
    pub only_reference: usize,
    /// Seeds only this group has.
    pub only_this: usize,
    /// Mean progression of the reference on the shared seeds.
    pub reference_mean: f64,
    /// Mean progression of this group on the shared seeds.
    pub this_mean: f64,
    /// Mean of the per-seed differences (this − reference), percentage points.
    pub delta: f64,
    /// Percentile bootstrap interval of `delta`.
    pub ci: Interval,
    /// Two-sided sign-flip permutation p-value.
    pub p: PValue,
}

/// Paired progression deltas of every group after the first against the first, on shared
/// seeds; `None` for a group sharing no seed with the reference.
pub fn paired(
    groups: &[Group],
    level: f64,
    resamples: usize,
    seed: u32,
) -> Vec<(String, Option<Paired>)> {
    let Some(first) = groups.first() else {
        return Vec::new();
    };
    let reference = first.progression_by_seed();
    groups[1..]
        .iter()
        .map(|g| {
            let this = g.progression_by_seed();
            let shared: Vec<i64> = this
                .keys()
                .filter(|s| reference.contains_key(s))
                .copied()
                .collect();
            if shared.is_empty() {
                return (g.label.clone(), None);
            }
            let a: Vec<f64> = shared.iter().map(|s| reference[s]).collect();
            let b: Vec<f64> = shared.iter().map(|s| this[s]).collect();
            let deltas: Vec<f64> = a.iter().zip(&b).map(|(x, y)| y - x).collect();
            let p = Paired {
                label: g.label.clone(),
                reference: first.label.clone(),
                shared: shared.len(),
                only_reference: reference.len() - shared.len(),
                only_this: this.len() - shared.len(),
                reference_mean: mean(&a),
                this_mean: mean(&b),
                delta: mean(&deltas),
                ci: paired_bootstrap_ci(&a, &b, level, resamples, seed),
                p: sign_flip_p_value(&deltas, resamples, seed),
            };
            (g.label.clone(), Some(p))
        })
        .collect()
}

/// The paired comparisons for CSV: snake_case names, plain numbers, empty cells for a run
/// sharing no seed.
pub fn paired_csv(rows: &[(String, Option<Paired>)], level: f64) -> Table {
    let header = [
        "run",
        "vs",
        "shared_seeds",
        "only_in_run",
        "only_in_vs",
        "vs_mean",
        "run_mean",
        "delta",
        "ci_low",
        "ci_high",
        "ci_level",
        "p_value",
        "p_exact",
    ];
    let rows = rows
        .iter()
        .map(|(label, p)| match p {
            Some(p) => vec![
                p.label.clone(),
                p.reference.clone(),
                p.shared.to_string(),
                p.only_this.to_string(),
                p.only_reference.to_string(),
                format!("{:.4}", p.reference_mean),
                format!("{:.4}", p.this_mean),
                format!("{:.4}", p.delta),
                format!("{:.4}", p.ci.lo),
                format!("{:.4}", p.ci.hi),
                level.to_string(),
                format!("{:.6}", p.p.p),
                p.p.exact.to_string(),
            ],
            None => {
                let mut r = vec![label.clone(), String::new(), "0".into()];
                r.resize(header.len(), String::new());
                r
            }
        })
        .collect();
    Table {
        header: header.iter().map(|h| h.to_string()).collect(),
        rows,
    }
}

/// The paired comparisons as a terminal table.
pub fn paired_table(rows: &[(String, Option<Paired>)], level: f64) -> Table {
    let pct = format!("{:.0}", 100.0 * level);
    let header = vec![
        "run".to_string(),
        "vs".to_string(),
        "shared seeds".to_string(),
        "only in run".to_string(),
        "only in vs".to_string(),
        "vs mean %".to_string(),
        "run mean %".to_string(),
        "delta pp".to_string(),
        format!("{pct}% CI low"),
        format!("{pct}% CI high"),
        "p (sign-flip)".to_string(),
    ];
    let rows = rows
        .iter()
        .map(|(label, p)| match p {
            Some(p) => vec![
                p.label.clone(),
                p.reference.clone(),
                p.shared.to_string(),
                p.only_this.to_string(),
                p.only_reference.to_string(),
                format!("{:.2}", p.reference_mean),
                format!("{:.2}", p.this_mean),
                format!("{:+.2}", p.delta),
                format!("{:+.2}", p.ci.lo),
                format!("{:+.2}", p.ci.hi),
                format!("{:.4}{}", p.p.p, if p.p.exact { "" } else { " (MC)" }),
            ],
            None => {
                let mut r = vec![label.clone(), String::new(), "0".into()];
                r.resize(header.len(), String::new());
                r
            }
        })
        .collect();
    Table { header, rows }
}

/// The reminder printed with comparisons of small samples (research/agents.md §2.7).
pub const NOISE_NOTE: &str = "with ~10 episodes per run, progression gaps below ~8 points are \
mostly noise (typical SE 2–6 points); judge gaps by the paired CI and p-value on shared seeds, \
and add episodes to narrow them.";
