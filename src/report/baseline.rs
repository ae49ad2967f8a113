//! Per-episode metric values shared by `compare` and `check`, the metrics the gate knows, and
//! the baseline file written by `vlm-eval baseline save` (docs/FORMATS.md).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::crafter::ACHIEVEMENT_NAMES;
use crate::results::formats::{EpisodeResult, FormatCounts, Termination};

use super::protocol::protocol_of;
use super::stats::{crafter_score, mean, standard_error};
use crate::results::run::RunData;
use crate::results::summary::{summarize, ReadError, Summary};

/// `format` field of a baseline file.
pub const BASELINE_FORMAT: &str = "vlm-eval-baseline";
/// Newest baseline file version this build reads and the one it writes.
pub const BASELINE_VERSION: u32 = 1;
/// `run.json` config keys copied into a baseline file and compared by `check`.
pub const CONFIG_KEYS: [&str; 13] = [
    "model",
    "seeds",
    "steps",
    "episode_length",
    "image_size",
    "modality",
    "obs_format",
    "history",
    "image_history",
    "protocol",
    "max_actions_per_turn",
    "temperature",
    "max_tokens",
];

/// One finished (non-error) episode's values, as stored in a baseline file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EpisodePoint {
    /// Env seed.
    pub seed: i64,
    /// Progression in percent (unique achievements / 22 × 100).
    pub progression: f64,
    /// Unique achievements unlocked.
    pub score: u32,
    /// Episode return.
    #[serde(rename = "return")]
    pub episode_return: f64,
    /// Env steps.
    pub steps: u32,
    /// Why it ended.
    pub termination: Termination,
    /// Achievements unlocked at least once.
    pub unlocked: Vec<String>,
    /// Turns by reply-format outcome (absent for episodes that did not record it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<FormatCounts>,
}

impl EpisodePoint {
    /// The values of one episode.
    pub fn from_episode(e: &EpisodeResult) -> EpisodePoint {
        EpisodePoint {
            seed: e.seed,
            progression: 100.0 * e.progression,
            score: e.score,
            episode_return: e.episode_return,
            steps: e.num_steps,
            termination: e.termination,
            unlocked: ACHIEVEMENT_NAMES
                .iter()
                .filter(|n| e.achievements.get(**n).copied().unwrap_or(0) > 0)
                .map(|n| n.to_string())
                .collect(),
            format: e.format,
        }
    }

    /// Unlocked achievements as a bit set in `ACHIEVEMENT_NAMES` order.
    pub fn mask(&self) -> u32 {
        ACHIEVEMENT_NAMES
            .iter()
            .enumerate()
            .filter(|(_, n)| self.unlocked.iter().any(|u| u == *n))
            .fold(0, |m, (i, _)| m | 1 << i)
    }
}

/// Crafter score (percent) of the episodes `idx` of `masks` (unlock bit sets).
pub fn crafter_score_of(masks: &[u32], idx: &[usize]) -> f64 {
    if idx.is_empty() {
        return 0.0;
    }
    let rates: Vec<f64> = (0..ACHIEVEMENT_NAMES.len())
        .map(|a| {
            let k = idx.iter().filter(|&&i| masks[i] >> a & 1 == 1).count();
            100.0 * k as f64 / idx.len() as f64
        })
        .collect();
    crafter_score(&rates)
}

/// Pooled reply-format rate (percent of turns) of the episodes `idx` of `counts` (per-episode
/// `(part, turns)`); None when they have no turns.
pub fn format_rate_of(counts: &[(u32, u32)], idx: &[usize]) -> Option<f64> {
    let (part, turns) = idx.iter().fold((0u64, 0u64), |(p, t), &i| {
        (p + counts[i].0 as u64, t + counts[i].1 as u64)
    });
    (turns > 0).then(|| 100.0 * part as f64 / turns as f64)
}

/// A metric `check` can gate on; higher is better for all but `format_repaired_rate`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    /// Mean progression, percent (difference in percentage points).
    Progression,
    /// Mean unique achievements per episode.
    Score,
    /// Mean episode return.
    Return,
    /// Crafter score over the episodes, percent (a set statistic, not a per-episode mean).
    CrafterScore,
    /// Replies in the exact form asked for, percent of the turns (pooled over the episodes).
    FormatExact,
    /// Replies usable only after lenient recovery, percent of the turns; lower is better.
    FormatRepaired,
}

impl Metric {
    /// Every metric.
    pub const ALL: [Metric; 6] = [
        Metric::Progression,
        Metric::Score,
        Metric::Return,
        Metric::CrafterScore,
        Metric::FormatExact,
        Metric::FormatRepaired,
    ];

    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Metric::Progression => "progression",
            Metric::Score => "score",
            Metric::Return => "return",
            Metric::CrafterScore => "crafter_score",
            Metric::FormatExact => "format_exact_rate",
            Metric::FormatRepaired => "format_repaired_rate",
        }
    }

    /// False for the metric whose rise is the regression (`format_repaired_rate`).
    pub fn higher_is_better(self) -> bool {
        self != Metric::FormatRepaired
    }

    /// A set statistic (not a mean of per-episode values): resampled as a whole.
    pub fn is_pooled(self) -> bool {
        matches!(
            self,
            Metric::CrafterScore | Metric::FormatExact | Metric::FormatRepaired
        )
    }

    /// Per-episode `(count, turns)` of a reply-format metric (None for other metrics, or for
    /// an episode without format counts).
    pub fn format_counts(self, p: &EpisodePoint) -> Option<(u32, u32)> {
        let f = p.format?;
        match self {
            Metric::FormatExact => Some((f.exact, f.turns())),
            Metric::FormatRepaired => Some((f.repaired, f.turns())),
            _ => None,
        }
    }

    /// Parse a command-line name.
    pub fn parse(s: &str) -> Option<Metric> {
        Metric::ALL.into_iter().find(|m| m.name() == s.trim())
    }

    /// Units of the metric and of `--max-drop` for it.
    pub fn unit(self) -> &'static str {
        match self {
            Metric::Progression | Metric::CrafterScore => "percentage points",
            Metric::FormatExact | Metric::FormatRepaired => "percentage points of turns",
            Metric::Score => "achievements per episode",
            Metric::Return => "reward per episode",
        }
    }

    /// The per-episode value of a mean metric (None for the Crafter score).
    pub fn per_episode(self, p: &EpisodePoint) -> Option<f64> {
        match self {
            Metric::Progression => Some(p.progression),
            Metric::Score => Some(p.score as f64),
            Metric::Return => Some(p.episode_return),
            Metric::CrafterScore | Metric::FormatExact | Metric::FormatRepaired => None,
        }
    }

    /// The metric over a set of episodes.
    pub fn of(self, points: &[&EpisodePoint]) -> f64 {
        match self {
            Metric::CrafterScore => {
                let masks: Vec<u32> = points.iter().map(|p| p.mask()).collect();
                let idx: Vec<usize> = (0..masks.len()).collect();
                crafter_score_of(&masks, &idx)
            }
            Metric::FormatExact | Metric::FormatRepaired => {
                let counts: Vec<(u32, u32)> = points
                    .iter()
                    .map(|p| self.format_counts(p).unwrap_or((0, 0)))
                    .collect();
                let idx: Vec<usize> = (0..counts.len()).collect();
                format_rate_of(&counts, &idx).unwrap_or(f64::NAN)
            }
            m => mean(
                &points
                    .iter()
                    .filter_map(|p| m.per_episode(p))
                    .collect::<Vec<_>>(),
            ),
        }
    }

    /// Value and standard error from a `summary.json` (None when it has no SE for this metric).
    pub fn from_summary(self, s: &Summary) -> Option<(f64, f64)> {
        match self {
            Metric::Progression => Some((s.progression_mean, s.progression_se)),
            // score = progression × 22 / 100 episode by episode, so the SE scales the same way.
            Metric::Score => Some((
                s.score_mean,
                s.progression_se * ACHIEVEMENT_NAMES.len() as f64 / 100.0,
            )),
            Metric::Return
            | Metric::CrafterScore
            | Metric::FormatExact
            | Metric::FormatRepaired => None,
        }
    }

    /// Standard error of a mean metric over episodes (None for the Crafter score).
    pub fn standard_error(self, points: &[&EpisodePoint]) -> Option<f64> {
        let xs: Option<Vec<f64>> = points.iter().map(|p| self.per_episode(p)).collect();
        xs.map(|xs| standard_error(&xs))
    }
}

/// `vlm-eval baseline save` output.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BaselineFile {
    /// Always `vlm-eval-baseline`.
    pub format: String,
    /// File version (1).
    pub version: u32,
    /// Run name.
    pub run: String,
    /// Model name.
    pub model: String,
    /// The run folder it was saved from, as given.
    pub source: String,
    /// vlm-eval version that wrote the run.
    pub vlm_eval_version: Option<String>,
    /// When the run finished (copied from run.json; no clock is read, so saves are repeatable).
    pub finished_at: Option<String>,
    /// The `CONFIG_KEYS` of the run's config, plus `prompt_sha256` and `textures`.
    pub config: Value,
    /// Per-seed values of every finished (non-error) episode, sorted by seed.
    pub episodes: Vec<EpisodePoint>,
    /// The run's summary (as in summary.json), recomputed from its episodes.
    pub summary: Summary,
    /// The run's protocol (`report::protocol::PROTOCOL_KEYS`), compared by `check`; absent
    /// in files saved before vlm-eval recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<Value>,
}

/// Where a result set came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceKind {
    /// A run folder.
    Run,
    /// A baseline file.
    Baseline,
    /// A `summary.json` alone (means and SEs, no per-episode values).
    Summary,
}

/// Results to compare: per-episode points when known, and a summary.
#[derive(Clone, Debug)]
pub struct ResultSet {
    /// The path given.
    pub path: PathBuf,
    /// What it is.
    pub kind: SourceKind,
    /// Run name.
    pub name: String,
    /// Model name.
    pub model: String,
    /// Config excerpt (`CONFIG_KEYS`, `prompt_sha256`, `textures`); Null for a summary.
    pub config: Value,
    /// Finished non-error episodes, sorted by seed (empty for a summary).
    pub points: Vec<EpisodePoint>,
    /// Summary of all complete episodes.
    pub summary: Summary,
    /// Planned seeds without an `episode.json` (a partial run); empty unless a run folder.
    pub unfinished: Vec<i64>,
    /// The protocol (`report::protocol`): from run.json, from a baseline file that stores it,
    /// or from the run.json beside a summary.json; None when unknown.
    pub protocol: Option<Value>,
}

/// The config excerpt stored in baseline files.
pub fn config_excerpt(info: &Value) -> Value {
    let mut out = serde_json::Map::new();
    for key in CONFIG_KEYS {
        if let Some(v) = info["config"].get(key) {
            out.insert(key.into(), v.clone());
        }
    }
    for key in ["prompt_sha256", "textures"] {
        if let Some(v) = info.get(key) {
            out.insert(key.into(), v.clone());
        }
    }
    Value::Object(out)
}

/// Planned seeds (config.seeds plus seed folders found) that have no `episode.json`.
pub fn unfinished_seeds(run: &RunData) -> Vec<i64> {
    let done: std::collections::BTreeSet<i64> = run.episodes.iter().map(|e| e.seed).collect();
    let mut out: std::collections::BTreeSet<i64> = run.incomplete.iter().copied().collect();
    for s in run.planned_seeds().unwrap_or_default() {
        if !done.contains(&s) {
            out.insert(s);
        }
    }
    out.into_iter().collect()
}

impl ResultSet {
    /// From an opened run folder.
    pub fn from_run(run: &RunData) -> ResultSet {
        let model = run.model();
        ResultSet {
            path: run.dir.clone(),
            kind: SourceKind::Run,
            name: run.name(),
            config: config_excerpt(&run.info),
            points: run
                .episodes
                .iter()
                .filter(|e| e.termination != Termination::Error)
                .map(EpisodePoint::from_episode)
                .collect(),
            summary: summarize(&model, &run.episodes),
            model,
            unfinished: unfinished_seeds(run),
            protocol: Some(protocol_of(&run.info)),
        }
    }

    /// Per-episode points by reference.
    pub fn point_refs(&self) -> Vec<&EpisodePoint> {
        self.points.iter().collect()
    }

    /// The baseline file for these results (a run folder or a baseline file).
    pub fn to_baseline(&self) -> BaselineFile {
        BaselineFile {
            format: BASELINE_FORMAT.into(),
            version: BASELINE_VERSION,
            run: self.name.clone(),
            model: self.model.clone(),
            source: self.path.display().to_string(),
            vlm_eval_version: None,
            finished_at: None,
            config: self.config.clone(),
            episodes: self.points.clone(),
            summary: self.summary.clone(),
            protocol: self.protocol.clone(),
        }
    }
}

/// The baseline file of a run folder.
pub fn baseline_from_run(run: &RunData) -> BaselineFile {
    let mut b = ResultSet::from_run(run).to_baseline();
    b.vlm_eval_version = run.info["vlm_eval_version"].as_str().map(str::to_string);
    b.finished_at = run.info["finished_at"].as_str().map(str::to_string);
    b
}

/// Write a baseline file atomically.
pub fn save_baseline(path: &Path, b: &BaselineFile) -> Result<(), ReadError> {
    crate::results::store::write_json(path, b).map_err(|e| ReadError::Write {
        path: path.display().to_string(),
        message: e.to_string(),
    })
}

fn corrupt(path: &Path, message: impl Into<String>) -> ReadError {
    ReadError::Corrupt {
        path: path.display().to_string(),
        message: message.into(),
    }
}

/// Load results from a run folder, a baseline file or a `summary.json`.
pub fn load_results(path: &Path) -> Result<ResultSet, ReadError> {
    if !path.exists() {
        return Err(crate::results::run::missing(
            path,
            "no such file or folder: pass a run folder, a baseline file (`vlm-eval baseline save`) or a summary.json",
        ));
    }
    if path.is_dir() {
        return super::validate::open_checked_run(path).map(|r| ResultSet::from_run(&r));
    }
    let text = std::fs::read_to_string(path).map_err(|source| ReadError::Io {
        path: path.display().to_string(),
        source,
    })?;
    let v: Value =
        serde_json::from_str(&text).map_err(|e| corrupt(path, format!("not valid JSON ({e})")))?;
    if v["format"] == BASELINE_FORMAT {
        let version = v["version"].as_u64().unwrap_or(0);
        if version == 0 || version > BASELINE_VERSION as u64 {
            return Err(corrupt(
                path,
                format!("baseline version {version} is not one this vlm-eval reads (1): upgrade vlm-eval or save the baseline again"),
            ));
        }
        super::validate::check_baseline_json(path, &v)?;
        let b: BaselineFile = serde_json::from_value(v).map_err(|e| {
            corrupt(
                path,
                format!("baseline file does not match format 1 ({e}): save it again with `vlm-eval baseline save`"),
            )
        })?;
        if b.episodes.is_empty() {
            return Err(corrupt(path, "baseline file has no episodes"));
        }
        let mut points = b.episodes;
        points.sort_by_key(|p| p.seed);
        return Ok(ResultSet {
            path: path.to_path_buf(),
            kind: SourceKind::Baseline,
            name: b.run,
            model: b.model,
            config: b.config,
            points,
            summary: b.summary,
            unfinished: Vec::new(),
            protocol: b.protocol,
        });
    }
    if v.get("progression_mean").is_some() {
        super::validate::check_summary_json(
            path,
            &v,
            "",
            "the file was edited or damaged: pass the run folder instead, or rerun the run's command to rewrite it",
        )?;
        let s: Summary = serde_json::from_value(v)
            .map_err(|e| corrupt(path, format!("summary.json is incomplete ({e})")))?;
        if s.completed == 0 {
            return Err(corrupt(path, "summary has no completed episodes"));
        }
        let name = path
            .parent()
            .and_then(|p| p.file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| path.display().to_string());
        let protocol = path
            .parent()
            .and_then(|dir| std::fs::read_to_string(dir.join("run.json")).ok())
            .and_then(|text| serde_json::from_str::<Value>(&text).ok())
            .map(|info| protocol_of(&info));
        return Ok(ResultSet {
            path: path.to_path_buf(),
            kind: SourceKind::Summary,
            name,
            model: s.model.clone(),
            config: Value::Null,
            points: Vec::new(),
            summary: s,
            unfinished: Vec::new(),
            protocol,
        });
    }
    Err(corrupt(
        path,
        "is neither a run folder, a baseline file (`vlm-eval baseline save`) nor a summary.json",
    ))
}

/// Config keys whose values differ between two excerpts (ignoring `model` and `seeds`, which
/// comparisons change on purpose, and, with `skip_protocol`, the protocol settings that `check`
/// compares through `report::protocol`), as `key: a vs b` lines.
pub fn config_differences(a: &Value, b: &Value, skip_protocol: bool) -> Vec<String> {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (k, va) in a {
        if k == "model"
            || k == "seeds"
            || (skip_protocol && super::protocol::PROTOCOL_KEYS.contains(&k.as_str()))
        {
            continue;
        }
        if let Some(vb) = b.get(k) {
            if va != vb {
                out.push(format!("{k}: {va} vs {vb}"));
            }
        }
    }
    out
}
