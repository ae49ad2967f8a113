//! Frames without a model: play a fixed action cycle and render every frame exactly as a run
//! would (same env settings, same PNG encoding). The `frames` command is in `cli/frames.rs`.

use crate::crafter::{Action, Env, EnvConfig, TextureSet};

use crate::agent::dialog::PlayOptions;
use crate::agent::observe::encode_png;

/// The default action cycle: stand still, walk each way, interact.
pub const DEFAULT_CYCLE: [Action; 6] = [
    Action::Noop,
    Action::MoveLeft,
    Action::MoveRight,
    Action::MoveUp,
    Action::MoveDown,
    Action::Do,
];

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
/// return every frame, exactly as a run with the same seed, size, length and protocol (`play`:
/// a preset's reset Noop, whose frame is the second one, and double render) renders them.
pub fn play_frames(
    textures: &TextureSet,
    seed: i64,
    image_size: usize,
    episode_length: u32,
    actions: &[Action],
    steps: u32,
    play: &PlayOptions,
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
    if play.reset_noop {
        play.step(&mut env, Action::Noop);
        frames.push(Frame {
            step: env.step_count(),
            action: Some(Action::Noop),
            png: encode_png(env.frame(), image_size),
        });
    }
    for action in actions.iter().cycle().take(steps as usize) {
        let out = play.step(&mut env, *action);
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
