//! vlm-eval: a fast, seed-exact Crafter engine and an evaluation harness for vision-language
//! models.

pub mod agent;
pub mod bench;
pub mod cli;
pub mod crafter;
pub mod model;
