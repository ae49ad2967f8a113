//! The small set of tensor operations the Qwen2-VL model needs. The model is written once over
//! this trait; each backend owns its buffers (host `Vec<f32>` for the CPU reference).
//!
//! Every buffer is a row-major matrix whose shape the caller tracks; ops take the dimensions.

pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;

use super::LocalError;

/// Result of a backend operation.
pub type BResult<T> = Result<T, LocalError>;

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
    /// Upload activations.
    fn upload(&self, data: &[f32]) -> BResult<Self::Buf>;
    /// Copy a buffer back to the host as f32.
    fn download(&self, x: &Self::Buf) -> BResult<Vec<f32>>;
    /// A zero-filled buffer of `n` values.
    fn zeros(&self, n: usize) -> BResult<Self::Buf>;

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
