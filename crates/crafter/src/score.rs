//! The Crafter paper's metrics (Hafner, 2021) from crafter `stats.jsonl` files: the lines that
//! crafter's `Recorder` (and vlmcrafter's `Recorder`/`VectorRecorder`) append, one per finished
//! episode: `{"length": .., "reward": .., "achievement_collect_coal": .., ...}`.
//!
//! - success rate of an achievement: % of episodes in which its count is ≥ 1;
//! - score: `exp(mean(ln(1 + p))) − 1` over the 22 success rates `p` in percent;
//! - reward and length: mean and standard deviation (ddof 0) over episodes;
//! - with two or more files (runs, e.g. seeds), each file's score and their standard deviation
//!   (ddof 0), as the paper's "± over seeds".
//!
//! Reading rules (the CLI's `vlm-eval score` and Python's `vlmcrafter.score.compute` both call
//! this module, so they accept and refuse the same files with the same messages):
//! - a path named twice (a folder given with its own `stats.jsonl`, or the same file twice) is
//!   read once, where it first appears;
//! - a line that is not a stats line is an error naming the file and the line; so is a line
//!   that is not UTF-8 text (a binary file);
//! - the last line, when it does not end in a newline and is the start of a JSON object that
//!   does not parse (a run still writing, or killed mid-line), is skipped and counted in
//!   [`CrafterScore::warning`];
//! - a file without one episode is an error naming it (crafter writes a line when an episode
//!   ends), so `files` and `run_scores` line up one to one.

use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use crate::ACHIEVEMENT_NAMES;

/// The stats file name crafter's Recorder writes.
pub const STATS_FILE: &str = "stats.jsonl";

/// Why stats files could not be scored.
#[derive(Debug, thiserror::Error)]
pub enum ScoreError {
    /// A line that is not a crafter stats line.
    #[error("{path}:{line}: {reason} (a crafter stats line is a JSON object with \"length\", \"reward\" and the 22 \"achievement_*\" counts)")]
    BadLine {
        /// The file.
        path: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// A file or folder that cannot be read.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// A folder with no stats.jsonl under it.
    #[error("{0}: no stats.jsonl in this folder or below it; give crafter Recorder folders or stats.jsonl files")]
    NoStats(String),
    /// No path given.
    #[error("no stats files given: pass crafter Recorder folders or stats.jsonl files")]
    NoPaths,
    /// A file without one episode.
    #[error("{0}: no episodes in this file (crafter's Recorder writes a line when an episode ends): leave it out, or score it once an episode has ended")]
    Empty(String),
}

/// One finished episode's line.
#[derive(Clone, Debug, PartialEq)]
pub struct EpisodeStats {
    /// Steps.
    pub length: u64,
    /// Summed reward (crafter rounds it to 0.1).
    pub reward: f64,
    /// Achievement counts in `ACHIEVEMENT_NAMES` order.
    pub achievements: Vec<u64>,
}

/// The paper's metrics over a set of stats files.
#[derive(Clone, Debug, PartialEq)]
pub struct CrafterScore {
    /// The files read, in order.
    pub files: Vec<PathBuf>,
    /// Episodes over all files.
    pub episodes: usize,
    /// Success rate (% of episodes with the achievement ≥ 1) per achievement, crafter's order.
    pub success_rates: Vec<(&'static str, f64)>,
    /// The Crafter score (%) over all episodes pooled.
    pub score: f64,
    /// Each file's score (%), in `files` order.
    pub run_scores: Vec<f64>,
    /// Cut last lines skipped (file, 1-based line number).
    pub skipped: Vec<(PathBuf, usize)>,
    /// Standard deviation (ddof 0) of the files' scores; None with one file.
    pub score_std: Option<f64>,
    /// Mean episode reward.
    pub reward_mean: f64,
    /// Standard deviation (ddof 0) of episode rewards.
    pub reward_std: f64,
    /// Mean episode length.
    pub length_mean: f64,
    /// Standard deviation (ddof 0) of episode lengths.
    pub length_std: f64,
}

/// The stats files named by `inputs`: a file as given, a folder as every `stats.jsonl` in it or
/// below it (sorted); a file named twice (by its real path) is kept where it first appears.
pub fn stats_files(inputs: &[PathBuf]) -> Result<Vec<PathBuf>, ScoreError> {
    let mut files = Vec::new();
    for input in inputs {
        if input.is_dir() {
            let mut found = Vec::new();
            walk(input, &mut found)?;
            if found.is_empty() {
                return Err(ScoreError::NoStats(input.display().to_string()));
            }
            files.extend(found);
        } else {
            files.push(input.clone());
        }
    }
    let mut seen = std::collections::HashSet::new();
    // A path that cannot be resolved (a missing file) stays, to be reported when it is read.
    files.retain(|f| seen.insert(std::fs::canonicalize(f).unwrap_or_else(|_| f.clone())));
    Ok(files)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), ScoreError> {
    let io = |source| ScoreError::Io {
        path: dir.display().to_string(),
        source,
    };
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(io)?;
    entries.sort();
    for path in entries {
        if path.is_dir() {
            walk(&path, out)?;
        } else if path.file_name().and_then(|n| n.to_str()) == Some(STATS_FILE) {
            out.push(path);
        }
    }
    Ok(())
}

/// Read one stats file; a bad line is an error naming the file and the line. A cut last line
/// (see the module doc) is skipped: its line number is the second value.
pub fn read_stats(path: &Path) -> Result<(Vec<EpisodeStats>, Option<usize>), ScoreError> {
    let shown = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|source| ScoreError::Io {
        path: shown.clone(),
        source,
    })?;
    let mut lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
    // The text after the last newline: empty for a whole file, a cut line otherwise.
    let tail = lines.pop().filter(|t| !t.is_empty());
    let mut episodes = Vec::new();
    let bad = |line: usize, reason: String| ScoreError::BadLine {
        path: shown.clone(),
        line,
        reason,
    };
    for (i, raw) in lines.iter().enumerate() {
        let text = std::str::from_utf8(raw).map_err(|_| bad(i + 1, NOT_TEXT.to_string()))?;
        if text.trim().is_empty() {
            continue;
        }
        episodes.push(parse_line(text).map_err(|r| bad(i + 1, r))?);
    }
    let mut skipped = None;
    if let Some(raw) = tail {
        let number = lines.len() + 1;
        let text = match std::str::from_utf8(raw) {
            Ok(text) => text,
            // Cut inside a multi-byte character: the text before it.
            Err(e) if e.error_len().is_none() => {
                std::str::from_utf8(&raw[..e.valid_up_to()]).unwrap_or("")
            }
            Err(_) => return Err(bad(number, NOT_TEXT.to_string())),
        };
        if !text.trim().is_empty() {
            match parse_line(text) {
                Ok(e) => episodes.push(e),
                Err(_) if text.trim_start().starts_with('{') => skipped = Some(number),
                Err(r) => return Err(bad(number, r)),
            }
        }
    }
    if episodes.is_empty() {
        return Err(ScoreError::Empty(shown));
    }
    Ok((episodes, skipped))
}

const NOT_TEXT: &str = "not UTF-8 text (a binary file?)";

/// One stats line.
pub fn parse_line(line: &str) -> Result<EpisodeStats, String> {
    let value: Value = serde_json::from_str(line).map_err(|e| format!("not JSON ({e})"))?;
    let obj = value
        .as_object()
        .ok_or_else(|| "not a JSON object".to_string())?;
    let count = |key: &str| -> Result<u64, String> {
        match obj.get(key) {
            None => Err(format!("no {key:?}")),
            Some(v) => v
                .as_u64()
                .ok_or_else(|| format!("{key:?} is {v}, not a count (an integer >= 0)")),
        }
    };
    let length = count("length")?;
    let reward = match obj.get("reward") {
        None => return Err("no \"reward\"".into()),
        Some(v) => v
            .as_f64()
            .ok_or_else(|| format!("\"reward\" is {v}, not a number"))?,
    };
    let achievements = ACHIEVEMENT_NAMES
        .iter()
        .map(|name| count(&format!("achievement_{name}")))
        .collect::<Result<_, _>>()?;
    Ok(EpisodeStats {
        length,
        reward,
        achievements,
    })
}

/// Success rates (%) per achievement, crafter's order.
pub fn success_rates(episodes: &[EpisodeStats]) -> Vec<(&'static str, f64)> {
    let n = episodes.len().max(1) as f64;
    ACHIEVEMENT_NAMES
        .iter()
        .enumerate()
        .map(|(k, name)| {
            let hits = episodes.iter().filter(|e| e.achievements[k] >= 1).count();
            (*name, 100.0 * hits as f64 / n)
        })
        .collect()
}

/// The Crafter score (%) of success rates in percent: `exp(mean(ln(1 + p))) − 1`.
pub fn score_of(rates: &[(&str, f64)]) -> f64 {
    let sum: f64 = rates.iter().map(|(_, p)| (1.0 + p).ln()).sum();
    (sum / rates.len() as f64).exp() - 1.0
}

fn mean_std(values: impl Iterator<Item = f64> + Clone) -> (f64, f64) {
    let n = values.clone().count().max(1) as f64;
    let mean = values.clone().sum::<f64>() / n;
    let var = values.map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
    (mean, var.sqrt())
}

/// The metrics of the files named by `inputs` (files or folders; see [`stats_files`]).
pub fn compute(inputs: &[PathBuf]) -> Result<CrafterScore, ScoreError> {
    let files = stats_files(inputs)?;
    if files.is_empty() {
        return Err(ScoreError::NoPaths);
    }
    let mut runs = Vec::with_capacity(files.len());
    let mut skipped = Vec::new();
    for f in &files {
        let (run, cut) = read_stats(f)?;
        runs.push(run);
        skipped.extend(cut.map(|line| (f.clone(), line)));
    }
    let all: Vec<EpisodeStats> = runs.iter().flatten().cloned().collect();
    let rates = success_rates(&all);
    let run_scores: Vec<f64> = runs.iter().map(|r| score_of(&success_rates(r))).collect();
    let score_std = (run_scores.len() >= 2).then(|| mean_std(run_scores.iter().copied()).1);
    let (reward_mean, reward_std) = mean_std(all.iter().map(|e| e.reward));
    let (length_mean, length_std) = mean_std(all.iter().map(|e| e.length as f64));
    Ok(CrafterScore {
        files,
        episodes: all.len(),
        score: score_of(&rates),
        success_rates: rates,
        run_scores,
        skipped,
        score_std,
        reward_mean,
        reward_std,
        length_mean,
        length_std,
    })
}

impl CrafterScore {
    /// The warning for the cut last lines skipped (None when none was): one line that counts
    /// them and names each (`file:line`).
    pub fn warning(&self) -> Option<String> {
        if self.skipped.is_empty() {
            return None;
        }
        let n = self.skipped.len();
        let at: Vec<String> = self
            .skipped
            .iter()
            .map(|(f, line)| format!("{}:{line}", f.display()))
            .collect();
        Some(format!(
            "skipped {n} cut last line{} (a run still writing, or killed mid-line): {}",
            if n == 1 { "" } else { "s" },
            at.join(", ")
        ))
    }

    /// The JSON object `vlm-eval score --json` prints (the keys of Python's `compute`).
    pub fn to_json(&self) -> Value {
        let rates: Map<String, Value> = self
            .success_rates
            .iter()
            .map(|(n, p)| (n.to_string(), json!(p)))
            .collect();
        let files: Vec<String> = self.files.iter().map(|f| f.display().to_string()).collect();
        json!({
            "files": files,
            "episodes": self.episodes,
            "score": self.score,
            "score_std": self.score_std,
            "run_scores": self.run_scores,
            "reward_mean": self.reward_mean,
            "reward_std": self.reward_std,
            "length_mean": self.length_mean,
            "length_std": self.length_std,
            "success_rates": rates,
        })
    }

    /// `metric,value` rows (`vlm-eval score --csv`): the summary, then `success_<name>`.
    pub fn csv_rows(&self) -> Vec<(String, String)> {
        let mut rows = vec![
            ("episodes".to_string(), self.episodes.to_string()),
            ("files".to_string(), self.files.len().to_string()),
            ("score".to_string(), self.score.to_string()),
            (
                "score_std".to_string(),
                self.score_std.map(|s| s.to_string()).unwrap_or_default(),
            ),
            ("reward_mean".to_string(), self.reward_mean.to_string()),
            ("reward_std".to_string(), self.reward_std.to_string()),
            ("length_mean".to_string(), self.length_mean.to_string()),
            ("length_std".to_string(), self.length_std.to_string()),
        ];
        for (name, p) in &self.success_rates {
            rows.push((format!("success_{name}"), p.to_string()));
        }
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(length: u64, reward: f64, unlocked: &[usize]) -> String {
        let mut obj = Map::new();
        obj.insert("length".into(), json!(length));
        obj.insert("reward".into(), json!(reward));
        for (k, name) in ACHIEVEMENT_NAMES.iter().enumerate() {
            let v = if unlocked.contains(&k) { 2 } else { 0 };
            obj.insert(format!("achievement_{name}"), json!(v));
        }
        Value::Object(obj).to_string()
    }

    #[test]
    fn rates_and_score_by_hand() {
        let eps: Vec<EpisodeStats> = [line(10, 1.0, &[0]), line(30, 3.0, &[0, 1])]
            .iter()
            .map(|l| parse_line(l).unwrap())
            .collect();
        let rates = success_rates(&eps);
        assert_eq!(rates[0].1, 100.0);
        assert_eq!(rates[1].1, 50.0);
        assert_eq!(rates[2].1, 0.0);
        // exp((ln 101 + ln 51) / 22) - 1, evaluated independently.
        let expected = ((101f64).ln() / 22.0 + (51f64).ln() / 22.0).exp() - 1.0;
        assert!((score_of(&rates) - expected).abs() < 1e-12);
        assert_eq!(mean_std([10.0, 30.0].into_iter()), (20.0, 10.0));
    }

    #[test]
    fn bad_lines_are_named() {
        assert!(parse_line("[1]").unwrap_err().contains("not a JSON object"));
        assert!(parse_line("{\"length\": 3}")
            .unwrap_err()
            .contains("no \"reward\""));
        let l = line(3, 0.0, &[]).replace("\"achievement_place_table\":0", "\"x\":0");
        assert!(parse_line(&l)
            .unwrap_err()
            .contains("no \"achievement_place_table\""));
        let l = line(3, 0.0, &[]).replace("\"length\":3", "\"length\":-3");
        assert!(parse_line(&l).unwrap_err().contains("not a count"));
    }

    #[test]
    fn cut_last_line_skipped_duplicates_once_empty_refused() {
        let dir = std::env::temp_dir().join(format!("vlm-eval-score-test-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("a")).unwrap();
        let file = dir.join("a").join(STATS_FILE);
        let whole = format!("{}\n{}\n", line(10, 1.0, &[0]), line(30, 3.0, &[0, 1]));
        std::fs::write(&file, format!("{whole}{{\"length\": 7, \"rew")).unwrap();
        let s = compute(&[dir.clone(), file.clone(), dir.join("a")]).unwrap();
        assert_eq!((s.files.len(), s.episodes, s.run_scores.len()), (1, 2, 1));
        assert_eq!(s.skipped, vec![(file.clone(), 3)]);
        let warning = s.warning().unwrap();
        assert!(
            warning.starts_with("skipped 1 cut last line ") && warning.ends_with(":3"),
            "{warning}"
        );
        // Not cut (no newline, but it parses): counted; not JSON and not an object start: refused.
        std::fs::write(&file, format!("{whole}{}", line(5, 0.0, &[]))).unwrap();
        assert_eq!(compute(std::slice::from_ref(&file)).unwrap().episodes, 3);
        std::fs::write(&file, format!("{whole}[1]")).unwrap();
        assert!(matches!(
            compute(std::slice::from_ref(&file)),
            Err(ScoreError::BadLine { line: 3, .. })
        ));
        std::fs::write(&file, b"\xff\xfe\n").unwrap();
        let err = compute(std::slice::from_ref(&file))
            .unwrap_err()
            .to_string();
        assert!(err.contains(":1: not UTF-8 text"), "{err}");
        std::fs::write(&file, "").unwrap();
        assert!(matches!(
            compute(std::slice::from_ref(&file)),
            Err(ScoreError::Empty(_))
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
