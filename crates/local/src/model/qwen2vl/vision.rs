//! Qwen2-VL vision tower: patch embedding (Conv3d as a matmul), ViT blocks with 2D rotary and
//! attention block-diagonal per frame, then the 2×2 patch merger into the text width.

use crate::backend::{BResult, Backend};
use crate::config::VisionConfig;
use crate::model::vit::{self, Act, Block, Pair, LN_EPS};
use crate::preprocess::ImageInput;
use crate::weights::Weights;
use crate::LocalError;

/// Vision tower weights on a backend.
pub struct Vision<B: Backend> {
    cfg: VisionConfig,
    patch: B::Buf,
    blocks: Vec<Block<B>>,
    ln_q: Pair<B>,
    mlp0: Pair<B>,
    mlp2: Pair<B>,
}

impl<B: Backend> Vision<B> {
    /// Load `visual.*` tensors.
    pub fn load(be: &B, w: &Weights, cfg: &VisionConfig) -> Result<Vision<B>, LocalError> {
        let e = cfg.embed_dim;
        let merged = e * cfg.spatial_merge_size * cfg.spatial_merge_size;
        let pair = |name: &str, wshape: &[usize], bshape: usize| {
            vit::load_pair(be, w, name, wshape, bshape, true)
        };
        let (c, t, ps) = (cfg.in_channels, cfg.temporal_patch_size, cfg.patch_size);
        Ok(Vision {
            patch: be.linear_weight(
                w.f32("visual.patch_embed.proj.weight", &[e, c, t, ps, ps])?,
                e,
                c * t * ps * ps,
            )?,
            blocks: vit::load_blocks(be, w, cfg, cfg.mlp_dim(), ["fc1", "fc2"])?,
            ln_q: vit::load_pair(be, w, "visual.merger.ln_q", &[e], e, false)?,
            mlp0: pair("visual.merger.mlp.0", &[merged, merged], merged)?,
            mlp2: pair(
                "visual.merger.mlp.2",
                &[cfg.hidden_size, merged],
                cfg.hidden_size,
            )?,
            cfg: cfg.clone(),
        })
    }

    /// Embed images: returns `[Σ merged tokens, hidden]` in image order.
    pub fn forward(&self, be: &B, images: &[&ImageInput]) -> BResult<B::Buf> {
        let cfg = &self.cfg;
        let (e, pd) = (cfg.embed_dim, cfg.patch_dim());
        let p = vit::pack(cfg, images)?;
        let n = p.rows(cfg);
        let x_in = be.upload(&p.pixels)?;
        let mut x = be.linear(&x_in, n, pd, &self.patch, e, None)?;
        vit::run_blocks(
            be,
            cfg,
            &self.blocks,
            &p,
            cfg.mlp_dim(),
            Act::QuickGelu,
            &mut x,
        )?;
        let y = be.layer_norm(&x, n, e, &self.ln_q.0, &self.ln_q.1, LN_EPS)?;
        vit::merge(be, cfg, &y, n, &self.mlp0, &self.mlp2)
    }
}
