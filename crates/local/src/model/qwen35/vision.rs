//! Qwen3.5's vision tower: Conv3d patch embedding with bias, plus the learned position table
//! bilinearly resampled (align_corners) to each image's grid in merge-block order; ViT blocks
//! with 2D rotary and attention within a frame (LN → qkv → attention → proj, LN → fc1 →
//! tanh-GELU → fc2); merger LN → 2×2 merge → fc1 → GELU → fc2.

use super::config::Qwen35Extra;
use crate::backend::{BResult, Backend};
use crate::config::VisionConfig;
use crate::model::vit::{self, Act, Block, Pair, LN_EPS};
use crate::preprocess::{vision_positions, ImageInput};
use crate::weights::Weights;
use crate::LocalError;

/// Vision tower weights on a backend.
pub struct Vision<B: Backend> {
    cfg: VisionConfig,
    mlp: usize,
    side: usize,
    patch: Pair<B>,
    pos: B::Buf,
    blocks: Vec<Block<B>>,
    norm: Pair<B>,
    fc1: Pair<B>,
    fc2: Pair<B>,
}

/// Bilinear taps (align_corners) of target index `i` on an axis of `size` into a table side
/// of `side`, as transformers' `_interpolation_axis_taps_weights` computes them in f32.
fn axis_taps(i: usize, size: usize, side: usize) -> [(u32, f32); 2] {
    let src = i as f32 * (side - 1) as f32 / (size.max(2) - 1) as f32;
    let fl = src.floor();
    let mut out = [(0u32, 0f32); 2];
    for (o, slot) in out.iter_mut().enumerate() {
        let tap = (fl as i64 + o as i64).clamp(0, side as i64 - 1) as u32;
        let w = (1.0 - (src - fl - o as f32).abs()).max(0.0);
        *slot = (tap, w);
    }
    out
}

/// Position-table rows and weights (4 taps per patch) for a grid, in merge-block order.
pub fn pos_taps(grid: [usize; 3], merge: usize, side: usize) -> (Vec<u32>, Vec<f32>) {
    let (mut idx, mut w) = (Vec::new(), Vec::new());
    for (r, c) in vision_positions(grid, merge) {
        let (ht, wt) = (axis_taps(r, grid[1], side), axis_taps(c, grid[2], side));
        for (hi, hw) in ht {
            for (wi, ww) in wt {
                idx.push(hi * side as u32 + wi);
                w.push(hw * ww);
            }
        }
    }
    (idx, w)
}

impl<B: Backend> Vision<B> {
    /// Load `visual.*` tensors.
    pub fn load(
        be: &B,
        w: &Weights,
        cfg: &VisionConfig,
        x: &Qwen35Extra,
    ) -> Result<Vision<B>, LocalError> {
        let e = cfg.embed_dim;
        let merged = e * cfg.spatial_merge_size * cfg.spatial_merge_size;
        let m = x.vision_mlp;
        let pair = |name: &str, wshape: &[usize], bshape: usize| {
            vit::load_pair(be, w, name, wshape, bshape, true)
        };
        let (c, t, ps) = (cfg.in_channels, cfg.temporal_patch_size, cfg.patch_size);
        let side = x.pos_side();
        Ok(Vision {
            patch: pair("visual.patch_embed.proj", &[e, c, t, ps, ps], e)?,
            pos: be.weight(w.f32("visual.pos_embed.weight", &[side * side, e])?)?,
            blocks: vit::load_blocks(be, w, cfg, m, ["linear_fc1", "linear_fc2"])?,
            norm: vit::load_pair(be, w, "visual.merger.norm", &[e], e, false)?,
            fc1: pair("visual.merger.linear_fc1", &[merged, merged], merged)?,
            fc2: pair(
                "visual.merger.linear_fc2",
                &[cfg.hidden_size, merged],
                cfg.hidden_size,
            )?,
            cfg: cfg.clone(),
            mlp: m,
            side,
        })
    }

    /// Embed images: returns `[Σ merged tokens, hidden]` in image order.
    pub fn forward(&self, be: &B, images: &[&ImageInput]) -> BResult<B::Buf> {
        let cfg = &self.cfg;
        let (e, pd, merge) = (cfg.embed_dim, cfg.patch_dim(), cfg.spatial_merge_size);
        let p = vit::pack(cfg, images)?;
        let n = p.rows(cfg);
        let (mut tap_idx, mut tap_w) = (Vec::new(), Vec::new());
        for img in images {
            let (i, wt) = pos_taps(img.grid, merge, self.side);
            tap_idx.extend(i);
            tap_w.extend(wt);
        }
        let x_in = be.upload(&p.pixels)?;
        let mut x = be.linear(&x_in, n, pd, &self.patch.0, e, Some(&self.patch.1))?;
        let pos = be.gather_weighted(&self.pos, e, &tap_idx, &tap_w, 4)?;
        be.add_assign(&mut x, &pos)?;
        vit::run_blocks(be, cfg, &self.blocks, &p, self.mlp, Act::GeluTanh, &mut x)?;
        let y = be.layer_norm(&x, n, e, &self.norm.0, &self.norm.1, LN_EPS)?;
        vit::merge(be, cfg, &y, n, &self.fc1, &self.fc2)
    }
}
