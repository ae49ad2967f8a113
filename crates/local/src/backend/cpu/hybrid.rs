//! Host (f32) reference kernels of the ops Qwen3.5 adds: partial rotary, sigmoid gating,
//! tanh-GELU, per-head L2 norm, gated RMSNorm, the causal depthwise conv with state, the
//! Gated DeltaNet gates and delta-rule scan, and weighted row gathers (the vision position
//! table's bilinear resampling). Each follows transformers 5.23.0's `modeling_qwen3_5.py`
//! operation for operation in f32. The CPU backend calls them directly; other backends fall
//! back to them through a host round trip (see the trait defaults in `mod.rs`).

use super::simd::{sigmoid, silu};

/// Shape of a Gated DeltaNet layer's heads.
#[derive(Clone, Copy, Debug)]
pub struct DeltaShape {
    /// Query/key heads.
    pub k_heads: usize,
    /// Value heads (a multiple of `k_heads`; q/k heads repeat-interleave over them).
    pub v_heads: usize,
    /// Key head width.
    pub dk: usize,
    /// Value head width.
    pub dv: usize,
}

impl DeltaShape {
    /// Values in one sequence's recurrent state `[Hv, Dk, Dv]`.
    pub fn state_len(&self) -> usize {
        self.v_heads * self.dk * self.dv
    }
}

/// Rotate the first `rot` dims of each head of `x[rows, heads·hd]` (rotate-half within those
/// dims) with tables `[rows, rot]`; dims `rot..hd` pass through.
#[allow(clippy::too_many_arguments)]
pub fn rope_partial(
    x: &mut [f32],
    rows: usize,
    heads: usize,
    hd: usize,
    rot: usize,
    cos: &[f32],
    sin: &[f32],
) {
    let half = rot / 2;
    let mut tmp = vec![0f32; rot];
    for r in 0..rows {
        let (c, s) = (&cos[r * rot..(r + 1) * rot], &sin[r * rot..(r + 1) * rot]);
        for h in 0..heads {
            let v = &mut x[(r * heads + h) * hd..(r * heads + h) * hd + rot];
            for i in 0..rot {
                let rh = if i < half { -v[i + half] } else { v[i - half] };
                tmp[i] = v[i] * c[i] + rh * s[i];
            }
            v.copy_from_slice(&tmp);
        }
    }
}

/// `x ·= σ(g)` elementwise (in parallel).
pub fn mul_sigmoid(x: &mut [f32], g: &[f32]) {
    super::pool::par_chunks(x, 1, |i0, c| mul_sigmoid_part(c, &g[i0..]));
}

super::simd::multiversion! {
/// [`mul_sigmoid`] on one chunk.
fn mul_sigmoid_part(x: &mut [f32], g: &[f32]) {
    x.iter_mut().zip(g).for_each(|(a, b)| *a *= sigmoid(*b));
}
}

/// `gelu(x, approximate="tanh")` in place (in parallel), as `x·σ(2u)` with
/// `u = √(2/π)(x + 0.044715x³)`: the same function as `½x(1 + tanh u)` without its
/// cancellation near `tanh u = −1`.
pub fn gelu_tanh(x: &mut [f32]) {
    super::pool::par_chunks(x, 1, |_, c| gelu_tanh_part(c));
}

super::simd::multiversion! {
/// [`gelu_tanh`] on one chunk.
fn gelu_tanh_part(x: &mut [f32]) {
    const C: f32 = 0.797_884_6; // sqrt(2/pi)
    x.iter_mut().for_each(|v| {
        let f = *v;
        *v = f * sigmoid(2.0 * C * (f + 0.044715 * f * f * f));
    });
}
}

/// Rows of width `dim` scaled by `rsqrt(Σ x² + eps)` (FLA's l2norm).
pub fn l2_norm(x: &[f32], rows: usize, dim: usize, eps: f32) -> Vec<f32> {
    let mut y = vec![0f32; rows * dim];
    super::pool::par_chunks(&mut y, dim, |r0, yc| {
        for (xr, yr) in x[r0 * dim..]
            .chunks_exact(dim)
            .zip(yc.chunks_exact_mut(dim))
        {
            let r = 1.0 / (xr.iter().map(|v| v * v).sum::<f32>() + eps).sqrt();
            yr.iter_mut().zip(xr).for_each(|(o, v)| *o = v * r);
        }
    });
    y
}

/// `RMSNorm(x)·w·silu(z)` over rows of width `dim` (Qwen3.5's `RMSNormGated`).
pub fn rms_norm_gated(
    x: &[f32],
    z: &[f32],
    rows: usize,
    dim: usize,
    w: &[f32],
    eps: f32,
) -> Vec<f32> {
    let mut y = vec![0f32; rows * dim];
    super::pool::par_chunks(&mut y, dim, |r0, yc| {
        for (ri, yr) in yc.chunks_exact_mut(dim).enumerate() {
            let r = r0 + ri;
            let (xr, zr) = (&x[r * dim..(r + 1) * dim], &z[r * dim..(r + 1) * dim]);
            let ms = xr.iter().map(|v| v * v).sum::<f32>() / dim as f32;
            let inv = 1.0 / (ms + eps).sqrt();
            for i in 0..dim {
                yr[i] = w[i] * (xr[i] * inv) * silu(zr[i]);
            }
        }
    });
    y
}

/// Depthwise causal conv (kernel `k`, no bias) + SiLU over `x[n, ch]`, continuing from
/// `state[k−1, ch]` (the previous inputs, oldest first; zeros for a fresh sequence), which is
/// replaced by the last `k−1` inputs. `w` is `[ch, k]`.
pub fn conv1d_silu(
    x: &[f32],
    n: usize,
    ch: usize,
    w: &[f32],
    k: usize,
    state: &mut [f32],
) -> Vec<f32> {
    let past = k - 1;
    let y = conv1d_taps(x, n, ch, &transpose(w, ch, k), k, state);
    // New state: the last `past` rows of [state; x].
    let total = past + n;
    let mut next = vec![0f32; past * ch];
    for (i, t) in (total - past..total).enumerate() {
        let src = if t < past {
            &state[t * ch..(t + 1) * ch]
        } else {
            &x[(t - past) * ch..(t - past + 1) * ch]
        };
        next[i * ch..(i + 1) * ch].copy_from_slice(src);
    }
    state[..past * ch].copy_from_slice(&next);
    y
}

/// `w[rows, cols]` as `[cols, rows]`.
fn transpose(w: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut t = vec![0f32; rows * cols];
    for r in 0..rows {
        for c in 0..cols {
            t[c * rows + r] = w[r * cols + c];
        }
    }
    t
}

/// `y[t, c] = silu(Σ_j [state; x][t + j, c] · w[c, j])` with the taps `wt = wᵀ [k, ch]`: one
/// row of y at a time (rows in parallel), each tap added across all channels (vectorised over
/// channels), the taps in order as in a per-channel loop.
fn conv1d_taps(x: &[f32], n: usize, ch: usize, wt: &[f32], k: usize, state: &[f32]) -> Vec<f32> {
    let mut y = vec![0f32; n * ch];
    super::pool::par_chunks(&mut y, ch, |t0, yc| {
        conv1d_taps_part(x, ch, wt, k, state, t0, yc)
    });
    y
}

super::simd::multiversion! {
/// [`conv1d_taps`] for the rows of `y`, the first of them row `t0`.
fn conv1d_taps_part(x: &[f32], ch: usize, wt: &[f32], k: usize, state: &[f32], t0: usize, y: &mut [f32]) {
    let past = k - 1;
    for (t, yr) in y.chunks_exact_mut(ch).enumerate() {
        let t = t0 + t;
        for (j, wj) in wt.chunks_exact(ch).enumerate() {
            let src = if t + j < past {
                &state[(t + j) * ch..(t + j + 1) * ch]
            } else {
                &x[(t + j - past) * ch..(t + j - past + 1) * ch]
            };
            yr.iter_mut().zip(src).zip(wj).for_each(|((a, s), w)| *a += s * w);
        }
        yr.iter_mut().for_each(|a| *a = silu(*a));
    }
}
}

/// `β = σ(b)` and `g = −exp(A_log)·softplus(a + dt_bias)` for `b, a [rows, heads]`.
pub fn delta_gates(
    b: &[f32],
    a: &[f32],
    rows: usize,
    heads: usize,
    a_log: &[f32],
    dt_bias: &[f32],
) -> (Vec<f32>, Vec<f32>) {
    let beta = b[..rows * heads].iter().map(|&x| sigmoid(x)).collect();
    let mut g = Vec::with_capacity(rows * heads);
    for r in 0..rows {
        for h in 0..heads {
            let x = a[r * heads + h] + dt_bias[h];
            // torch softplus (beta 1, threshold 20).
            let sp = if x > 20.0 { x } else { x.exp().ln_1p() };
            g.push(-a_log[h].exp() * sp);
        }
    }
    (beta, g)
}

/// The gated delta rule over `n` tokens of one sequence, in the recurrent form: per value
/// head, `S ← S·e^g; δ = β(v − Sᵀk); S ← S + k⊗δ; o = Sᵀq` with q scaled by `Dk^-½`.
/// `q, k [n, Hk·Dk]` (already L2-normalised), `v [n, Hv·Dv]`, `beta, g [n, Hv]`;
/// `state [Hv, Dk, Dv]` is read and updated. Returns `o [n, Hv·Dv]`.
#[allow(clippy::too_many_arguments)]
pub fn delta_rule(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    beta: &[f32],
    g: &[f32],
    n: usize,
    s: DeltaShape,
    state: &mut [f32],
) -> Vec<f32> {
    let (hv, dk, dv) = (s.v_heads, s.dk, s.dv);
    if n == 0 || s.state_len() == 0 {
        return vec![0f32; n * hv * dv];
    }
    // Value heads are independent: split them across threads, each head's tokens in order.
    let threads = super::pool::threads_for(n * hv * dk * dv).min(hv).max(1);
    let per = hv.div_ceil(threads);
    let mut parts: Vec<Vec<f32>> = vec![Vec::new(); hv.div_ceil(per)];
    let mut jobs: Vec<_> = state[..hv * dk * dv]
        .chunks_mut(per * dk * dv)
        .zip(parts.iter_mut())
        .collect();
    super::pool::run_each(&mut jobs, |c, (st, part)| {
        for (i, sh) in st.chunks_exact_mut(dk * dv).enumerate() {
            delta_rule_head(q, k, v, beta, g, n, s, c * per + i, sh, part);
        }
    });
    // parts[c] holds heads c·per.. in order, each [n, dv]; interleave into [n, Hv·Dv].
    let mut out = vec![0f32; n * hv * dv];
    for (c, part) in parts.iter().enumerate() {
        for (i, head) in part.chunks_exact(n * dv).enumerate() {
            let h = c * per + i;
            for t in 0..n {
                out[(t * hv + h) * dv..(t * hv + h + 1) * dv]
                    .copy_from_slice(&head[t * dv..(t + 1) * dv]);
            }
        }
    }
    out
}

super::simd::multiversion! {
/// One value head `h` of [`delta_rule`] over the `n` tokens, its state `st [Dk, Dv]`; the
/// head's outputs `[n, Dv]` are appended to `out`. The state's columns evolve independently,
/// so they are taken 32 at a time (an L1-sized block, the running sums in registers) through
/// all the tokens, in one pass over the block per token: update each row with this token's
/// delta and add it into `Sᵀq`, then decay it for the next token and add it into that token's
/// `Sᵀk`. Each value sees the same operations in the same order as four separate passes per
/// token (decay, `Sᵀk`, update, `Sᵀq`).
#[allow(clippy::too_many_arguments)]
fn delta_rule_head(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    beta: &[f32],
    g: &[f32],
    n: usize,
    s: DeltaShape,
    h: usize,
    st: &mut [f32],
    out: &mut Vec<f32>,
) {
    let o0 = out.len();
    out.resize(o0 + n * s.dv, 0.0);
    let o = &mut out[o0..];
    let cols = DeltaCols { q, k, v, beta, g, n, s, h };
    let mut j0 = 0;
    while j0 + DELTA_COLS <= s.dv {
        cols.run::<DELTA_COLS>(j0, st, o);
        j0 += DELTA_COLS;
    }
    for j in j0..s.dv {
        cols.run::<1>(j, st, o);
    }
}
}

/// State columns per block of [`delta_rule_head`].
const DELTA_COLS: usize = 32;

/// One head's inputs to the delta rule, for its column blocks.
#[derive(Clone, Copy)]
struct DeltaCols<'a> {
    q: &'a [f32],
    k: &'a [f32],
    v: &'a [f32],
    beta: &'a [f32],
    g: &'a [f32],
    n: usize,
    s: DeltaShape,
    h: usize,
}

impl DeltaCols<'_> {
    /// State columns `j0..j0 + W` through every token; outputs into `o [n, Dv]`.
    #[inline(always)]
    fn run<const W: usize>(self, j0: usize, st: &mut [f32], o: &mut [f32]) {
        let Self {
            q,
            k,
            v,
            beta,
            g,
            n,
            s,
            h,
        } = self;
        let (hk, hv, dk, dv) = (s.k_heads, s.v_heads, s.dk, s.dv);
        let kh = h / (hv / hk);
        let scale = 1.0 / (dk as f32).sqrt();
        let key = |t: usize| &k[(t * hk + kh) * dk..(t * hk + kh + 1) * dk];
        if n == 0 {
            return;
        }
        // Token 0: decay the state, then Sᵀk.
        let mut kv = [0f32; W];
        let (d0, k0) = (g[h].exp(), key(0));
        for (i, &ki) in k0.iter().enumerate() {
            let row = &mut st[i * dv + j0..i * dv + j0 + W];
            for j in 0..W {
                row[j] *= d0;
                kv[j] += row[j] * ki;
            }
        }
        for t in 0..n {
            let bt = beta[t * hv + h];
            let vt = &v[(t * hv + h) * dv + j0..(t * hv + h) * dv + j0 + W];
            let mut delta = [0f32; W];
            for j in 0..W {
                delta[j] = (vt[j] - kv[j]) * bt;
            }
            let (kt, qt) = (key(t), &q[(t * hk + kh) * dk..(t * hk + kh + 1) * dk]);
            let next = t + 1 < n;
            let (dn, kn) = if next {
                (g[(t + 1) * hv + h].exp(), key(t + 1))
            } else {
                (1.0, kt)
            };
            let mut acc = [0f32; W];
            let mut kv_next = [0f32; W];
            for i in 0..dk {
                let row = &mut st[i * dv + j0..i * dv + j0 + W];
                let (ki, qi) = (kt[i], qt[i] * scale);
                for j in 0..W {
                    row[j] += ki * delta[j];
                    acc[j] += row[j] * qi;
                }
                if next {
                    let kni = kn[i];
                    for j in 0..W {
                        row[j] *= dn;
                        kv_next[j] += row[j] * kni;
                    }
                }
            }
            o[t * dv + j0..t * dv + j0 + W].copy_from_slice(&acc);
            kv = kv_next;
        }
    }
}

/// `out[i] = Σ_t w[i·taps + t] · table[idx[i·taps + t]]` over rows of width `dim`.
pub fn gather_weighted(table: &[f32], dim: usize, idx: &[u32], w: &[f32], taps: usize) -> Vec<f32> {
    let rows = idx.len() / taps.max(1);
    let mut out = vec![0f32; rows * dim];
    for (r, o) in out.chunks_exact_mut(dim).enumerate() {
        for t in 0..taps {
            let (i, wt) = (idx[r * taps + t] as usize, w[r * taps + t]);
            let row = &table[i * dim..(i + 1) * dim];
            o.iter_mut().zip(row).for_each(|(a, b)| *a += b * wt);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conv_state_carries_across_calls() {
        // One channel, kernel 3, weights [1, 2, 3]: y_t = silu(x_{t-2} + 2x_{t-1} + 3x_t).
        let w = [1.0, 2.0, 3.0];
        let x = [1.0, -1.0, 0.5, 2.0];
        let mut s_all = vec![0.0; 2];
        let all = conv1d_silu(&x, 4, 1, &w, 3, &mut s_all);
        let mut s = vec![0.0; 2];
        let mut split = conv1d_silu(&x[..3], 3, 1, &w, 3, &mut s);
        split.extend(conv1d_silu(&x[3..], 1, 1, &w, 3, &mut s));
        assert_eq!(all, split);
        assert_eq!(s, s_all);
        assert_eq!(s, vec![0.5, 2.0]);
        // t = 1: 0 + 2·1 + 3·(−1) = −1.
        assert!((all[1] - silu(-1.0)).abs() < 1e-7);
    }

    #[test]
    fn delta_rule_one_step_by_hand() {
        // One head, Dk = Dv = 1, zero state: S = βkv, o = S·q/√1.
        let s = DeltaShape {
            k_heads: 1,
            v_heads: 1,
            dk: 1,
            dv: 1,
        };
        let mut st = vec![0.0];
        let o = delta_rule(&[2.0], &[1.0], &[3.0], &[0.5], &[0.0], 1, s, &mut st);
        assert_eq!(st, vec![1.5]);
        assert_eq!(o, vec![3.0]);
        // Second step decays by e^g = 0.5 first: S = 0.75; δ = 0.5(1 − 0.75) ; S = 0.875.
        let o = delta_rule(
            &[1.0],
            &[1.0],
            &[1.0],
            &[0.5],
            &[0.5f32.ln()],
            1,
            s,
            &mut st,
        );
        assert!((st[0] - 0.875).abs() < 1e-6 && (o[0] - 0.875).abs() < 1e-6);
    }

    /// The delta rule as written in the model card: per token, decay the state, `Sᵀk`, update,
    /// `Sᵀq`, each a separate pass over `[Dk, Dv]`.
    #[allow(clippy::too_many_arguments)]
    fn four_passes(
        q: &[f32],
        k: &[f32],
        v: &[f32],
        beta: &[f32],
        g: &[f32],
        n: usize,
        s: DeltaShape,
        st: &mut [f32],
    ) -> Vec<f32> {
        let (hk, hv, dk, dv) = (s.k_heads, s.v_heads, s.dk, s.dv);
        let mut out = vec![0f32; n * hv * dv];
        for h in 0..hv {
            let kh = h / (hv / hk);
            let sh = &mut st[h * dk * dv..(h + 1) * dk * dv];
            for t in 0..n {
                let (qt, kt) = (&q[(t * hk + kh) * dk..], &k[(t * hk + kh) * dk..]);
                let decay = g[t * hv + h].exp();
                sh.iter_mut().for_each(|x| *x *= decay);
                let mut kv = vec![0f32; dv];
                for i in 0..dk {
                    for j in 0..dv {
                        kv[j] += sh[i * dv + j] * kt[i];
                    }
                }
                let delta: Vec<f32> = (0..dv)
                    .map(|j| (v[(t * hv + h) * dv + j] - kv[j]) * beta[t * hv + h])
                    .collect();
                for i in 0..dk {
                    for j in 0..dv {
                        sh[i * dv + j] += kt[i] * delta[j];
                    }
                }
                let o = &mut out[(t * hv + h) * dv..(t * hv + h + 1) * dv];
                for i in 0..dk {
                    let qi = qt[i] * (1.0 / (dk as f32).sqrt());
                    for j in 0..dv {
                        o[j] += sh[i * dv + j] * qi;
                    }
                }
            }
        }
        out
    }

    #[test]
    fn the_blocked_delta_rule_gives_the_four_pass_bits() {
        // Hv > Hk, Dv with a block and a tail, a state carried from one call into the next.
        let s = DeltaShape {
            k_heads: 2,
            v_heads: 4,
            dk: 24,
            dv: DELTA_COLS + 5,
        };
        let n = 9;
        let f =
            |len: usize, a: f32| -> Vec<f32> { (0..len).map(|i| (i as f32 * a).sin()).collect() };
        let (q, k) = (f(n * 2 * 24, 0.31), f(n * 2 * 24, 0.17));
        let v = f(n * s.v_heads * s.dv, 0.23);
        let beta: Vec<f32> = f(n * 4, 0.5).iter().map(|x| sigmoid(*x)).collect();
        let g: Vec<f32> = f(n * 4, 0.7).iter().map(|x| -x.abs() * 0.3).collect();
        let st0 = f(s.state_len(), 0.05);
        let (mut a, mut b) = (st0.clone(), st0);
        let want = four_passes(&q, &k, &v, &beta, &g, n, s, &mut a);
        let (c, t) = (5, n - 5);
        let (qd, vd) = (2 * 24, 4 * s.dv);
        let mut got = delta_rule(
            &q[..c * qd],
            &k[..c * qd],
            &v[..c * vd],
            &beta[..c * 4],
            &g[..c * 4],
            c,
            s,
            &mut b,
        );
        got.extend(delta_rule(
            &q[c * qd..],
            &k[c * qd..],
            &v[c * vd..],
            &beta[c * 4..],
            &g[c * 4..],
            t,
            s,
            &mut b,
        ));
        assert_eq!(got, want);
        assert_eq!(b, a);
    }
}
