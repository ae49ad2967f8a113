//! `vlm-eval frames`: play a fixed action cycle without a model and save the frames exactly as
//! a run would (same env settings, same PNG encoding), plus `preview.jsonl` with one image-only
//! user message per frame: a quick look at what a model would be shown.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;
use serde_json::json;

use crate::cli::{load_textures, CliError};
use crate::crafter::trace::sha256_hex;
use crate::crafter::{Action, Env, EnvConfig, TextureSet, ACTION_NAMES};
use crate::model::openai::png_data_url;

use super::episode::encode_png;
use super::store::{write_atomic, EpisodeWriter};

/// The default action cycle: stand still, walk each way, interact.
pub const DEFAULT_CYCLE: [Action; 6] = [
    Action::Noop,
    Action::MoveLeft,
    Action::MoveRight,
    Action::MoveUp,
    Action::MoveDown,
    Action::Do,
];

/// `vlm-eval frames` flags.
#[derive(Args, Debug)]
pub struct FramesArgs {
    /// Env seed (as in `run --seed-list`).
    #[arg(long, default_value_t = 0, allow_hyphen_values = true)]
    pub seed: i64,
    /// Env steps to play (frames saved: steps + 1, step_0000 being the reset frame).
    #[arg(long, default_value_t = 5)]
    pub steps: u32,
    /// Actions to cycle through, by name or id [default: noop,move_left,move_right,move_up,move_down,do].
    #[arg(long, value_delimiter = ',')]
    pub actions: Option<Vec<String>>,
    /// Frame size in pixels, as `run --image-size` [default: 64].
    #[arg(long, default_value_t = 64)]
    pub image_size: usize,
    /// Game length in env steps, as `run --episode-length`.
    #[arg(long, default_value_t = 10_000)]
    pub episode_length: u32,
    /// Output folder [default: results/frames_seed<SEED>].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Directory with crafter's textures.
    #[arg(long)]
    pub assets: Option<PathBuf>,
}

/// One saved frame: the action that led to it (None for the reset frame) and its PNG.
#[derive(Clone, Debug)]
pub struct Frame {
    /// Env step of the frame (0 = after reset).
    pub step: u32,
    /// Action played to reach it.
    pub action: Option<Action>,
    /// PNG bytes, encoded as a run encodes them.
    pub png: Vec<u8>,
}

/// Play `steps` env steps cycling through `actions` (stopping early when the episode ends) and
/// return every frame, exactly as a run with the same seed, size and length renders them.
pub fn play_frames(
    textures: &TextureSet,
    seed: i64,
    image_size: usize,
    episode_length: u32,
    actions: &[Action],
    steps: u32,
) -> Result<Vec<Frame>, String> {
    if actions.is_empty() {
        return Err("no actions to play".into());
    }
    let cfg = EnvConfig {
        seed,
        size: [image_size, image_size],
        length: Some(episode_length),
        ..EnvConfig::default()
    };
    let mut env = Env::new(cfg, textures).map_err(|e| e.to_string())?;
    env.reset();
    let mut frames = vec![Frame {
        step: 0,
        action: None,
        png: encode_png(env.frame(), image_size),
    }];
    for action in actions.iter().cycle().take(steps as usize) {
        let out = env.step(*action);
        frames.push(Frame {
            step: env.step_count(),
            action: Some(*action),
            png: encode_png(env.frame(), image_size),
        });
        if out.done {
            break;
        }
    }
    Ok(frames)
}

/// Parse `--actions` (names or ids); an unknown one is a usage error listing the valid names.
pub fn parse_actions(list: &[String]) -> Result<Vec<Action>, CliError> {
    let mut out = Vec::with_capacity(list.len());
    for s in list {
        let s = s.trim();
        let found = match s.parse::<i64>() {
            Ok(id) => Action::from_id(id),
            Err(_) => Action::from_name(s),
        };
        match found {
            Some(a) => out.push(a),
            None => {
                return Err(CliError::usage(format!(
                    "unknown action '{s}' in --actions: use ids 0..=16 or these names: {}",
                    ACTION_NAMES.join(", ")
                )))
            }
        }
    }
    if out.is_empty() {
        return Err(CliError::usage(format!(
            "--actions is empty: give at least one of {}",
            ACTION_NAMES.join(", ")
        )));
    }
    Ok(out)
}

fn write_err(path: &Path, e: impl std::fmt::Display) -> CliError {
    CliError {
        code: 1,
        message: format!("cannot write {}: {e}", path.display()),
    }
}

/// Run `vlm-eval frames`.
pub fn cmd_frames(a: FramesArgs) -> Result<i32, CliError> {
    if !(9..=1024).contains(&a.image_size) {
        return Err(CliError::usage(format!(
            "--image-size {} is out of range: use 9..=1024 pixels (64 is crafter's default)",
            a.image_size
        )));
    }
    let actions = match &a.actions {
        Some(list) => parse_actions(list)?,
        None => DEFAULT_CYCLE.to_vec(),
    };
    let textures = load_textures(a.assets.as_deref())?;
    let frames = play_frames(
        &textures,
        a.seed,
        a.image_size,
        a.episode_length,
        &actions,
        a.steps,
    )
    .map_err(CliError::usage)?;
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("results").join(format!("frames_seed{}", a.seed)));
    let mut preview = Vec::new();
    for f in &frames {
        // Same names as a run's frames/ folder.
        let rel = EpisodeWriter::frame_rel(f.step);
        let name = rel.trim_start_matches("frames/");
        let path = out.join(name);
        write_atomic(&path, &f.png).map_err(|e| write_err(&path, e))?;
        let row = json!({
            "messages": [{
                "role": "user",
                "content": [{"type": "image_url", "image_url": {"url": png_data_url(&f.png)}}],
            }],
            "metadata": {
                "seed": a.seed,
                "step": f.step,
                "action": f.action.map(|x| x.name()),
                "frame": name,
                "sha256": sha256_hex(&f.png),
                "image_size": a.image_size,
                "textures": textures.kind(),
            },
        });
        serde_json::to_writer(&mut preview, &row).map_err(|e| write_err(&out, e))?;
        preview.push(b'\n');
    }
    let preview_path = out.join("preview.jsonl");
    write_atomic(&preview_path, &preview).map_err(|e| write_err(&preview_path, e))?;
    let mut stdout = std::io::stdout().lock();
    let ended = frames.len() < a.steps as usize + 1;
    let _ = writeln!(
        stdout,
        "{} frame(s) of seed {} at {}px ({} textures){} saved to {}; preview: {}",
        frames.len(),
        a.seed,
        a.image_size,
        textures.kind(),
        if ended {
            ", the episode ended early"
        } else {
            ""
        },
        out.display(),
        preview_path.display()
    );
    Ok(0)
}
