//! `vlm-eval merge`: join the run folders of shards (`run --shard i/n`, or any runs of the same
//! settings on different seeds) into one run folder with a fresh summary.
//!
//! Inputs must agree on every setting that shapes results (`run.json` config minus seeds, shard,
//! run name, output folder, concurrency, endpoint (a warning) and the quiet/force switches, plus
//! the prompt hash and the texture fingerprint) and no seed may be complete in two inputs. Complete episodes are
//! copied (frames hard-linked when the filesystem allows, else copied), each with its
//! `episode.json` written last and atomically, so an interrupted merge never shows a half-copied
//! episode as complete. Unfinished episodes are not copied (a warning names them).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde_json::{json, Value};

use crate::results::frames::run_frame_hash;
use crate::results::run::{open_run, RunData};
use crate::results::summary::{read_episodes, summarize, write_summary, ReadError, Summary};

use crate::results::store::{write_atomic, write_json, StoreError};

/// Why a merge was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// An input run could not be read (missing, partial or corrupt; the message names the file).
    #[error(transparent)]
    Read(#[from] ReadError),
    /// Two inputs were made with different settings.
    #[error("{b} does not match {a}: {fields}; merge only shards of one run (same flags apart from --shard/--seeds/--run-name/--out/--concurrency)")]
    Mismatch {
        /// The first input's run.json.
        a: String,
        /// The mismatching input's run.json.
        b: String,
        /// What differs.
        fields: String,
    },
    /// A seed is complete in two inputs.
    #[error("seed {seed} is complete in both {a} and {b}; each seed may come from one input only (do two shards overlap?)")]
    DuplicateSeed {
        /// The seed.
        seed: i64,
        /// Its episode.json in one input.
        a: String,
        /// Its episode.json in another.
        b: String,
    },
    /// Bad output folder.
    #[error("{0}")]
    Out(String),
    /// Writing the merged run failed.
    #[error(transparent)]
    Write(#[from] StoreError),
    /// An input (or --out) is still being written by a running `vlm-eval run`.
    #[error("{run} is still being written by `vlm-eval run` ({holder}): {fix}")]
    Running {
        /// The held folder.
        run: String,
        /// Who holds it (`results::lock::Holder`).
        holder: String,
        /// What to do.
        fix: &'static str,
    },
}

impl MergeError {
    /// Exit code: 1 for write failures, 2 for bad input.
    pub fn exit_code(&self) -> i32 {
        match self {
            MergeError::Write(_) => 1,
            MergeError::Read(ReadError::Write { .. }) => 1,
            _ => 2,
        }
    }
}

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

fn io_err(path: &Path, source: std::io::Error) -> StoreError {
    StoreError::Io {
        path: path.display().to_string(),
        source,
    }
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

fn same_path(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(x), Ok(y)) => x.starts_with(&y) || y.starts_with(&x),
        _ => false,
    }
}

/// Whether `dir/run.json` was written by a merge (it lists `merged_from`).
fn made_by_merge(dir: &Path) -> bool {
    fs::read_to_string(dir.join("run.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .is_some_and(|v| v.get("merged_from").is_some())
}

/// Check the output folder: it must not exist (unless `force`) and must not hold an input.
fn prepare_out(inputs: &[PathBuf], out: &Path, force: bool) -> Result<(), MergeError> {
    if let Some(input) = inputs.iter().find(|i| same_path(i, out)) {
        return Err(MergeError::Out(format!(
            "--out {} overlaps the input {}; write the merged run to a new folder",
            out.display(),
            input.display()
        )));
    }
    if out.exists() {
        if !force {
            return Err(MergeError::Out(format!(
                "--out {} already exists; choose a new folder or pass --force to replace it",
                out.display()
            )));
        }
        // --force replaces an earlier merged run folder, or an empty folder; never a folder that
        // is not a run, nor a file, whatever path was typed.
        let replaceable = out.is_dir()
            && !out.is_symlink()
            && (out.join("run.json").is_file()
                || fs::read_dir(out).is_ok_and(|mut d| d.next().is_none()));
        if replaceable && out.join("run.json").is_file() && !made_by_merge(out) {
            return Err(MergeError::Out(format!(
                "--out {} is a run that `vlm-eval merge` did not make (its run.json has no merged_from): --force replaces only an earlier merge's folder; choose a new folder",
                out.display()
            )));
        }
        if !replaceable {
            return Err(MergeError::Out(format!(
                "--out {} is not a run folder (no run.json): --force replaces only an earlier run folder or an empty folder; choose a new folder",
                out.display()
            )));
        }
        fs::remove_dir_all(out).map_err(|e| io_err(out, e))?;
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
    let runs = inputs
        .iter()
        .map(|p| open_run(p))
        .collect::<Result<Vec<_>, _>>()?;
    check_runs(&runs).map(|_| ())
}

/// Merge `inputs` into a new run folder `out`.
pub fn merge_runs(inputs: &[PathBuf], out: &Path, force: bool) -> Result<MergeOutcome, MergeError> {
    let runs = inputs
        .iter()
        .map(|p| open_run(p))
        .collect::<Result<Vec<_>, _>>()?;
    let (mut warnings, owner) = check_runs(&runs)?;
    let first = &runs[0];
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

    prepare_out(inputs, out, force)?;
    let (mut linked, mut copied) = (0, 0);
    for (&seed, r) in &owner {
        let dst = out.join("episodes").join(format!("seed_{seed}"));
        let (l, c) = copy_episode(&r.episode_dir(seed), &dst)?;
        linked += l;
        copied += c;
    }
    let episodes = read_episodes(out)?;
    let model = first.model();
    let summary = summarize(&model, &episodes);
    write_summary(out, &summary, &episodes)?;

    let mut info = first.info.clone();
    let run_name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| out.display().to_string());
    if let Some(config) = info["config"].as_object_mut() {
        config.remove("shard");
        config.insert("seeds".into(), json!(seeds));
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
    write_json(&out.join("run.json"), &info)?;
    Ok(MergeOutcome {
        summary,
        episodes: episodes.len(),
        linked,
        copied,
        warnings,
    })
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
