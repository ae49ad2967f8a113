//! Qwen3.5's vision tower: Conv3d patch embedding with bias, plus the learned position table
//! bilinearly resampled (align_corners) to each image's grid in merge-block order; ViT blocks
//! with 2D rotary and attention within a frame (LN → qkv → attention → proj, LN → fc1 →
//! tanh-GELU → fc2); merger LN → 2×2 merge → fc1 → GELU → fc2.

use super::config::Qwen35Extra;
use crate::model::local::backend::{AttnShape, BResult, Backend};
use crate::model::local::config::VisionConfig;
use crate::model::local::model::{inv_freq, rope_tables};
use crate::model::local::preprocess::{vision_positions, ImageInput};
use crate::model::local::weights::Weights;
use crate::model::local::LocalError;

struct Block<B: Backend> {
    norm1: (B::Buf, B::Buf),
    qkv: (B::Buf, B::Buf),
    proj: (B::Buf, B::Buf),
    norm2: (B::Buf, B::Buf),
    fc1: (B::Buf, B::Buf),
    fc2: (B::Buf, B::Buf),
}

/// Vision tower weights on a backend.
pub struct Vision<B: Backend> {
    cfg: VisionConfig,
    mlp: usize,
    side: usize,
    patch: (B::Buf, B::Buf),
    pos: B::Buf,
    blocks: Vec<Block<B>>,
    norm: (B::Buf, B::Buf),
    fc1: (B::Buf, B::Buf),
    fc2: (B::Buf, B::Buf),
}

/// LayerNorm epsilon of the vision tower (fixed in the model code).
const LN_EPS: f32 = 1e-6;

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
        let load = |name: &str, wshape: &[usize], bshape: usize, linear: bool| {
            let wv = w.f32(&format!("{name}.weight"), wshape)?;
            Ok::<_, LocalError>((
                if linear {
                    be.matrix(wv)?
                } else {
                    be.weight(wv)?
                },
                be.weight(w.f32(&format!("{name}.bias"), &[bshape])?)?,
            ))
        };
        let pair = |name: &str, wshape: &[usize], bshape: usize| load(name, wshape, bshape, true);
        let norm = |name: &str, dim: usize| load(name, &[dim], dim, false);
        let mut blocks = Vec::with_capacity(cfg.depth);
        for i in 0..cfg.depth {
            let p = format!("visual.blocks.{i}");
            blocks.push(Block {
                norm1: norm(&format!("{p}.norm1"), e)?,
                qkv: pair(&format!("{p}.attn.qkv"), &[3 * e, e], 3 * e)?,
                proj: pair(&format!("{p}.attn.proj"), &[e, e], e)?,
                norm2: norm(&format!("{p}.norm2"), e)?,
                fc1: pair(&format!("{p}.mlp.linear_fc1"), &[m, e], m)?,
                fc2: pair(&format!("{p}.mlp.linear_fc2"), &[e, m], e)?,
            });
        }
        let (c, t, ps) = (cfg.in_channels, cfg.temporal_patch_size, cfg.patch_size);
        let side = x.pos_side();
        Ok(Vision {
            patch: pair("visual.patch_embed.proj", &[e, c, t, ps, ps], e)?,
            pos: be.weight(w.f32("visual.pos_embed.weight", &[side * side, e])?)?,
            blocks,
            norm: norm("visual.merger.norm", e)?,
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
        let heads = cfg.num_heads;
        let hd = e / heads;
        let (mut pixels, mut freqs, mut frames) = (Vec::new(), Vec::new(), Vec::new());
        let (mut tap_idx, mut tap_w) = (Vec::new(), Vec::new());
        let inv = inv_freq(cfg.rope_theta, hd / 2);
        for img in images {
            if img.pixels.len() % pd != 0 {
                return Err(LocalError::Image(format!(
                    "patch rows must have {pd} values"
                )));
            }
            let n = img.pixels.len() / pd;
            let [t, h, w] = img.grid;
            if n != t * h * w || h % merge != 0 || w % merge != 0 {
                return Err(LocalError::Image(format!(
                    "grid {:?} does not match {n} patches",
                    img.grid
                )));
            }
            for ti in 0..t {
                frames.push((pixels.len() / pd + ti * h * w, h * w));
            }
            pixels.extend_from_slice(&img.pixels);
            for (r, c) in vision_positions(img.grid, merge) {
                freqs.extend(inv.iter().map(|f| r as f32 * f));
                freqs.extend(inv.iter().map(|f| c as f32 * f));
            }
            let (i, wt) = pos_taps(img.grid, merge, self.side);
            tap_idx.extend(i);
            tap_w.extend(wt);
        }
        let n = pixels.len() / pd;
        let (cos, sin) = rope_tables(&freqs, hd / 2);
        let (cos, sin) = (be.upload(&cos)?, be.upload(&sin)?);
        let x_in = be.upload(&pixels)?;
        let mut x = be.linear(&x_in, n, pd, &self.patch.0, e, Some(&self.patch.1))?;
        let pos = be.gather_weighted(&self.pos, e, &tap_idx, &tap_w, 4)?;
        be.add_assign(&mut x, &pos)?;
        let shape = AttnShape {
            heads,
            kv_heads: heads,
            hd,
        };
        for b in &self.blocks {
            let y = be.layer_norm(&x, n, e, &b.norm1.0, &b.norm1.1, LN_EPS)?;
            let qkv = be.linear(&y, n, e, &b.qkv.0, 3 * e, Some(&b.qkv.1))?;
            let (q, k, v) = be.split_qkv_rope(&qkv, n, shape, &cos, &sin)?;
            let mut o = be.zeros(n * e)?;
            for &(r0, len) in &frames {
                let ks = be.slice_rows(&k, r0, len, e)?;
                let vs = be.slice_rows(&v, r0, len, e)?;
                be.attention(&q, r0, len, &ks, &vs, len, shape, false, &mut o)?;
            }
            be.linear_add(&o, n, e, &b.proj.0, e, Some(&b.proj.1), &mut x)?;
            let y = be.layer_norm(&x, n, e, &b.norm2.0, &b.norm2.1, LN_EPS)?;
            let mut h1 = be.linear(&y, n, e, &b.fc1.0, self.mlp, Some(&b.fc1.1))?;
            be.gelu_tanh(&mut h1)?;
            be.linear_add(&h1, n, self.mlp, &b.fc2.0, e, Some(&b.fc2.1), &mut x)?;
        }
        let y = be.layer_norm(&x, n, e, &self.norm.0, &self.norm.1, LN_EPS)?;
        let g = merge * merge;
        let rows = n / g;
        let mut h = be.linear(&y, rows, e * g, &self.fc1.0, e * g, Some(&self.fc1.1))?;
        be.gelu_erf(&mut h)?;
        be.linear(
            &h,
            rows,
            e * g,
            &self.fc2.0,
            cfg.hidden_size,
            Some(&self.fc2.1),
        )
    }
}
