//! The model families, each written once over the [`Backend`] trait in its own folder
//! (`qwen2vl/`, `qwen35/`), and what they share: rotary tables, the per-sequence cache, the
//! batched-call bookkeeping and the final norm + lm_head (`shared.rs`), the ViT blocks and the
//! merger (`vit.rs`). [`Model`] dispatches on the family read from config.json's `model_type`.
//!
//! Adding a family (crates/local/README.md has the whole list): a folder `model/<family>/` with
//! `config.rs` (its config.json reader over `config/layout.rs`, and the settings only it has),
//! `vision.rs` (`load`, `forward` over images to merged embeddings), `text.rs` (`load`,
//! `embed`, `new_cache`, batched `forward` over [`SeqChunk`]s to logits, `decode_params`) and
//! `mod.rs` (the two together); then it is registered in two places, one `Arch` variant and its
//! `model_type` in `config/mod.rs`, and one [`Model`] variant with its match arms here. Ops it
//! needs that the [`Backend`] trait lacks go on the trait (a host kernel in
//! `backend/cpu/hybrid.rs`, a CUDA one in `backend/cuda/`); never branches in another family's
//! files.

pub mod qwen2vl;
pub mod qwen35;
pub mod shared;
pub mod vit;

pub use shared::{LayerState, SeqCache, SeqChunk};

use super::backend::{BResult, Backend};
use super::config::{Arch, ModelConfig};
use super::preprocess::ImageInput;
use super::weights::Weights;
use super::LocalError;

/// A loaded model of one family.
pub enum Model<B: Backend> {
    /// Qwen2-VL.
    Qwen2Vl(qwen2vl::Qwen2Vl<B>),
    /// Qwen3.5 (hybrid Gated DeltaNet / gated attention decoder).
    Qwen35(qwen35::Qwen35<B>),
}

impl<B: Backend> Model<B> {
    /// Load the weights of the family config.json names.
    pub fn load(be: &B, w: &Weights, cfg: &ModelConfig) -> Result<Model<B>, LocalError> {
        Ok(match &cfg.arch {
            Arch::Qwen2Vl => Model::Qwen2Vl(qwen2vl::Qwen2Vl::load(be, w, cfg)?),
            Arch::Qwen35(h) => Model::Qwen35(qwen35::Qwen35::load(be, w, cfg, h)?),
        })
    }

    /// Embedding rows for token ids.
    pub fn embed(&self, be: &B, ids: &[u32]) -> BResult<B::Buf> {
        match self {
            Model::Qwen2Vl(m) => m.text.embed(be, ids),
            Model::Qwen35(m) => m.text.embed(be, ids),
        }
    }

    /// Merged image embeddings `[Σ tokens, hidden]`.
    pub fn vision(&self, be: &B, images: &[&ImageInput]) -> BResult<B::Buf> {
        match self {
            Model::Qwen2Vl(m) => m.vision.forward(be, images),
            Model::Qwen35(m) => m.vision.forward(be, images),
        }
    }

    /// A fresh per-sequence cache for up to `capacity` tokens.
    pub fn new_cache(&self, be: &B, capacity: usize) -> BResult<SeqCache<B>> {
        match self {
            Model::Qwen2Vl(m) => m.text.new_cache(be, capacity),
            Model::Qwen35(m) => m.text.new_cache(be, capacity),
        }
    }

    /// Batched decoder forward (see the families' `forward`).
    pub fn forward(&self, be: &B, x: B::Buf, chunks: &mut [SeqChunk<'_, B>]) -> BResult<Vec<f32>> {
        match self {
            Model::Qwen2Vl(m) => m.text.forward(be, x, chunks),
            Model::Qwen35(m) => m.text.forward(be, x, chunks),
        }
    }

    /// Parameters read per decoded token.
    pub fn decode_params(&self) -> usize {
        match self {
            Model::Qwen2Vl(m) => m.text.decode_params(),
            Model::Qwen35(m) => m.text.decode_params(),
        }
    }
}
