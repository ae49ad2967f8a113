//! Qwen2-VL vision tower: patch embedding (Conv3d as a matmul), ViT blocks with 2D rotary and
//! attention block-diagonal per frame, then the 2×2 patch merger into the text width.

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
    patch: B::Buf,
    blocks: Vec<Block<B>>,
    ln_q: (B::Buf, B::Buf),
    mlp0: (B::Buf, B::Buf),
    mlp2: (B::Buf, B::Buf),
}

/// LayerNorm epsilon of the vision tower (fixed in the model code, not in config.json).
const LN_EPS: f32 = 1e-6;

impl<B: Backend> Vision<B> {
    /// Load `visual.*` tensors.
    pub fn load(be: &B, w: &Weights, cfg: &VisionConfig) -> Result<Vision<B>, LocalError> {
        let e = cfg.embed_dim;
        let merged = e * cfg.spatial_merge_size * cfg.spatial_merge_size;
        let m = cfg.mlp_dim();
        // Linear weights go through `matrix` (lower precision allowed); norms and biases do not.
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
                fc1: pair(&format!("{p}.mlp.fc1"), &[m, e], m)?,
                fc2: pair(&format!("{p}.mlp.fc2"), &[e, m], e)?,
            });
        }
        let (c, t, ps) = (cfg.in_channels, cfg.temporal_patch_size, cfg.patch_size);
        Ok(Vision {
            patch: be.matrix(w.f32("visual.patch_embed.proj.weight", &[e, c, t, ps, ps])?)?,
            blocks,
            ln_q: norm("visual.merger.ln_q", e)?,
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
        let (e, pd, merge) = (cfg.embed_dim, cfg.patch_dim(), cfg.spatial_merge_size);
        let heads = cfg.num_heads;
        let hd = e / heads;
        let mut pixels = Vec::new();
        let mut freqs = Vec::new();
        let mut frames = Vec::new(); // (first row, rows) per frame
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
        }
        let n = pixels.len() / pd;
        let (cos, sin) = rope_tables(&freqs, hd / 2);
        let (cos, sin) = (be.upload(&cos)?, be.upload(&sin)?);
        let x_in = be.upload(&pixels)?;
        let mut x = be.linear(&x_in, n, pd, &self.patch, e, None)?;
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
            let mut h1 = be.linear(&y, n, e, &b.fc1.0, cfg.mlp_dim(), Some(&b.fc1.1))?;
            be.quick_gelu(&mut h1)?;
            be.linear_add(&h1, n, cfg.mlp_dim(), &b.fc2.0, e, Some(&b.fc2.1), &mut x)?;
        }
        let y = be.layer_norm(&x, n, e, &self.ln_q.0, &self.ln_q.1, LN_EPS)?;
        let g = merge * merge;
        let rows = n / g;
        // Row-major [n, e] viewed as [n/4, 4e]: consecutive patches form one merged token.
        let mut h = be.linear(&y, rows, e * g, &self.mlp0.0, e * g, Some(&self.mlp0.1))?;
        be.gelu_erf(&mut h)?;
        be.linear(
            &h,
            rows,
            e * g,
            &self.mlp2.0,
            cfg.hidden_size,
            Some(&self.mlp2.1),
        )
    }
}
