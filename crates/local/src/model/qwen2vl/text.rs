//! Qwen2 decoder with M-RoPE and a per-sequence KV cache. One forward call serves a ragged
//! batch: the rows of all sequences go through the matmuls together, attention runs per
//! sequence against its own cache.

use crate::backend::{AttnShape, BResult, Backend};
use crate::config::TextConfig;
use crate::model::shared::{
    attend_cached, check_chunks, inv_freq, logits_rows, rope_tables, LayerState, SeqCache,
    SeqChunk, SwiGlu,
};
use crate::weights::Weights;
use crate::LocalError;

/// One decoder layer. q/k/v are stacked into one `[qd + 2·kd, d]` matrix at load time, so
/// they take one matmul.
struct Layer<B: Backend> {
    input_norm: B::Buf,
    qkv: (B::Buf, B::Buf),
    o: B::Buf,
    mlp: SwiGlu<B>,
}

/// Decoder weights on a backend.
pub struct Text<B: Backend> {
    cfg: TextConfig,
    embed: B::Buf,
    layers: Vec<Layer<B>>,
    norm: B::Buf,
    lm_head: Option<B::Buf>,
    inv: Vec<f32>,
}

impl<B: Backend> Text<B> {
    /// Load `model.*` (and `lm_head.weight` when untied) tensors.
    pub fn load(be: &B, w: &Weights, cfg: &TextConfig) -> Result<Text<B>, LocalError> {
        let (d, hd) = (cfg.hidden_size, cfg.head_dim());
        let (qd, kd, m) = (
            cfg.num_heads * hd,
            cfg.num_kv_heads * hd,
            cfg.intermediate_size,
        );
        let f = |name: String, shape: &[usize]| w.f32(&name, shape);
        let t = |name: String, shape: &[usize]| -> Result<B::Buf, LocalError> {
            be.weight(f(name, shape)?)
        };
        let mat = |name: String, shape: &[usize]| -> Result<B::Buf, LocalError> {
            be.matrix(f(name, shape)?)
        };
        let lin = |name: String, shape: &[usize]| -> Result<B::Buf, LocalError> {
            be.linear_weight(f(name, shape)?, shape[0], shape[1])
        };
        // Row-major matrices stack by concatenation.
        let stack = |parts: Vec<Vec<f32>>| parts.concat();
        let mut layers = Vec::with_capacity(cfg.num_layers);
        for i in 0..cfg.num_layers {
            let p = format!("model.layers.{i}");
            let a = format!("{p}.self_attn");
            let qkv_w = stack(vec![
                f(format!("{a}.q_proj.weight"), &[qd, d])?,
                f(format!("{a}.k_proj.weight"), &[kd, d])?,
                f(format!("{a}.v_proj.weight"), &[kd, d])?,
            ]);
            let qkv_b = stack(vec![
                f(format!("{a}.q_proj.bias"), &[qd])?,
                f(format!("{a}.k_proj.bias"), &[kd])?,
                f(format!("{a}.v_proj.bias"), &[kd])?,
            ]);
            layers.push(Layer {
                input_norm: t(format!("{p}.input_layernorm.weight"), &[d])?,
                qkv: (be.linear_weight(qkv_w, qd + 2 * kd, d)?, be.weight(qkv_b)?),
                o: lin(format!("{a}.o_proj.weight"), &[d, qd])?,
                mlp: SwiGlu::load(
                    be,
                    w,
                    &p,
                    d,
                    m,
                    t(format!("{p}.post_attention_layernorm.weight"), &[d])?,
                )?,
            });
        }
        let lm_head = if w.has("lm_head.weight") && !cfg.tie_word_embeddings {
            Some(lin("lm_head.weight".into(), &[cfg.vocab_size, d])?)
        } else if cfg.tie_word_embeddings {
            None
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
            norm: t("model.norm.weight".into(), &[d])?,
            lm_head,
            inv: inv_freq(cfg.rope_theta, hd),
            cfg: cfg.clone(),
        })
    }

    /// Parameters read per decoded token (all decoder weights; the lm_head counts once).
    pub fn decode_params(&self) -> usize {
        let c = &self.cfg;
        let (d, hd) = (c.hidden_size, c.head_dim());
        let (qd, kd, m) = (c.num_heads * hd, c.num_kv_heads * hd, c.intermediate_size);
        let per_layer = 2 * d + (qd + 2 * kd) * (d + 1) + d * qd + 3 * m * d;
        c.num_layers * per_layer + d + c.vocab_size * d
    }

    /// A cache for up to `capacity` tokens.
    pub fn new_cache(&self, be: &B, capacity: usize) -> BResult<SeqCache<B>> {
        let kd = self.cfg.num_kv_heads * self.cfg.head_dim();
        let mut layers = Vec::with_capacity(self.cfg.num_layers);
        for _ in 0..self.cfg.num_layers {
            layers.push(LayerState::Kv {
                k: be.zeros(capacity * kd)?,
                v: be.zeros(capacity * kd)?,
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

    /// M-RoPE tables `[rows, hd]`: the half-width frequencies take their first `s0` entries from
    /// the temporal positions, the next `s1` from rows, the last `s2` from columns.
    fn mrope_tables(&self, chunks: &[SeqChunk<'_, B>]) -> (Vec<f32>, Vec<f32>) {
        let half = self.cfg.head_dim() / 2;
        let [s0, s1, _] = self.cfg.mrope_section;
        let mut freqs = Vec::new();
        for c in chunks {
            for r in 0..c.positions[0].len() {
                for (i, f) in self.inv.iter().enumerate() {
                    let axis = if i < s0 {
                        0
                    } else if i < s0 + s1 {
                        1
                    } else {
                        2
                    };
                    freqs.push(c.positions[axis][r] as f32 * f);
                }
            }
        }
        rope_tables(&freqs, half)
    }

    /// Run new rows `x` (`[Σ n_i, hidden]`, sequences in `chunks` order) through the decoder,
    /// appending to each cache. Returns logits `[rows, vocab]` for each sequence's last row (or
    /// all its rows when `all_logits`), in order.
    pub fn forward(&self, be: &B, x: B::Buf, chunks: &mut [SeqChunk<'_, B>]) -> BResult<Vec<f32>> {
        let c = &self.cfg;
        let (d, hd) = (c.hidden_size, c.head_dim());
        let (qd, kd) = (c.num_heads * hd, c.num_kv_heads * hd);
        let eps = c.rms_norm_eps as f32;
        let lens = check_chunks(chunks)?;
        let rows: usize = lens.iter().sum();
        let (cos, sin) = self.mrope_tables(chunks);
        let (cos, sin) = (be.upload(&cos)?, be.upload(&sin)?);
        let shape = AttnShape {
            heads: c.num_heads,
            kv_heads: c.num_kv_heads,
            hd,
        };
        let mut x = x;
        for (li, l) in self.layers.iter().enumerate() {
            let y = be.rms_norm(&x, rows, d, &l.input_norm, eps)?;
            let qkv = be.linear(&y, rows, d, &l.qkv.0, qd + 2 * kd, Some(&l.qkv.1))?;
            let (q, k, v) = be.split_qkv_rope(&qkv, rows, shape, &cos, &sin)?;
            let o = attend_cached(be, li, &q, &k, &v, chunks, &lens, shape)?;
            be.linear_add(&o, rows, qd, &l.o, d, None, &mut x)?;
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
}
