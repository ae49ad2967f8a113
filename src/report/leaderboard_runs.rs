//! Which folders the leaderboard ranks: the run folders under the paths given, and what it leaves
//! out and lists as skipped, with why: folders that are not runs (a `vlm-eval frames` folder, a
//! folder of other files) and runs that are parts of another run (the shards of a sharded run,
//! the inputs of a merged run), whose episodes would otherwise be ranked twice or as a part
//! against the whole.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::results::live::is_run_dir;
use crate::results::run::RunData;
use crate::results::summary::ReadError;

/// A run that could not be ranked (no complete episode yet, or unreadable), or a folder left out
/// on purpose, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Unranked {
    /// The run folder.
    pub dir: PathBuf,
    /// Why (one line).
    pub why: String,
}

/// The run folders under `paths` (a run folder itself, else its direct sub-folders that are
/// runs, each found once), and the folders that are not runs, each with why. Hidden folders and
/// symbolic links are passed over in silence. A path that is missing or not a folder is an error.
pub fn find_candidates(paths: &[PathBuf]) -> Result<(Vec<PathBuf>, Vec<Unranked>), ReadError> {
    let (mut runs, mut skipped) = (Vec::new(), Vec::new());
    let mut seen = std::collections::BTreeSet::new();
    let mut add = |dir: PathBuf, runs: &mut Vec<PathBuf>| {
        let key = std::fs::canonicalize(&dir).unwrap_or_else(|_| dir.clone());
        if seen.insert(key) {
            runs.push(dir);
        }
    };
    for path in paths {
        let meta = std::fs::metadata(path).map_err(|source| {
            if source.kind() == std::io::ErrorKind::NotFound {
                crate::results::run::missing(
                    path,
                    "no such folder: pass run folders or folders of runs (results/)",
                )
            } else {
                ReadError::Io {
                    path: path.display().to_string(),
                    source,
                }
            }
        })?;
        if !meta.is_dir() {
            return Err(ReadError::Corrupt {
                path: path.display().to_string(),
                message: "not a folder: pass a run folder or a folder of runs (results/)".into(),
            });
        }
        if is_run_dir(path) {
            add(path.clone(), &mut runs);
            continue;
        }
        let entries = std::fs::read_dir(path).map_err(|source| ReadError::Io {
            path: path.display().to_string(),
            source,
        })?;
        let mut subs: Vec<PathBuf> = entries
            .flatten()
            .filter(|e| e.file_type().map(|t| t.is_dir()).unwrap_or(false))
            .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
            .map(|e| e.path())
            .collect();
        subs.sort();
        let before = runs.len();
        for dir in subs {
            if is_run_dir(&dir) {
                add(dir, &mut runs);
            } else {
                let why = not_a_run(&dir);
                skipped.push(Unranked { dir, why });
            }
        }
        if runs.len() == before && !skipped.iter().any(|s| s.dir.starts_with(path)) {
            skipped.push(Unranked {
                dir: path.clone(),
                why: not_a_run(path),
            });
        }
    }
    Ok((runs, skipped))
}

/// Why a folder without `run.json` is not ranked.
fn not_a_run(dir: &Path) -> String {
    if dir.join("preview.jsonl").is_file() {
        return "a `vlm-eval frames` folder (frames and preview.jsonl), not a run".into();
    }
    let holds_runs = std::fs::read_dir(dir)
        .map(|it| it.flatten().any(|e| is_run_dir(&e.path())))
        .unwrap_or(false);
    if holds_runs {
        return format!(
            "a folder of runs, not a run: pass {} itself to rank the runs in it",
            dir.display()
        );
    }
    "not a run folder (no run.json)".into()
}

/// The runs a merged run was made from, as its `run.json` lists them (`merged_from`): each
/// input's folder as given to `merge` and its run name.
fn merged_inputs(run: &RunData) -> Vec<(PathBuf, String)> {
    run.info["merged_from"]
        .as_array()
        .map(|list| {
            list.iter()
                .filter_map(|m| {
                    let dir = PathBuf::from(m["run"].as_str()?);
                    let name = m["run_name"].as_str().unwrap_or_default().to_string();
                    Some((dir, name))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `run` is the input `(dir, name)` of a merge: the same folder, or (the merge having
/// been run from another working folder) the same folder name and run name.
fn is_input(run: &RunData, dir: &Path, name: &str) -> bool {
    let canon = |p: &Path| std::fs::canonicalize(p).ok();
    if canon(dir).is_some() && canon(dir) == canon(&run.dir) {
        return true;
    }
    dir.file_name().is_some() && dir.file_name() == run.dir.file_name() && run.name() == name
}

/// `shard I/N` when the run is one shard of a sharded run (`config.shard`).
fn shard_of(run: &RunData) -> Option<String> {
    let s = run.info["config"].get("shard").filter(|s| s.is_object())?;
    let num = |k: &str| s[k].as_u64().map(|n| n.to_string()).unwrap_or("?".into());
    Some(format!("shard {}/{}", num("index"), num("count")))
}

/// Split the runs into those ranked and the parts left out: a run listed as an input of a merged
/// run among them (ranked as that run), and any other shard (ranked once merged).
pub fn leave_out_parts(runs: Vec<RunData>) -> (Vec<RunData>, Vec<Unranked>) {
    let merges: Vec<(String, Vec<(PathBuf, String)>)> = runs
        .iter()
        .filter(|r| r.info.get("merged_from").is_some_and(Value::is_array))
        .map(|r| (r.name(), merged_inputs(r)))
        .collect();
    let (mut kept, mut skipped) = (Vec::new(), Vec::new());
    for run in runs {
        let merged_into = merges
            .iter()
            .find(|(_, inputs)| inputs.iter().any(|(dir, name)| is_input(&run, dir, name)));
        let why = match (merged_into, shard_of(&run)) {
            (Some((merged, _)), Some(shard)) => Some(format!(
                "{shard} of the merged run {merged}, which is ranked in its place"
            )),
            (Some((merged, _)), None) => Some(format!(
                "an input of the merged run {merged}, which is ranked in its place"
            )),
            (None, Some(shard)) => Some(format!(
                "{shard}: a part of a run's seeds; merge the shards with `vlm-eval merge` to rank the whole run"
            )),
            (None, None) => None,
        };
        match why {
            Some(why) => skipped.push(Unranked {
                dir: run.dir.clone(),
                why,
            }),
            None => kept.push(run),
        }
    }
    (kept, skipped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(dir: &str, info: Value) -> RunData {
        RunData {
            dir: PathBuf::from(dir),
            info,
            episodes: Vec::new(),
            incomplete: Vec::new(),
        }
    }

    #[test]
    fn shards_and_merge_inputs_are_left_out_with_why() {
        let shard = |i: u32| {
            run(
                &format!("/nowhere/r/m_shard{i}of2"),
                json!({"config": {"run_name": format!("m_shard{i}of2"), "shard": {"index": i, "count": 2}}}),
            )
        };
        let merged = run(
            "/nowhere/r/m",
            json!({"config": {"run_name": "m"}, "merged_from": [
                {"run": "results/m_shard0of2", "run_name": "m_shard0of2"},
                {"run": "results/m_shard1of2", "run_name": "m_shard1of2"}]}),
        );
        let plain = run("/nowhere/r/other", json!({"config": {"run_name": "other"}}));
        let lone = run(
            "/nowhere/r/x_shard1of3",
            json!({"config": {"run_name": "x_shard1of3", "shard": {"index": 1, "count": 3}}}),
        );
        let (kept, skipped) = leave_out_parts(vec![shard(0), merged, shard(1), plain, lone]);
        let names: Vec<String> = kept.iter().map(RunData::name).collect();
        assert_eq!(names, ["m", "other"]);
        let why: Vec<&str> = skipped.iter().map(|s| s.why.as_str()).collect();
        assert_eq!(
            why,
            [
                "shard 0/2 of the merged run m, which is ranked in its place",
                "shard 1/2 of the merged run m, which is ranked in its place",
                "shard 1/3: a part of a run's seeds; merge the shards with `vlm-eval merge` to rank the whole run",
            ]
        );
    }
}
