//! Turning a model's reply into Crafter actions: the parser is the crate `vlm-eval-parse`
//! (`crates/parse`), re-exported here so the harness keeps its paths; `bench` is
//! `vlm-eval bench parse`'s measurement of it.

pub mod bench;

pub use vlm_eval_parse::*;
