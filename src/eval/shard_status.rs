//! Which shards of a sharded run are missing, unfinished or errored (`vlm-eval merge --check`,
//! and `merge`'s refusal of an incomplete set): read from the shard folders alone, so it works
//! after any scheduler (a failed Slurm array task, a Kubernetes index out of retries).
//!
//! A shard is known from its own `run.json` (`config.shard`), or, when its folder is missing
//! entirely, from any other shard of the run: they all record the shard count and the full seed
//! list. Shards that disagree on either are refused, naming both folders.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::shard::Shard;
use crate::results::formats::Termination;
use crate::results::summary::{read_episodes, ReadError};

/// Why a set of run folders cannot be judged.
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    /// A folder could not be read (missing, not a run, corrupt; the message names the file).
    #[error(transparent)]
    Read(#[from] ReadError),
    /// Two inputs disagree on the shard count or the full seed list, or are the same shard.
    #[error("{0}")]
    Inconsistent(String),
}

/// One unit of the run: a shard (found or missing) or an unsharded input.
#[derive(Clone, Debug)]
pub struct Part {
    /// The shard, for sharded runs.
    pub shard: Option<Shard>,
    /// Its folder; `None` when no input is this shard.
    pub dir: Option<PathBuf>,
    /// The seeds it should play.
    pub seeds: Vec<i64>,
    /// Seeds with a finished `episode.json` that a rerun keeps.
    pub complete: Vec<i64>,
    /// Seeds whose episode ended in an error or a spending cap (a rerun plays them again).
    pub errored: Vec<i64>,
    /// Seeds not finished (folder without `episode.json`, or no folder at all).
    pub unfinished: Vec<i64>,
}

impl Part {
    /// Whether every seed is complete without error.
    pub fn is_done(&self) -> bool {
        self.dir.is_some() && self.errored.is_empty() && self.unfinished.is_empty()
    }
}

/// The state of a set of run folders meant to be merged.
#[derive(Clone, Debug)]
pub struct Status {
    /// The shard count, when the inputs are shards.
    pub count: Option<usize>,
    /// Every shard `0..count` (found or not) in order, then the unsharded inputs.
    pub parts: Vec<Part>,
    /// Seeds of the run with no finished episode in any input (what a merge would lack).
    pub missing: Vec<i64>,
}

impl Status {
    /// The shard indexes to run again (missing, unfinished or errored), for `--array=`.
    pub fn redo(&self) -> Vec<usize> {
        self.parts
            .iter()
            .filter(|p| !p.is_done())
            .filter_map(|p| p.shard.map(|s| s.index))
            .collect()
    }

    /// Whether nothing needs running again.
    pub fn is_done(&self) -> bool {
        self.parts.iter().all(Part::is_done)
    }
}

fn corrupt(path: &Path, message: &str) -> ReadError {
    ReadError::Corrupt {
        path: path.display().to_string(),
        message: message.to_string(),
    }
}

fn read_info(dir: &Path) -> Result<Value, ReadError> {
    if !dir.exists() {
        return Err(crate::results::run::missing(
            dir,
            crate::results::run::MISSING_RUN,
        ));
    }
    if !dir.is_dir() {
        return Err(corrupt(
            dir,
            "not a folder: pass a run folder written by `vlm-eval run` (results/<run>)",
        ));
    }
    let path = dir.join("run.json");
    let text = std::fs::read_to_string(&path).map_err(|_| {
        corrupt(
            &path,
            "missing: this is not a run folder (expected results/<run>/run.json)",
        )
    })?;
    match serde_json::from_str::<Value>(&text) {
        Ok(v) if v.is_object() => Ok(v),
        _ => Err(corrupt(&path, "not a JSON object")),
    }
}

fn seeds_at(v: &Value) -> Option<Vec<i64>> {
    crate::results::run::seeds_of(v)
}

/// Read one folder into a part.
fn read_part(dir: &Path, info: &Value, shard: Option<Shard>) -> Result<Part, ReadError> {
    let episodes = read_episodes(dir)?;
    let mut seeds = seeds_at(&info["config"]["seeds"]).unwrap_or_default();
    let finished: BTreeMap<i64, Termination> =
        episodes.iter().map(|e| (e.seed, e.termination)).collect();
    for &s in finished.keys() {
        if !seeds.contains(&s) {
            seeds.push(s);
        }
    }
    let mut part = Part {
        shard,
        dir: Some(dir.to_path_buf()),
        seeds: seeds.clone(),
        complete: Vec::new(),
        errored: Vec::new(),
        unfinished: Vec::new(),
    };
    for s in seeds {
        match finished.get(&s) {
            Some(Termination::Error | Termination::Budget) => part.errored.push(s),
            Some(_) => part.complete.push(s),
            None => part.unfinished.push(s),
        }
    }
    Ok(part)
}

/// Judge `inputs` (run folders: shards of one run, or runs on different seeds).
pub fn shard_status(inputs: &[PathBuf]) -> Result<Status, StatusError> {
    let mut sharded: BTreeMap<usize, (PathBuf, Value)> = BTreeMap::new();
    let mut plain: Vec<(PathBuf, Value)> = Vec::new();
    // (count, all_seeds, the folder they came from)
    let mut run: Option<(usize, Vec<i64>, PathBuf)> = None;
    for dir in inputs {
        let info = read_info(dir)?;
        let rec = &info["config"]["shard"];
        let (Some(index), Some(count)) = (rec["index"].as_u64(), rec["count"].as_u64()) else {
            plain.push((dir.clone(), info));
            continue;
        };
        let (index, count) = (index as usize, count as usize);
        let all = seeds_at(&rec["all_seeds"]).unwrap_or_default();
        if let Some((c, a, first)) = &run {
            if *c != count {
                return Err(StatusError::Inconsistent(format!(
                    "{} is shard {index}/{count} but {} is one of {c} shards; merge only the shards of one run (same --shard count)",
                    dir.display(),
                    first.display()
                )));
            }
            if *a != all {
                return Err(StatusError::Inconsistent(format!(
                    "{} and {} split different seed lists; merge only the shards of one run (same --seeds or --seed-list)",
                    dir.display(),
                    first.display()
                )));
            }
        } else {
            run = Some((count, all, dir.clone()));
        }
        if let Some((other, _)) = sharded.get(&index) {
            return Err(StatusError::Inconsistent(format!(
                "{} and {} are both shard {index}/{count}; pass each shard's folder once",
                other.display(),
                dir.display()
            )));
        }
        sharded.insert(index, (dir.clone(), info));
    }
    let mut parts = Vec::new();
    let count = run.as_ref().map(|r| r.0);
    if let Some((count, all, _)) = &run {
        for index in 0..*count {
            let shard = Shard::new(index, *count);
            match sharded.get(&index) {
                Some((dir, info)) => parts.push(read_part(dir, info, Some(shard))?),
                None => {
                    let seeds = shard.slice(all).to_vec();
                    parts.push(Part {
                        shard: Some(shard),
                        dir: None,
                        unfinished: seeds.clone(),
                        seeds,
                        complete: Vec::new(),
                        errored: Vec::new(),
                    });
                }
            }
        }
    }
    for (dir, info) in &plain {
        parts.push(read_part(dir, info, None)?);
    }
    let done: BTreeSet<i64> = parts
        .iter()
        .flat_map(|p| p.complete.iter().chain(&p.errored).copied())
        .collect();
    let mut missing: Vec<i64> = Vec::new();
    for p in &parts {
        for s in &p.unfinished {
            if !done.contains(s) && !missing.contains(s) {
                missing.push(*s);
            }
        }
    }
    Ok(Status {
        count,
        parts,
        missing,
    })
}
