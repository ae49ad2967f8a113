//! `vlm-eval bench harness`: how close concurrent episodes come to the ideal wall time against
//! a server with a fixed latency, and the harness's own work per turn.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::agent::conversation::{ConversationConfig, Modality};
use crate::agent::observe::ObsFormat;
use crate::agent::parse::Protocol;
use crate::agent::prompt::Prompts;
use crate::crafter::TextureSet;
use crate::model::baseline::ScriptedModel;
use crate::model::mock::MockServer;
use crate::model::openai::{OpenAiConfig, OpenAiModel};
use crate::model::{BoxFuture, ChatModel, ChatReply, ChatRequest, ModelError};

use super::episode::EpisodeConfig;
use super::runner::{run, RunOptions};
use crate::results::frames::FramesMode;
use crate::results::store::RunDir;

/// Harness benchmark figures.
#[derive(Debug, Clone, Serialize)]
pub struct HarnessBenchReport {
    /// Episodes played concurrently.
    pub episodes: usize,
    /// Turns per episode.
    pub turns: u32,
    /// Server latency per request, ms.
    pub latency_ms: u64,
    /// Concurrency.
    pub concurrency: usize,
    /// Measured wall time, s.
    pub wall_s: f64,
    /// Ideal wall time: turns × latency × ceil(episodes / concurrency), s.
    pub ideal_s: f64,
    /// wall / ideal.
    pub ratio: f64,
    /// Harness time per turn with the model's own time subtracted, ms (one episode at a time,
    /// in-process scripted model, frames at `image_size`).
    pub harness_ms_per_turn: f64,
    /// Frame size used.
    pub image_size: usize,
    /// Harness time per turn under each `--frames` mode (`all`, `sent`, `none`), ms, measured
    /// in this run one after another (`harness_ms_per_turn` is `all`'s).
    pub harness_ms_per_turn_by_frames: Vec<(String, f64)>,
    /// Frame files written per turn under each `--frames` mode, and their bytes per turn.
    pub frame_files_per_turn_by_frames: Vec<(String, f64, f64)>,
    /// The same episodes played by a `vlm-eval run` process (absent when not measured).
    pub process: Option<ProcessFigures>,
}

/// A model that answers like another after a fixed delay, noting when the first request
/// arrived and when the last answer left.
struct Delayed {
    inner: ScriptedModel,
    delay: Duration,
    seen: Mutex<(Option<Instant>, Option<Instant>)>,
}

impl Delayed {
    fn new(delay: Duration) -> Delayed {
        Delayed {
            inner: ScriptedModel,
            delay,
            seen: Mutex::new((None, None)),
        }
    }

    /// Forget the times noted so far.
    fn clear(&self) {
        *self.seen.lock().unwrap_or_else(|p| p.into_inner()) = (None, None);
    }

    /// (first request's arrival, last answer's departure).
    fn seen(&self) -> (Option<Instant>, Option<Instant>) {
        *self.seen.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl ChatModel for Delayed {
    fn name(&self) -> &str {
        "delayed-scripted"
    }
    fn chat<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<ChatReply, ModelError>> {
        Box::pin(async move {
            let now = Instant::now();
            self.seen
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .0
                .get_or_insert(now);
            tokio::time::sleep(self.delay).await;
            let r = self.inner.chat(request).await;
            self.seen.lock().unwrap_or_else(|p| p.into_inner()).1 = Some(Instant::now());
            r
        })
    }
}

/// The same run as a `vlm-eval run` process against the same server: where its wall time goes.
#[derive(Debug, Clone, Serialize)]
pub struct ProcessFigures {
    /// Spawn to exit, s.
    pub wall_s: f64,
    /// `wall_s` / ideal.
    pub ratio: f64,
    /// Spawn to the server's receipt of the first request (process start, textures, runtime,
    /// first episode's reset and request), s.
    pub to_first_request_s: f64,
    /// First request's arrival to the last answer's departure, s.
    pub requests_s: f64,
    /// Last answer to the process's exit (the last turn's work, summary, run.json), s.
    pub after_last_answer_s: f64,
}

/// Time `exe run …` (the same episodes, turns, concurrency, size and frames as the in-process
/// measurement) against `server`; `assets` is passed on when the textures came from a folder.
#[allow(clippy::too_many_arguments)]
async fn run_process(
    exe: &std::path::Path,
    base_url: &str,
    model: &Delayed,
    dir: &std::path::Path,
    episodes: usize,
    turns: u32,
    concurrency: usize,
    image_size: usize,
    assets: Option<&std::path::Path>,
    ideal_s: f64,
) -> Result<ProcessFigures, String> {
    model.clear();
    let mut cmd = tokio::process::Command::new(exe);
    cmd.args(["run", "--model", "bench", "--base-url", base_url])
        .args([
            "--seeds",
            &episodes.to_string(),
            "--steps",
            &turns.to_string(),
        ])
        .args(["--concurrency", &concurrency.to_string()])
        .args(["--image-size", &image_size.to_string()])
        .args(["--episode-length", "10000", "--max-retries", "0", "--quiet"])
        .args([
            "--modality",
            "both",
            "--history",
            "3",
            "--image-history",
            "1",
        ])
        .args(["--frames", "all", "--run-name", "process"])
        .arg("--out")
        .arg(dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    if let Some(a) = assets {
        cmd.arg("--assets").arg(a);
    }
    let started = Instant::now();
    let child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
    let output = child
        .wait_with_output()
        .await
        .map_err(|e| format!("the benchmark's run process: {e}"))?;
    let wall_s = started.elapsed().as_secs_f64();
    if !output.status.success() {
        let err = String::from_utf8_lossy(&output.stderr);
        return Err(format!(
            "the benchmark's run process failed ({}): {}",
            output.status,
            err.lines().last().unwrap_or("").trim()
        ));
    }
    let (Some(first), Some(last)) = model.seen() else {
        return Err("the benchmark's run process sent no request".into());
    };
    let secs = |a: Instant, b: Instant| b.saturating_duration_since(a).as_secs_f64();
    Ok(ProcessFigures {
        wall_s,
        ratio: wall_s / ideal_s.max(1e-9),
        to_first_request_s: secs(started, first),
        requests_s: secs(first, last),
        after_last_answer_s: wall_s - secs(started, last),
    })
}

/// A model wrapper that adds up the time spent inside the model.
struct Timed {
    inner: ScriptedModel,
    nanos: AtomicU64,
}

impl ChatModel for Timed {
    fn name(&self) -> &str {
        "timed-scripted"
    }
    fn chat<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<ChatReply, ModelError>> {
        Box::pin(async move {
            let t = Instant::now();
            let r = self.inner.chat(request).await;
            self.nanos
                .fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
            r
        })
    }
}

fn options(
    seeds: usize,
    turns: u32,
    concurrency: usize,
    image_size: usize,
    textures: Arc<TextureSet>,
    frames: FramesMode,
) -> RunOptions {
    let conversation = ConversationConfig {
        system: Prompts::builtin().system(Protocol::Tool, 8),
        protocol: Protocol::Tool,
        modality: Modality::Both,
        history: 3,
        image_history: 1,
        max_actions: 8,
        temperature: None,
        max_tokens: None,
        seed: None,
        tool_choice: true,
        layout: Default::default(),
    };
    RunOptions {
        episode: EpisodeConfig {
            model: "bench".into(),
            turns,
            episode_length: 10_000,
            image_size,
            obs_format: ObsFormat::State,
            conversation,
            textures,
            prices: None,
            budget: Default::default(),
            cache: None,
            api_seed: false,
            prompt_cache_key: None,
            play: Default::default(),
            frames,
        },
        seeds: (0..seeds as i64).collect(),
        concurrency,
        force: true,
        progress: false,
        run_info: serde_json::json!({"config": {"bench": true}}),
        stop_on_ctrl_c: false,
    }
}

/// Run the harness benchmark (results go to a scratch folder inside `out`, removed afterwards).
/// With `exe` (the `vlm-eval` binary), the same episodes are also played by a `vlm-eval run`
/// process (given `--assets assets` when set) and timed from spawn to exit.
#[allow(clippy::too_many_arguments)]
pub async fn bench_harness(
    out: &std::path::Path,
    episodes: usize,
    turns: u32,
    latency_ms: u64,
    concurrency: usize,
    image_size: usize,
    textures: Arc<TextureSet>,
    exe: Option<&std::path::Path>,
    assets: Option<&std::path::Path>,
) -> Result<HarnessBenchReport, String> {
    let dir = out.join(format!(".bench-{}", std::process::id()));
    let result = async {
        let delayed = Arc::new(Delayed::new(Duration::from_millis(latency_ms)));
        let server = MockServer::start(delayed.clone())
            .await
            .map_err(|e| format!("cannot start the local server: {e}"))?;
        let mut cfg = OpenAiConfig::new(server.base_url(), "bench");
        cfg.max_retries = 0;
        let model: Arc<dyn ChatModel> = Arc::new(OpenAiModel::new(cfg).map_err(|e| e.to_string())?);
        let opts = options(
            episodes,
            turns,
            concurrency,
            image_size,
            textures.clone(),
            FramesMode::All,
        );
        let t = Instant::now();
        let out = run(opts, RunDir::new(dir.join("latency")), model)
            .await
            .map_err(|e| e.to_string())?;
        let wall_s = t.elapsed().as_secs_f64();
        if out.summary.errors > 0 {
            return Err(format!(
                "{} episode(s) errored during the benchmark",
                out.summary.errors
            ));
        }
        let rounds = episodes.div_ceil(concurrency.max(1)) as f64;
        let ideal_s = rounds * turns as f64 * latency_ms as f64 / 1000.0;
        let process = match exe {
            Some(exe) => Some(
                run_process(
                    exe,
                    &server.base_url(),
                    &delayed,
                    &dir,
                    episodes,
                    turns,
                    concurrency,
                    image_size,
                    assets,
                    ideal_s,
                )
                .await?,
            ),
            None => None,
        };

        // Harness work per turn: one episode at a time, in-process model, its time subtracted;
        // once per `--frames` mode.
        let n = episodes.min(16);
        let mut by_mode = Vec::new();
        let mut files = Vec::new();
        for mode in [FramesMode::All, FramesMode::Sent, FramesMode::None] {
            let timed = Arc::new(Timed {
                inner: ScriptedModel,
                nanos: AtomicU64::new(0),
            });
            let opts = options(n, turns, 1, image_size, textures.clone(), mode);
            let work = dir.join(format!("work-{}", mode.as_str()));
            let t = Instant::now();
            let out = run(opts, RunDir::new(work.clone()), timed.clone())
                .await
                .map_err(|e| e.to_string())?;
            let total = t.elapsed().as_secs_f64();
            let model_s = timed.nanos.load(Ordering::Relaxed) as f64 / 1e9;
            let played = out.episodes.iter().map(|e| e.turns).sum::<u32>().max(1) as f64;
            by_mode.push((
                mode.as_str().to_string(),
                (total - model_s) * 1000.0 / played,
            ));
            let (count, bytes) = png_files(&work);
            files.push((
                mode.as_str().to_string(),
                count as f64 / played,
                bytes as f64 / played,
            ));
        }
        Ok(HarnessBenchReport {
            episodes,
            turns,
            latency_ms,
            concurrency,
            wall_s,
            ideal_s,
            ratio: wall_s / ideal_s.max(1e-9),
            harness_ms_per_turn: by_mode[0].1,
            image_size,
            harness_ms_per_turn_by_frames: by_mode,
            frame_files_per_turn_by_frames: files,
            process,
        })
    }
    .await;
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// PNG files under a folder and their total bytes.
fn png_files(dir: &std::path::Path) -> (u64, u64) {
    let (mut n, mut bytes) = (0, 0);
    let Ok(entries) = std::fs::read_dir(dir) else {
        return (0, 0);
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            let (a, b) = png_files(&p);
            n += a;
            bytes += b;
        } else if p.extension().is_some_and(|x| x == "png") {
            n += 1;
            bytes += e.metadata().map(|m| m.len()).unwrap_or(0);
        }
    }
    (n, bytes)
}
