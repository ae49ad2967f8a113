//! Replaying a run's episodes (`vlm-eval replay`, and the frames readers cannot find as files):
//! the game is played again from the run's settings and the trajectory's actions, every frame is
//! rendered and checked against the hash the run recorded (over the raw pixels, or, for runs
//! written before `rgb-sha256`, over the PNG as the run encoded it). The first difference stops the replay with one line naming the episode and step.
//!
//! It lives in `eval` because it needs the agent's protocol (a preset's reset Noop and double
//! render, the PNG encoding); readers in `report` get it as a [`Replayer`] (docs/ARCHITECTURE.md).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::agent::dialog::PlayOptions;
use crate::agent::observe::{encode_png, encode_png_paeth};
use crate::crafter::textures::FetchPolicy;
use crate::crafter::{Action, Env, EnvConfig, TextureSet, ENGINE_PARITY};
use crate::results::formats::EpisodeResult;
use crate::results::frame_reader::Replayer;
use crate::results::frames::{frames_sha256, rgb_sha256, sha256_hex, FrameHashKind};
use crate::results::run::{episode_dir, read_trajectory};

/// Why a replay was refused or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The run cannot be replayed here (engine, textures, missing records): bad input, exit 2.
    #[error("{0}")]
    Refused(String),
    /// A replayed frame differs from the run's record: exit 1.
    #[error("{0}")]
    Mismatch(String),
    /// Writing a frame failed: exit 1.
    #[error("{0}")]
    Write(String),
}

impl ReplayError {
    /// The exit code: 2 for a run that cannot be replayed here, 1 otherwise.
    pub fn exit_code(&self) -> i32 {
        match self {
            ReplayError::Refused(_) => 2,
            _ => 1,
        }
    }
}

/// What replaying a run needs from its run.json, checked against this engine and textures.
#[derive(Clone)]
pub struct ReplaySettings {
    image_size: usize,
    episode_length: u32,
    play: PlayOptions,
    textures: Arc<TextureSet>,
}

fn short(hash: &str) -> &str {
    &hash[..hash.len().min(12)]
}

impl ReplaySettings {
    /// Read the settings from a run's run.json; `textures` gives the texture set to use when
    /// the run used crafter's official textures (the built-in sprites are always at hand).
    pub fn from_run(
        info: &Value,
        textures: impl FnOnce() -> Result<TextureSet, String>,
    ) -> Result<ReplaySettings, ReplayError> {
        let refused = |m: String| ReplayError::Refused(m);
        match info["engine_parity"].as_u64() {
            Some(v) if v == ENGINE_PARITY as u64 => {}
            Some(v) => {
                return Err(refused(format!(
                    "the run was made by engine parity version {v} (vlm-eval {}), this vlm-eval replays version {ENGINE_PARITY}: replay it with the vlm-eval that made it",
                    info["vlm_eval_version"].as_str().unwrap_or("unknown")
                )))
            }
            None => {
                return Err(refused(
                    "run.json records no engine_parity: the run was made before vlm-eval recorded frame hashes, so its frames cannot be replayed and checked (its saved files are all it has)".into(),
                ))
            }
        }
        let c = &info["config"];
        let num = |k: &str| {
            c[k].as_u64().ok_or_else(|| {
                refused(format!(
                    "run.json has no config.{k}: not a run folder written by `vlm-eval run`"
                ))
            })
        };
        let image_size = num("image_size")? as usize;
        let episode_length = num("episode_length")? as u32;
        let play = PlayOptions {
            reset_noop: c["reset_noop"].as_bool().unwrap_or(false),
            render_twice: c["render_twice"].as_bool().unwrap_or(false),
            ..PlayOptions::default()
        };
        let want = info["textures"]["fingerprint"].as_str().unwrap_or("");
        let kind = info["textures"]["kind"].as_str().unwrap_or("");
        let set = if kind == "builtin" {
            TextureSet::builtin()
        } else {
            textures().map_err(|e| {
                refused(format!(
                    "cannot load crafter's textures to replay the run ({e}): pass --assets DIR (or set CRAFTER_ASSETS) to crafter's official textures"
                ))
            })?
        };
        if set.fingerprint() != want {
            return Err(refused(format!(
                "the run used {kind} textures with fingerprint {}, but the textures found here are {} ({}): pass --assets DIR (or set CRAFTER_ASSETS) to the textures the run used (`vlm-eval assets which` shows what is found)",
                short(want),
                set.kind(),
                short(&set.fingerprint())
            )));
        }
        Ok(ReplaySettings {
            image_size,
            episode_length,
            play,
            textures: Arc::new(set),
        })
    }

    /// The frame size in pixels.
    pub fn image_size(&self) -> usize {
        self.image_size
    }
}

/// A replayed episode's counts.
#[derive(Clone, Debug, Default)]
pub struct ReplayedEpisode {
    /// Frames rendered and checked.
    pub frames: u32,
    /// What the episode's frame hashes cover (`png-sha256` for runs written before
    /// `rgb-sha256`).
    pub hash: FrameHashKind,
}

/// One recorded step: the action played, the step it led to and its frame's sha256.
struct Recorded {
    action: Action,
    step: u32,
    sha256: Option<String>,
    line: usize,
}

/// Each turn's sent-frame sha256 by env step, with its trajectory line.
type SentHashes = HashMap<u32, (String, usize)>;

/// The recorded actions of an episode, each with its frame hash, and the hash of the frame each
/// turn was sent (by step).
fn recorded(run: &Path, seed: i64) -> Result<(Vec<Recorded>, SentHashes), ReplayError> {
    let lines = read_trajectory(run, seed)
        .map_err(|e| ReplayError::Refused(format!("seed {seed}: no trajectory to replay ({e})")))?;
    let mut steps = Vec::new();
    let mut sent = HashMap::new();
    for (i, line) in lines.iter().enumerate() {
        let n = i + 1;
        if let (Some(step), Some(h)) = (line["step"].as_u64(), line["frame"]["sha256"].as_str()) {
            sent.insert(step as u32, (h.to_string(), n));
        }
        for e in line["executed"].as_array().into_iter().flatten() {
            let name = e["action"].as_str().unwrap_or("");
            let action = Action::from_name(name).ok_or_else(|| {
                ReplayError::Mismatch(format!(
                    "seed {seed}: trajectory.jsonl line {n} plays unknown action {name:?}"
                ))
            })?;
            let step = e["step"].as_u64().ok_or_else(|| {
                ReplayError::Mismatch(format!(
                    "seed {seed}: trajectory.jsonl line {n} has an executed action without a step"
                ))
            })? as u32;
            steps.push(Recorded {
                action,
                step,
                sha256: e["frame_sha256"].as_str().map(str::to_string),
                line: n,
            });
        }
    }
    Ok((steps, sent))
}

/// Replay one complete episode of `run`, checking every frame against the hash the episode
/// records (of its kind: the raw pixels, or the PNG for older runs), and calling
/// `sink(step, png)` for each frame in step order once it is checked. Without a sink, frames of
/// an `rgb-sha256` episode are never PNG-encoded.
pub fn replay_episode(
    s: &ReplaySettings,
    run: &Path,
    seed: i64,
    mut sink: Option<&mut Sink<'_>>,
) -> Result<ReplayedEpisode, ReplayError> {
    let ep_path = episode_dir(run, seed).join("episode.json");
    let ep: EpisodeResult = std::fs::read_to_string(&ep_path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .ok_or_else(|| {
            ReplayError::Refused(format!(
                "seed {seed}: {} is missing or unreadable: only complete episodes can be replayed",
                ep_path.display()
            ))
        })?;
    let Some(frames) = ep.frames.clone() else {
        return Err(ReplayError::Refused(format!(
            "seed {seed}: episode.json records no frame hashes (written before vlm-eval recorded them)"
        )));
    };
    let (steps, sent) = recorded(run, seed)?;
    // Under a double render the first render of each step only draws noise from the game RNG:
    // this env skips it (advancing the RNG exactly as it would, `EnvConfig::render`) and renders
    // once, after the step, as the protocol's second render does.
    let cfg = EnvConfig {
        seed,
        size: [s.image_size, s.image_size],
        length: Some(s.episode_length),
        render: !s.play.render_twice,
        ..EnvConfig::default()
    };
    let mut env = Env::new(cfg, &s.textures)
        .map_err(|e| ReplayError::Refused(format!("seed {seed}: {e}")))?;
    env.reset();
    if s.play.render_twice {
        // The reset frame is a day frame: rendering it draws nothing from the RNG.
        env.render();
    }
    let mut checker = Checker {
        seed,
        size: s.image_size,
        kind: frames.hash,
        encode: frames.hash == FrameHashKind::Png || sink.is_some(),
        sent: &sent,
        pending: Vec::new(),
        hashes: Vec::new(),
        workers: std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
            .clamp(1, 8),
    };
    let reset_hash = |step: u32| {
        frames
            .reset
            .iter()
            .find(|h| h.step == step)
            .map(|h| h.sha256.clone())
    };
    let reset_what = "episode.json frames.reset".to_string();
    checker.push(&env, reset_hash(0), reset_what.clone(), &mut sink)?;
    if s.play.reset_noop {
        s.play.step(&mut env, Action::Noop);
        let step = env.step_count();
        checker.push(&env, reset_hash(step), reset_what, &mut sink)?;
    }
    let mut done = false;
    for r in &steps {
        let problem = if done {
            Some(format!(
                "seed {seed} step {}: the game had ended, but trajectory.jsonl line {} plays on",
                env.step_count(),
                r.line
            ))
        } else {
            done = s.play.step(&mut env, r.action).done;
            (env.step_count() != r.step).then(|| {
                format!(
                    "seed {seed} step {}: trajectory.jsonl line {} records this action as step {}",
                    env.step_count(),
                    r.line,
                    r.step
                )
            })
        };
        if let Some(p) = problem {
            // Frames before this step are checked first: the first difference is reported.
            checker.flush(&mut sink)?;
            return Err(ReplayError::Mismatch(p));
        }
        let what = format!("trajectory.jsonl line {}", r.line);
        checker.push(&env, r.sha256.clone(), what, &mut sink)?;
    }
    checker.flush(&mut sink)?;
    let hashes = checker.hashes;
    let total = frames_sha256(hashes.iter().map(String::as_str));
    if hashes.len() as u32 != frames.count || total != frames.sha256 {
        return Err(ReplayError::Mismatch(format!(
            "seed {seed}: the {} replayed frames hash to {}, episode.json records {} frames hashing to {} (an edited trajectory or episode.json)",
            hashes.len(),
            short(&total),
            frames.count,
            short(&frames.sha256)
        )));
    }
    Ok(ReplayedEpisode {
        frames: hashes.len() as u32,
        hash: frames.hash,
    })
}

/// Frames rendered but not yet encoded and checked, in step order.
struct Pending {
    step: u32,
    rgb: Vec<u8>,
    want: Option<String>,
    what: String,
}

/// Hashes (and, when needed, encodes) and checks frames in batches, the work spread over
/// threads (the game itself is played on one), handing each checked frame to the sink in step
/// order.
struct Checker<'a> {
    seed: i64,
    size: usize,
    /// What the recorded hashes cover.
    kind: FrameHashKind,
    /// Encode each frame as PNG (to hash it under `png-sha256`, or for the sink).
    encode: bool,
    sent: &'a SentHashes,
    pending: Vec<Pending>,
    hashes: Vec<String>,
    workers: usize,
}

/// Frames checked per batch.
const BATCH: usize = 32;

/// What receives each checked frame's PNG, in step order.
pub type Sink<'s> = dyn FnMut(u32, &[u8]) -> Result<(), ReplayError> + 's;

impl Checker<'_> {
    fn push(
        &mut self,
        env: &Env,
        want: Option<String>,
        what: String,
        sink: &mut Option<&mut Sink<'_>>,
    ) -> Result<(), ReplayError> {
        self.pending.push(Pending {
            step: env.step_count(),
            rgb: env.frame().to_vec(),
            want,
            what,
        });
        if self.pending.len() >= BATCH {
            self.flush(sink)?;
        }
        Ok(())
    }

    /// One frame's PNG (when encoding) and its hash of the episode's kind.
    fn hash_one(&self, rgb: &[u8]) -> (Vec<u8>, String) {
        let size = self.size;
        let png = match (self.encode, self.kind) {
            (false, _) => Vec::new(),
            // Those runs hashed the PNG of their version's encoder.
            (true, FrameHashKind::Png) => encode_png_paeth(rgb, size),
            (true, FrameHashKind::Rgb) => encode_png(rgb, size),
        };
        let hash = match self.kind {
            FrameHashKind::Png => sha256_hex(&png),
            FrameHashKind::Rgb => rgb_sha256(rgb, size, size),
        };
        (png, hash)
    }

    fn flush(&mut self, sink: &mut Option<&mut Sink<'_>>) -> Result<(), ReplayError> {
        let batch = std::mem::take(&mut self.pending);
        let per = batch.len().div_ceil(self.workers).max(1);
        let this = &*self;
        let encoded: Vec<(Vec<u8>, String)> = std::thread::scope(|sc| {
            let handles: Vec<_> = batch
                .chunks(per)
                .map(|chunk| {
                    sc.spawn(move || {
                        chunk
                            .iter()
                            .map(|p| this.hash_one(&p.rgb))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap_or_default())
                .collect()
        });
        if encoded.len() != batch.len() {
            return Err(ReplayError::Write("a frame encoder thread failed".into()));
        }
        let (seed, kind) = (self.seed, self.kind.as_str());
        for (p, (png, got)) in batch.iter().zip(encoded) {
            let step = p.step;
            if let Some(w) = &p.want {
                if *w != got {
                    return Err(ReplayError::Mismatch(format!(
                        "seed {seed} step {step}: frame {kind} {} differs from {} recorded in {} (other textures, another engine, or an edited trajectory)",
                        short(&got),
                        short(w),
                        p.what
                    )));
                }
            }
            if let Some((w, line)) = self.sent.get(&step) {
                if *w != got {
                    return Err(ReplayError::Mismatch(format!(
                        "seed {seed} step {step}: frame {kind} {} differs from the sent frame's {} in trajectory.jsonl line {line} (other textures, another engine, or an edited trajectory)",
                        short(&got),
                        short(w)
                    )));
                }
            }
            if let Some(sink) = sink.as_mut() {
                sink(step, &png)?;
            }
            self.hashes.push(got);
        }
        Ok(())
    }
}

/// Replays episodes for readers (report, export-sft): run.json read and checked once per run,
/// textures loaded once, only when a frame file is missing.
pub struct RunReplayer {
    assets: Option<PathBuf>,
    textures: Mutex<Option<Result<TextureSet, String>>>,
    settings: Mutex<HashMap<PathBuf, Result<ReplaySettings, String>>>,
}

impl RunReplayer {
    /// A replayer that finds crafter's official textures as every rendering command does
    /// (`assets`, else `$CRAFTER_ASSETS`, the cache, an installed crafter).
    pub fn new(assets: Option<PathBuf>) -> RunReplayer {
        RunReplayer {
            assets,
            textures: Mutex::new(None),
            settings: Mutex::new(HashMap::new()),
        }
    }

    fn official(&self) -> Result<TextureSet, String> {
        let mut slot = self.textures.lock().unwrap_or_else(|p| p.into_inner());
        slot.get_or_insert_with(|| {
            TextureSet::discover_with(self.assets.as_deref(), FetchPolicy::from_env(), &mut |m| {
                eprintln!("{m}")
            })
            .map(|(set, _)| set)
            .map_err(|e| e.to_string())
        })
        .clone()
    }

    fn settings(&self, run: &Path) -> Result<ReplaySettings, String> {
        if let Some(s) = self
            .settings
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(run)
        {
            return s.clone();
        }
        let s = std::fs::read_to_string(run.join("run.json"))
            .map_err(|e| format!("{}: {e}", run.join("run.json").display()))
            .and_then(|t| serde_json::from_str::<Value>(&t).map_err(|e| e.to_string()))
            .and_then(|info| {
                ReplaySettings::from_run(&info, || self.official()).map_err(|e| e.to_string())
            });
        self.settings
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(run.to_path_buf(), s.clone());
        s
    }
}

impl Replayer for RunReplayer {
    fn replay(&self, run: &Path, seed: i64) -> Result<Vec<Vec<u8>>, String> {
        let s = self.settings(run)?;
        let mut frames = Vec::new();
        let mut keep = |_: u32, png: &[u8]| {
            frames.push(png.to_vec());
            Ok(())
        };
        replay_episode(&s, run, seed, Some(&mut keep)).map_err(|e| e.to_string())?;
        Ok(frames)
    }
}
