//! Qwen2-VL: a Qwen2 decoder with M-RoPE and biased q/k/v, and a ViT with 2D rotary and a
//! 2×2 patch merger.

pub mod config;
pub mod text;
pub mod vision;

use crate::model::local::backend::Backend;
use crate::model::local::config::ModelConfig;
use crate::model::local::weights::Weights;
use crate::model::local::LocalError;

/// Qwen2-VL weights on a backend.
pub struct Qwen2Vl<B: Backend> {
    /// Vision tower.
    pub vision: vision::Vision<B>,
    /// Decoder.
    pub text: text::Text<B>,
}

impl<B: Backend> Qwen2Vl<B> {
    /// Load `visual.*` and `model.*` tensors.
    pub fn load(be: &B, w: &Weights, cfg: &ModelConfig) -> Result<Qwen2Vl<B>, LocalError> {
        Ok(Qwen2Vl {
            vision: vision::Vision::load(be, w, &cfg.vision)?,
            text: text::Text::load(be, w, &cfg.text)?,
        })
    }
}
