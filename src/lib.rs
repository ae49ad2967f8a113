//! vlm-eval: a fast, seed-exact Crafter engine and an evaluation harness for vision-language
//! models.
//!
//! Layers (docs/ARCHITECTURE.md), every arrow one way:
//! `cli → {eval, report, serve} → {agent, model, results} → crafter`.

pub mod agent;
pub mod cli;
/// The game: the `vlm-eval-crafter` crate (crates/crafter), re-exported under its old path.
pub use vlm_eval_crafter as crafter;
pub mod eval;
pub mod model;
pub mod report;
pub mod results;
pub mod serve;
pub mod view;
