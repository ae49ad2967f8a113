//! The view server's state: the runs under its folder, per-run data and the index page cached
//! on file times (`results::live::change_key`), and the trajectory tails of episodes in flight.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use crate::report::leaderboard::{build_leaderboard, Leaderboard, LeaderboardOptions, Unranked};
use crate::results::live::{change_key, find_runs, seed_folders, TrajectoryTail};
use crate::results::run::{open_run, RunData};

type Key = Vec<(String, Option<SystemTime>)>;
/// Opened runs by folder, with the change key they were read at.
type RunCache = HashMap<PathBuf, (Key, Result<Arc<RunData>, String>)>;

/// Whether a run is still playing: a `vlm-eval run` holds its folder (`results::lock`, asked
/// without taking it). A folder from before the lock (no `run.lock`) counts as playing while it
/// has unfinished episodes (an episode folder without `episode.json`, or a planned seed with
/// no folder yet), as an interrupted one of those reads the same.
pub fn in_progress(run: &Path) -> bool {
    if run.join(crate::results::lock::LOCK_FILE).exists() {
        return crate::results::lock::holder(run).is_some();
    }
    let (done, open) = seed_folders(run);
    if !open.is_empty() {
        return true;
    }
    let planned = crate::results::live::read_run_info(run)
        .and_then(|info| crate::results::run::seeds_of(&info["config"]["seeds"]))
        .unwrap_or_default();
    planned.iter().any(|s| !done.contains(s))
}

/// Open a run for reading (`results::run::open_run`), with a plain reason while it has no
/// complete episode yet.
pub fn open_fresh(dir: &Path) -> Result<RunData, String> {
    let (done, open) = seed_folders(dir);
    if done.is_empty() {
        return Err(format!(
            "no complete episode yet ({} episode folder(s) without episode.json)",
            open.len()
        ));
    }
    open_run(dir).map_err(|e| e.to_string())
}

/// A run folder's name in URLs (its folder name).
pub fn run_name(dir: &Path) -> String {
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "run".into())
}

/// Shared server state.
pub struct ViewState {
    /// The results folder served (a folder of runs, or one run folder).
    pub root: PathBuf,
    /// Episodes shown in detail on a run page.
    pub max_episodes: usize,
    runs: Mutex<RunCache>,
    index: Mutex<Option<(Vec<Key>, Arc<String>)>>,
    /// Tails of episodes in flight, by (run folder, seed).
    pub tails: Mutex<HashMap<(PathBuf, i64), TrajectoryTail>>,
}

impl ViewState {
    /// Fresh state over a folder.
    pub fn new(root: PathBuf, max_episodes: usize) -> ViewState {
        ViewState {
            root,
            max_episodes,
            runs: Mutex::default(),
            index: Mutex::default(),
            tails: Mutex::default(),
        }
    }

    /// The run folders served (found anew on each call: runs may appear at any time).
    pub fn run_dirs(&self) -> Vec<PathBuf> {
        find_runs(&self.root).unwrap_or_default()
    }

    /// The run folder served under a name, if any (a lookup, never a path join).
    pub fn run_dir(&self, name: &str) -> Option<PathBuf> {
        self.run_dirs().into_iter().find(|d| run_name(d) == name)
    }

    /// A run's data, re-read only when its files changed; `Err` with the reader's reason
    /// when it cannot be opened (e.g. no complete episode yet).
    pub fn run_data(&self, dir: &Path) -> Result<Arc<RunData>, String> {
        let key = change_key(dir);
        if let Some((k, data)) = self.lock_runs().get(dir) {
            if *k == key {
                return data.clone();
            }
        }
        let data = open_fresh(dir).map(|mut run| {
            // The index never shows per-call latencies: drop them to keep memory small.
            for e in &mut run.episodes {
                e.latency_ms.calls = Vec::new();
            }
            Arc::new(run)
        });
        self.lock_runs()
            .insert(dir.to_path_buf(), (key, data.clone()));
        data
    }

    fn lock_runs(&self) -> std::sync::MutexGuard<'_, RunCache> {
        self.runs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The index page, `render`ed from the leaderboard of every run, the runs in progress and
    /// whether the folder holds none; rebuilt only when some run's files changed.
    pub fn index_html(
        &self,
        render: impl FnOnce(&Leaderboard, &[PathBuf], bool) -> String,
    ) -> Arc<String> {
        let dirs = self.run_dirs();
        let keys: Vec<Key> = dirs
            .iter()
            .map(|d| {
                let mut k = change_key(d);
                k.insert(0, (d.display().to_string(), None));
                k
            })
            .collect();
        let mut index = self.index.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((k, html)) = index.as_ref() {
            if *k == keys {
                return html.clone();
            }
        }
        let (mut runs, mut unranked) = (Vec::new(), Vec::new());
        for d in &dirs {
            match self.run_data(d) {
                Ok(r) => runs.push((*r).clone()),
                Err(why) => unranked.push(Unranked {
                    dir: d.clone(),
                    why,
                }),
            }
        }
        self.lock_runs().retain(|d, _| dirs.contains(d));
        let live: Vec<PathBuf> = dirs.iter().filter(|d| in_progress(d)).cloned().collect();
        let lb = build_leaderboard(runs, unranked, LeaderboardOptions::default());
        let html = Arc::new(render(&lb, &live, dirs.is_empty()));
        *index = Some((keys, html.clone()));
        html
    }
}
