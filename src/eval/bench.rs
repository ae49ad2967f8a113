//! `vlm-eval bench harness`: how close concurrent episodes come to the ideal wall time against
//! a server with a fixed latency, and the harness's own work per turn.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
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
}

/// A model that answers like another after a fixed delay.
struct Delayed {
    inner: ScriptedModel,
    delay: Duration,
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
            tokio::time::sleep(self.delay).await;
            self.inner.chat(request).await
        })
    }
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
            play: Default::default(),
            frames,
        },
        seeds: (0..seeds as i64).collect(),
        concurrency,
        force: true,
        progress: false,
        run_info: serde_json::json!({"config": {"bench": true}}),
    }
}

/// Run the harness benchmark (results go to a scratch folder inside `out`, removed afterwards).
#[allow(clippy::too_many_arguments)]
pub async fn bench_harness(
    out: &std::path::Path,
    episodes: usize,
    turns: u32,
    latency_ms: u64,
    concurrency: usize,
    image_size: usize,
    textures: Arc<TextureSet>,
) -> Result<HarnessBenchReport, String> {
    let dir = out.join(format!(".bench-{}", std::process::id()));
    let result = async {
        let server = MockServer::start(Arc::new(Delayed {
            inner: ScriptedModel,
            delay: Duration::from_millis(latency_ms),
        }))
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
