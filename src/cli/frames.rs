//! `vlm-eval frames`: play a fixed action cycle without a model and save the frames exactly as
//! a run would (see [`crate::eval::frames`]), plus `preview.jsonl` with one image-only user
//! message per frame.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;
use serde_json::json;

use super::common::load_textures;
use super::error::CliError;
use crate::agent::dialog::PlayOptions;
use crate::agent::preset::{Preset, DEFAULT_PRESET};
use crate::crafter::trace::sha256_hex;
use crate::crafter::{Action, ACTION_NAMES};
use crate::eval::frames::{play_frames, DEFAULT_CYCLE};
use crate::model::openai::png_data_url;
use crate::results::store::{write_atomic, EpisodeWriter};

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
    /// Frame size in pixels, as `run --image-size` [default: 64, or the preset's].
    #[arg(long)]
    pub image_size: Option<usize>,
    /// Game length in env steps, as `run --episode-length` [default: 10000, or the preset's].
    #[arg(long)]
    pub episode_length: Option<u32>,
    /// Render as a run of this preset does (`vlm-eval presets`): its frame size and game
    /// length, and for `balrog` its reset Noop (saved as step 1) and double render.
    #[arg(long)]
    pub preset: Option<String>,
    /// Output folder [default: results/frames_seed<SEED>].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Directory with crafter's textures.
    #[arg(long)]
    pub assets: Option<PathBuf>,
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
    let preset = Preset::builtin(a.preset.as_deref().unwrap_or(DEFAULT_PRESET))
        .map_err(|e| CliError::usage(e.to_string()))?;
    let image_size = a.image_size.unwrap_or(preset.observation.image_size);
    let episode_length = a.episode_length.unwrap_or(preset.episode.episode_length);
    if !(9..=1024).contains(&image_size) {
        return Err(CliError::usage(format!(
            "--image-size {image_size} is out of range: use 9..=1024 pixels (64 is crafter's default)"
        )));
    }
    let play = PlayOptions {
        reset_noop: preset.observation.reset_noop,
        render_twice: preset.observation.render_twice,
        ..PlayOptions::default()
    };
    let actions = match &a.actions {
        Some(list) => parse_actions(list)?,
        None => DEFAULT_CYCLE.to_vec(),
    };
    let textures = load_textures(a.assets.as_deref())?;
    let frames = play_frames(
        &textures,
        a.seed,
        image_size,
        episode_length,
        &actions,
        a.steps,
        &play,
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
                "image_size": image_size,
                "preset": preset.name,
                "textures": textures.kind(),
            },
        });
        serde_json::to_writer(&mut preview, &row).map_err(|e| write_err(&out, e))?;
        preview.push(b'\n');
    }
    let preview_path = out.join("preview.jsonl");
    write_atomic(&preview_path, &preview).map_err(|e| write_err(&preview_path, e))?;
    let mut stdout = std::io::stdout().lock();
    let ended = frames.len() < a.steps as usize + 1 + play.reset_noop as usize;
    let _ = writeln!(
        stdout,
        "{} frame(s) of seed {} at {}px ({} textures){} saved to {}; preview: {}",
        frames.len(),
        a.seed,
        image_size,
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
