//! The CUDA backend (feature `cuda`): cuBLAS matmuls (strict f32 `sgemm`, or bf16 weights ×
//! bf16-rounded activations with f32 accumulation and f32 output), NVRTC kernels for everything
//! else (`kernels.cu`), activations in f32. cudarc loads the libraries at run time, so the build
//! needs no CUDA toolkit; [`missing_libraries`] is checked before the first CUDA call because
//! cudarc panics on a missing library.

use std::sync::Arc;

use cudarc::cublas::CudaBlas;
use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, LaunchConfig, PushKernelArg};

mod hybrid;
mod matmul;
mod setup;

pub use setup::{compile_kernels, missing_libraries, nvrtc_present, DeviceInfo, KERNELS, LIB_HINT};
use setup::{dev, Kernels};

use super::{AttnShape, BResult, Backend, DType, DeltaShape};
use crate::LocalError;

/// Threads per attention block (`ATT_T` in kernels.cu); head width may be up to twice this.
const ATT_T: u32 = 128;
/// Threads per block of the other kernels.
const BLOCK: u32 = 256;
/// Most rows `gemv_bf16` takes (`GEMV_ROWS` in kernels.cu).
const GEMV_ROWS: usize = 8;

fn int(n: usize, what: &str) -> BResult<i32> {
    i32::try_from(n).map_err(|_| LocalError::Internal(format!("{what}: {n} exceeds i32")))
}

fn check(what: &str, got: usize, want: usize) -> BResult<()> {
    if got < want {
        return Err(LocalError::Internal(format!(
            "{what}: buffer has {got} values, needs {want}"
        )));
    }
    Ok(())
}

/// One thread per element.
fn flat(n: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (n.div_ceil(BLOCK as usize).max(1) as u32, 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// One block per row.
fn per_row(rows: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (rows as u32, 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// A device buffer: activations and most weights in f32; matrices in bf16 under `--dtype bf16`.
pub enum CudaBuf {
    /// f32 values.
    F32(CudaSlice<f32>),
    /// bfloat16 values (bit patterns).
    Bf16(CudaSlice<u16>),
}

impl CudaBuf {
    /// Number of values.
    pub fn len(&self) -> usize {
        match self {
            CudaBuf::F32(s) => s.len(),
            CudaBuf::Bf16(s) => s.len(),
        }
    }

    /// Whether the buffer holds no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The CUDA backend on one device and one stream.
pub struct Cuda {
    stream: Arc<CudaStream>,
    blas: CudaBlas,
    k: Kernels,
    dtype: DType,
    /// One value, passed where a kernel takes an optional buffer it will not read.
    dummy: CudaSlice<f32>,
    /// What was found at start-up.
    pub info: DeviceInfo,
}

impl Cuda {
    /// Open device `ordinal`, compile the kernels and create the cuBLAS handle. Missing
    /// libraries, no device, or a device too old for `dtype` are errors, never panics.
    pub fn new(ordinal: usize, dtype: DType) -> BResult<Cuda> {
        let setup::Opened {
            stream,
            blas,
            k,
            info,
        } = setup::open(ordinal, dtype)?;
        let dummy = stream.alloc_zeros::<f32>(1).map_err(dev("alloc"))?;
        Ok(Cuda {
            dummy,
            stream,
            blas,
            k,
            dtype,
            info,
        })
    }

    fn f32<'a>(&self, b: &'a CudaBuf, what: &str) -> BResult<&'a CudaSlice<f32>> {
        match b {
            CudaBuf::F32(s) => Ok(s),
            CudaBuf::Bf16(_) => Err(LocalError::Internal(format!("{what}: expected f32 values"))),
        }
    }

    fn f32_mut<'a>(&self, b: &'a mut CudaBuf, what: &str) -> BResult<&'a mut CudaSlice<f32>> {
        match b {
            CudaBuf::F32(s) => Ok(s),
            CudaBuf::Bf16(_) => Err(LocalError::Internal(format!("{what}: expected f32 values"))),
        }
    }

    /// An uninitialised f32 buffer that a kernel will fill completely.
    fn out(&self, n: usize) -> BResult<CudaSlice<f32>> {
        // SAFETY: callers write every element before it is read.
        unsafe { self.stream.alloc::<f32>(n.max(1)) }.map_err(dev("alloc"))
    }

    /// Launch an in-place elementwise kernel `f(float* x, int n)`.
    fn inplace(&self, f: &CudaFunction, x: &mut CudaBuf, what: &'static str) -> BResult<()> {
        let xs = self.f32_mut(x, what)?;
        let n = xs.len();
        let n_i = int(n, what)?;
        let mut b = self.stream.launch_builder(f);
        b.arg(xs).arg(&n_i);
        // SAFETY: the kernel touches indices below n only.
        unsafe { b.launch(flat(n)) }.map_err(dev(what))?;
        Ok(())
    }
}

impl Backend for Cuda {
    type Buf = CudaBuf;

    fn name(&self) -> &'static str {
        "cuda"
    }

    fn weight_bytes_per_value(&self) -> usize {
        match self.dtype {
            DType::Bf16 => 2,
            DType::F32 => 4,
        }
    }

    fn weight(&self, data: Vec<f32>) -> BResult<CudaBuf> {
        self.upload(&data)
    }

    fn matrix(&self, data: Vec<f32>) -> BResult<CudaBuf> {
        match self.dtype {
            DType::F32 => self.upload(&data),
            DType::Bf16 => {
                let bits: Vec<u16> = data
                    .iter()
                    .map(|&v| half::bf16::from_f32(v).to_bits())
                    .collect();
                let s = self.stream.clone_htod(&bits).map_err(dev("upload"))?;
                Ok(CudaBuf::Bf16(s))
            }
        }
    }

    fn upload(&self, data: &[f32]) -> BResult<CudaBuf> {
        if data.is_empty() {
            return self.zeros(0);
        }
        let s = self.stream.clone_htod(data).map_err(dev("upload"))?;
        Ok(CudaBuf::F32(s))
    }

    fn download(&self, x: &CudaBuf) -> BResult<Vec<f32>> {
        match x {
            CudaBuf::F32(s) => self.stream.clone_dtoh(s).map_err(dev("download")),
            CudaBuf::Bf16(s) => Ok(self
                .stream
                .clone_dtoh(s)
                .map_err(dev("download"))?
                .into_iter()
                .map(|b| half::bf16::from_bits(b).to_f32())
                .collect()),
        }
    }

    fn zeros(&self, n: usize) -> BResult<CudaBuf> {
        let s = self
            .stream
            .alloc_zeros::<f32>(n.max(1))
            .map_err(dev("alloc"))?;
        Ok(CudaBuf::F32(s))
    }

    fn linear(
        &self,
        x: &CudaBuf,
        rows: usize,
        k: usize,
        w: &CudaBuf,
        n: usize,
        bias: Option<&CudaBuf>,
    ) -> BResult<CudaBuf> {
        let xs = self.f32(x, "linear input")?;
        let mut y = self.out(rows * n)?;
        self.matmul(xs, rows, k, w, n, bias, &mut y, false)?;
        Ok(CudaBuf::F32(y))
    }

    fn linear_add(
        &self,
        x: &CudaBuf,
        rows: usize,
        k: usize,
        w: &CudaBuf,
        n: usize,
        bias: Option<&CudaBuf>,
        acc: &mut CudaBuf,
    ) -> BResult<()> {
        let xs = self.f32(x, "linear input")?;
        let ys = self.f32_mut(acc, "residual")?;
        self.matmul(xs, rows, k, w, n, bias, ys, true)
    }

    fn split_qkv_rope(
        &self,
        qkv: &CudaBuf,
        rows: usize,
        s: AttnShape,
        cos: &CudaBuf,
        sin: &CudaBuf,
    ) -> BResult<(CudaBuf, CudaBuf, CudaBuf)> {
        let (qd, kd) = (s.heads * s.hd, s.kv_heads * s.hd);
        let xs = self.f32(qkv, "split_qkv_rope")?;
        let (cs, ss) = (self.f32(cos, "rope cos")?, self.f32(sin, "rope sin")?);
        check("split_qkv_rope", xs.len(), rows * (qd + 2 * kd))?;
        check("rope tables", cs.len().min(ss.len()), rows * s.hd)?;
        let (mut q, mut k, mut v) = (
            self.out(rows * qd)?,
            self.out(rows * kd)?,
            self.out(rows * kd)?,
        );
        let pairs = rows * (s.heads + 2 * s.kv_heads) * (s.hd / 2);
        if pairs > 0 {
            let ints = [
                int(rows, "split_qkv_rope")?,
                int(s.heads, "split_qkv_rope")?,
                int(s.kv_heads, "split_qkv_rope")?,
                int(s.hd, "split_qkv_rope")?,
            ];
            let mut b = self.stream.launch_builder(&self.k.split_qkv_rope);
            b.arg(&mut q)
                .arg(&mut k)
                .arg(&mut v)
                .arg(xs)
                .arg(cs)
                .arg(ss);
            for x in &ints {
                b.arg(x);
            }
            // SAFETY: split_qkv_rope(float* q, float* k, float* v, const float* qkv,
            // const float* cos, const float* sin, int rows, int heads, int kv_heads, int hd);
            // one thread per rotated pair, sizes checked above.
            unsafe { b.launch(flat(pairs)) }.map_err(dev("split_qkv_rope"))?;
        }
        Ok((CudaBuf::F32(q), CudaBuf::F32(k), CudaBuf::F32(v)))
    }

    fn add_assign(&self, x: &mut CudaBuf, y: &CudaBuf) -> BResult<()> {
        let ys = self.f32(y, "add")?;
        let xs = self.f32_mut(x, "add")?;
        check("add", ys.len(), xs.len())?;
        let n = xs.len();
        let n_i = int(n, "add")?;
        let mut b = self.stream.launch_builder(&self.k.add_assign);
        b.arg(xs).arg(ys).arg(&n_i);
        // SAFETY: add_assign(float* x, const float* y, int n); both hold n values.
        unsafe { b.launch(flat(n)) }.map_err(dev("add_assign"))?;
        Ok(())
    }

    fn rms_norm(
        &self,
        x: &CudaBuf,
        rows: usize,
        dim: usize,
        w: &CudaBuf,
        eps: f32,
    ) -> BResult<CudaBuf> {
        let (xs, ws) = (self.f32(x, "rms_norm")?, self.f32(w, "rms_norm weight")?);
        check("rms_norm", xs.len(), rows * dim)?;
        check("rms_norm weight", ws.len(), dim)?;
        let mut y = self.out(rows * dim)?;
        if rows > 0 {
            let d = int(dim, "rms_norm")?;
            let mut b = self.stream.launch_builder(&self.k.rms_norm);
            b.arg(&mut y).arg(xs).arg(ws).arg(&d).arg(&eps);
            // SAFETY: rms_norm(float* y, const float* x, const float* w, int dim, float eps),
            // one block per row; x and y hold rows·dim values, w dim.
            unsafe { b.launch(per_row(rows)) }.map_err(dev("rms_norm"))?;
        }
        Ok(CudaBuf::F32(y))
    }

    fn layer_norm(
        &self,
        x: &CudaBuf,
        rows: usize,
        dim: usize,
        w: &CudaBuf,
        bias: &CudaBuf,
        eps: f32,
    ) -> BResult<CudaBuf> {
        let xs = self.f32(x, "layer_norm")?;
        let (ws, bs) = (self.f32(w, "layer_norm")?, self.f32(bias, "layer_norm")?);
        check("layer_norm", xs.len(), rows * dim)?;
        check("layer_norm weight", ws.len().min(bs.len()), dim)?;
        let mut y = self.out(rows * dim)?;
        if rows > 0 {
            let d = int(dim, "layer_norm")?;
            let mut b = self.stream.launch_builder(&self.k.layer_norm);
            b.arg(&mut y).arg(xs).arg(ws).arg(bs).arg(&d).arg(&eps);
            // SAFETY: layer_norm(float* y, const float* x, const float* w, const float* b,
            // int dim, float eps), one block per row; sizes checked above.
            unsafe { b.launch(per_row(rows)) }.map_err(dev("layer_norm"))?;
        }
        Ok(CudaBuf::F32(y))
    }

    fn rope(
        &self,
        x: &mut CudaBuf,
        rows: usize,
        heads: usize,
        hd: usize,
        cos: &CudaBuf,
        sin: &CudaBuf,
    ) -> BResult<()> {
        let (cs, ss) = (self.f32(cos, "rope cos")?, self.f32(sin, "rope sin")?);
        let xs = self.f32_mut(x, "rope")?;
        check("rope", xs.len(), rows * heads * hd)?;
        check("rope tables", cs.len().min(ss.len()), rows * hd)?;
        let pairs = rows * heads * (hd / 2);
        if pairs == 0 {
            return Ok(());
        }
        let (r, h, d) = (int(rows, "rope")?, int(heads, "rope")?, int(hd, "rope")?);
        let mut b = self.stream.launch_builder(&self.k.rope);
        b.arg(xs).arg(cs).arg(ss).arg(&r).arg(&h).arg(&d);
        // SAFETY: rope(float* x, const float* cos, const float* sin, int rows, int heads,
        // int hd); one thread per rotated pair, sizes checked above.
        unsafe { b.launch(flat(pairs)) }.map_err(dev("rope"))?;
        Ok(())
    }

    fn silu_mul(&self, gu: &CudaBuf, rows: usize, m: usize) -> BResult<CudaBuf> {
        let gs = self.f32(gu, "silu_mul")?;
        check("silu_mul", gs.len(), rows * 2 * m)?;
        let mut out = self.out(rows * m)?;
        if rows * m > 0 {
            let (r, m_i) = (int(rows, "silu_mul")?, int(m, "silu_mul")?);
            let mut b = self.stream.launch_builder(&self.k.silu_mul);
            b.arg(&mut out).arg(gs).arg(&r).arg(&m_i);
            // SAFETY: silu_mul(float* out, const float* gu, int rows, int m); out rows·m,
            // gu rows·2m values.
            unsafe { b.launch(flat(rows * m)) }.map_err(dev("silu_mul"))?;
        }
        Ok(CudaBuf::F32(out))
    }

    fn quick_gelu(&self, x: &mut CudaBuf) -> BResult<()> {
        self.inplace(&self.k.quick_gelu, x, "quick_gelu")
    }

    fn gelu_erf(&self, x: &mut CudaBuf) -> BResult<()> {
        self.inplace(&self.k.gelu_erf, x, "gelu_erf")
    }

    fn gather_rows(&self, table: &CudaBuf, dim: usize, ids: &[u32]) -> BResult<CudaBuf> {
        let rows = table.len() / dim.max(1);
        if let Some(&bad) = ids.iter().find(|&&id| id as usize >= rows) {
            return Err(LocalError::Internal(format!(
                "token id {bad} is outside the embedding table"
            )));
        }
        let mut out = self.out(ids.len() * dim)?;
        if ids.is_empty() || dim == 0 {
            return Ok(CudaBuf::F32(out));
        }
        let ids_d = self.stream.clone_htod(ids).map_err(dev("upload"))?;
        let (n_i, d) = (int(ids.len(), "gather")?, int(dim, "gather")?);
        let f = match table {
            CudaBuf::F32(_) => &self.k.gather_f32,
            CudaBuf::Bf16(_) => &self.k.gather_bf16,
        };
        let mut b = self.stream.launch_builder(f);
        b.arg(&mut out);
        match table {
            CudaBuf::F32(t) => b.arg(t),
            CudaBuf::Bf16(t) => b.arg(t),
        };
        b.arg(&ids_d).arg(&n_i).arg(&d);
        // SAFETY: gather_*(float* out, const T* table, const unsigned* ids, int n_ids, int dim);
        // every id is below the table's row count (checked above).
        unsafe { b.launch(flat(ids.len() * dim)) }.map_err(dev("gather"))?;
        Ok(CudaBuf::F32(out))
    }

    fn slice_cols(
        &self,
        x: &CudaBuf,
        rows: usize,
        stride: usize,
        col0: usize,
        n: usize,
    ) -> BResult<CudaBuf> {
        let xs = self.f32(x, "slice_cols")?;
        check("slice_cols", xs.len(), rows * stride)?;
        if col0 + n > stride {
            return Err(LocalError::Internal(format!(
                "slice_cols: columns {col0}..{} exceed the row width {stride}",
                col0 + n
            )));
        }
        let mut out = self.out(rows * n)?;
        if rows * n > 0 {
            let (r, s, c, n_i) = (
                int(rows, "slice_cols")?,
                int(stride, "slice_cols")?,
                int(col0, "slice_cols")?,
                int(n, "slice_cols")?,
            );
            let mut b = self.stream.launch_builder(&self.k.slice_cols);
            b.arg(&mut out).arg(xs).arg(&r).arg(&s).arg(&c).arg(&n_i);
            // SAFETY: slice_cols(float* out, const float* x, int rows, int stride, int col0,
            // int n); bounds checked above.
            unsafe { b.launch(flat(rows * n)) }.map_err(dev("slice_cols"))?;
        }
        Ok(CudaBuf::F32(out))
    }

    fn copy_rows(
        &self,
        dst: &mut CudaBuf,
        dst_row: usize,
        src: &CudaBuf,
        src_row: usize,
        rows: usize,
        dim: usize,
    ) -> BResult<()> {
        let s = self.f32(src, "copy_rows source")?;
        let d = self.f32_mut(dst, "copy_rows destination")?;
        check("copy_rows source", s.len(), (src_row + rows) * dim)?;
        check("copy_rows destination", d.len(), (dst_row + rows) * dim)?;
        if rows * dim == 0 {
            return Ok(());
        }
        let from = s.slice(src_row * dim..(src_row + rows) * dim);
        let mut to = d.slice_mut(dst_row * dim..(dst_row + rows) * dim);
        self.stream.memcpy_dtod(&from, &mut to).map_err(dev("copy"))
    }

    fn attention(
        &self,
        q: &CudaBuf,
        q_row: usize,
        n_q: usize,
        k: &CudaBuf,
        v: &CudaBuf,
        n_kv: usize,
        s: AttnShape,
        causal: bool,
        out: &mut CudaBuf,
    ) -> BResult<()> {
        let (qd, kd) = (s.heads * s.hd, s.kv_heads * s.hd);
        let (qs, ks, vs) = (
            self.f32(q, "attention q")?,
            self.f32(k, "attention k")?,
            self.f32(v, "attention v")?,
        );
        let os = self.f32_mut(out, "attention out")?;
        check("attention q", qs.len(), (q_row + n_q) * qd)?;
        check("attention k", ks.len().min(vs.len()), n_kv * kd)?;
        check("attention out", os.len(), (q_row + n_q) * qd)?;
        if n_q == 0 {
            return Ok(());
        }
        if n_kv == 0 || (causal && n_q > n_kv) {
            return Err(LocalError::Internal(format!(
                "attention with {n_q} queries over {n_kv} keys"
            )));
        }
        if s.hd > 2 * ATT_T as usize || s.kv_heads == 0 || !s.heads.is_multiple_of(s.kv_heads) {
            return Err(LocalError::Internal(format!(
                "attention: head width {} (max {}) or heads {}/{} not supported",
                s.hd,
                2 * ATT_T,
                s.heads,
                s.kv_heads
            )));
        }
        let scale = 1.0 / (s.hd as f32).sqrt();
        let ints = [
            int(q_row, "attention")?,
            int(n_q, "attention")?,
            int(n_kv, "attention")?,
            int(s.heads, "attention")?,
            int(s.kv_heads, "attention")?,
            int(s.hd, "attention")?,
            i32::from(causal),
        ];
        let mut b = self.stream.launch_builder(&self.k.attention);
        b.arg(os).arg(qs).arg(ks).arg(vs);
        for x in &ints {
            b.arg(x);
        }
        b.arg(&scale);
        let cfg = LaunchConfig {
            grid_dim: (n_q as u32, s.heads as u32, 1),
            block_dim: (ATT_T, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: attention(float* out, const float* q, const float* k, const float* v,
        // int q_row, int n_q, int n_kv, int heads, int kv_heads, int hd, int causal,
        // float scale); sizes and head layout checked above.
        unsafe { b.launch(cfg) }.map_err(dev("attention"))?;
        Ok(())
    }

    // The Qwen3.5 ops: native kernels (cuda/hybrid.rs) instead of the trait's host round trip.

    fn rope_partial(
        &self,
        x: &mut CudaBuf,
        rows: usize,
        heads: usize,
        hd: usize,
        rot: usize,
        cos: &CudaBuf,
        sin: &CudaBuf,
    ) -> BResult<()> {
        self.rope_partial_impl(x, rows, heads, hd, rot, cos, sin)
    }

    fn mul_sigmoid(&self, x: &mut CudaBuf, g: &CudaBuf) -> BResult<()> {
        self.mul_sigmoid_impl(x, g)
    }

    fn gelu_tanh(&self, x: &mut CudaBuf) -> BResult<()> {
        self.gelu_tanh_impl(x)
    }

    fn l2_norm(&self, x: &CudaBuf, rows: usize, dim: usize, eps: f32) -> BResult<CudaBuf> {
        self.l2_norm_impl(x, rows, dim, eps)
    }

    fn rms_norm_gated(
        &self,
        x: &CudaBuf,
        z: &CudaBuf,
        rows: usize,
        dim: usize,
        w: &CudaBuf,
        eps: f32,
    ) -> BResult<CudaBuf> {
        self.rms_norm_gated_impl(x, z, rows, dim, w, eps)
    }

    fn conv1d_silu(
        &self,
        x: &CudaBuf,
        n: usize,
        ch: usize,
        w: &CudaBuf,
        k: usize,
        state: &mut CudaBuf,
    ) -> BResult<CudaBuf> {
        self.conv1d_silu_impl(x, n, ch, w, k, state)
    }

    fn delta_gates(
        &self,
        b: &CudaBuf,
        a: &CudaBuf,
        rows: usize,
        heads: usize,
        a_log: &CudaBuf,
        dt_bias: &CudaBuf,
    ) -> BResult<(CudaBuf, CudaBuf)> {
        self.delta_gates_impl(b, a, rows, heads, a_log, dt_bias)
    }

    fn delta_rule(
        &self,
        q: &CudaBuf,
        k: &CudaBuf,
        v: &CudaBuf,
        beta: &CudaBuf,
        g: &CudaBuf,
        n: usize,
        s: DeltaShape,
        state: &mut CudaBuf,
    ) -> BResult<CudaBuf> {
        self.delta_rule_impl(q, k, v, beta, g, n, s, state)
    }

    fn gather_weighted(
        &self,
        table: &CudaBuf,
        dim: usize,
        idx: &[u32],
        w: &[f32],
        taps: usize,
    ) -> BResult<CudaBuf> {
        self.gather_weighted_impl(table, dim, idx, w, taps)
    }
}
