//! Qwen3.5's hybrid decoder. Pre-norm residual blocks: a token mixer (gated full attention or
//! a Gated DeltaNet, per `layer_types`), then a SwiGLU MLP. One forward call serves a ragged
//! batch: matmuls over all rows together; attention, the causal conv and the delta rule per
//! sequence against its own KV cache, conv tail and recurrent state.

use super::config::{LayerKind, Qwen35Extra};
use crate::backend::{AttnShape, BResult, Backend, DeltaShape};
use crate::config::TextConfig;
use crate::model::shared::{
    attend_cached, check_chunks, inv_freq, logits_rows, rope_tables, LayerState, SeqCache,
    SeqChunk, SwiGlu,
};
use crate::weights::Weights;
use crate::LocalError;

/// Epsilon of the q/k L2 norm inside the delta rule (fixed in the model code).
const L2_EPS: f32 = 1e-6;

/// A layer's token mixer. Projections that read the same input are stacked at load time into
/// one matrix (one matmul each).
enum Mixer<B: Backend> {
    /// `[q|gate per head; k; v]` stacked, per-head q/k norms (stored `1 + w`), output.
    Full {
        qkv: B::Buf,
        q_norm: B::Buf,
        k_norm: B::Buf,
        o: B::Buf,
    },
    /// `[qkv; z; b; a]` stacked, conv `[C, K]`, gates, gated norm, output.
    Linear {
        proj: B::Buf,
        conv: B::Buf,
        a_log: B::Buf,
        dt_bias: B::Buf,
        norm: B::Buf,
        out: B::Buf,
    },
}

struct Layer<B: Backend> {
    input_norm: B::Buf,
    mixer: Mixer<B>,
    mlp: SwiGlu<B>,
}

/// Decoder weights on a backend.
pub struct Text<B: Backend> {
    cfg: TextConfig,
    x: Qwen35Extra,
    embed: B::Buf,
    layers: Vec<Layer<B>>,
    norm: B::Buf,
    lm_head: Option<B::Buf>,
    inv: Vec<f32>,
}

impl<B: Backend> Text<B> {
    /// Load `model.*` (and `lm_head.weight` when untied) tensors.
    pub fn load(
        be: &B,
        w: &Weights,
        cfg: &TextConfig,
        x: &Qwen35Extra,
    ) -> Result<Text<B>, LocalError> {
        let (d, hd, m) = (cfg.hidden_size, cfg.head_dim(), cfg.intermediate_size);
        let (qd, kd) = (cfg.num_heads * hd, cfg.num_kv_heads * hd);
        let s = delta_shape(x);
        let (lk, lv) = (s.k_heads * s.dk, s.v_heads * s.dv);
        let f = |name: String, shape: &[usize]| w.f32(&name, shape);
        let mat = |name: String, shape: &[usize]| be.matrix(f(name, shape)?);
        let lin =
            |name: String, shape: &[usize]| be.linear_weight(f(name, shape)?, shape[0], shape[1]);
        let mut layers = Vec::with_capacity(cfg.num_layers);
        for (i, kind) in x.layer_types.iter().enumerate() {
            let p = format!("model.layers.{i}");
            let mixer = match kind {
                LayerKind::Full => {
                    let a = format!("{p}.self_attn");
                    Mixer::Full {
                        qkv: be.linear_weight(
                            [
                                f(format!("{a}.q_proj.weight"), &[2 * qd, d])?,
                                f(format!("{a}.k_proj.weight"), &[kd, d])?,
                                f(format!("{a}.v_proj.weight"), &[kd, d])?,
                            ]
                            .concat(),
                            2 * qd + 2 * kd,
                            d,
                        )?,
                        q_norm: norm_plus_one(be, w, &format!("{a}.q_norm.weight"), hd)?,
                        k_norm: norm_plus_one(be, w, &format!("{a}.k_norm.weight"), hd)?,
                        o: lin(format!("{a}.o_proj.weight"), &[d, qd])?,
                    }
                }
                LayerKind::Linear => {
                    let a = format!("{p}.linear_attn");
                    let c = 2 * lk + lv;
                    Mixer::Linear {
                        proj: be.linear_weight(
                            [
                                f(format!("{a}.in_proj_qkv.weight"), &[c, d])?,
                                f(format!("{a}.in_proj_z.weight"), &[lv, d])?,
                                f(format!("{a}.in_proj_b.weight"), &[s.v_heads, d])?,
                                f(format!("{a}.in_proj_a.weight"), &[s.v_heads, d])?,
                            ]
                            .concat(),
                            c + lv + 2 * s.v_heads,
                            d,
                        )?,
                        conv: be
                            .weight(f(format!("{a}.conv1d.weight"), &[c, 1, x.conv_kernel])?)?,
                        a_log: be.weight(f(format!("{a}.A_log"), &[s.v_heads])?)?,
                        dt_bias: be.weight(f(format!("{a}.dt_bias"), &[s.v_heads])?)?,
                        norm: be.weight(f(format!("{a}.norm.weight"), &[s.dv])?)?,
                        out: lin(format!("{a}.out_proj.weight"), &[d, lv])?,
                    }
                }
            };
            layers.push(Layer {
                input_norm: norm_plus_one(be, w, &format!("{p}.input_layernorm.weight"), d)?,
                mixer,
                mlp: SwiGlu::load(
                    be,
                    w,
                    &p,
                    d,
                    m,
                    norm_plus_one(be, w, &format!("{p}.post_attention_layernorm.weight"), d)?,
                )?,
            });
        }
        let lm_head = if cfg.tie_word_embeddings {
            None
        } else if w.has("lm_head.weight") {
            Some(lin("lm_head.weight".into(), &[cfg.vocab_size, d])?)
        } else {
            return Err(LocalError::Tensor {
                file: "model.safetensors".into(),
                name: "lm_head.weight".into(),
                msg: "is missing and config.json does not set tie_word_embeddings".into(),
            });
        };
        Ok(Text {
            embed: mat("model.embed_tokens.weight".into(), &[cfg.vocab_size, d])?,
            layers,
            norm: norm_plus_one(be, w, "model.norm.weight", d)?,
            lm_head,
            inv: inv_freq(cfg.rope_theta, x.rotary_dim),
            cfg: cfg.clone(),
            x: x.clone(),
        })
    }

    /// Parameters read per decoded token (all decoder weights; the lm_head counts once).
    pub fn decode_params(&self) -> usize {
        let (c, s) = (&self.cfg, delta_shape(&self.x));
        let (d, hd) = (c.hidden_size, c.head_dim());
        let (qd, kd) = (c.num_heads * hd, c.num_kv_heads * hd);
        let (lk, lv) = (s.k_heads * s.dk, s.v_heads * s.dv);
        let common = 2 * d + 3 * c.intermediate_size * d;
        let per = |k: &LayerKind| match k {
            LayerKind::Full => (2 * qd + 2 * kd) * d + 2 * hd + qd * d,
            LayerKind::Linear => {
                let ch = 2 * lk + lv;
                (ch + lv + 2 * s.v_heads) * d
                    + ch * self.x.conv_kernel
                    + 2 * s.v_heads
                    + s.dv
                    + lv * d
            }
        };
        self.x
            .layer_types
            .iter()
            .map(|k| common + per(k))
            .sum::<usize>()
            + d
            + c.vocab_size * d
    }

    /// A fresh state for up to `capacity` tokens: a KV cache per attention layer, a zero conv
    /// tail and recurrent state per linear-attention layer.
    pub fn new_cache(&self, be: &B, capacity: usize) -> BResult<SeqCache<B>> {
        let kd = self.cfg.num_kv_heads * self.cfg.head_dim();
        let s = delta_shape(&self.x);
        let ch = 2 * s.k_heads * s.dk + s.v_heads * s.dv;
        let mut layers = Vec::with_capacity(self.layers.len());
        for k in &self.x.layer_types {
            layers.push(match k {
                LayerKind::Full => LayerState::Kv {
                    k: be.zeros(capacity * kd)?,
                    v: be.zeros(capacity * kd)?,
                },
                LayerKind::Linear => LayerState::Linear {
                    conv: be.zeros((self.x.conv_kernel - 1) * ch)?,
                    rec: be.zeros(s.state_len())?,
                },
            });
        }
        Ok(SeqCache {
            layers,
            len: 0,
            capacity,
        })
    }

    /// Embedding rows for token ids.
    pub fn embed(&self, be: &B, ids: &[u32]) -> BResult<B::Buf> {
        be.gather_rows(&self.embed, self.cfg.hidden_size, ids)
    }

    /// Interleaved M-RoPE tables `[rows, rotary_dim]`: frequency `i` takes the row position
    /// when `i % 3 == 1` (and `i < 3·s1`), the column when `i % 3 == 2` (and `i < 3·s2`), else
    /// the temporal one.
    fn mrope_tables(&self, chunks: &[SeqChunk<'_, B>]) -> (Vec<f32>, Vec<f32>) {
        let [_, s1, s2] = self.cfg.mrope_section;
        let mut freqs = Vec::new();
        for c in chunks {
            for r in 0..c.positions[0].len() {
                for (i, f) in self.inv.iter().enumerate() {
                    let axis = if i % 3 == 1 && i < 3 * s1 {
                        1
                    } else if i % 3 == 2 && i < 3 * s2 {
                        2
                    } else {
                        0
                    };
                    freqs.push(c.positions[axis][r] as f32 * f);
                }
            }
        }
        rope_tables(&freqs, self.inv.len())
    }

    /// Run new rows `x` (`[Σ n_i, hidden]`, sequences in `chunks` order) through the decoder,
    /// advancing each sequence's state. Returns logits `[rows, vocab]` for each sequence's last
    /// row (or all its rows when `all_logits`), in order.
    pub fn forward(&self, be: &B, x: B::Buf, chunks: &mut [SeqChunk<'_, B>]) -> BResult<Vec<f32>> {
        let c = &self.cfg;
        let d = c.hidden_size;
        let eps = c.rms_norm_eps as f32;
        let lens = check_chunks(chunks)?;
        let rows: usize = lens.iter().sum();
        let (cos, sin) = self.mrope_tables(chunks);
        let (cos, sin) = (be.upload(&cos)?, be.upload(&sin)?);
        let mut x = x;
        for (li, l) in self.layers.iter().enumerate() {
            let y = be.rms_norm(&x, rows, d, &l.input_norm, eps)?;
            match &l.mixer {
                Mixer::Full {
                    qkv,
                    q_norm,
                    k_norm,
                    o,
                } => {
                    let a = self.full_attention(
                        be, &y, rows, li, qkv, q_norm, k_norm, chunks, &lens, &cos, &sin,
                    )?;
                    be.linear_add(&a, rows, c.num_heads * c.head_dim(), o, d, None, &mut x)?;
                }
                Mixer::Linear {
                    proj,
                    conv,
                    a_log,
                    dt_bias,
                    norm,
                    out,
                } => {
                    let w = LinearWeights {
                        proj,
                        conv,
                        a_log,
                        dt_bias,
                        norm,
                    };
                    let a = self.linear_attention(be, &y, rows, li, w, chunks, &lens)?;
                    let lv = self.x.lin_v_heads * self.x.lin_v_dim;
                    be.linear_add(&a, rows, lv, out, d, None, &mut x)?;
                }
            }
            l.mlp
                .add_to(be, &mut x, rows, d, c.intermediate_size, eps)?;
        }
        for (s, &n) in chunks.iter_mut().zip(&lens) {
            s.cache.len += n;
        }
        let head = self.lm_head.as_ref().unwrap_or(&self.embed);
        logits_rows(
            be,
            &x,
            chunks,
            &lens,
            d,
            &self.norm,
            eps,
            head,
            c.vocab_size,
        )
    }

    /// Gated attention: `q_proj` gives `[q | gate]` per head; per-head (1+w) RMSNorm on q and
    /// k; partial rotary; causal GQA against each sequence's cache; output `· σ(gate)`.
    #[allow(clippy::too_many_arguments)]
    fn full_attention(
        &self,
        be: &B,
        y: &B::Buf,
        rows: usize,
        li: usize,
        qkv: &B::Buf,
        q_norm: &B::Buf,
        k_norm: &B::Buf,
        chunks: &mut [SeqChunk<'_, B>],
        lens: &[usize],
        cos: &B::Buf,
        sin: &B::Buf,
    ) -> BResult<B::Buf> {
        let c = &self.cfg;
        let (d, hd, h, hk) = (c.hidden_size, c.head_dim(), c.num_heads, c.num_kv_heads);
        let (qd, kd) = (h * hd, hk * hd);
        let eps = c.rms_norm_eps as f32;
        let width = 2 * qd + 2 * kd;
        let p = be.linear(y, rows, d, qkv, width, None)?;
        let qg = be.slice_cols(&p, rows, width, 0, 2 * qd)?;
        let q = be.slice_cols(&qg, rows * h, 2 * hd, 0, hd)?;
        let gate = be.slice_cols(&qg, rows * h, 2 * hd, hd, hd)?;
        let k = be.slice_cols(&p, rows, width, 2 * qd, kd)?;
        let v = be.slice_cols(&p, rows, width, 2 * qd + kd, kd)?;
        let mut q = be.rms_norm(&q, rows * h, hd, q_norm, eps)?;
        let mut k = be.rms_norm(&k, rows * hk, hd, k_norm, eps)?;
        let rot = self.x.rotary_dim;
        be.rope_partial(&mut q, rows, h, hd, rot, cos, sin)?;
        be.rope_partial(&mut k, rows, hk, hd, rot, cos, sin)?;
        let shape = AttnShape {
            heads: h,
            kv_heads: hk,
            hd,
        };
        let mut o = attend_cached(be, li, &q, &k, &v, chunks, lens, shape)?;
        be.mul_sigmoid(&mut o, &gate)?;
        Ok(o)
    }

    /// Gated DeltaNet: stacked projections; per sequence the causal conv (+SiLU) over q‖k‖v
    /// from its conv tail, L2-normalised q/k, and the delta rule from its recurrent state;
    /// then the gated RMSNorm with `silu(z)`.
    #[allow(clippy::too_many_arguments)]
    fn linear_attention(
        &self,
        be: &B,
        y: &B::Buf,
        rows: usize,
        li: usize,
        w: LinearWeights<'_, B>,
        chunks: &mut [SeqChunk<'_, B>],
        lens: &[usize],
    ) -> BResult<B::Buf> {
        let d = self.cfg.hidden_size;
        let s = delta_shape(&self.x);
        let (lk, lv, hv) = (s.k_heads * s.dk, s.v_heads * s.dv, s.v_heads);
        let ch = 2 * lk + lv;
        let width = ch + lv + 2 * hv;
        let p = be.linear(y, rows, d, w.proj, width, None)?;
        let mixed = be.slice_cols(&p, rows, width, 0, ch)?;
        let z = be.slice_cols(&p, rows, width, ch, lv)?;
        let b = be.slice_cols(&p, rows, width, ch + lv, hv)?;
        let a = be.slice_cols(&p, rows, width, ch + lv + hv, hv)?;
        let (beta, g) = be.delta_gates(&b, &a, rows, hv, w.a_log, w.dt_bias)?;
        let mut core = be.zeros(rows * lv)?;
        let mut r0 = 0;
        for (sq, &n) in chunks.iter_mut().zip(lens) {
            if n == 0 {
                continue;
            }
            let (conv_state, rec) = sq.cache.linear_mut(li)?;
            let xs = be.slice_rows(&mixed, r0, n, ch)?;
            let cv = be.conv1d_silu(&xs, n, ch, w.conv, self.x.conv_kernel, conv_state)?;
            let q = be.l2_norm(
                &be.slice_cols(&cv, n, ch, 0, lk)?,
                n * s.k_heads,
                s.dk,
                L2_EPS,
            )?;
            let k = be.l2_norm(
                &be.slice_cols(&cv, n, ch, lk, lk)?,
                n * s.k_heads,
                s.dk,
                L2_EPS,
            )?;
            let v = be.slice_cols(&cv, n, ch, 2 * lk, lv)?;
            let bs = be.slice_rows(&beta, r0, n, hv)?;
            let gs = be.slice_rows(&g, r0, n, hv)?;
            let o = be.delta_rule(&q, &k, &v, &bs, &gs, n, s, rec)?;
            be.copy_rows(&mut core, r0, &o, 0, n, lv)?;
            r0 += n;
        }
        let eps = self.cfg.rms_norm_eps as f32;
        be.rms_norm_gated(&core, &z, rows * hv, s.dv, w.norm, eps)
    }
}

/// A linear-attention layer's weights, borrowed for one call.
struct LinearWeights<'a, B: Backend> {
    proj: &'a B::Buf,
    conv: &'a B::Buf,
    a_log: &'a B::Buf,
    dt_bias: &'a B::Buf,
    norm: &'a B::Buf,
}

fn delta_shape(x: &Qwen35Extra) -> DeltaShape {
    DeltaShape {
        k_heads: x.lin_k_heads,
        v_heads: x.lin_v_heads,
        dk: x.lin_k_dim,
        dv: x.lin_v_dim,
    }
}

/// Load a zero-centred RMSNorm weight as `1 + w` (Qwen3.5's decoder norms compute
/// `x·rsqrt(mean x² + eps)·(1 + w)` in f32; adding once at load gives the same f32 values).
pub(crate) fn norm_plus_one<B: Backend>(
    be: &B,
    w: &Weights,
    name: &str,
    dim: usize,
) -> Result<B::Buf, LocalError> {
    let v = w.f32(name, &[dim])?;
    be.weight(v.into_iter().map(|x| 1.0 + x).collect())
}
