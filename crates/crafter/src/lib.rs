//! A seed-exact Rust twin of Python `crafter` 1.8.3: same seed and actions give the same
//! world, states and (with crafter's textures) byte-identical frames.
//!
//! The reference is crafter 1.8.3 with chunk balancing iterating creatures in creation order
//! (stock crafter iterates a Python set there and is not reproducible even against itself).

pub mod bench;
pub mod env;
pub mod hash;
pub mod noise;
mod objects;
mod player;
pub mod render;
pub mod rng;
pub mod rules;
pub mod score;
pub mod textures;
pub mod trace;
pub mod world;
pub mod worldgen;

pub use env::{Env, EnvConfig, EnvError, StepOutcome};

/// The engine's parity version, recorded in run.json (`engine_parity`): raised whenever a change
/// makes the same seed, settings and actions give other states or frame pixels, or the saved
/// frame PNGs other bytes, so `vlm-eval replay` can refuse runs it would not reproduce.
pub const ENGINE_PARITY: u32 = 1;
pub use rules::{Action, Material, ACHIEVEMENT_NAMES, ACTION_NAMES, ITEM_NAMES};
pub use textures::TextureSet;
