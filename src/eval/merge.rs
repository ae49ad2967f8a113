//! `vlm-eval merge`: join the run folders of shards (`run --shard i/n`, or any runs of the same
//! settings on different seeds) into one run folder with a fresh summary.
//!
//! Inputs must agree on every setting that shapes results (`run.json` config minus seeds, shard,
//! run name, output folder, concurrency, endpoint (a warning) and the quiet/force switches, plus
//! the prompt hash and the texture fingerprint), no input may be given twice and no seed may be
//! complete in two inputs. Before anything is written, every finished episode is checked against
//! its own record (`results::verify`: trajectory lines against `turns`, frame files against the
//! recorded hashes); a damaged one is refused, naming the file. The merged run is then built in
//! a folder beside `--out` (`.<name>.merge-tmp`, held with a `run.lock` so two merges never
//! share it), episodes copied (frames hard-linked when the filesystem allows, else copied),
//! summary and `run.json` written, and renamed to `--out` at the end (an earlier merge's folder
//! is moved aside first and removed last). A merge killed at any moment leaves `--out` as it
//! was (absent, or the earlier merge), so running it again, with `--force` where `--out`
//! existed, gives the same folder as an uninterrupted merge. Unfinished episodes are not copied
//! (a warning names them).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde_json::{json, Value};

use crate::results::frames::run_frame_hash;
use crate::results::run::{open_run, RunData};
use crate::results::summary::{read_episodes, summarize, write_summary, Summary};
use crate::results::verify::{check_episode, Damage};

use crate::results::store::{write_atomic, write_json, StoreError};

pub use super::merge_error::MergeError;
use super::merge_out::{check_out, io_err, kill_point, remove_if_there, swap_in, take_work_dir};

/// What a merge produced.
#[derive(Debug)]
pub struct MergeOutcome {
    /// Summary of the merged run.
    pub summary: Summary,
    /// Episodes copied.
    pub episodes: usize,
    /// Frames hard-linked (the rest were copied).
    pub linked: usize,
    /// Frames copied.
    pub copied: usize,
    /// Warnings (unfinished episodes, missing shards, version differences).
    pub warnings: Vec<String>,
}

/// Config keys that may differ between shards of one run (`endpoint` too, with a warning:
/// shards may each use their own server of the same model; `frames` changes no score, and the
/// merged run.json says `mixed` when the inputs differ).
const VOLATILE: [&str; 9] = [
    "seeds",
    "shard",
    "run_name",
    "out",
    "concurrency",
    "quiet",
    "force",
    "endpoint",
    "frames",
];

/// The settings that must agree between inputs.
fn compat_key(info: &Value) -> BTreeMap<String, Value> {
    let mut key = BTreeMap::new();
    if let Some(config) = info["config"].as_object() {
        for (k, v) in config {
            if !VOLATILE.contains(&k.as_str()) {
                key.insert(format!("config.{k}"), v.clone());
            }
        }
    }
    key.insert("prompt_sha256".into(), info["prompt_sha256"].clone());
    key.insert(
        "textures.fingerprint".into(),
        info["textures"]["fingerprint"].clone(),
    );
    key.insert("engine_parity".into(), info["engine_parity"].clone());
    key
}

fn short(v: Option<&Value>) -> String {
    let s = v.map(Value::to_string).unwrap_or_else(|| "absent".into());
    if s.chars().count() > 40 {
        format!("{}…", s.chars().take(40).collect::<String>())
    } else {
        s
    }
}

fn differences(a: &BTreeMap<String, Value>, b: &BTreeMap<String, Value>) -> Vec<String> {
    let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    keys.into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .map(|k| format!("{k} {} vs {}", short(b.get(k)), short(a.get(k))))
        .collect()
}

/// Copy an episode folder: frames hard-linked (else copied), other files copied, and
/// `episode.json` written last, atomically. Returns (linked, copied) frame counts.
fn copy_episode(src: &Path, dst: &Path) -> Result<(usize, usize), StoreError> {
    fn walk(
        src: &Path,
        dst: &Path,
        top: bool,
        counts: &mut (usize, usize),
    ) -> Result<(), StoreError> {
        fs::create_dir_all(dst).map_err(|e| io_err(dst, e))?;
        for entry in fs::read_dir(src).map_err(|e| io_err(src, e))? {
            let entry = entry.map_err(|e| io_err(src, e))?;
            let name = entry.file_name();
            let (from, to) = (entry.path(), dst.join(&name));
            let text = name.to_string_lossy();
            // Temporary files of an interrupted write are left out; episode.json comes last.
            if text.starts_with('.') || (top && text == "episode.json") {
                continue;
            }
            let kind = entry.file_type().map_err(|e| io_err(&from, e))?;
            if kind.is_dir() {
                walk(&from, &to, false, counts)?;
            } else if text.ends_with(".png") {
                if fs::hard_link(&from, &to).is_ok() {
                    counts.0 += 1;
                } else {
                    fs::copy(&from, &to).map_err(|e| io_err(&to, e))?;
                    counts.1 += 1;
                }
            } else {
                fs::copy(&from, &to).map_err(|e| io_err(&to, e))?;
            }
        }
        Ok(())
    }
    let mut counts = (0, 0);
    walk(src, dst, true, &mut counts)?;
    let episode = src.join("episode.json");
    let bytes = fs::read(&episode).map_err(|e| io_err(&episode, e))?;
    write_atomic(&dst.join("episode.json"), &bytes)?;
    Ok(counts)
}

fn now() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}

/// Check every episode the merge will copy against its own record, on a few threads (frame
/// files are decoded). The first damaged one (in seed order) is the error.
fn check_episodes(owner: &BTreeMap<i64, &RunData>) -> Result<(), MergeError> {
    let work: Vec<(&RunData, &crate::results::formats::EpisodeResult)> = owner
        .iter()
        .filter_map(|(seed, r)| r.episodes.iter().find(|e| e.seed == *seed).map(|e| (*r, e)))
        .collect();
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, 8);
    let chunk = work.len().div_ceil(threads).max(1);
    let found: Vec<Option<(i64, Damage)>> = std::thread::scope(|s| {
        let handles: Vec<_> = work
            .chunks(chunk)
            .map(|part| {
                s.spawn(move || {
                    part.iter()
                        .find_map(|(r, e)| check_episode(&r.dir, e).err().map(|d| (e.seed, d)))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or(None))
            .collect()
    });
    match found.into_iter().flatten().min_by_key(|(seed, _)| *seed) {
        Some((_, d)) => Err(MergeError::Damaged(d)),
        None => Ok(()),
    }
}

/// Refuse an input given twice (the same folder under two spellings too).
pub fn check_distinct(inputs: &[PathBuf]) -> Result<(), MergeError> {
    let key = |p: &PathBuf| p.canonicalize().unwrap_or_else(|_| p.clone());
    for (i, a) in inputs.iter().enumerate() {
        if let Some(b) = inputs[..i].iter().find(|b| key(b) == key(a)) {
            let what = if a == b {
                format!("{} is given twice", a.display())
            } else {
                format!("{} and {} are the same folder", b.display(), a.display())
            };
            return Err(MergeError::Twice { what });
        }
    }
    Ok(())
}

/// The merged seed list: the union of the inputs' planned seeds, in the original (pre-shard)
/// order when the inputs recorded one, else sorted.
fn merged_seeds(runs: &[RunData]) -> (Vec<i64>, Option<Vec<i64>>) {
    let mut union = BTreeSet::new();
    for r in runs {
        let planned = r
            .planned_seeds()
            .unwrap_or_else(|| r.episodes.iter().map(|e| e.seed).collect());
        union.extend(planned);
        union.extend(r.incomplete.iter().copied());
    }
    let all: Vec<Option<Vec<i64>>> = runs
        .iter()
        .map(|r| crate::results::run::seeds_of(&r.info["config"]["shard"]["all_seeds"]))
        .collect();
    let original = match all.first() {
        Some(Some(first)) if all.iter().all(|a| a.as_ref() == Some(first)) => Some(first.clone()),
        _ => None,
    };
    let seeds = match &original {
        Some(list) if union.iter().all(|s| list.contains(s)) => {
            list.iter().copied().filter(|s| union.contains(s)).collect()
        }
        _ => union.into_iter().collect(),
    };
    (seeds, original)
}

/// The checks that need no writing: every input has the first one's settings (version and
/// endpoint differences are warnings) and no seed is complete in two inputs. Returns the
/// warnings and which input each complete seed comes from.
fn check_runs(runs: &[RunData]) -> Result<(Vec<String>, BTreeMap<i64, &RunData>), MergeError> {
    let first = &runs[0];
    let key = compat_key(&first.info);
    let mut warnings = Vec::new();
    for r in &runs[1..] {
        let diff = differences(&key, &compat_key(&r.info));
        if !diff.is_empty() {
            return Err(MergeError::Mismatch {
                a: first.dir.join("run.json").display().to_string(),
                b: r.dir.join("run.json").display().to_string(),
                fields: diff.join("; "),
            });
        }
        for field in ["vlm_eval_version", "git_commit", "endpoint"] {
            let get = |info: &Value| match field {
                "endpoint" => info["config"]["endpoint"].clone(),
                _ => info[field].clone(),
            };
            if get(&r.info) != get(&first.info) {
                warnings.push(format!(
                    "{} was made with {field} {} and {} with {}",
                    r.dir.display(),
                    get(&r.info),
                    first.dir.display(),
                    get(&first.info)
                ));
            }
        }
    }
    let mut owner: BTreeMap<i64, &RunData> = BTreeMap::new();
    for r in runs {
        for ep in &r.episodes {
            if let Some(other) = owner.insert(ep.seed, r) {
                return Err(MergeError::DuplicateSeed {
                    seed: ep.seed,
                    a: other
                        .episode_dir(ep.seed)
                        .join("episode.json")
                        .display()
                        .to_string(),
                    b: r.episode_dir(ep.seed)
                        .join("episode.json")
                        .display()
                        .to_string(),
                });
            }
        }
    }
    Ok((warnings, owner))
}

/// [`merge_runs`]'s checks of its inputs alone (settings agree, no seed in two inputs), writing
/// nothing: lets a caller report these before its own refusals.
pub fn check_inputs(inputs: &[PathBuf]) -> Result<(), MergeError> {
    check_distinct(inputs)?;
    let runs = inputs
        .iter()
        .map(|p| open_run(p))
        .collect::<Result<Vec<_>, _>>()?;
    check_runs(&runs).map(|_| ())
}

/// Merge `inputs` into a new run folder `out`.
pub fn merge_runs(inputs: &[PathBuf], out: &Path, force: bool) -> Result<MergeOutcome, MergeError> {
    check_distinct(inputs)?;
    let runs = inputs
        .iter()
        .map(|p| open_run(p))
        .collect::<Result<Vec<_>, _>>()?;
    let (mut warnings, owner) = check_runs(&runs)?;
    for r in &runs {
        let unfinished: Vec<i64> = r
            .incomplete
            .iter()
            .copied()
            .filter(|s| !owner.contains_key(s))
            .collect();
        if !unfinished.is_empty() {
            warnings.push(format!(
                "{}: {} unfinished episode(s) not copied (seeds {unfinished:?}); rerun that run's command to finish them, then merge again",
                r.dir.display(),
                unfinished.len()
            ));
        }
    }
    let (seeds, original) = merged_seeds(&runs);
    let absent: Vec<i64> = seeds
        .iter()
        .copied()
        .filter(|s| !owner.contains_key(s))
        .collect();
    if let Some(original) = &original {
        let missing: Vec<i64> = original
            .iter()
            .copied()
            .filter(|s| !seeds.contains(s))
            .collect();
        if !missing.is_empty() {
            warnings.push(format!(
                "the shards' full seed list has {} seed(s) that no input planned (a shard is missing?): {missing:?}",
                missing.len()
            ));
        }
    }
    if !absent.is_empty() {
        warnings.push(format!(
            "{} planned seed(s) have no complete episode in any input: {absent:?}",
            absent.len()
        ));
    }

    check_out(inputs, out, force)?;
    check_episodes(&owner)?;
    let (tmp, lock) = take_work_dir(out)?;
    let written = write_merged(&tmp, out, &runs, &owner, &seeds).and_then(|w| {
        swap_in(&tmp, out, lock)
            .map(|()| w)
            .map_err(MergeError::from)
    });
    let (summary, episodes, linked, copied) = match written {
        Ok(w) => w,
        Err(e) => {
            // A failed write (a full disk) leaves nothing behind: `--out` is as it was.
            let _ = remove_if_there(&tmp);
            return Err(e);
        }
    };
    Ok(MergeOutcome {
        summary,
        episodes,
        linked,
        copied,
        warnings,
    })
}

/// Build the merged run in the work folder `tmp`: the owned episodes copied, the summary, and
/// `run.json` (which names `out`) last. Returns the summary, the episodes and the frames
/// hard-linked and copied.
fn write_merged(
    tmp: &Path,
    out: &Path,
    runs: &[RunData],
    owner: &BTreeMap<i64, &RunData>,
    seeds: &[i64],
) -> Result<(Summary, usize, usize, usize), MergeError> {
    let first = &runs[0];
    let (mut linked, mut copied) = (0, 0);
    for (k, (&seed, r)) in owner.iter().enumerate() {
        let dst = tmp.join("episodes").join(format!("seed_{seed}"));
        let (l, c) = copy_episode(&r.episode_dir(seed), &dst)?;
        linked += l;
        copied += c;
        kill_point(&format!("episode:{}", k + 1));
    }
    let episodes = read_episodes(tmp)?;
    let model = first.model();
    let summary = summarize(&model, &episodes);
    write_summary(tmp, &summary, &episodes)?;
    kill_point("summary");

    let mut info = first.info.clone();
    let run_name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| out.display().to_string());
    if let Some(config) = info["config"].as_object_mut() {
        config.remove("shard");
        config.insert("seeds".into(), crate::results::run::seeds_value(seeds));
        config.insert("run_name".into(), json!(run_name));
        config.insert("out".into(), json!(out.parent().unwrap_or(Path::new("."))));
        let modes: BTreeSet<String> = runs
            .iter()
            .map(|r| {
                r.info["config"]["frames"]
                    .as_str()
                    .unwrap_or("all")
                    .to_string()
            })
            .collect();
        if modes.len() > 1 {
            config.insert("frames".into(), json!("mixed"));
        }
    }
    let times = |field: &str| -> Vec<String> {
        runs.iter()
            .filter_map(|r| r.info[field].as_str().map(str::to_string))
            .collect()
    };
    if let Some(obj) = info.as_object_mut() {
        obj.remove("wall_s");
        obj.remove("shard_from");
        obj.insert(
            "started_at".into(),
            json!(times("started_at").into_iter().min()),
        );
        obj.insert(
            "finished_at".into(),
            json!(times("finished_at").into_iter().max()),
        );
        obj.insert("merged_at".into(), json!(now()));
        obj.insert(
            "frame_hash".into(),
            json!(run_frame_hash(
                episodes.iter().filter_map(|e| e.frames.as_ref())
            )),
        );
        obj.insert("episodes_complete".into(), json!(episodes.len()));
        obj.insert(
            "merged_from".into(),
            Value::Array(
                runs.iter()
                    .map(|r| {
                        json!({
                            "run": r.dir,
                            "run_name": r.name(),
                            "shard": r.info["config"]["shard"],
                            "seeds": r.planned_seeds(),
                            "episodes": owner.values().filter(|o| o.dir == r.dir).count(),
                            "started_at": r.info["started_at"],
                            "finished_at": r.info["finished_at"],
                            "wall_s": r.info["wall_s"],
                            "vlm_eval_version": r.info["vlm_eval_version"],
                            "git_commit": r.info["git_commit"],
                        })
                    })
                    .collect(),
            ),
        );
    }
    write_json(&tmp.join("run.json"), &info)?;
    kill_point("run-json");
    Ok((summary, episodes.len(), linked, copied))
}

/// Refuse inputs that a running `vlm-eval run` still holds (`results::lock`), unless
/// `allow_running`: then each held input gives a warning, and only the episodes finished when
/// `merge_runs` reads it are merged (as for any unfinished episode). A held `out` is always
/// refused. Asks without taking any lock, so it never gets in a starting run's way.
pub fn check_running(
    inputs: &[PathBuf],
    out: &Path,
    allow_running: bool,
) -> Result<Vec<String>, MergeError> {
    use crate::results::lock::holder;
    if let Some(h) = holder(out) {
        return Err(MergeError::Running {
            run: out.display().to_string(),
            holder: h.to_string(),
            fix: "choose another --out",
        });
    }
    let mut warnings = Vec::new();
    for input in inputs {
        let Some(h) = holder(input) else { continue };
        if !allow_running {
            return Err(MergeError::Running {
                run: input.display().to_string(),
                holder: h.to_string(),
                fix: "wait for it to finish, or pass --allow-running to merge only its finished episodes",
            });
        }
        warnings.push(format!(
            "{} is still being written by `vlm-eval run` ({h}): only its episodes finished by now are merged (--allow-running)",
            input.display()
        ));
    }
    Ok(warnings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compat_key_ignores_volatile_fields_and_names_differences() {
        let a = json!({"config": {"model": "m", "steps": 5, "seeds": [0, 1], "run_name": "a",
            "shard": {"index": 0}, "concurrency": 8, "endpoint": "http://a/v1"},
            "prompt_sha256": "p", "textures": {"fingerprint": "t"}, "started_at": "x"});
        let mut b = a.clone();
        b["config"]["seeds"] = json!([2, 3]);
        b["config"]["run_name"] = json!("b");
        b["config"]["shard"] = json!({"index": 1});
        b["config"]["concurrency"] = json!(2);
        b["config"]["endpoint"] = json!("http://b/v1");
        b["started_at"] = json!("y");
        assert!(differences(&compat_key(&a), &compat_key(&b)).is_empty());
        b["config"]["steps"] = json!(4);
        b["prompt_sha256"] = json!("q");
        b["textures"]["fingerprint"] = json!("u");
        let d = differences(&compat_key(&a), &compat_key(&b));
        assert_eq!(
            d,
            [
                "config.steps 4 vs 5",
                "prompt_sha256 \"q\" vs \"p\"",
                "textures.fingerprint \"u\" vs \"t\""
            ]
        );
    }
}
