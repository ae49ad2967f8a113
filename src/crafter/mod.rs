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
pub mod textures;
pub mod trace;
pub mod world;
pub mod worldgen;

pub use env::{Env, EnvConfig, EnvError, StepOutcome};
pub use rules::{Action, Material, ACHIEVEMENT_NAMES, ACTION_NAMES, ITEM_NAMES};
pub use textures::TextureSet;
