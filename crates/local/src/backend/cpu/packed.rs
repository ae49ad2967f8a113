//! The CPU backend (`--device cpu`, f32 or `--dtype bf16`): linear weights are packed once at
//! load into column panels (`panels.rs`) that the product kernel reads as they lie, and in
//! bf16 they and the embedding table are stored as bfloat16 (half the memory and half the
//! bytes read per decoded token). Everything else, activations included, stays f32 and runs
//! the f32 reference backend's code (`mod.rs`). Products multiply bf16 weights by f32
//! activations with f32 accumulation (the CUDA backend also rounds activations to bf16; this
//! one does not).
//!
//! In f32, a matrix whose values are all bf16 values (every matrix of a bf16 checkpoint, as
//! Qwen publishes and trainers save) is held as bf16 too: widening is exact and decode runs
//! the same chains of fused multiply-adds, so decode steps are the same bits as holding it in
//! f32, with half the memory and half the bytes read per decoded token.
//!
//! Prompt rows (the engine marks them through [`Backend::set_prompt`]) over bf16-held weights
//! run on AMX where the CPU has AMX-BF16 (`amx.rs`): exact products, f32 sums, not the
//! FMA chains' bits.

use super::kernels;
use super::layout::{bf16_to_f32, Weights};
use super::panels::{Panels, Phase};
use super::Cpu;
use crate::backend::{AttnShape, BResult, Backend, DeltaShape};
use crate::LocalError;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// The CPU backend with packed linear weights, storing matrices in f32 or (`bf16`) bfloat16.
#[derive(Clone, Debug, Default)]
pub struct CpuPacked {
    /// Store linear weights and the embedding table as bfloat16 (rounding them).
    bf16: bool,
    /// Values of the matrices held in f32 so far (shared by clones): none when every matrix
    /// was held as bf16.
    f32_values: Arc<AtomicUsize>,
}

impl CpuPacked {
    /// The backend for `--dtype bf16` (`bf16`, weights rounded) or f32 (weights kept exactly;
    /// bf16-valued matrices held as bf16).
    pub fn new(bf16: bool) -> CpuPacked {
        CpuPacked {
            bf16,
            f32_values: Arc::default(),
        }
    }

    /// Refuse settings in the environment that this backend cannot read (`VLM_EVAL_CPU_AMX`
    /// with a value other than 0 or 1 and their spellings), naming the variable and the fix.
    pub fn check_env() -> Result<(), LocalError> {
        super::amx::allowed().map(drop).map_err(LocalError::Device)
    }

    /// Decide how to hold a matrix being loaded: as bf16 always with `--dtype bf16`, and in
    /// f32 when every value is a bf16 value (its low 16 bits are zero), so nothing is rounded.
    /// A matrix kept in f32 is counted, for [`Backend::weight_bytes_per_value`].
    fn hold_as_bf16(&self, data: &[f32]) -> bool {
        let exact = self.bf16 || data.iter().all(|v| v.to_bits() & 0xffff == 0);
        if !exact {
            self.f32_values.fetch_add(data.len(), Ordering::Relaxed);
        }
        exact
    }
}

thread_local! {
    /// The phase of this thread's products ([`Backend::set_prompt`]): a thread-local, so
    /// engines on other threads (and clones of a backend) do not see it.
    static PHASE: std::cell::Cell<Phase> = const { std::cell::Cell::new(Phase::Decode) };
}

/// A buffer of the packed CPU backend.
#[derive(Clone, Debug)]
pub enum CpuBuf {
    /// f32 values (activations, norms, biases, small weights, an f32 embedding table).
    F32(Vec<f32>),
    /// bfloat16 bit patterns, row-major (the bf16 embedding table).
    Bf16(Vec<u16>),
    /// A linear weight in column panels, f32 or bf16.
    Panels(Panels),
}

fn f<'a>(b: &'a CpuBuf, what: &str) -> BResult<&'a Vec<f32>> {
    match b {
        CpuBuf::F32(v) => Ok(v),
        _ => Err(LocalError::Internal(format!(
            "{what}: a stored matrix where f32 values were expected"
        ))),
    }
}

fn fm<'a>(b: &'a mut CpuBuf, what: &str) -> BResult<&'a mut Vec<f32>> {
    match b {
        CpuBuf::F32(v) => Ok(v),
        _ => Err(LocalError::Internal(format!(
            "{what}: a stored matrix where f32 values were expected"
        ))),
    }
}

fn ok(v: BResult<Vec<f32>>) -> BResult<CpuBuf> {
    v.map(CpuBuf::F32)
}

impl Backend for CpuPacked {
    type Buf = CpuBuf;

    fn name(&self) -> &'static str {
        "cpu"
    }
    fn weight_bytes_per_value(&self) -> usize {
        // 2 when every matrix loaded so far is held as bf16.
        if self.f32_values.load(Ordering::Relaxed) == 0 {
            2
        } else {
            4
        }
    }
    fn weight(&self, data: Vec<f32>) -> BResult<CpuBuf> {
        Ok(CpuBuf::F32(data))
    }
    fn matrix(&self, data: Vec<f32>) -> BResult<CpuBuf> {
        if !self.hold_as_bf16(&data) {
            return Ok(CpuBuf::F32(data));
        }
        Ok(CpuBuf::Bf16(
            data.iter()
                .map(|&v| half::bf16::from_f32(v).to_bits())
                .collect(),
        ))
    }
    fn linear_weight(&self, data: Vec<f32>, n: usize, k: usize) -> BResult<CpuBuf> {
        crate::backend::need("linear weight", data.len(), n * k)?;
        let bf16 = self.hold_as_bf16(&data);
        Ok(CpuBuf::Panels(Panels::pack(&data, n, k, bf16)))
    }
    fn kernels(&self) -> String {
        #[cfg(target_arch = "x86_64")]
        let fma = match super::gemv::isa() {
            Some(super::gemv::Isa::Avx512) => "AVX-512F",
            Some(super::gemv::Isa::Avx2Fma) => "AVX2 + FMA",
            None => "portable",
        };
        #[cfg(not(target_arch = "x86_64"))]
        let fma = "portable";
        if super::amx::available() {
            format!("{fma} panels; prompts over bf16 weights on AMX-BF16")
        } else {
            format!("{fma} panels")
        }
    }
    fn set_prompt(&self, on: bool) -> bool {
        PHASE.replace(if on { Phase::Prompt } else { Phase::Decode }) == Phase::Prompt
    }
    fn upload(&self, data: &[f32]) -> BResult<CpuBuf> {
        Ok(CpuBuf::F32(data.to_vec()))
    }
    fn download(&self, x: &CpuBuf) -> BResult<Vec<f32>> {
        Ok(match x {
            CpuBuf::F32(v) => v.clone(),
            CpuBuf::Bf16(b) => b.iter().map(|&u| bf16_to_f32(u)).collect(),
            CpuBuf::Panels(p) => p.unpack(),
        })
    }
    fn zeros(&self, n: usize) -> BResult<CpuBuf> {
        Ok(CpuBuf::F32(vec![0.0; n]))
    }

    fn linear(
        &self,
        x: &CpuBuf,
        rows: usize,
        k: usize,
        w: &CpuBuf,
        n: usize,
        bias: Option<&CpuBuf>,
    ) -> BResult<CpuBuf> {
        let x = f(x, "linear input")?;
        let bias = bias.map(|b| f(b, "linear bias")).transpose()?;
        crate::backend::need("linear input", x.len(), rows * k)?;
        if let Some(b) = bias {
            crate::backend::need("linear bias", b.len(), n)?;
        }
        // The weight as stored: f32 row-major, row-major bf16 (a tied lm_head) or panels.
        let w = match w {
            CpuBuf::F32(w) => return ok(Cpu.linear(x, rows, k, w, n, bias)),
            CpuBuf::Bf16(wb) => {
                crate::backend::need("linear weight", wb.len(), n * k)?;
                Weights::Bf16(wb)
            }
            CpuBuf::Panels(p) => {
                crate::backend::need("linear weight rows", p.n(), n)?;
                crate::backend::need("linear weight columns", p.k(), k)?;
                let y = p.matmul_in(x, rows, bias.map(|b| &b[..n]), PHASE.get());
                return Ok(CpuBuf::F32(y));
            }
        };
        let mut y = vec![0f32; rows * n];
        if let Some(b) = bias {
            for row in y.chunks_exact_mut(n) {
                row.copy_from_slice(&b[..n]);
            }
        }
        kernels::matmul_add(x, rows, k, w, n, &mut y);
        Ok(CpuBuf::F32(y))
    }
    fn add_assign(&self, x: &mut CpuBuf, y: &CpuBuf) -> BResult<()> {
        Cpu.add_assign(fm(x, "add")?, f(y, "add")?)
    }
    fn rms_norm(
        &self,
        x: &CpuBuf,
        rows: usize,
        dim: usize,
        w: &CpuBuf,
        eps: f32,
    ) -> BResult<CpuBuf> {
        ok(Cpu.rms_norm(f(x, "rms_norm")?, rows, dim, f(w, "rms_norm")?, eps))
    }
    fn layer_norm(
        &self,
        x: &CpuBuf,
        rows: usize,
        dim: usize,
        w: &CpuBuf,
        b: &CpuBuf,
        eps: f32,
    ) -> BResult<CpuBuf> {
        let (x, w, b) = (
            f(x, "layer_norm")?,
            f(w, "layer_norm")?,
            f(b, "layer_norm")?,
        );
        ok(Cpu.layer_norm(x, rows, dim, w, b, eps))
    }
    fn rope(
        &self,
        x: &mut CpuBuf,
        rows: usize,
        heads: usize,
        hd: usize,
        cos: &CpuBuf,
        sin: &CpuBuf,
    ) -> BResult<()> {
        let (c, s) = (f(cos, "rope")?, f(sin, "rope")?);
        Cpu.rope(fm(x, "rope")?, rows, heads, hd, c, s)
    }
    fn silu_mul(&self, gu: &CpuBuf, rows: usize, m: usize) -> BResult<CpuBuf> {
        ok(Cpu.silu_mul(f(gu, "silu_mul")?, rows, m))
    }
    fn quick_gelu(&self, x: &mut CpuBuf) -> BResult<()> {
        Cpu.quick_gelu(fm(x, "quick_gelu")?)
    }
    fn gelu_erf(&self, x: &mut CpuBuf) -> BResult<()> {
        Cpu.gelu_erf(fm(x, "gelu_erf")?)
    }
    fn gather_rows(&self, table: &CpuBuf, dim: usize, ids: &[u32]) -> BResult<CpuBuf> {
        let t = match table {
            CpuBuf::F32(t) => return ok(Cpu.gather_rows(t, dim, ids)),
            CpuBuf::Bf16(t) => t,
            CpuBuf::Panels(_) => {
                return Err(LocalError::Internal(
                    "gather_rows: a linear weight where an embedding table was expected".into(),
                ))
            }
        };
        let mut out = Vec::with_capacity(ids.len() * dim);
        for &id in ids {
            let a = id as usize * dim;
            let row = t.get(a..a + dim).ok_or_else(|| {
                LocalError::Internal(format!("token id {id} is outside the embedding table"))
            })?;
            out.extend(row.iter().map(|&u| bf16_to_f32(u)));
        }
        Ok(CpuBuf::F32(out))
    }
    fn slice_cols(
        &self,
        x: &CpuBuf,
        rows: usize,
        stride: usize,
        col0: usize,
        n: usize,
    ) -> BResult<CpuBuf> {
        ok(Cpu.slice_cols(f(x, "slice_cols")?, rows, stride, col0, n))
    }
    fn copy_rows(
        &self,
        dst: &mut CpuBuf,
        dst_row: usize,
        src: &CpuBuf,
        src_row: usize,
        rows: usize,
        dim: usize,
    ) -> BResult<()> {
        let s = f(src, "copy_rows")?;
        Cpu.copy_rows(fm(dst, "copy_rows")?, dst_row, s, src_row, rows, dim)
    }
    fn attention(
        &self,
        q: &CpuBuf,
        q_row: usize,
        n_q: usize,
        k: &CpuBuf,
        v: &CpuBuf,
        n_kv: usize,
        s: AttnShape,
        causal: bool,
        out: &mut CpuBuf,
    ) -> BResult<()> {
        let (q, k, v) = (f(q, "attention")?, f(k, "attention")?, f(v, "attention")?);
        Cpu.attention(q, q_row, n_q, k, v, n_kv, s, causal, fm(out, "attention")?)
    }
    fn rope_partial(
        &self,
        x: &mut CpuBuf,
        rows: usize,
        heads: usize,
        hd: usize,
        rot: usize,
        cos: &CpuBuf,
        sin: &CpuBuf,
    ) -> BResult<()> {
        let (c, s) = (f(cos, "rope_partial")?, f(sin, "rope_partial")?);
        Cpu.rope_partial(fm(x, "rope_partial")?, rows, heads, hd, rot, c, s)
    }
    fn mul_sigmoid(&self, x: &mut CpuBuf, g: &CpuBuf) -> BResult<()> {
        let g = f(g, "mul_sigmoid")?;
        Cpu.mul_sigmoid(fm(x, "mul_sigmoid")?, g)
    }
    fn gelu_tanh(&self, x: &mut CpuBuf) -> BResult<()> {
        Cpu.gelu_tanh(fm(x, "gelu_tanh")?)
    }
    fn l2_norm(&self, x: &CpuBuf, rows: usize, dim: usize, eps: f32) -> BResult<CpuBuf> {
        ok(Cpu.l2_norm(f(x, "l2_norm")?, rows, dim, eps))
    }
    fn rms_norm_gated(
        &self,
        x: &CpuBuf,
        z: &CpuBuf,
        rows: usize,
        dim: usize,
        w: &CpuBuf,
        eps: f32,
    ) -> BResult<CpuBuf> {
        let (x, z, w) = (f(x, "norm")?, f(z, "norm")?, f(w, "norm")?);
        ok(Cpu.rms_norm_gated(x, z, rows, dim, w, eps))
    }
    fn conv1d_silu(
        &self,
        x: &CpuBuf,
        n: usize,
        ch: usize,
        w: &CpuBuf,
        k: usize,
        state: &mut CpuBuf,
    ) -> BResult<CpuBuf> {
        let (x, w) = (f(x, "conv1d")?, f(w, "conv1d")?);
        ok(Cpu.conv1d_silu(x, n, ch, w, k, fm(state, "conv1d state")?))
    }
    fn delta_gates(
        &self,
        b: &CpuBuf,
        a: &CpuBuf,
        rows: usize,
        heads: usize,
        a_log: &CpuBuf,
        dt_bias: &CpuBuf,
    ) -> BResult<(CpuBuf, CpuBuf)> {
        let (b, a) = (f(b, "delta_gates")?, f(a, "delta_gates")?);
        let (l, d) = (f(a_log, "delta_gates")?, f(dt_bias, "delta_gates")?);
        let (beta, g) = Cpu.delta_gates(b, a, rows, heads, l, d)?;
        Ok((CpuBuf::F32(beta), CpuBuf::F32(g)))
    }
    fn delta_rule(
        &self,
        q: &CpuBuf,
        k: &CpuBuf,
        v: &CpuBuf,
        beta: &CpuBuf,
        g: &CpuBuf,
        n: usize,
        s: DeltaShape,
        state: &mut CpuBuf,
    ) -> BResult<CpuBuf> {
        let (q, k, v) = (
            f(q, "delta_rule")?,
            f(k, "delta_rule")?,
            f(v, "delta_rule")?,
        );
        let (beta, g) = (f(beta, "delta_rule")?, f(g, "delta_rule")?);
        ok(Cpu.delta_rule(q, k, v, beta, g, n, s, fm(state, "delta_rule state")?))
    }
    fn gather_weighted(
        &self,
        table: &CpuBuf,
        dim: usize,
        idx: &[u32],
        w: &[f32],
        taps: usize,
    ) -> BResult<CpuBuf> {
        ok(Cpu.gather_weighted(f(table, "gather_weighted")?, dim, idx, w, taps))
    }
}

#[cfg(test)]
mod tests {
    use super::super::kernels::max_diff;
    use super::*;

    #[test]
    fn f32_holds_bf16_valued_matrices_as_bf16_with_the_same_bits() {
        // A bf16 checkpoint run in f32: the matrices are held as bf16 (half the bytes) and
        // every product gives the bits of holding them in f32, for decode and prefill row
        // counts (tile tails, the gemv/gemm switch of row-major matrices), several blocks of
        // k, and with a bias.
        let (k, n) = (1030, 70);
        let w: Vec<f32> = (0..n * k)
            .map(|i| half::bf16::from_f32((i as f32 * 0.11).cos() / 3.0).to_f32())
            .collect();
        let bias: Vec<f32> = (0..n).map(|j| j as f32 * 0.25 - 2.0).collect();
        let be = CpuPacked::new(false);
        let panels = be.linear_weight(w.clone(), n, k).unwrap();
        let table = be.matrix(w.clone()).unwrap();
        assert!(matches!(&panels, CpuBuf::Panels(p) if p.unpack() == w));
        assert!(matches!(&table, CpuBuf::Bf16(_)));
        assert_eq!(be.weight_bytes_per_value(), 2);
        let f32_panels = CpuBuf::Panels(Panels::pack(&w, n, k, false));
        let f32_table = CpuBuf::F32(w.clone());
        for rows in [1, 2, 3, 5, 8, 9, 12, 13, 16, 17, 30, 41] {
            let x = be
                .upload(
                    &(0..rows * k)
                        .map(|i| (i as f32 * 0.37).sin())
                        .collect::<Vec<_>>(),
                )
                .unwrap();
            let b = be.upload(&bias).unwrap();
            for (held, f32_held, what) in [
                (&panels, &f32_panels, "panels"),
                (&table, &f32_table, "row-major"),
            ] {
                for bias in [None, Some(&b)] {
                    let got = be.linear(&x, rows, k, held, n, bias).unwrap();
                    let want = be.linear(&x, rows, k, f32_held, n, bias).unwrap();
                    let (got, want) = (be.download(&got).unwrap(), be.download(&want).unwrap());
                    assert!(
                        got.iter()
                            .zip(&want)
                            .all(|(a, b)| a.to_bits() == b.to_bits()),
                        "{what}, rows {rows}, bias {}: the bits differ",
                        bias.is_some()
                    );
                }
            }
        }
        let ids = [3, 0, 69];
        assert_eq!(
            be.download(&be.gather_rows(&table, k, &ids).unwrap())
                .unwrap(),
            be.download(&be.gather_rows(&f32_table, k, &ids).unwrap())
                .unwrap()
        );
        // One value that is not a bf16 value keeps the matrix in f32, unrounded.
        let mut w2 = w;
        w2[7] = f32::from_bits(w2[7].to_bits() | 1);
        assert!(matches!(be.matrix(w2.clone()).unwrap(), CpuBuf::F32(v) if v == w2));
        assert!(
            matches!(be.linear_weight(w2.clone(), n, k).unwrap(), CpuBuf::Panels(p) if p.unpack() == w2)
        );
        assert_eq!(be.weight_bytes_per_value(), 4);
    }

    #[test]
    fn bf16_matrices_round_once_and_everything_else_stays_f32() {
        let be = CpuPacked::new(true);
        let (rows, k, n) = (3, 16, 5);
        let x: Vec<f32> = (0..rows * k).map(|i| (i as f32 * 0.37).sin()).collect();
        let w: Vec<f32> = (0..n * k).map(|i| (i as f32 * 0.11).cos() / 3.0).collect();
        let wr: Vec<f32> = w
            .iter()
            .map(|&v| half::bf16::from_f32(v).to_f32())
            .collect();
        let got = be
            .linear(
                &be.upload(&x).unwrap(),
                rows,
                k,
                &be.matrix(w.clone()).unwrap(),
                n,
                None,
            )
            .unwrap();
        let want = Cpu.linear(&x, rows, k, &wr, n, None).unwrap();
        let got = be.download(&got).unwrap();
        let d = max_diff(&got, &want);
        assert!(d < 1e-5, "max |Δ| {d}");
        // The embedding table: rows of the rounded values.
        let t = be.matrix(w.clone()).unwrap();
        let rows2 = be
            .download(&be.gather_rows(&t, k, &[4, 0]).unwrap())
            .unwrap();
        assert_eq!(&rows2[..k], &wr[4 * k..5 * k]);
        assert_eq!(&rows2[k..], &wr[..k]);
        assert!(be.gather_rows(&t, k, &[5]).is_err());
        // An f32 op given a bf16 matrix is an error, not a reinterpretation.
        assert!(be.silu_mul(&t, 1, 8).is_err());
    }
}
