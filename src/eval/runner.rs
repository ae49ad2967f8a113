//! A run: many seeded episodes played concurrently (bounded), with a progress bar, resume
//! (finished episodes are skipped), and the run's summary at the end.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use futures::stream::{self, StreamExt};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use serde_json::{json, Value};

use crate::model::ChatModel;
use crate::results::formats::{EpisodeResult, Termination};
use crate::results::frames::{run_frame_hash, FrameHashKind};
use crate::results::summary::{read_episodes, summarize, write_summary, ReadError, Summary};

use super::episode::{run_episode, EpisodeConfig};
use crate::results::store::{write_json, RunDir, StoreError};

/// What a run needs besides the model.
#[derive(Clone)]
pub struct RunOptions {
    /// Per-episode settings.
    pub episode: EpisodeConfig,
    /// Env seeds to play.
    pub seeds: Vec<i64>,
    /// Episodes in flight at once.
    pub concurrency: usize,
    /// Redo finished episodes.
    pub force: bool,
    /// Show a progress bar (stderr).
    pub progress: bool,
    /// The `run.json` content (config; the runner adds times and counts).
    pub run_info: Value,
    /// Stop at Ctrl-C (SIGINT), keeping finished episodes. This installs tokio's process-wide
    /// SIGINT handler, which is never removed (SIGINT no longer ends the process after it): the
    /// binary sets it, a library caller or a test process leaves it off.
    pub stop_on_ctrl_c: bool,
}

/// What a run produced.
#[derive(Debug)]
pub struct RunOutcome {
    /// Every episode of the run folder after this run, by seed.
    pub episodes: Vec<EpisodeResult>,
    /// Their summary.
    pub summary: Summary,
    /// Episodes skipped because they were already complete.
    pub skipped: usize,
    /// Episodes played now.
    pub played: usize,
    /// The run folder.
    pub dir: PathBuf,
    /// The run was interrupted (Ctrl-C) before every episode finished.
    pub interrupted: bool,
}

/// Why a run could not proceed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Writing results failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Reading results failed.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// The folder holds a different run.
    #[error("{0}")]
    Mismatch(String),
}

fn now() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}

/// Where a run shows its progress: its own bar (the default), or one bar of a display
/// several runs share, its lines labelled (the model matrix: one bar per model).
#[derive(Clone, Default)]
pub struct Display {
    /// The shared display the bar joins.
    pub multi: Option<MultiProgress>,
    /// Put before the bar and before each line printed above it.
    pub label: Option<String>,
}

/// A line above the progress bar (or on stderr when the bar is hidden), after the bar's
/// label when it has one.
fn say(bar: &ProgressBar, line: String) {
    let label = bar.prefix();
    let line = if label.is_empty() {
        line
    } else {
        format!("{label}: {line}")
    };
    if bar.is_hidden() && bar.length().is_some() {
        eprintln!("{line}");
    } else {
        bar.println(line);
    }
}

/// Config keys that may change between tries of one run: how many episodes play at once,
/// which seeds (a rerun may add some), where the folder is, and whether requests carry a
/// `prompt_cache_key` (a routing hint for the provider's cache that changes no reply).
const VOLATILE: [&str; 6] = [
    "concurrency",
    "force",
    "seeds",
    "run_name",
    "out",
    "prompt_cache_key",
];

/// Settings that must match for a rerun to resume a run folder: run.json's `config` less
/// [`VOLATILE`] (`frames` included: a run stores one kind of frame files; a run.json from
/// before `frames` wrote every frame; one from before `history_layout` and `reasoning_effort`
/// played the window layout and sent no effort), and the prompt, tools and textures it recorded.
fn resume_key(info: &Value) -> std::collections::BTreeMap<String, Value> {
    let mut key: std::collections::BTreeMap<String, Value> = info
        .get("config")
        .and_then(Value::as_object)
        .map(|c| {
            c.iter()
                .filter(|(k, _)| !VOLATILE.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default();
    key.entry("frames".into()).or_insert_with(|| json!("all"));
    // A run.json from before these settings existed played the window layout, with no
    // reasoning effort sent.
    key.entry("history_layout".into())
        .or_insert_with(|| json!("window"));
    key.entry("reasoning_effort".into())
        .or_insert_with(|| json!("default"));
    for k in ["prompt_sha256", "tools", "textures"] {
        if let Some(v) = info.get(k) {
            key.insert(k.into(), v.clone());
        }
    }
    key
}

/// The settings a rerun would change, each as `name: <before> there, <now> now` (values cut
/// to 60 characters); the prompt, tools and textures only when the folder recorded them.
fn resume_differences(old: &Value, new: &Value) -> Vec<String> {
    let (before, now) = (resume_key(old), resume_key(new));
    let show = |v: Option<&Value>| {
        let text = v.map_or("(not set)".to_string(), Value::to_string);
        if text.chars().count() > 60 {
            format!("{}…", text.chars().take(59).collect::<String>())
        } else {
            text
        }
    };
    let mut keys: Vec<&String> = before.keys().chain(now.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| {
            let recorded_only = ["prompt_sha256", "tools", "textures"].contains(&k.as_str());
            (!recorded_only || before.contains_key(*k)) && before.get(*k) != now.get(*k)
        })
        .map(|k| {
            format!(
                "{k}: {} there, {} now",
                show(before.get(k)),
                show(now.get(k))
            )
        })
        .collect()
}

/// A spawned episode, cancelled when dropped (as the episode future itself was when polled in
/// place): an interrupted run stops its episodes before writing the summary.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl<T> std::future::Future for AbortOnDrop<Result<T, StoreError>> {
    type Output = Result<T, StoreError>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut self.0).poll(cx).map(|r| {
            r.unwrap_or_else(|e| {
                Err(StoreError::Io {
                    path: "an episode".into(),
                    source: std::io::Error::other(format!("the episode's task failed: {e}")),
                })
            })
        })
    }
}

fn previous_episode_ok(store: &RunDir, seed: i64) -> bool {
    store
        .finished_episode(seed)
        .is_some_and(|e| !matches!(e.termination, Termination::Error | Termination::Budget))
}

/// Whether `store` may be resumed with `run_info`'s settings: a folder without run.json, or
/// with `force`, always; else every setting of [`resume_key`] must match, and the error names
/// each that differs. The runner checks it again once it holds the folder; the command calls
/// it first, before it makes anything.
pub fn check_resume(store: &RunDir, run_info: &Value, force: bool) -> Result<(), RunError> {
    let run_json = store.run_json();
    if force || !run_json.is_file() {
        return Ok(());
    }
    let old: Value = std::fs::read_to_string(&run_json)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null);
    let differ = resume_differences(&old, run_info);
    if differ.is_empty() {
        return Ok(());
    }
    Err(RunError::Mismatch(format!(
        "{} holds a run with different settings ({}); use another --run-name, or --force to start it over",
        store.root.display(),
        differ.join("; ")
    )))
}

/// Play the run's episodes and write its summary.
pub async fn run(
    opts: RunOptions,
    store: RunDir,
    model: Arc<dyn ChatModel>,
) -> Result<RunOutcome, RunError> {
    run_shown(opts, store, model, &Display::default()).await
}

/// [`run`], its progress shown on `display`.
pub async fn run_shown(
    opts: RunOptions,
    store: RunDir,
    model: Arc<dyn ChatModel>,
    display: &Display,
) -> Result<RunOutcome, RunError> {
    let run_json = store.run_json();
    check_resume(&store, &opts.run_info, opts.force)?;
    if opts.force && store.root.join("episodes").exists() {
        std::fs::remove_dir_all(store.root.join("episodes")).map_err(|source| StoreError::Io {
            path: store.root.display().to_string(),
            source,
        })?;
    }
    let started = now();
    let mut info = opts.run_info.clone();
    info["started_at"] = Value::String(started.clone());
    info["frame_hash"] = json!(FrameHashKind::CURRENT.as_str());
    write_json(&run_json, &info)?;

    let todo: Vec<i64> = opts
        .seeds
        .iter()
        .copied()
        .filter(|&s| opts.force || !previous_episode_ok(&store, s))
        .collect();
    let skipped = opts.seeds.len() - todo.len();
    let bar = match (opts.progress, &display.multi) {
        (true, Some(multi)) => multi.add(ProgressBar::new(todo.len() as u64)),
        (true, None) => ProgressBar::new(todo.len() as u64),
        (false, _) => ProgressBar::hidden(),
    };
    let template = match &display.label {
        Some(label) => {
            bar.set_prefix(label.clone());
            "{spinner} {prefix} [{elapsed_precise}] {bar:30} {pos}/{len} episodes  {msg}"
        }
        None => "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} episodes  {msg}",
    };
    bar.set_style(
        ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    if skipped > 0 {
        say(
            &bar,
            format!("resuming: {skipped} finished episode(s) kept"),
        );
    }
    let turns = Arc::new(AtomicU64::new(0));
    let unlocks = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let t0 = Instant::now();
    let cfg = Arc::new(opts.episode.clone());
    let tasks = stream::iter(todo.clone())
        .map(|seed| {
            let (cfg, model, store, bar) = (cfg.clone(), model.clone(), store.clone(), bar.clone());
            let (turns, unlocks, errors) = (turns.clone(), unlocks.clone(), errors.clone());
            // Each episode is its own task, so episodes' work (stepping, hashing, building
            // requests) runs on every runtime worker rather than all on the task polling them.
            AbortOnDrop(tokio::spawn(async move {
                let mut last_turn = u32::MAX;
                let result = run_episode(&cfg, model.as_ref(), &store, seed, |turn, unlocked| {
                    if turn != last_turn {
                        last_turn = turn;
                        turns.fetch_add(1, Ordering::Relaxed);
                    }
                    unlocks.fetch_add(unlocked.len() as u64, Ordering::Relaxed);
                    let t = turns.load(Ordering::Relaxed);
                    let limit = model
                        .concurrency_limit()
                        .map(|n| format!("  limit {n}"))
                        .unwrap_or_default();
                    bar.set_message(format!(
                        "turns {t}  achievements {}  req/s {:.1}  errors {}{limit}",
                        unlocks.load(Ordering::Relaxed),
                        t as f64 / t0.elapsed().as_secs_f64().max(1e-9),
                        errors.load(Ordering::Relaxed)
                    ));
                })
                .await;
                if let Ok(ep) = &result {
                    if ep.termination == Termination::Error {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                    say(&bar, format!(
                        "seed {:>5}: progression {:5.1}%  achievements {:>2}  steps {:>5}  turns {:>4}  {}{}",
                        ep.seed,
                        100.0 * ep.progression,
                        ep.score,
                        ep.num_steps,
                        ep.turns,
                        ep.termination,
                        ep.error.as_deref().map(|e| format!("  ({e})")).unwrap_or_default()
                    ));
                }
                bar.inc(1);
                result
            }))
        })
        .buffer_unordered(opts.concurrency.max(1));
    let mut tasks = Box::pin(tasks);
    let mut played = 0;
    let mut interrupted = false;
    let stop_on_ctrl_c = opts.stop_on_ctrl_c;
    let ctrl_c = async move {
        // A handler that could not be installed never fires (the run then ends as SIGINT's
        // default action ends it), rather than reading as an interrupt at once.
        if !stop_on_ctrl_c || tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    tokio::pin!(ctrl_c);
    loop {
        tokio::select! {
            next = tasks.next() => match next {
                Some(result) => {
                    result?;
                    played += 1;
                }
                None => break,
            },
            _ = &mut ctrl_c => {
                interrupted = true;
                say(&bar, "interrupted: finished episodes are kept; rerun the same command to resume".into());
                break;
            }
        }
    }
    // After an interrupt, stop the episodes still playing before the summary is read.
    drop(tasks);
    bar.finish_and_clear();
    let wanted: std::collections::HashSet<i64> = opts.seeds.iter().copied().collect();
    let episodes: Vec<EpisodeResult> = read_episodes(&store.root)?
        .into_iter()
        .filter(|e| wanted.contains(&e.seed))
        .collect();
    let summary = summarize(&opts.episode.model, &episodes);
    write_summary(&store.root, &summary, &episodes)?;
    // A resumed folder may keep episodes written with the older PNG hash.
    info["frame_hash"] = json!(run_frame_hash(
        episodes.iter().filter_map(|e| e.frames.as_ref())
    ));
    info["finished_at"] = Value::String(now());
    info["wall_s"] = Value::from(t0.elapsed().as_secs_f64());
    info["episodes_complete"] = Value::from(episodes.len());
    write_json(&run_json, &info)?;
    Ok(RunOutcome {
        episodes,
        summary,
        skipped,
        played,
        dir: store.root.clone(),
        interrupted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_added_later_read_as_their_old_behaviour_on_resume() {
        let old = json!({"config": {"model": "m", "history": 3}});
        let now = |layout: &str, effort: &str, key: bool| {
            json!({"config": {"model": "m", "history": 3, "history_layout": layout,
                "reasoning_effort": effort, "prompt_cache_key": key}})
        };
        // What every run played before these keys: no difference, whether or not the cache
        // key (a routing hint) is sent now.
        assert!(resume_differences(&old, &now("window", "default", false)).is_empty());
        assert!(resume_differences(&old, &now("window", "default", true)).is_empty());
        // A layout or effort that changes the replies is a difference, named.
        assert_eq!(
            resume_differences(&old, &now("append", "default", false)),
            vec!["history_layout: \"window\" there, \"append\" now".to_string()]
        );
        assert_eq!(
            resume_differences(&old, &now("window", "low", false)),
            vec!["reasoning_effort: \"default\" there, \"low\" now".to_string()]
        );
    }
}
