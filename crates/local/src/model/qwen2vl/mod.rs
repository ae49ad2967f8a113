//! Qwen2-VL: a Qwen2 decoder with M-RoPE and biased q/k/v, and a ViT with 2D rotary and a
//! 2×2 patch merger.

pub mod config;
pub mod text;
pub mod vision;

use crate::backend::Backend;
use crate::config::ModelConfig;
use crate::weights::Weights;
use crate::LocalError;

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
