//! The f32 CPU reference backend: plain loops, with the matrix products and attention in
//! `kernels.rs`. It is the oracle other backends are checked against, so it favours
//! clarity.

mod amx;
pub mod attn;
#[cfg(target_arch = "x86_64")]
pub mod gemv;
pub mod hybrid;
pub mod kernels;
mod layout;
pub mod packed;
pub mod panels;
mod pool;
pub mod simd;
mod start;
mod tile;

use self::layout::Weights;
use super::{need, AttnShape, BResult, Backend, DeltaShape};
use crate::LocalError;

/// CPU f32 backend.
#[derive(Clone, Copy, Debug, Default)]
pub struct Cpu;

fn check(what: &str, got: usize, want: usize) -> BResult<()> {
    if got < want {
        return Err(LocalError::Internal(format!(
            "{what}: buffer has {got} values, needs {want}"
        )));
    }
    Ok(())
}

/// The error function (std has none): Taylor series below 3, asymptotic erfc above;
/// absolute error under 1e-9, far below f32 resolution.
fn erf(x: f64) -> f64 {
    let ax = x.abs();
    let r = if ax < 3.0 {
        let (mut sum, mut term, x2) = (ax, ax, ax * ax);
        let mut n = 0.0;
        while term.abs() > 1e-17 * sum.abs() {
            n += 1.0;
            term *= -x2 / n;
            sum += term / (2.0 * n + 1.0);
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    } else {
        // erfc(x) ≈ e^{-x²}/(x√π) · (1 − 1/(2x²) + 3/(4x⁴) − 15/(8x⁶) + 105/(16x⁸))
        let x2 = ax * ax;
        let s = 1.0 - 1.0 / (2.0 * x2) + 3.0 / (4.0 * x2 * x2) - 15.0 / (8.0 * x2.powi(3))
            + 105.0 / (16.0 * x2.powi(4));
        1.0 - (-x2).exp() / (ax * std::f64::consts::PI.sqrt()) * s
    };
    r.copysign(x)
}

impl Backend for Cpu {
    type Buf = Vec<f32>;

    fn name(&self) -> &'static str {
        "cpu"
    }
    fn weight_bytes_per_value(&self) -> usize {
        4
    }
    fn weight(&self, data: Vec<f32>) -> BResult<Vec<f32>> {
        Ok(data)
    }
    fn upload(&self, data: &[f32]) -> BResult<Vec<f32>> {
        Ok(data.to_vec())
    }
    fn download(&self, x: &Vec<f32>) -> BResult<Vec<f32>> {
        Ok(x.clone())
    }
    fn zeros(&self, n: usize) -> BResult<Vec<f32>> {
        Ok(vec![0.0; n])
    }

    fn linear(
        &self,
        x: &Vec<f32>,
        rows: usize,
        k: usize,
        w: &Vec<f32>,
        n: usize,
        bias: Option<&Vec<f32>>,
    ) -> BResult<Vec<f32>> {
        check("linear input", x.len(), rows * k)?;
        check("linear weight", w.len(), n * k)?;
        let mut y = vec![0f32; rows * n];
        if let Some(b) = bias {
            check("linear bias", b.len(), n)?;
            for row in y.chunks_exact_mut(n) {
                row.copy_from_slice(&b[..n]);
            }
        }
        kernels::matmul_add(x, rows, k, Weights::F32(w), n, &mut y);
        Ok(y)
    }

    fn add_assign(&self, x: &mut Vec<f32>, y: &Vec<f32>) -> BResult<()> {
        check("add", y.len(), x.len())?;
        x.iter_mut().zip(y).for_each(|(a, b)| *a += b);
        Ok(())
    }

    fn rms_norm(
        &self,
        x: &Vec<f32>,
        rows: usize,
        dim: usize,
        w: &Vec<f32>,
        eps: f32,
    ) -> BResult<Vec<f32>> {
        check("rms_norm", x.len(), rows * dim)?;
        let mut y = vec![0f32; rows * dim];
        pool::par_chunks(&mut y, dim, |r0, yc| {
            for (xr, yr) in x[r0 * dim..]
                .chunks_exact(dim)
                .zip(yc.chunks_exact_mut(dim))
            {
                let ms = xr.iter().map(|v| v * v).sum::<f32>() / dim as f32;
                let r = 1.0 / (ms + eps).sqrt();
                for ((o, v), g) in yr.iter_mut().zip(xr).zip(w) {
                    *o = v * r * g;
                }
            }
        });
        Ok(y)
    }

    fn layer_norm(
        &self,
        x: &Vec<f32>,
        rows: usize,
        dim: usize,
        w: &Vec<f32>,
        b: &Vec<f32>,
        eps: f32,
    ) -> BResult<Vec<f32>> {
        check("layer_norm", x.len(), rows * dim)?;
        let mut y = vec![0f32; rows * dim];
        pool::par_chunks(&mut y, dim, |r0, yc| {
            for (xr, yr) in x[r0 * dim..]
                .chunks_exact(dim)
                .zip(yc.chunks_exact_mut(dim))
            {
                let mean = xr.iter().sum::<f32>() / dim as f32;
                let var = xr.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / dim as f32;
                let r = 1.0 / (var + eps).sqrt();
                for (((o, v), g), bb) in yr.iter_mut().zip(xr).zip(w).zip(b) {
                    *o = (v - mean) * r * g + bb;
                }
            }
        });
        Ok(y)
    }

    fn rope(
        &self,
        x: &mut Vec<f32>,
        rows: usize,
        heads: usize,
        hd: usize,
        cos: &Vec<f32>,
        sin: &Vec<f32>,
    ) -> BResult<()> {
        check("rope", x.len(), rows * heads * hd)?;
        check("rope tables", cos.len().min(sin.len()), rows * hd)?;
        let half = hd / 2;
        let mut tmp = vec![0f32; hd];
        for r in 0..rows {
            let (c, s) = (&cos[r * hd..(r + 1) * hd], &sin[r * hd..(r + 1) * hd]);
            for h in 0..heads {
                let v = &mut x[(r * heads + h) * hd..(r * heads + h + 1) * hd];
                for i in 0..hd {
                    let rot = if i < half { -v[i + half] } else { v[i - half] };
                    tmp[i] = v[i] * c[i] + rot * s[i];
                }
                v.copy_from_slice(&tmp);
            }
        }
        Ok(())
    }

    fn silu_mul(&self, gu: &Vec<f32>, rows: usize, m: usize) -> BResult<Vec<f32>> {
        check("silu_mul", gu.len(), rows * 2 * m)?;
        Ok(silu_mul_rows(gu, rows, m))
    }

    fn quick_gelu(&self, x: &mut Vec<f32>) -> BResult<()> {
        quick_gelu(x);
        Ok(())
    }

    fn gelu_erf(&self, x: &mut Vec<f32>) -> BResult<()> {
        pool::par_chunks(x, 1, |_, c| {
            c.iter_mut().for_each(|v| {
                let f = *v as f64;
                *v = (0.5 * f * (1.0 + erf(f / std::f64::consts::SQRT_2))) as f32;
            })
        });
        Ok(())
    }

    fn gather_rows(&self, table: &Vec<f32>, dim: usize, ids: &[u32]) -> BResult<Vec<f32>> {
        let mut out = Vec::with_capacity(ids.len() * dim);
        for &id in ids {
            let a = id as usize * dim;
            let row = table.get(a..a + dim).ok_or_else(|| {
                LocalError::Internal(format!("token id {id} is outside the embedding table"))
            })?;
            out.extend_from_slice(row);
        }
        Ok(out)
    }

    fn slice_cols(
        &self,
        x: &Vec<f32>,
        rows: usize,
        stride: usize,
        col0: usize,
        n: usize,
    ) -> BResult<Vec<f32>> {
        check("slice_cols", x.len(), rows * stride)?;
        let mut out = Vec::with_capacity(rows * n);
        for r in 0..rows {
            out.extend_from_slice(&x[r * stride + col0..r * stride + col0 + n]);
        }
        Ok(out)
    }

    fn copy_rows(
        &self,
        dst: &mut Vec<f32>,
        dst_row: usize,
        src: &Vec<f32>,
        src_row: usize,
        rows: usize,
        dim: usize,
    ) -> BResult<()> {
        check("copy_rows source", src.len(), (src_row + rows) * dim)?;
        check("copy_rows destination", dst.len(), (dst_row + rows) * dim)?;
        dst[dst_row * dim..(dst_row + rows) * dim]
            .copy_from_slice(&src[src_row * dim..(src_row + rows) * dim]);
        Ok(())
    }

    fn attention(
        &self,
        q: &Vec<f32>,
        q_row: usize,
        n_q: usize,
        k: &Vec<f32>,
        v: &Vec<f32>,
        n_kv: usize,
        s: AttnShape,
        causal: bool,
        out: &mut Vec<f32>,
    ) -> BResult<()> {
        let (qd, kd) = (s.heads * s.hd, s.kv_heads * s.hd);
        check("attention q", q.len(), (q_row + n_q) * qd)?;
        check("attention k", k.len().min(v.len()), n_kv * kd)?;
        check("attention out", out.len(), (q_row + n_q) * qd)?;
        if causal && n_q > n_kv {
            return Err(LocalError::Internal(
                "causal attention with more queries than keys".into(),
            ));
        }
        if n_q >= attn::MIN_ROWS {
            attn::attention(q, q_row, n_q, k, v, n_kv, s, causal, out);
        } else {
            kernels::attention(q, q_row, n_q, k, v, n_kv, s, causal, out);
        }
        Ok(())
    }

    // Qwen3.5 ops: the host kernels in place, without the trait defaults' copies.
    fn rope_partial(
        &self,
        x: &mut Vec<f32>,
        rows: usize,
        heads: usize,
        hd: usize,
        rot: usize,
        cos: &Vec<f32>,
        sin: &Vec<f32>,
    ) -> BResult<()> {
        need("rope_partial", x.len(), rows * heads * hd)?;
        need("rope_partial tables", cos.len().min(sin.len()), rows * rot)?;
        hybrid::rope_partial(x, rows, heads, hd, rot, cos, sin);
        Ok(())
    }
    fn mul_sigmoid(&self, x: &mut Vec<f32>, g: &Vec<f32>) -> BResult<()> {
        need("mul_sigmoid", g.len(), x.len())?;
        hybrid::mul_sigmoid(x, g);
        Ok(())
    }
    fn gelu_tanh(&self, x: &mut Vec<f32>) -> BResult<()> {
        hybrid::gelu_tanh(x);
        Ok(())
    }
    fn conv1d_silu(
        &self,
        x: &Vec<f32>,
        n: usize,
        ch: usize,
        w: &Vec<f32>,
        k: usize,
        state: &mut Vec<f32>,
    ) -> BResult<Vec<f32>> {
        need("conv1d input", x.len(), n * ch)?;
        need("conv1d weight", w.len(), ch * k)?;
        need("conv1d state", state.len(), (k - 1) * ch)?;
        Ok(hybrid::conv1d_silu(x, n, ch, w, k, state))
    }
    fn delta_rule(
        &self,
        q: &Vec<f32>,
        k: &Vec<f32>,
        v: &Vec<f32>,
        beta: &Vec<f32>,
        g: &Vec<f32>,
        n: usize,
        s: DeltaShape,
        state: &mut Vec<f32>,
    ) -> BResult<Vec<f32>> {
        need("delta_rule q/k", q.len().min(k.len()), n * s.k_heads * s.dk)?;
        need("delta_rule v", v.len(), n * s.v_heads * s.dv)?;
        need("delta_rule gates", beta.len().min(g.len()), n * s.v_heads)?;
        need("delta_rule state", state.len(), s.state_len())?;
        Ok(hybrid::delta_rule(q, k, v, beta, g, n, s, state))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_matches_known_values() {
        // Reference values from tables: erf(0.5) = 0.5204998778130465, erf(1) = 0.8427007929497149,
        // erf(2) = 0.9953222650189527, erf(3.5) = 0.9999992569016276.
        for (x, want) in [
            (0.5, 0.5204998778130465),
            (1.0, 0.8427007929497149),
            (2.0, 0.9953222650189527),
            (3.5, 0.9999992569016276),
            (-1.0, -0.8427007929497149),
        ] {
            assert!((erf(x) - want).abs() < 1e-9, "erf({x}) = {}", erf(x));
        }
    }

    #[test]
    fn linear_matches_hand_product() {
        // x = [[1,2],[3,4]], w = [[1,0],[1,1],[0,2]], b = [0.5,0,-1] -> y = x·wᵀ + b.
        let y = Cpu
            .linear(
                &vec![1., 2., 3., 4.],
                2,
                2,
                &vec![1., 0., 1., 1., 0., 2.],
                3,
                Some(&vec![0.5, 0., -1.]),
            )
            .unwrap();
        assert_eq!(y, vec![1.5, 3., 3., 3.5, 7., 7.]);
    }

    #[test]
    fn causal_attention_first_query_sees_one_key() {
        let s = AttnShape {
            heads: 1,
            kv_heads: 1,
            hd: 2,
        };
        let q = vec![1., 0., 0., 1.];
        let k = vec![1., 0., 0., 1.];
        let v = vec![10., 20., 30., 40.];
        let mut out = vec![0.; 4];
        Cpu.attention(&q, 0, 2, &k, &v, 2, s, true, &mut out)
            .unwrap();
        assert_eq!(&out[..2], &[10., 20.]);
        // Second query: scores [0, 1/√2] -> weights softmax.
        let w1 = (1f32 / 2f32.sqrt()).exp() / (1.0 + (1f32 / 2f32.sqrt()).exp());
        assert!((out[2] - (10. * (1. - w1) + 30. * w1)).abs() < 1e-5);
    }
}

/// `silu(gate) · up` for rows `[gate | up]` of width `2m` (rows in parallel).
fn silu_mul_rows(gu: &[f32], rows: usize, m: usize) -> Vec<f32> {
    let mut out = vec![0f32; rows * m];
    pool::par_chunks(&mut out, m, |r0, o| silu_mul_part(&gu[r0 * 2 * m..], m, o));
    out
}

simd::multiversion! {
/// [`silu_mul_rows`] for the rows of `out`, from `gu`'s first rows.
fn silu_mul_part(gu: &[f32], m: usize, out: &mut [f32]) {
    for (row, o) in gu.chunks_exact(2 * m).zip(out.chunks_exact_mut(m)) {
        let (gate, up) = row.split_at(m);
        o.iter_mut()
            .zip(gate.iter().zip(up))
            .for_each(|(o, (g, u))| *o = simd::silu(*g) * u);
    }
}
}

simd::multiversion! {
/// `x · σ(1.702x)` in place.
fn quick_gelu(x: &mut [f32]) {
    x.iter_mut()
        .for_each(|v| *v *= simd::sigmoid(1.702 * *v));
}
}
