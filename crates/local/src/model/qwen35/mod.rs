//! Qwen3.5 (transformers 5.23.0 `models/qwen3_5/`): a hybrid decoder of Gated DeltaNet
//! (linear attention) and gated full-attention layers with interleaved M-RoPE on part of each
//! head, and a ViT with a learned, bilinearly resampled position table. `mtp.*` tensors (the
//! multi-token-prediction head) are never read.

pub mod config;
pub mod text;
pub mod vision;

use crate::backend::Backend;
use crate::config::ModelConfig;
use crate::weights::Weights;
use crate::LocalError;

use config::Qwen35Extra;

/// Qwen3.5 weights on a backend.
pub struct Qwen35<B: Backend> {
    /// Vision tower.
    pub vision: vision::Vision<B>,
    /// Decoder.
    pub text: text::Text<B>,
}

impl<B: Backend> Qwen35<B> {
    /// Load `visual.*` and `model.*` tensors (transformers 5 names via the weight aliases).
    pub fn load(
        be: &B,
        w: &Weights,
        cfg: &ModelConfig,
        extra: &Qwen35Extra,
    ) -> Result<Qwen35<B>, LocalError> {
        Ok(Qwen35 {
            vision: vision::Vision::load(be, w, &cfg.vision, extra)?,
            text: text::Text::load(be, w, &cfg.text, extra)?,
        })
    }
}
