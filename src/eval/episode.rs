//! One episode: reset the env, then per turn observe → ask the model → parse → step each action
//! (stopping on done), saving every frame and one trajectory line per turn.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Value};

use crate::agent::conversation::{ConversationConfig, Modality};
use crate::agent::dialog::{Dialog, PlayOptions};
use crate::agent::observe::{encode_png, ObsFormat};
use crate::agent::parse::Outcome;
use crate::crafter::{Action, Env, EnvConfig, TextureSet, ACHIEVEMENT_NAMES};
use crate::eval::budget::usage_counts;
use crate::model::{ChatModel, ChatReply, Usage};
use crate::results::formats::Spend;
use crate::results::frames::{
    frames_sha256, rgb_sha256, EpisodeFrames, FrameHash, FrameHashKind, FramesMode,
};

use super::budget::Budget;
use super::cache::ResponseCache;
use crate::results::formats::{latency_stats, EpisodeResult, FormatCounts, Termination};
use crate::results::store::{EpisodeWriter, RunDir, StoreError};

/// Options for every episode of a run.
#[derive(Clone)]
pub struct EpisodeConfig {
    /// Model name recorded in results.
    pub model: String,
    /// Model turns per episode.
    pub turns: u32,
    /// Game length (steps) per episode.
    pub episode_length: u32,
    /// Frame size in pixels (square); also the env's render size.
    pub image_size: usize,
    /// Text observation format.
    pub obs_format: ObsFormat,
    /// Request building.
    pub conversation: ConversationConfig,
    /// Textures.
    pub textures: Arc<TextureSet>,
    /// The model's price (None: unknown, cost null).
    pub prices: Option<crate::model::prices::Price>,
    /// Run-wide spending limits.
    pub budget: Arc<Budget>,
    /// Response cache, if enabled.
    pub cache: Option<Arc<ResponseCache>>,
    /// Send the episode's env seed as the API `seed` parameter.
    pub api_seed: bool,
    /// Send `prompt_cache_key` `<this>-s<seed>` with every request of an episode.
    pub prompt_cache_key: Option<String>,
    /// The protocol around the model: layout, parser, feedback, reset and render (presets).
    pub play: PlayOptions,
    /// Which frame files to write (`--frames`); every frame's hash is recorded whichever.
    pub frames: FramesMode,
}

/// An episode's frames as the run records them: each rendered frame hashed over its raw pixels
/// (`rgb-sha256`), and PNG-encoded only when it is written (`--frames all`, `sent`) or sent to
/// the model. A frame sent is encoded once, for the request and its file; the other frames
/// `all` writes are encoded on the store's writer thread, off the episode's path.
struct FrameLog {
    mode: FramesMode,
    image_size: usize,
    hashes: Vec<String>,
    /// The current frame's PNG, once encoded.
    png: Option<Arc<Vec<u8>>>,
    /// Under `all`: the current frame's step and pixels, until it is written.
    unwritten: Option<(u32, Vec<u8>)>,
}

impl FrameLog {
    fn new(mode: FramesMode, image_size: usize) -> FrameLog {
        FrameLog {
            mode,
            image_size,
            hashes: Vec::new(),
            png: None,
            unwritten: None,
        }
    }

    /// Hash the env's current frame (after a reset or a step); returns its hash. Under `all`
    /// the frame before it, if not yet written, goes to the writer thread to be encoded.
    fn take(&mut self, env: &Env, writer: &EpisodeWriter) -> Result<String, StoreError> {
        let size = self.image_size;
        let hash = rgb_sha256(env.frame(), size, size);
        self.flush(writer)?;
        self.png = None;
        if self.mode.writes_every_step() {
            self.unwritten = Some((env.step_count(), env.frame().to_vec()));
        }
        self.hashes.push(hash.clone());
        Ok(hash)
    }

    /// The env's current frame as PNG (the frame last taken), encoded now if it was not yet;
    /// under `all` its file is written from these bytes.
    fn png(&mut self, env: &Env, writer: &EpisodeWriter) -> Result<Arc<Vec<u8>>, StoreError> {
        if let Some(png) = &self.png {
            return Ok(png.clone());
        }
        let png = Arc::new(encode_png(env.frame(), self.image_size));
        if let Some((step, _)) = self.unwritten.take() {
            writer.write_frame(step, png.clone())?;
        }
        self.png = Some(png.clone());
        Ok(png)
    }

    /// Hand the current frame, if not yet written, to the writer thread.
    fn flush(&mut self, writer: &EpisodeWriter) -> Result<(), StoreError> {
        if let Some((step, rgb)) = self.unwritten.take() {
            let size = self.image_size;
            writer.write_frame_with(step, Box::new(move || encode_png(&rgb, size)))?;
        }
        Ok(())
    }

    /// episode.json's `frames`.
    fn summary(&self, reset: Vec<FrameHash>) -> EpisodeFrames {
        EpisodeFrames {
            saved: self.mode,
            count: self.hashes.len() as u32,
            sha256: frames_sha256(self.hashes.iter().map(String::as_str)),
            reset,
            hash: FrameHashKind::CURRENT,
        }
    }
}

fn add(total: Option<u64>, part: Option<u64>, first: bool) -> Option<u64> {
    match (total, part) {
        (Some(t), Some(p)) => Some(t + p),
        (None, Some(p)) if first => Some(p),
        _ => None,
    }
}

fn reply_json(reply: &ChatReply) -> Value {
    json!({
        "text": reply.text,
        "tool_calls": reply.tool_calls,
        "reasoning": reply.reasoning,
        "finish_reason": reply.finish_reason,
        "raw": reply.raw,
    })
}

/// Play one episode and store it. Returns the result (also written as `episode.json`).
pub async fn run_episode(
    cfg: &EpisodeConfig,
    model: &dyn ChatModel,
    store: &RunDir,
    seed: i64,
    mut on_turn: impl FnMut(u32, &[usize]),
) -> Result<EpisodeResult, StoreError> {
    let started = Instant::now();
    // A rerun replaces an errored or budget-stopped try of this seed: keep what it spent.
    let spent_before = previous_spend(store, seed);
    let mut writer = store.start_episode(seed)?;
    let env_cfg = EnvConfig {
        seed,
        size: [cfg.image_size, cfg.image_size],
        length: Some(cfg.episode_length),
        ..EnvConfig::default()
    };
    // Sizes are validated by the CLI before a run starts.
    let mut env = Env::new(env_cfg, &cfg.textures).expect("validated env config");
    env.reset();
    let mut log = FrameLog::new(cfg.frames, cfg.image_size);
    // The model is shown the frame unless the run sends text only.
    let sends_images = cfg.conversation.modality != Modality::Text;
    let mut frame_hash = log.take(&env, &writer)?;
    let mut reset_frames = vec![FrameHash {
        step: 0,
        sha256: frame_hash.clone(),
    }];
    let mut num_steps = 0u32;
    if cfg.play.reset_noop {
        // BALROG's reset plays one Noop before the first observation (its reward is not counted).
        cfg.play.step(&mut env, Action::Noop);
        num_steps += 1;
        frame_hash = log.take(&env, &writer)?;
        reset_frames.push(FrameHash {
            step: env.step_count(),
            sha256: frame_hash.clone(),
        });
    }
    let mut conv_cfg = cfg.conversation.clone();
    if cfg.api_seed {
        conv_cfg.seed = Some(seed);
    }
    let mut dialog = Dialog::new(conv_cfg, cfg.play.clone(), cfg.obs_format);
    let mut achievements = env.world().player.achievements;
    let mut unlock_step = BTreeMap::new();
    let mut format = FormatCounts::default();
    let (mut ret, mut turns) = (0.0f64, 0u32);
    let (mut invalid, mut unknown, mut truncated, mut retries) = (0u32, 0u32, 0u32, 0u32);
    let mut retry_wait_ms = 0.0f64;
    let mut spent = Spend::start(cfg.prices.is_some());
    let mut reply_cost = Some(0.0f64);
    let (mut input_tokens, mut output_tokens) = (None, None);
    let mut latencies = Vec::new();
    let mut termination = Termination::TurnBudget;
    let mut error = None;
    'turns: for turn in 0..cfg.turns {
        if cfg.budget.exhausted() {
            termination = Termination::Budget;
            break;
        }
        let frame = if sends_images {
            log.png(&env, &writer)?
        } else {
            Arc::default()
        };
        let mut prompted = dialog.prompt(&env, frame.clone());
        if let Some(key) = &cfg.prompt_cache_key {
            prompted.request.prompt_cache_key = Some(format!("{key}-s{seed}"));
        }
        let (observation, user, request) =
            (&prompted.observation, &prompted.user, &prompted.request);
        let step_before = env.step_count();
        let sent_hash = frame_hash.clone();
        if cfg.frames == FramesMode::Sent && user.image_count() > 0 {
            writer.write_frame(step_before, frame.clone())?;
        }
        let answer = match &cfg.cache {
            Some(cache) => cache.chat(model, request, seed, turn).await,
            None => model.chat_traced(request).await.map(|r| (r, false)),
        };
        let (reply, cache_hit) = match answer {
            Ok(r) => r,
            Err(failure) => {
                // The failed turn's attempts were sent (and maybe billed): count them.
                spend_call(cfg, &mut spent, &failure.attempts, None);
                retries += failure.retries();
                retry_wait_ms += failure.retry_wait_ms();
                termination = Termination::Error;
                error = Some(format!("turn {turn}: {}", failure.error));
                writer.append(&json!({
                    "turn": turn,
                    "step": step_before,
                    "observation": observation,
                    "error": failure.error.to_string(),
                    "retries": failure.retries(),
                    "retry_wait_ms": failure.retry_wait_ms(),
                    "attempts": failure.attempts,
                }))?;
                break;
            }
        };
        turns += 1;
        if !cache_hit {
            spend_call(cfg, &mut spent, &reply.attempts, Some(&reply.usage));
        }
        retries += reply.retries;
        retry_wait_ms += reply.retry_wait_ms;
        latencies.push(reply.latency_ms);
        input_tokens = add(input_tokens, reply.usage.input_tokens, turn == 0);
        let billed_output = reply
            .usage
            .billed_output_tokens
            .or(reply.usage.output_tokens);
        output_tokens = add(output_tokens, billed_output, turn == 0);
        reply_cost = reply_cost
            .zip(cfg.prices.as_ref())
            .map(|(c, p)| c + p.cost(&reply.usage));
        let judged = dialog.judge(&reply);
        let parsed = &judged.parsed;
        unknown += parsed.unknown.len() as u32;
        truncated += parsed.truncated as u32;
        match judged.outcome {
            Outcome::Exact => format.exact += 1,
            Outcome::Repaired => format.repaired += 1,
            Outcome::Invalid => format.invalid += 1,
        }
        let was_invalid = judged.is_invalid();
        let actions = if was_invalid {
            invalid += 1;
            vec![Action::Noop]
        } else {
            parsed.actions.clone()
        };
        let mut executed = Vec::new();
        let mut done = false;
        for action in &actions {
            let out = cfg.play.step(&mut env, *action);
            num_steps += 1;
            ret += out.reward;
            frame_hash = log.take(&env, &writer)?;
            let counts = env.world().player.achievements;
            for &i in &out.unlocked {
                unlock_step
                    .entry(ACHIEVEMENT_NAMES[i].to_string())
                    .or_insert(env.step_count());
            }
            achievements = counts;
            executed.push(json!({
                "action": action.name(),
                "step": env.step_count(),
                "reward": out.reward,
                "unlocked": out.unlocked.iter().map(|&i| ACHIEVEMENT_NAMES[i]).collect::<Vec<_>>(),
                "done": out.done,
                "frame": EpisodeWriter::frame_rel(env.step_count()),
                "frame_sha256": frame_hash,
            }));
            on_turn(turn, &out.unlocked);
            if out.done {
                termination = if out.dead {
                    Termination::Death
                } else {
                    Termination::Length
                };
                done = true;
                break;
            }
        }
        let names: Vec<&str> = executed
            .iter()
            .filter_map(|e| e["action"].as_str())
            .collect();
        let summary = format!("Executed {} action(s): {}.", names.len(), names.join(", "));
        let frame_rel = EpisodeWriter::frame_rel(step_before);
        let mut line = json!({
            "turn": turn,
            "step": step_before,
            "observation": observation,
            "note": prompted.note,
            "user_text": user.joined_text(),
            "frame": {"path": frame_rel, "sha256": sent_hash, "sent": user.image_count() > 0},
            "request": {
                "messages": request.messages.len(),
                "images": request.messages.iter().map(|m| m.image_count()).sum::<usize>(),
                "tools": request.tools.iter().map(|t| t.name.clone()).collect::<Vec<_>>(),
                "temperature": request.temperature,
                "max_tokens": request.max_tokens,
            },
            "reply": reply_json(&reply),
            "parsed": judged,
            "invalid": was_invalid,
            "executed": executed,
            "usage": reply.usage,
            "latency_ms": reply.latency_ms,
            "retries": reply.retries,
            "cache_hit": cache_hit,
            "retry_wait_ms": reply.retry_wait_ms,
            "attempts": (reply.retries > 0).then_some(&reply.attempts),
        });
        if let Some(b) = &prompted.balrog {
            line["balrog"] = json!(b);
        }
        if let Some(w) = reply.usage.warning {
            // Recorded as reported (reply.raw keeps the body); never billed negative.
            line["usage_warning"] = json!(w.describe());
        }
        writer.append(&line)?;
        dialog.record(prompted, &reply, &judged, &summary);
        if done {
            break 'turns;
        }
    }
    let score = achievements.iter().filter(|&&c| c > 0).count() as u32;
    // The replies' cost, when every reply reported its usage (as the token fields).
    let cost_usd = reply_cost.filter(|_| input_tokens.is_some() && output_tokens.is_some());
    let result = EpisodeResult {
        seed,
        world_seed: env.world_seed(),
        model: cfg.model.clone(),
        progression: score as f64 / 22.0,
        score,
        achievements: ACHIEVEMENT_NAMES
            .iter()
            .zip(achievements)
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
        unlock_step,
        num_steps,
        episode_return: ret,
        turns,
        termination,
        invalid_actions: invalid,
        unknown_actions: unknown,
        truncated_actions: truncated,
        format: Some(format),
        input_tokens,
        output_tokens,
        retries,
        retry_wait_ms,
        latency_ms: latency_stats(latencies),
        cost_usd,
        error,
        wall_s: started.elapsed().as_secs_f64(),
        spent: Some(spent),
        spent_before,
        frames: Some(log.summary(reset_frames)),
    };
    log.flush(&writer)?;
    writer.finish(&result).await?;
    Ok(result)
}

/// Count one model call into the episode's spend and charge the run's budget with the tokens
/// it added: every HTTP attempt (each after the first a retry) or, for an in-process model (no
/// attempts), its one reply's `usage`.
fn spend_call(
    cfg: &EpisodeConfig,
    spent: &mut Spend,
    attempts: &[crate::model::Attempt],
    usage: Option<&Usage>,
) {
    let price = cfg.prices.as_ref();
    let (tokens, cost) = (
        spent.input_tokens + spent.output_tokens,
        spent.cost_usd.unwrap_or(0.0),
    );
    if attempts.is_empty() {
        if let Some(u) = usage {
            spent.add_usage(&usage_counts(u, price));
        }
    }
    for (i, a) in attempts.iter().enumerate() {
        let counts = a.usage.as_ref().map(|u| usage_counts(u, price));
        spent.add_request(i > 0, counts.as_ref(), a.error.is_none());
    }
    let added_tokens = spent.input_tokens + spent.output_tokens - tokens;
    let added_cost = spent.cost_usd.map(|c| c - cost);
    cfg.budget.add(added_tokens, added_cost);
}

/// What earlier tries of this seed spent, from the episode.json a rerun replaces.
fn previous_spend(store: &RunDir, seed: i64) -> Option<Spend> {
    let old = store.finished_episode(seed)?;
    let before = old.spent_before.clone();
    Some(Spend::total(before.iter().chain([&old.spend()])))
}
