//! vlm-eval: a fast, seed-exact Crafter engine and an evaluation harness for vision-language
//! models.

pub mod bench;
pub mod cli;
pub mod crafter;
