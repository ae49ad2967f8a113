//! What a model is told and what it said: observations, prompts, tools, the history window,
//! and parsing replies into actions. Knows nothing of HTTP or GPUs.

pub mod balrog;
pub mod conversation;
pub mod dialog;
pub mod observe;
pub mod parse;
pub mod preset;
pub mod prompt;
pub mod tools;
