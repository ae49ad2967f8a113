//! What both families' decoders share (a leaf under the families): rotary tables, the
//! per-sequence cache, the SwiGLU block, attention over each sequence's cache, the batched-call
//! bookkeeping and the final norm + lm_head.

use crate::backend::{AttnShape, BResult, Backend};
use crate::weights::Weights;
use crate::LocalError;

/// Rotary `cos`/`sin` tables `[rows, hd]` (f32, `emb = [f, f]` convention) from per-row
/// half-width frequency vectors.
pub(crate) fn rope_tables(freqs: &[f32], half: usize) -> (Vec<f32>, Vec<f32>) {
    let rows = freqs.len() / half;
    let (mut cos, mut sin) = (
        Vec::with_capacity(rows * 2 * half),
        Vec::with_capacity(rows * 2 * half),
    );
    for f in freqs.chunks_exact(half) {
        for _ in 0..2 {
            cos.extend(f.iter().map(|x| x.cos()));
            sin.extend(f.iter().map(|x| x.sin()));
        }
    }
    (cos, sin)
}

/// `1 / theta^(2i / dim)` for `i < dim/2`, computed in f32 as transformers does.
pub(crate) fn inv_freq(theta: f64, dim: usize) -> Vec<f32> {
    (0..dim / 2)
        .map(|i| 1.0 / (theta as f32).powf((2 * i) as f32 / dim as f32))
        .collect()
}

/// One decoder layer's state for one sequence.
pub enum LayerState<B: Backend> {
    /// Keys and values `[capacity, kv_heads·hd]` (attention layers).
    Kv {
        /// Keys.
        k: B::Buf,
        /// Values.
        v: B::Buf,
    },
    /// The causal conv's last inputs `[kernel−1, channels]` and the delta-rule state
    /// `[Hv, Dk, Dv]` (f32) of a linear-attention layer.
    Linear {
        /// Conv tail.
        conv: B::Buf,
        /// Recurrent state.
        rec: B::Buf,
    },
}

/// Everything one sequence carries between forward calls, per layer.
pub struct SeqCache<B: Backend> {
    /// One state per decoder layer.
    pub layers: Vec<LayerState<B>>,
    /// Tokens seen.
    pub len: usize,
    /// Tokens that fit in the KV buffers.
    pub capacity: usize,
}

impl<B: Backend> SeqCache<B> {
    /// Layer `li`'s keys and values.
    pub fn kv_mut(&mut self, li: usize) -> BResult<(&mut B::Buf, &mut B::Buf)> {
        match self.layers.get_mut(li) {
            Some(LayerState::Kv { k, v }) => Ok((k, v)),
            _ => Err(LocalError::Internal(format!("layer {li} has no KV cache"))),
        }
    }

    /// Layer `li`'s conv tail and recurrent state.
    pub fn linear_mut(&mut self, li: usize) -> BResult<(&mut B::Buf, &mut B::Buf)> {
        match self.layers.get_mut(li) {
            Some(LayerState::Linear { conv, rec }) => Ok((conv, rec)),
            _ => Err(LocalError::Internal(format!(
                "layer {li} has no linear-attention state"
            ))),
        }
    }
}

/// One sequence's part of a batched forward call.
pub struct SeqChunk<'a, B: Backend> {
    /// Its cache (appended to).
    pub cache: &'a mut SeqCache<B>,
    /// M-RoPE positions `[3][n]` of its new rows.
    pub positions: [Vec<i64>; 3],
    /// Return logits for every new row (else only the last).
    pub all_logits: bool,
}

/// The pre-norm SwiGLU MLP that ends every decoder layer of both families:
/// `x += down(silu(gate) · up)(norm(x))`, gate and up stacked into one `[2m, d]` matrix at
/// load time (one matmul).
pub(crate) struct SwiGlu<B: Backend> {
    norm: B::Buf,
    gate_up: B::Buf,
    down: B::Buf,
}

impl<B: Backend> SwiGlu<B> {
    /// `{prefix}.mlp.{gate,up,down}_proj.weight` with the given (already loaded) norm weight.
    pub fn load(
        be: &B,
        w: &Weights,
        prefix: &str,
        d: usize,
        m: usize,
        norm: B::Buf,
    ) -> Result<SwiGlu<B>, LocalError> {
        let gate_up = [
            w.f32(&format!("{prefix}.mlp.gate_proj.weight"), &[m, d])?,
            w.f32(&format!("{prefix}.mlp.up_proj.weight"), &[m, d])?,
        ]
        .concat();
        Ok(SwiGlu {
            norm,
            gate_up: be.linear_weight(gate_up, 2 * m, d)?,
            down: be.linear_weight(
                w.f32(&format!("{prefix}.mlp.down_proj.weight"), &[d, m])?,
                d,
                m,
            )?,
        })
    }

    /// Adds the block's output to the residual stream `x` (`[rows, d]`, intermediate size m).
    pub fn add_to(
        &self,
        be: &B,
        x: &mut B::Buf,
        rows: usize,
        d: usize,
        m: usize,
        eps: f32,
    ) -> BResult<()> {
        let y = be.rms_norm(x, rows, d, &self.norm, eps)?;
        let gu = be.linear(&y, rows, d, &self.gate_up, 2 * m, None)?;
        let h = be.silu_mul(&gu, rows, m)?;
        be.linear_add(&h, rows, m, &self.down, d, None, x)
    }
}

/// Causal attention of a ragged batch against each sequence's own cache at layer `li`: each
/// sequence's new key and value rows (`lens[i]` rows of `k`/`v`, in `chunks` order) are
/// appended to its cache, then its queries attend over everything cached; outputs `[rows,
/// heads·hd]`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn attend_cached<B: Backend>(
    be: &B,
    li: usize,
    q: &B::Buf,
    k: &B::Buf,
    v: &B::Buf,
    chunks: &mut [SeqChunk<'_, B>],
    lens: &[usize],
    shape: AttnShape,
) -> BResult<B::Buf> {
    let kd = shape.kv_heads * shape.hd;
    let rows: usize = lens.iter().sum();
    let mut o = be.zeros(rows * shape.heads * shape.hd)?;
    let mut r0 = 0;
    for (s, &n) in chunks.iter_mut().zip(lens) {
        let past = s.cache.len;
        let (ck, cv) = s.cache.kv_mut(li)?;
        be.copy_rows(ck, past, k, r0, n, kd)?;
        be.copy_rows(cv, past, v, r0, n, kd)?;
        be.attention(q, r0, n, ck, cv, past + n, shape, true, &mut o)?;
        r0 += n;
    }
    Ok(o)
}

/// Rows per chunk, after checking position axes and cache room.
pub(crate) fn check_chunks<B: Backend>(chunks: &[SeqChunk<'_, B>]) -> BResult<Vec<usize>> {
    let lens: Vec<usize> = chunks.iter().map(|s| s.positions[0].len()).collect();
    for (s, &n) in chunks.iter().zip(&lens) {
        if s.positions.iter().any(|p| p.len() != n) {
            return Err(LocalError::Internal(
                "M-RoPE position axes differ in length".into(),
            ));
        }
        if s.cache.len + n > s.cache.capacity {
            return Err(LocalError::Internal(format!(
                "KV cache full: {} + {n} tokens exceed its capacity {}",
                s.cache.len, s.cache.capacity
            )));
        }
    }
    Ok(lens)
}

/// Final RMSNorm and lm_head on the rows whose logits are wanted (each chunk's last row, or
/// all its rows when `all_logits`), downloaded as `[rows, vocab]`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn logits_rows<B: Backend>(
    be: &B,
    x: &B::Buf,
    chunks: &[SeqChunk<'_, B>],
    lens: &[usize],
    d: usize,
    norm: &B::Buf,
    eps: f32,
    head: &B::Buf,
    vocab: usize,
) -> BResult<Vec<f32>> {
    let mut want = Vec::new();
    let mut r0 = 0;
    for (s, &n) in chunks.iter().zip(lens) {
        if s.all_logits {
            want.extend(r0..r0 + n);
        } else if n > 0 {
            want.push(r0 + n - 1);
        }
        r0 += n;
    }
    let mut sel = be.zeros(want.len() * d)?;
    for (i, &r) in want.iter().enumerate() {
        be.copy_rows(&mut sel, i, x, r, 1, d)?;
    }
    let h = be.rms_norm(&sel, want.len(), d, norm, eps)?;
    let logits = be.linear(&h, want.len(), d, head, vocab, None)?;
    be.download(&logits)
}
