//! Opening a run folder for reading (DESIGN §4): `run.json`, complete episodes, unfinished
//! episodes and trajectories, with errors that name the file and say what to do.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::formats::EpisodeResult;

use super::summary::ReadError;

/// A run folder as read from disk.
#[derive(Clone, Debug)]
pub struct RunData {
    /// The run folder.
    pub dir: PathBuf,
    /// `run.json` as written (config, versions, seeds, times).
    pub info: Value,
    /// Complete episodes (those with an `episode.json`), sorted by seed.
    pub episodes: Vec<EpisodeResult>,
    /// Seeds whose folder exists without an `episode.json` (interrupted or running), sorted.
    pub incomplete: Vec<i64>,
}

impl RunData {
    /// Model name: from `run.json`'s config, else from the episodes, else "unknown".
    pub fn model(&self) -> String {
        self.info["config"]["model"]
            .as_str()
            .map(str::to_string)
            .or_else(|| self.episodes.first().map(|e| e.model.clone()))
            .unwrap_or_else(|| "unknown".into())
    }

    /// Run name: `config.run_name`, else the folder name.
    pub fn name(&self) -> String {
        self.info["config"]["run_name"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| {
                self.dir
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| self.dir.display().to_string())
            })
    }

    /// Seeds the run was asked to play (`config.seeds`, a list or a range), when recorded.
    pub fn planned_seeds(&self) -> Option<Vec<i64>> {
        seeds_of(&self.info["config"]["seeds"])
    }

    /// The folder of one episode.
    pub fn episode_dir(&self, seed: i64) -> PathBuf {
        episode_dir(&self.dir, seed)
    }

    /// The trajectory lines of one episode.
    pub fn trajectory(&self, seed: i64) -> Result<Vec<Value>, ReadError> {
        read_trajectory(&self.dir, seed)
    }
}

/// The most seeds one run may plan (`run --seeds`, `--seed-list`); a recorded range longer
/// than this is not read.
pub const MAX_SEEDS: u64 = 1_000_000;

/// A seed set as run.json records it (`config.seeds`, `config.shard.all_seeds`): a consecutive
/// run `a, a+1, …, b-1` of two or more seeds as the range `{"start": a, "end": b}` (end
/// excluded), anything else as a list.
pub fn seeds_value(seeds: &[i64]) -> Value {
    let consecutive =
        seeds.len() >= 2 && seeds.windows(2).all(|w| w[0].checked_add(1) == Some(w[1]));
    match (consecutive, seeds.first(), seeds.last()) {
        (true, Some(&start), Some(&last)) => serde_json::json!({"start": start, "end": last + 1}),
        _ => Value::from(seeds.to_vec()),
    }
}

/// Read a seed set as [`seeds_value`] writes it, or as a list (every run.json before ranges).
/// `None` for anything else, and for a range of more than [`MAX_SEEDS`] seeds.
pub fn seeds_of(v: &Value) -> Option<Vec<i64>> {
    if let Some(list) = v.as_array() {
        return Some(list.iter().filter_map(Value::as_i64).collect());
    }
    let (start, end) = (v.get("start")?.as_i64()?, v.get("end")?.as_i64()?);
    let len = end.checked_sub(start)?;
    if !(0..=MAX_SEEDS as i64).contains(&len) {
        return None;
    }
    Some((start..end).collect())
}

/// `RUN/episodes/seed_<S>`.
pub fn episode_dir(run: &Path, seed: i64) -> PathBuf {
    run.join("episodes").join(format!("seed_{seed}"))
}

/// Whether a trajectory's `frame.path` is a plain `frames/<file>.png` inside its episode
/// folder (as the writer records it): readers join nothing else under the episode folder, so
/// a crafted run folder cannot make them read a file outside it.
pub fn is_frame_rel(rel: &str) -> bool {
    match rel.strip_prefix("frames/") {
        Some(file) => {
            file.len() > ".png".len()
                && file.ends_with(".png")
                && !file.contains("..")
                && !file.contains(['/', '\\', '\0'])
        }
        None => false,
    }
}

fn corrupt(path: &Path, message: impl Into<String>) -> ReadError {
    ReadError::Corrupt {
        path: path.display().to_string(),
        message: message.into(),
    }
}

fn io(path: &Path, source: std::io::Error) -> ReadError {
    ReadError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// What `open_run` says of a path that does not exist.
pub const MISSING_RUN: &str =
    "no such folder: pass a run folder written by `vlm-eval run` (results/<run>, named <model>_<settings> unless --run-name was given)";

/// The error for a path that does not exist (`message`: what is missing and what to pass).
pub fn missing(path: &Path, message: &str) -> ReadError {
    ReadError::Missing {
        path: path.display().to_string(),
        message: message.to_string(),
    }
}

/// Why a run folder has no finished episode: its episodes are still playing (a `vlm-eval run`
/// holds it), or they were interrupted, or none was started.
fn not_ready(dir: &Path, unfinished: usize) -> ReadError {
    let state = match (super::lock::holder(dir), unfinished) {
        (Some(h), 0) => {
            format!("0 playing: the run has just started ({h}); try again once an episode has finished")
        }
        (Some(h), n) => format!(
            "{n} playing: `vlm-eval run` is still writing it ({h}); try again once an episode has finished"
        ),
        (None, 0) => {
            "no episode was started: rerun the same `vlm-eval run` command to play them".to_string()
        }
        (None, n) => format!(
            "{n} unfinished, interrupted: rerun the same `vlm-eval run` command to resume them"
        ),
    };
    ReadError::NotReady {
        path: dir.display().to_string(),
        state,
    }
}

/// Open a run folder: `run.json` must exist and parse; every `episode.json` must parse.
/// A missing folder ([`ReadError::Missing`]), a run with no finished episode yet
/// ([`ReadError::NotReady`]: still playing, or interrupted) and a corrupt file
/// ([`ReadError::Corrupt`]) are different errors, each one line naming the path.
pub fn open_run(dir: &Path) -> Result<RunData, ReadError> {
    if !dir.exists() {
        return Err(missing(dir, MISSING_RUN));
    }
    if !dir.is_dir() {
        return Err(corrupt(
            dir,
            "not a folder: pass a run folder (results/<run>)",
        ));
    }
    let run_json = dir.join("run.json");
    let text = match std::fs::read_to_string(&run_json) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(corrupt(
                &run_json,
                "missing: this is not a run folder (expected results/<run>/run.json)",
            ))
        }
        Err(e) => return Err(io(&run_json, e)),
    };
    let info: Value = serde_json::from_str(&text)
        .map_err(|e| corrupt(&run_json, format!("not valid JSON ({e})")))?;
    if !info.is_object() {
        return Err(corrupt(&run_json, "not a JSON object"));
    }
    let episodes = super::summary::read_episodes(dir)?;
    let mut incomplete = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir.join("episodes")) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(seed) = name
                .strip_prefix("seed_")
                .and_then(|s| s.parse::<i64>().ok())
            else {
                continue;
            };
            if !entry.path().join("episode.json").is_file() {
                incomplete.push(seed);
            }
        }
    }
    incomplete.sort_unstable();
    if episodes.is_empty() {
        return Err(not_ready(dir, incomplete.len()));
    }
    Ok(RunData {
        dir: dir.to_path_buf(),
        info,
        episodes,
        incomplete,
    })
}

/// Read `trajectory.jsonl` of one episode. A last line cut short (an interrupted write) is
/// dropped; a bad line before it is an error naming the file and line.
pub fn read_trajectory(run: &Path, seed: i64) -> Result<Vec<Value>, ReadError> {
    let path = episode_dir(run, seed).join("trajectory.jsonl");
    let text = std::fs::read_to_string(&path).map_err(|e| io(&path, e))?;
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let mut out = Vec::with_capacity(lines.len());
    for (i, line) in lines.iter().enumerate() {
        match serde_json::from_str::<Value>(line) {
            Ok(v) if v.is_object() => out.push(v),
            _ if i + 1 == lines.len() && !text.ends_with('\n') => break,
            Ok(_) => {
                return Err(corrupt(
                    &path,
                    format!("line {} is not a JSON object", i + 1),
                ))
            }
            Err(e) => return Err(corrupt(&path, format!("line {}: {e}", i + 1))),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_sets_round_trip_as_ranges_or_lists() {
        use serde_json::json;
        assert_eq!(seeds_value(&[0, 1, 2]), json!({"start": 0, "end": 3}));
        assert_eq!(seeds_value(&[-2, -1]), json!({"start": -2, "end": 0}));
        assert_eq!(seeds_value(&[5]), json!([5]));
        assert_eq!(seeds_value(&[2, 1]), json!([2, 1]));
        assert_eq!(seeds_value(&[0, 2, 3]), json!([0, 2, 3]));
        for seeds in [vec![0, 1, 2], vec![7], vec![3, 9, 4], vec![]] {
            assert_eq!(seeds_of(&seeds_value(&seeds)), Some(seeds));
        }
        // Lists as every run.json before ranges wrote them.
        assert_eq!(seeds_of(&json!([4, 1])), Some(vec![4, 1]));
        // A range is never materialised past the bound, nor read backwards.
        assert_eq!(seeds_of(&json!({"start": 0, "end": 100_000_000})), None);
        assert_eq!(seeds_of(&json!({"start": 5, "end": 1})), None);
        assert_eq!(seeds_of(&json!({"start": i64::MIN, "end": i64::MAX})), None);
        assert_eq!(seeds_of(&json!("0..3")), None);
    }

    #[test]
    fn frame_paths_are_plain_files_under_frames() {
        assert!(is_frame_rel("frames/step_0003.png"));
        for bad in [
            "../../etc/passwd",
            "frames/../../x.png",
            "frames/a/b.png",
            "frames/a\\b.png",
            "frames/.png",
            "/abs.png",
            "frames/x.txt",
            "episode.json",
        ] {
            assert!(!is_frame_rel(bad), "{bad}");
        }
    }

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("vlm-eval-run-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn missing_and_corrupt_runs_name_the_file() {
        let d = tmp("bad");
        let e = open_run(&d.join("nope")).unwrap_err().to_string();
        assert!(e.contains("nope") && e.contains("no such folder"), "{e}");
        assert!(!e.contains("corrupt"), "{e}");
        let e = open_run(&d).unwrap_err().to_string();
        assert!(
            e.contains("run.json") && e.contains("not a run folder"),
            "{e}"
        );
        std::fs::write(d.join("run.json"), "{oops").unwrap();
        let e = open_run(&d).unwrap_err().to_string();
        assert!(
            e.contains("run.json") && e.contains("not valid JSON"),
            "{e}"
        );
        std::fs::write(d.join("run.json"), "{}").unwrap();
        std::fs::create_dir_all(d.join("episodes/seed_3")).unwrap();
        let e = open_run(&d).unwrap_err().to_string();
        assert!(
            e.contains("no finished episode yet (1 unfinished, interrupted"),
            "{e}"
        );
        assert!(!e.contains("corrupt"), "{e}");
        std::fs::write(d.join("episodes/seed_3/episode.json"), "[1,").unwrap();
        let e = open_run(&d).unwrap_err().to_string();
        assert!(e.contains("seed_3") && e.contains("episode.json"), "{e}");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn truncated_last_trajectory_line_is_dropped() {
        let d = tmp("traj");
        let ep = episode_dir(&d, 0);
        std::fs::create_dir_all(&ep).unwrap();
        std::fs::write(
            ep.join("trajectory.jsonl"),
            "{\"turn\":0}\n{\"turn\":1,\"obs",
        )
        .unwrap();
        assert_eq!(read_trajectory(&d, 0).unwrap().len(), 1);
        std::fs::write(
            ep.join("trajectory.jsonl"),
            "{\"turn\":0}\nxx\n{\"turn\":2}\n",
        )
        .unwrap();
        let e = read_trajectory(&d, 0).unwrap_err().to_string();
        assert!(
            e.contains("trajectory.jsonl") && e.contains("line 2"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&d);
    }
}
