//! Prefill attention as two matrix products per head, on the panel kernel (`panels.rs`):
//! scores `Q·Kᵀ`, a softmax per row (causal rows see their prefix), then `P·V`. Heads are split
//! across threads. Decode's few query rows keep the row-at-a-time loop of `kernels.rs`,
//! which reads the KV cache once per row instead of packing it.
//!
//! Per value the order is fixed (one FMA chain over the head width for a score, over the keys
//! for an output, masked keys adding exact zeros), whatever the thread count.

use super::panels::Panels;
use super::pool::threads_for;
use crate::backend::AttnShape;

/// Fewest query rows that take this path.
pub const MIN_ROWS: usize = 16;

/// Scaled dot-product attention (see [`crate::backend::Backend::attention`]); the caller checks lengths.
#[allow(clippy::too_many_arguments)]
pub fn attention(
    q: &[f32],
    q_row: usize,
    n_q: usize,
    k: &[f32],
    v: &[f32],
    n_kv: usize,
    s: AttnShape,
    causal: bool,
    out: &mut [f32],
) {
    let (qd, hd) = (s.heads * s.hd, s.hd);
    if n_q == 0 || n_kv == 0 || qd == 0 {
        return;
    }
    let threads = threads_for(n_q * n_kv * qd).min(s.heads).max(1);
    let per = s.heads.div_ceil(threads);
    let job = Job {
        q,
        q_row,
        n_q,
        k,
        v,
        n_kv,
        s,
        causal,
    };
    let mut heads: Vec<Vec<f32>> = vec![Vec::new(); s.heads];
    let mut chunks: Vec<&mut [Vec<f32>]> = heads.chunks_mut(per).collect();
    super::pool::run_each(&mut chunks, |t, chunk| {
        for (i, o) in chunk.iter_mut().enumerate() {
            *o = job.head(t * per + i);
        }
    });
    for (h, oh) in heads.iter().enumerate() {
        for (i, row) in oh.chunks_exact(hd).enumerate() {
            let at = (q_row + i) * qd + h * hd;
            out[at..at + hd].copy_from_slice(row);
        }
    }
}

/// One call's inputs, as [`attention`] takes them.
#[derive(Clone, Copy)]
struct Job<'a> {
    q: &'a [f32],
    q_row: usize,
    n_q: usize,
    k: &'a [f32],
    v: &'a [f32],
    n_kv: usize,
    s: AttnShape,
    causal: bool,
}

impl Job<'_> {
    /// Query head `h`'s output rows `[n_q, hd]`.
    fn head(self, h: usize) -> Vec<f32> {
        let Job {
            q,
            q_row,
            n_q,
            k,
            v,
            n_kv,
            s,
            causal,
        } = self;
        let (qd, kd, hd) = (s.heads * s.hd, s.kv_heads * s.hd, s.hd);
        let kh = h / (s.heads / s.kv_heads);
        let scale = 1.0 / (hd as f32).sqrt();
        let mut qh = Vec::with_capacity(n_q * hd);
        for i in 0..n_q {
            let at = (q_row + i) * qd + h * hd;
            qh.extend_from_slice(&q[at..at + hd]);
        }
        let mut kh_rows = Vec::with_capacity(n_kv * hd);
        for j in 0..n_kv {
            kh_rows.extend_from_slice(&k[j * kd + kh * hd..j * kd + (kh + 1) * hd]);
        }
        let mut p = vec![0f32; n_q * n_kv];
        Panels::pack(&kh_rows, n_kv, hd, false).matmul_add_on(&qh, n_q, &mut p, 1);
        for (i, row) in p.chunks_exact_mut(n_kv).enumerate() {
            let visible = if causal { n_kv - n_q + i + 1 } else { n_kv };
            softmax_prefix(row, visible, scale);
        }
        // Vᵀ for this head: row d holds value dimension d of every key.
        let mut vt = vec![0f32; hd * n_kv];
        for j in 0..n_kv {
            for (d, &x) in v[j * kd + kh * hd..j * kd + (kh + 1) * hd]
                .iter()
                .enumerate()
            {
                vt[d * n_kv + j] = x;
            }
        }
        let mut oh = vec![0f32; n_q * hd];
        Panels::pack(&vt, hd, n_kv, false).matmul_add_on(&p, n_q, &mut oh, 1);
        oh
    }
}

super::simd::multiversion! {
    /// `row[..visible]` scaled then softmax-normalised; the masked rest set to 0.
    fn softmax_prefix(row: &mut [f32], visible: usize, scale: f32) {
        let (seen, masked) = row.split_at_mut(visible);
        // Max and sum over 16 lanes (loops the compiler can vectorise), lanes reduced in order.
        let mut max = [f32::NEG_INFINITY; 16];
        for c in seen.chunks_mut(16) {
            for (m, x) in max.iter_mut().zip(c) {
                *x *= scale;
                *m = if *x > *m { *x } else { *m };
            }
        }
        let max = max.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b));
        seen.iter_mut().for_each(|x| *x = super::simd::exp(*x - max));
        let mut sum = [0f32; 16];
        for c in seen.chunks(16) {
            for (s, x) in sum.iter_mut().zip(c) {
                *s += x;
            }
        }
        let sum: f32 = sum.iter().sum();
        seen.iter_mut().for_each(|x| *x /= sum);
        masked.iter_mut().for_each(|x| *x = 0.0);
    }
}

#[cfg(test)]
mod tests {
    use super::super::kernels::max_diff;
    use super::*;

    #[test]
    fn blocked_attention_matches_the_row_loop() {
        // GQA (4 query heads on 2 KV heads), a head width off the panel width, causal with a
        // cached prefix (more keys than queries) and not, queries starting at a later row.
        let s = AttnShape {
            heads: 4,
            kv_heads: 2,
            hd: 24,
        };
        let (qd, kd) = (s.heads * s.hd, s.kv_heads * s.hd);
        let val = |i: usize, m: f32| ((i as f32) * m).sin();
        for &(q_row, n_q, n_kv, causal) in
            &[(0, 20, 20, true), (3, 17, 40, true), (0, 33, 50, false)]
        {
            let q: Vec<f32> = (0..(q_row + n_q) * qd).map(|i| val(i, 0.37)).collect();
            let k: Vec<f32> = (0..n_kv * kd).map(|i| val(i, 0.11)).collect();
            let v: Vec<f32> = (0..n_kv * kd).map(|i| val(i, 0.23)).collect();
            let mut a = vec![7f32; (q_row + n_q) * qd];
            let mut b = a.clone();
            attention(&q, q_row, n_q, &k, &v, n_kv, s, causal, &mut a);
            super::super::kernels::attention(&q, q_row, n_q, &k, &v, n_kv, s, causal, &mut b);
            let d = max_diff(&a, &b);
            assert!(
                d < 1e-5,
                "q_row {q_row} n_q {n_q} n_kv {n_kv} causal {causal}: max |Δ| {d}"
            );
            assert!(
                a[..q_row * qd].iter().all(|&x| x == 7.0),
                "rows before q_row untouched"
            );
        }
    }
}
