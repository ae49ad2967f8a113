//! The leaderboard over many runs (`vlm-eval leaderboard`, the index of `vlm-eval view`): runs
//! grouped by protocol and budget (`report::protocol::group_key_of`) and ranked only inside
//! their group (shards and merge inputs left out: `leaderboard_runs`), each with its
//! progression ± SE and bootstrap CI, Crafter score, the paired difference to the group's
//! leader on shared seeds (bootstrap CI, sign-flip p-value), reply-format rates, spend, cost per
//! progression point and achievement unlock rates. Unfinished and errored episodes are counted
//! and shown, never averaged in. The page is in `leaderboard_html.rs`.

use std::path::PathBuf;

use serde_json::Value;

use crate::crafter::ACHIEVEMENT_NAMES;
use crate::results::formats::Termination;
use crate::results::run::RunData;
use crate::results::summary::Summary;

use super::compare::{group_runs, paired, GroupBy, Paired, Table};
use super::protocol::{group_key_of, group_keys, protocol_names};
use super::stats::{bootstrap_mean_ci, Interval};

/// Inference settings of the leaderboard.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LeaderboardOptions {
    /// Confidence level of the intervals (e.g. 0.95).
    pub level: f64,
    /// Bootstrap / Monte Carlo resamples.
    pub resamples: usize,
    /// Resampling seed.
    pub seed: u32,
}

impl Default for LeaderboardOptions {
    fn default() -> Self {
        LeaderboardOptions {
            level: 0.95,
            resamples: super::stats::DEFAULT_RESAMPLES,
            seed: 0,
        }
    }
}

/// One run's row.
#[derive(Clone, Debug)]
pub struct Row {
    /// Rank inside its protocol group (1 = leader).
    pub rank: usize,
    /// Run label (its name, or its folder when names repeat).
    pub label: String,
    /// Model name.
    pub model: String,
    /// The run folder.
    pub dir: PathBuf,
    /// Summary of its complete episodes (progression and rates over non-error ones).
    pub summary: Summary,
    /// Planned seeds with no `episode.json` (interrupted or still playing).
    pub unfinished: usize,
    /// Bootstrap CI of the mean progression (percent); `None` without a non-error episode.
    pub ci: Option<Interval>,
    /// Paired progression difference to the leader on shared seeds (`None` for the leader
    /// itself and for a run sharing no seed with it).
    pub vs_leader: Option<Paired>,
    /// Spent USD per episode divided by mean progression (USD per progression point per
    /// episode); `None` without a price or with zero progression.
    pub cost_per_point: Option<f64>,
}

impl Row {
    /// Episodes planned: complete plus unfinished.
    pub fn planned(&self) -> usize {
        self.summary.episodes + self.unfinished
    }
}

/// Runs playing the same protocol with the same budget, ranked by mean progression.
#[derive(Clone, Debug)]
pub struct ProtocolGroup {
    /// The group key: the protocol and the budget (`report::protocol::group_key_of`).
    pub protocol: Value,
    /// Its name among the leaderboard's groups: what sets it apart
    /// (`report::protocol::protocol_names`, e.g. `preset balrog`).
    pub name: String,
    /// Rows, best first.
    pub rows: Vec<Row>,
}

pub use super::leaderboard_runs::Unranked;

/// The whole leaderboard.
#[derive(Clone, Debug)]
pub struct Leaderboard {
    /// Protocol groups, in first-seen order.
    pub groups: Vec<ProtocolGroup>,
    /// Runs left out of the ranking.
    pub unranked: Vec<Unranked>,
    /// Folders left out on purpose, with why: folders that are not runs, and runs that are
    /// parts of another (`report::leaderboard_runs`).
    pub skipped: Vec<Unranked>,
    /// The options it was computed with.
    pub options: LeaderboardOptions,
    /// What the page records it is a leaderboard of (the folders given, as `vlm-eval
    /// leaderboard` sets it), so that a later run can tell regenerating it from overwriting it.
    pub identity: Option<String>,
}

/// The group key as one line (`preset vlm-eval · parser lenient · … · steps 10 ·
/// episode_length 10000`).
pub fn protocol_line(protocol: &Value) -> String {
    group_keys()
        .filter_map(|k| {
            let v = protocol.get(k)?;
            let shown = match v {
                Value::String(s) if k == "prompt_sha256" => s.chars().take(12).collect(),
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            Some(format!("{k} {shown}"))
        })
        .collect::<Vec<_>>()
        .join(" · ")
}

/// Build the leaderboard from opened runs (those that could not be opened go in `unranked`;
/// shards and merge inputs are left out into `skipped`).
pub fn build_leaderboard(
    runs: Vec<RunData>,
    unranked: Vec<Unranked>,
    opts: LeaderboardOptions,
) -> Leaderboard {
    let (runs, skipped) = super::leaderboard_runs::leave_out_parts(runs);
    let mut buckets: Vec<(Value, Vec<RunData>)> = Vec::new();
    for run in runs {
        let p = group_key_of(&run.info);
        match buckets.iter_mut().find(|(q, _)| *q == p) {
            Some((_, v)) => v.push(run),
            None => buckets.push((p, vec![run])),
        }
    }
    let protocols: Vec<Value> = buckets.iter().map(|(p, _)| p.clone()).collect();
    let groups = buckets
        .into_iter()
        .zip(protocol_names(&protocols))
        .map(|((protocol, runs), name)| ProtocolGroup {
            protocol,
            name,
            rows: rank(&runs, opts),
        })
        .collect();
    Leaderboard {
        groups,
        unranked,
        skipped,
        options: opts,
        identity: None,
    }
}

fn rank(runs: &[RunData], opts: LeaderboardOptions) -> Vec<Row> {
    // One group per run (GroupBy::Run labels repeated names by folder), in run order.
    let mut pairs: Vec<(super::compare::Group, PathBuf)> = group_runs(runs, GroupBy::Run)
        .into_iter()
        .zip(runs.iter().map(|r| r.dir.clone()))
        .collect();
    pairs.sort_by(|(ga, _), (gb, _)| {
        gb.summary
            .progression_mean
            .total_cmp(&ga.summary.progression_mean)
            .then_with(|| ga.label.cmp(&gb.label))
    });
    let (sorted, dirs): (Vec<_>, Vec<_>) = pairs.into_iter().unzip();
    let vs = paired(&sorted, opts.level, opts.resamples, opts.seed);
    sorted
        .into_iter()
        .enumerate()
        .map(|(i, g)| {
            let prog: Vec<f64> = g
                .episodes
                .iter()
                .filter(|e| e.termination != Termination::Error)
                .map(|e| 100.0 * e.progression)
                .collect();
            let ci = (!prog.is_empty())
                .then(|| bootstrap_mean_ci(&prog, opts.level, opts.resamples, opts.seed));
            let s = &g.summary;
            let cost_per_point = s.spent.cost_usd.and_then(|c| {
                (s.episodes > 0 && s.progression_mean > 0.0)
                    .then(|| c / s.episodes as f64 / s.progression_mean)
            });
            Row {
                rank: i + 1,
                label: g.label.clone(),
                model: g.model.clone(),
                dir: dirs[i].clone(),
                unfinished: g.unfinished.len(),
                ci,
                vs_leader: if i == 0 {
                    None
                } else {
                    vs.get(i - 1).and_then(|(_, p)| p.clone())
                },
                cost_per_point,
                summary: g.summary,
            }
        })
        .collect()
}

/// The leaderboard's CSV columns before the 22 `unlock_<achievement>` columns (docs/FORMATS.md).
pub const CSV_COLUMNS: [&str; 31] = [
    "group",
    "protocol",
    "rank",
    "run",
    "model",
    "dir",
    "episodes_planned",
    "episodes_complete",
    "episodes_errors",
    "episodes_unfinished",
    "episodes_counted",
    "progression_mean",
    "progression_se",
    "progression_ci_low",
    "progression_ci_high",
    "crafter_score",
    "leader",
    "shared_seeds",
    "delta_vs_leader",
    "delta_ci_low",
    "delta_ci_high",
    "p_value",
    "format_exact_rate",
    "format_repaired_rate",
    "format_invalid_rate",
    "spent_requests",
    "spent_input_tokens",
    "spent_output_tokens",
    "spent_cost_usd",
    "cost_per_point",
    "ci_level",
];

/// The leaderboard as one CSV table: one row per ranked run, group by group.
pub fn leaderboard_csv(lb: &Leaderboard) -> Table {
    let mut header: Vec<String> = CSV_COLUMNS.iter().map(|s| s.to_string()).collect();
    header.extend(ACHIEVEMENT_NAMES.iter().map(|a| format!("unlock_{a}")));
    let f4 = |v: Option<f64>| v.map(|x| format!("{x:.4}")).unwrap_or_default();
    let mut rows = Vec::new();
    for (gi, g) in lb.groups.iter().enumerate() {
        let leader = g.rows.first().map(|r| r.label.clone()).unwrap_or_default();
        for r in &g.rows {
            let s = &r.summary;
            let invalid = s
                .format_exact_rate
                .zip(s.format_repaired_rate)
                .map(|(e, rp)| (1.0 - e - rp).max(0.0));
            let p = r.vs_leader.as_ref();
            let mut row = vec![
                (gi + 1).to_string(),
                protocol_line(&g.protocol),
                r.rank.to_string(),
                r.label.clone(),
                r.model.clone(),
                r.dir.display().to_string(),
                r.planned().to_string(),
                s.episodes.to_string(),
                s.errors.to_string(),
                r.unfinished.to_string(),
                s.completed.to_string(),
                format!("{:.4}", s.progression_mean),
                format!("{:.4}", s.progression_se),
                f4(r.ci.map(|c| c.lo)),
                f4(r.ci.map(|c| c.hi)),
                format!("{:.4}", s.crafter_score),
                leader.clone(),
                p.map(|p| p.shared.to_string()).unwrap_or_default(),
                f4(p.map(|p| p.delta)),
                f4(p.map(|p| p.ci.lo)),
                f4(p.map(|p| p.ci.hi)),
                p.map(|p| format!("{:.6}", p.p.p)).unwrap_or_default(),
                f4(s.format_exact_rate),
                f4(s.format_repaired_rate),
                f4(invalid),
                s.spent.requests.to_string(),
                s.spent.input_tokens.to_string(),
                s.spent.output_tokens.to_string(),
                s.spent
                    .cost_usd
                    .map(|c| format!("{c:.6}"))
                    .unwrap_or_default(),
                r.cost_per_point
                    .map(|c| format!("{c:.8}"))
                    .unwrap_or_default(),
                lb.options.level.to_string(),
            ];
            for a in ACHIEVEMENT_NAMES {
                row.push(format!(
                    "{:.1}",
                    s.achievement_rates.get(a).copied().unwrap_or(0.0)
                ));
            }
            rows.push(row);
        }
    }
    Table { header, rows }
}

/// What `load_runs` found: the runs opened, the runs that could not be, the folders skipped.
pub type LoadedRuns = (Vec<RunData>, Vec<Unranked>, Vec<Unranked>);

/// Open the runs under some paths (run folders or folders of runs,
/// `leaderboard_runs::find_candidates`): the runs opened, the runs that could not be (no complete
/// episode yet, corrupt files), each with the reader's one-line reason, and the folders skipped
/// as not runs. A path that is missing or not a folder is an error.
pub fn load_runs(paths: &[PathBuf]) -> Result<LoadedRuns, crate::results::summary::ReadError> {
    let (mut runs, mut unranked) = (Vec::new(), Vec::new());
    let (dirs, skipped) = super::leaderboard_runs::find_candidates(paths)?;
    for dir in dirs {
        match crate::results::run::open_run(&dir) {
            Ok(run) => runs.push(run),
            Err(e) => unranked.push(Unranked {
                dir,
                why: e.to_string(),
            }),
        }
    }
    Ok((runs, unranked, skipped))
}
