//! What the families' vision towers share: the ViT blocks (LN → qkv → 2D-rotary attention
//! within a frame → proj, LN → fc1 → activation → fc2), their weights, the packing of images
//! into patch rows with their rotary angles, and the 2×2 merger's two layers.

use crate::backend::{AttnShape, BResult, Backend};
use crate::config::VisionConfig;
use crate::model::shared::{inv_freq, rope_tables};
use crate::preprocess::{vision_positions, ImageInput};
use crate::weights::Weights;
use crate::LocalError;

/// LayerNorm epsilon of the vision towers (fixed in the model code, not in config.json).
pub const LN_EPS: f32 = 1e-6;

/// A weight with its bias (or a norm's weight and bias).
pub type Pair<B> = (<B as Backend>::Buf, <B as Backend>::Buf);

/// Load `NAME.weight [wshape]` and `NAME.bias [bshape]`; linear weights go through `matrix`
/// (lower precision allowed), norms through `weight`.
pub fn load_pair<B: Backend>(
    be: &B,
    w: &Weights,
    name: &str,
    wshape: &[usize],
    bshape: usize,
    linear: bool,
) -> Result<Pair<B>, LocalError> {
    let wv = w.f32(&format!("{name}.weight"), wshape)?;
    Ok((
        if linear {
            be.linear_weight(wv, wshape[0], wshape[1..].iter().product())?
        } else {
            be.weight(wv)?
        },
        be.weight(w.f32(&format!("{name}.bias"), &[bshape])?)?,
    ))
}

/// The MLP activation of a family's blocks.
#[derive(Clone, Copy, Debug)]
pub enum Act {
    /// `x·σ(1.702x)` (Qwen2-VL).
    QuickGelu,
    /// Tanh-approximated GELU (Qwen3.5).
    GeluTanh,
}

/// One ViT block's weights.
pub struct Block<B: Backend> {
    norm1: Pair<B>,
    qkv: Pair<B>,
    proj: Pair<B>,
    norm2: Pair<B>,
    fc1: Pair<B>,
    fc2: Pair<B>,
}

/// The blocks `visual.blocks.{i}` with MLP width `mlp`; `fc` names the MLP's two layers
/// under `mlp.` (`fc1`/`fc2` or `linear_fc1`/`linear_fc2`).
pub fn load_blocks<B: Backend>(
    be: &B,
    w: &Weights,
    cfg: &VisionConfig,
    mlp: usize,
    fc: [&str; 2],
) -> Result<Vec<Block<B>>, LocalError> {
    let (e, m) = (cfg.embed_dim, mlp);
    let pair = |name: String, wshape: &[usize], bshape: usize| {
        load_pair(be, w, &name, wshape, bshape, true)
    };
    let norm = |name: String| load_pair(be, w, &name, &[e], e, false);
    (0..cfg.depth)
        .map(|i| {
            let p = format!("visual.blocks.{i}");
            Ok(Block {
                norm1: norm(format!("{p}.norm1"))?,
                qkv: pair(format!("{p}.attn.qkv"), &[3 * e, e], 3 * e)?,
                proj: pair(format!("{p}.attn.proj"), &[e, e], e)?,
                norm2: norm(format!("{p}.norm2"))?,
                fc1: pair(format!("{p}.mlp.{}", fc[0]), &[m, e], m)?,
                fc2: pair(format!("{p}.mlp.{}", fc[1]), &[e, m], e)?,
            })
        })
        .collect()
}

/// Images packed for the tower: patch rows in image order, the rotary angles of every patch
/// (row then column frequencies), and each frame's `(first row, rows)`.
pub struct Packed {
    /// `[Σ patches, patch_dim]` values.
    pub pixels: Vec<f32>,
    /// `[Σ patches, head_dim / 2]` angles (row half, then column half).
    pub freqs: Vec<f32>,
    /// `(first row, rows)` per frame; attention stays within a frame.
    pub frames: Vec<(usize, usize)>,
}

impl Packed {
    /// Patch rows.
    pub fn rows(&self, cfg: &VisionConfig) -> usize {
        self.pixels.len() / cfg.patch_dim()
    }
}

/// Check each image's patch rows against its grid and pack them (see [`Packed`]).
pub fn pack(cfg: &VisionConfig, images: &[&ImageInput]) -> Result<Packed, LocalError> {
    let (pd, merge) = (cfg.patch_dim(), cfg.spatial_merge_size);
    let hd = cfg.embed_dim / cfg.num_heads;
    let inv = inv_freq(cfg.rope_theta, hd / 2);
    let (mut pixels, mut freqs, mut frames) = (Vec::new(), Vec::new(), Vec::new());
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
    Ok(Packed {
        pixels,
        freqs,
        frames,
    })
}

/// Run the blocks over the embedded patches `x [n, embed]` in place.
pub fn run_blocks<B: Backend>(
    be: &B,
    cfg: &VisionConfig,
    blocks: &[Block<B>],
    p: &Packed,
    mlp: usize,
    act: Act,
    x: &mut B::Buf,
) -> BResult<()> {
    let (e, heads) = (cfg.embed_dim, cfg.num_heads);
    let hd = e / heads;
    let n = p.rows(cfg);
    let (cos, sin) = rope_tables(&p.freqs, hd / 2);
    let (cos, sin) = (be.upload(&cos)?, be.upload(&sin)?);
    let shape = AttnShape {
        heads,
        kv_heads: heads,
        hd,
    };
    for b in blocks {
        let y = be.layer_norm(x, n, e, &b.norm1.0, &b.norm1.1, LN_EPS)?;
        let qkv = be.linear(&y, n, e, &b.qkv.0, 3 * e, Some(&b.qkv.1))?;
        let (q, k, v) = be.split_qkv_rope(&qkv, n, shape, &cos, &sin)?;
        let mut o = be.zeros(n * e)?;
        for &(r0, len) in &p.frames {
            let ks = be.slice_rows(&k, r0, len, e)?;
            let vs = be.slice_rows(&v, r0, len, e)?;
            be.attention(&q, r0, len, &ks, &vs, len, shape, false, &mut o)?;
        }
        be.linear_add(&o, n, e, &b.proj.0, e, Some(&b.proj.1), x)?;
        let y = be.layer_norm(x, n, e, &b.norm2.0, &b.norm2.1, LN_EPS)?;
        let mut h1 = be.linear(&y, n, e, &b.fc1.0, mlp, Some(&b.fc1.1))?;
        match act {
            Act::QuickGelu => be.quick_gelu(&mut h1)?,
            Act::GeluTanh => be.gelu_tanh(&mut h1)?,
        }
        be.linear_add(&h1, n, mlp, &b.fc2.0, e, Some(&b.fc2.1), x)?;
    }
    Ok(())
}

/// The merger after its norm: `y [n, embed]` viewed as `[n/g, g·embed]` (consecutive patches
/// form one merged token), then `fc1` → exact GELU → `fc2` into the text width.
pub fn merge<B: Backend>(
    be: &B,
    cfg: &VisionConfig,
    y: &B::Buf,
    n: usize,
    fc1: &Pair<B>,
    fc2: &Pair<B>,
) -> BResult<B::Buf> {
    let g = cfg.spatial_merge_size * cfg.spatial_merge_size;
    let (rows, width) = (n / g, cfg.embed_dim * g);
    let mut h = be.linear(y, rows, width, &fc1.0, width, Some(&fc1.1))?;
    be.gelu_erf(&mut h)?;
    be.linear(&h, rows, width, &fc2.0, cfg.hidden_size, Some(&fc2.1))
}
