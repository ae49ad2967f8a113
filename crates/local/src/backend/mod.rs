//! The small set of tensor operations the Qwen2-VL model needs. The model is written once over
//! this trait; each backend owns its buffers (host `Vec<f32>` for the CPU reference).
//!
//! Every buffer is a row-major matrix whose shape the caller tracks; ops take the dimensions.

pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;

pub use cpu::hybrid;
pub use hybrid::DeltaShape;

use super::LocalError;

/// Result of a backend operation.
pub type BResult<T> = Result<T, LocalError>;

/// The precision a backend stores its weight matrices in (activations stay f32); see
/// [`Backend::matrix`] and [`Backend::weight_bytes_per_value`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum DType {
    /// bfloat16 matrices (linear weights, embeddings): the GPU default; on the CPU, half the
    /// memory of f32.
    Bf16,
    /// float32 weights.
    F32,
}

impl DType {
    /// Lower-case name, as on the command line.
    pub fn name(self) -> &'static str {
        match self {
            DType::Bf16 => "bf16",
            DType::F32 => "f32",
        }
    }
}

/// Tensor operations over backend-owned buffers.
pub trait Backend: Send + Sync + 'static {
    /// A buffer of values (f32 or lower precision on the device).
    type Buf: Send + Sync;

    /// Short name for logs and results ("cpu", "cuda").
    fn name(&self) -> &'static str;
    /// Bytes per stored weight value (4 for f32, 2 for bf16): for achieved-bandwidth figures.
    fn weight_bytes_per_value(&self) -> usize;
    /// Take ownership of a weight matrix (converted to the backend's storage type).
    fn weight(&self, data: Vec<f32>) -> BResult<Self::Buf>;
    /// Take ownership of a matrix used only as a `linear` weight or an embedding table; a
    /// backend may store it at lower precision (bf16 on CUDA). Default: [`Backend::weight`].
    fn matrix(&self, data: Vec<f32>) -> BResult<Self::Buf> {
        self.weight(data)
    }
    /// Take ownership of the weight `data[n, k]` of an `nn.Linear`, used only as `linear`'s
    /// `w` with these `n` and `k`; a backend may store it in another layout (column panels on
    /// the CPU). Default: [`Backend::matrix`].
    fn linear_weight(&self, data: Vec<f32>, n: usize, k: usize) -> BResult<Self::Buf> {
        let _ = (n, k);
        self.matrix(data)
    }
    /// Upload activations.
    fn upload(&self, data: &[f32]) -> BResult<Self::Buf>;
    /// Copy a buffer back to the host as f32.
    fn download(&self, x: &Self::Buf) -> BResult<Vec<f32>>;
    /// A zero-filled buffer of `n` values.
    fn zeros(&self, n: usize) -> BResult<Self::Buf>;

    /// The kernels this backend runs on this machine, for reports (default: its name).
    fn kernels(&self) -> String {
        self.name().to_string()
    }
    /// Whether the products this thread runs next compute prompt rows (prefill and the vision
    /// tower: `true`) or decode steps (`false`, the start), so that a backend may run each
    /// on its own kernels: the packed CPU backend runs prompts on AMX where the CPU has it.
    /// Within a phase a row's results must not depend on its batch. Returns the phase it
    /// replaces, so that a caller can restore it. Default: nothing changes (always `false`).
    fn set_prompt(&self, on: bool) -> bool {
        let _ = on;
        false
    }

    /// `y[rows, n] = x[rows, k] · w[n, k]ᵀ (+ bias[n])` (an `nn.Linear`).
    fn linear(
        &self,
        x: &Self::Buf,
        rows: usize,
        k: usize,
        w: &Self::Buf,
        n: usize,
        bias: Option<&Self::Buf>,
    ) -> BResult<Self::Buf>;
    /// `acc[rows, n] += x[rows, k] · w[n, k]ᵀ (+ bias[n])`: a linear layer folded into a
    /// residual add.
    #[allow(clippy::too_many_arguments)]
    fn linear_add(
        &self,
        x: &Self::Buf,
        rows: usize,
        k: usize,
        w: &Self::Buf,
        n: usize,
        bias: Option<&Self::Buf>,
        acc: &mut Self::Buf,
    ) -> BResult<()> {
        let y = self.linear(x, rows, k, w, n, bias)?;
        self.add_assign(acc, &y)
    }
    /// `x += y` elementwise.
    fn add_assign(&self, x: &mut Self::Buf, y: &Self::Buf) -> BResult<()>;
    /// RMSNorm over rows of width `dim`: `x · rsqrt(mean(x²) + eps) · w`.
    fn rms_norm(
        &self,
        x: &Self::Buf,
        rows: usize,
        dim: usize,
        w: &Self::Buf,
        eps: f32,
    ) -> BResult<Self::Buf>;
    /// LayerNorm over rows of width `dim` with weight and bias.
    fn layer_norm(
        &self,
        x: &Self::Buf,
        rows: usize,
        dim: usize,
        w: &Self::Buf,
        b: &Self::Buf,
        eps: f32,
    ) -> BResult<Self::Buf>;
    /// Rotate every head of `x[rows, heads·hd]`: `x·cos + rotate_half(x)·sin`, tables `[rows, hd]`.
    fn rope(
        &self,
        x: &mut Self::Buf,
        rows: usize,
        heads: usize,
        hd: usize,
        cos: &Self::Buf,
        sin: &Self::Buf,
    ) -> BResult<()>;
    /// `silu(gu[:, ..m]) · gu[:, m..]` for `gu[rows, 2m]`: the gate and up projections come
    /// from one matmul over their stacked weights.
    fn silu_mul(&self, gu: &Self::Buf, rows: usize, m: usize) -> BResult<Self::Buf>;
    /// `x · σ(1.702 x)` in place.
    fn quick_gelu(&self, x: &mut Self::Buf) -> BResult<()>;
    /// Exact (erf) GELU in place.
    fn gelu_erf(&self, x: &mut Self::Buf) -> BResult<()>;
    /// Rows `ids` of `table[_, dim]`.
    fn gather_rows(&self, table: &Self::Buf, dim: usize, ids: &[u32]) -> BResult<Self::Buf>;
    /// `out[rows, n] = x[rows, col0 .. col0+n]` where `x` has `stride` columns.
    fn slice_cols(
        &self,
        x: &Self::Buf,
        rows: usize,
        stride: usize,
        col0: usize,
        n: usize,
    ) -> BResult<Self::Buf>;
    /// Copy `rows` rows of width `dim` from `src` (starting at `src_row`) into `dst` at `dst_row`.
    fn copy_rows(
        &self,
        dst: &mut Self::Buf,
        dst_row: usize,
        src: &Self::Buf,
        src_row: usize,
        rows: usize,
        dim: usize,
    ) -> BResult<()>;
    /// Rows `row0 .. row0+rows` (width `dim`) as a new buffer.
    fn slice_rows(
        &self,
        x: &Self::Buf,
        row0: usize,
        rows: usize,
        dim: usize,
    ) -> BResult<Self::Buf> {
        let mut out = self.zeros(rows * dim)?;
        self.copy_rows(&mut out, 0, x, row0, rows, dim)?;
        Ok(out)
    }
    /// Split `qkv[rows, (heads + 2·kv_heads)·hd]` into q, k and v, rotating q and k with the
    /// `[rows, hd]` tables (see [`Backend::rope`]).
    #[allow(clippy::type_complexity)]
    fn split_qkv_rope(
        &self,
        qkv: &Self::Buf,
        rows: usize,
        s: AttnShape,
        cos: &Self::Buf,
        sin: &Self::Buf,
    ) -> BResult<(Self::Buf, Self::Buf, Self::Buf)> {
        let (qd, kd) = (s.heads * s.hd, s.kv_heads * s.hd);
        let w = qd + 2 * kd;
        let mut q = self.slice_cols(qkv, rows, w, 0, qd)?;
        let mut k = self.slice_cols(qkv, rows, w, qd, kd)?;
        let v = self.slice_cols(qkv, rows, w, qd + kd, kd)?;
        self.rope(&mut q, rows, s.heads, s.hd, cos, sin)?;
        self.rope(&mut k, rows, s.kv_heads, s.hd, cos, sin)?;
        Ok((q, k, v))
    }
    /// Scaled dot-product attention of one sequence segment, written into `out` rows
    /// `q_row .. q_row+n_q` (width `heads·hd`). Queries are `q` rows `q_row ..`; keys and values
    /// are rows `0 .. n_kv` of `k`, `v` (width `kv_heads·hd`, grouped-query). With `causal`,
    /// query `i` sees keys `0 ..= n_kv − n_q + i`.
    #[allow(clippy::too_many_arguments)]
    fn attention(
        &self,
        q: &Self::Buf,
        q_row: usize,
        n_q: usize,
        k: &Self::Buf,
        v: &Self::Buf,
        n_kv: usize,
        shape: AttnShape,
        causal: bool,
        out: &mut Self::Buf,
    ) -> BResult<()>;

    // Qwen3.5 ops. The defaults run the host kernels of `hybrid.rs` through a download and an
    // upload (correct on every backend); a backend overrides them with native kernels.

    /// Rotate the first `rot` dims of every head of `x[rows, heads·hd]` with tables
    /// `[rows, rot]` (rotate-half within those dims); the other dims pass through.
    #[allow(clippy::too_many_arguments)]
    fn rope_partial(
        &self,
        x: &mut Self::Buf,
        rows: usize,
        heads: usize,
        hd: usize,
        rot: usize,
        cos: &Self::Buf,
        sin: &Self::Buf,
    ) -> BResult<()> {
        let mut h = self.download(x)?;
        let (c, s) = (self.download(cos)?, self.download(sin)?);
        need("rope_partial", h.len(), rows * heads * hd)?;
        need("rope_partial tables", c.len().min(s.len()), rows * rot)?;
        hybrid::rope_partial(&mut h, rows, heads, hd, rot, &c, &s);
        *x = self.upload(&h)?;
        Ok(())
    }
    /// `x ·= σ(g)` elementwise (the attention output gate).
    fn mul_sigmoid(&self, x: &mut Self::Buf, g: &Self::Buf) -> BResult<()> {
        let mut h = self.download(x)?;
        let gh = self.download(g)?;
        need("mul_sigmoid", gh.len(), h.len())?;
        hybrid::mul_sigmoid(&mut h, &gh);
        *x = self.upload(&h)?;
        Ok(())
    }
    /// Tanh-approximated GELU in place.
    fn gelu_tanh(&self, x: &mut Self::Buf) -> BResult<()> {
        let mut h = self.download(x)?;
        hybrid::gelu_tanh(&mut h);
        *x = self.upload(&h)?;
        Ok(())
    }
    /// Rows of width `dim` times `rsqrt(Σx² + eps)`.
    fn l2_norm(&self, x: &Self::Buf, rows: usize, dim: usize, eps: f32) -> BResult<Self::Buf> {
        let h = self.download(x)?;
        need("l2_norm", h.len(), rows * dim)?;
        self.upload(&hybrid::l2_norm(&h, rows, dim, eps))
    }
    /// `RMSNorm(x)·w·silu(z)` over rows of width `dim`.
    #[allow(clippy::too_many_arguments)]
    fn rms_norm_gated(
        &self,
        x: &Self::Buf,
        z: &Self::Buf,
        rows: usize,
        dim: usize,
        w: &Self::Buf,
        eps: f32,
    ) -> BResult<Self::Buf> {
        let (xh, zh, wh) = (self.download(x)?, self.download(z)?, self.download(w)?);
        need("rms_norm_gated", xh.len().min(zh.len()), rows * dim)?;
        need("rms_norm_gated weight", wh.len(), dim)?;
        self.upload(&hybrid::rms_norm_gated(&xh, &zh, rows, dim, &wh, eps))
    }
    /// Depthwise causal conv (weights `[ch, k]`, no bias) + SiLU over one sequence's rows
    /// `x[n, ch]`, continuing from and updating `state[k−1, ch]`.
    #[allow(clippy::too_many_arguments)]
    fn conv1d_silu(
        &self,
        x: &Self::Buf,
        n: usize,
        ch: usize,
        w: &Self::Buf,
        k: usize,
        state: &mut Self::Buf,
    ) -> BResult<Self::Buf> {
        let (xh, wh) = (self.download(x)?, self.download(w)?);
        let mut sh = self.download(state)?;
        need("conv1d input", xh.len(), n * ch)?;
        need("conv1d weight", wh.len(), ch * k)?;
        need("conv1d state", sh.len(), (k - 1) * ch)?;
        let y = hybrid::conv1d_silu(&xh, n, ch, &wh, k, &mut sh);
        *state = self.upload(&sh)?;
        self.upload(&y)
    }
    /// `(β, g) = (σ(b), −exp(A_log)·softplus(a + dt_bias))` for `b, a [rows, heads]`.
    #[allow(clippy::type_complexity)]
    fn delta_gates(
        &self,
        b: &Self::Buf,
        a: &Self::Buf,
        rows: usize,
        heads: usize,
        a_log: &Self::Buf,
        dt_bias: &Self::Buf,
    ) -> BResult<(Self::Buf, Self::Buf)> {
        let (bh, ah) = (self.download(b)?, self.download(a)?);
        let (lh, dh) = (self.download(a_log)?, self.download(dt_bias)?);
        need("delta_gates", bh.len().min(ah.len()), rows * heads)?;
        need("delta_gates parameters", lh.len().min(dh.len()), heads)?;
        let (beta, g) = hybrid::delta_gates(&bh, &ah, rows, heads, &lh, &dh);
        Ok((self.upload(&beta)?, self.upload(&g)?))
    }
    /// The gated delta rule over one sequence's `n` rows (see [`hybrid::delta_rule`]),
    /// reading and updating its recurrent state `[Hv, Dk, Dv]`. Returns `[n, Hv·Dv]`.
    #[allow(clippy::too_many_arguments)]
    fn delta_rule(
        &self,
        q: &Self::Buf,
        k: &Self::Buf,
        v: &Self::Buf,
        beta: &Self::Buf,
        g: &Self::Buf,
        n: usize,
        s: DeltaShape,
        state: &mut Self::Buf,
    ) -> BResult<Self::Buf> {
        let (qh, kh, vh) = (self.download(q)?, self.download(k)?, self.download(v)?);
        let (bh, gh) = (self.download(beta)?, self.download(g)?);
        let mut sh = self.download(state)?;
        need(
            "delta_rule q/k",
            qh.len().min(kh.len()),
            n * s.k_heads * s.dk,
        )?;
        need("delta_rule v", vh.len(), n * s.v_heads * s.dv)?;
        need("delta_rule gates", bh.len().min(gh.len()), n * s.v_heads)?;
        need("delta_rule state", sh.len(), s.state_len())?;
        let o = hybrid::delta_rule(&qh, &kh, &vh, &bh, &gh, n, s, &mut sh);
        *state = self.upload(&sh)?;
        self.upload(&o)
    }
    /// `out[i] = Σ_t w[i·taps+t] · table[idx[i·taps+t]]` (rows of width `dim`): the vision
    /// position table resampled to an image's grid.
    fn gather_weighted(
        &self,
        table: &Self::Buf,
        dim: usize,
        idx: &[u32],
        w: &[f32],
        taps: usize,
    ) -> BResult<Self::Buf> {
        let th = self.download(table)?;
        let rows = th.len() / dim.max(1);
        if let Some(bad) = idx.iter().find(|&&i| i as usize >= rows) {
            return Err(LocalError::Internal(format!(
                "gather_weighted: row {bad} is outside the {rows}-row table"
            )));
        }
        self.upload(&hybrid::gather_weighted(&th, dim, idx, w, taps))
    }
}

/// Head layout for attention.
#[derive(Clone, Copy, Debug)]
pub struct AttnShape {
    /// Query heads.
    pub heads: usize,
    /// Key/value heads.
    pub kv_heads: usize,
    /// Head width.
    pub hd: usize,
}

/// An error unless a buffer holds at least `want` values.
pub(crate) fn need(what: &str, got: usize, want: usize) -> BResult<()> {
    if got < want {
        return Err(LocalError::Internal(format!(
            "{what}: buffer has {got} values, needs {want}"
        )));
    }
    Ok(())
}
