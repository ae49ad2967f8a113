//! Matmuls of the CUDA backend: cuBLAS (`sgemm` for f32 weights; `GemmEx` with bf16 inputs, f32
//! accumulation and f32 output for bf16 weights) and the `gemv_bf16` kernel for decode.

use std::ffi::c_void;

use cudarc::cublas::result as blas;
use cudarc::cublas::sys::{
    cublasComputeType_t, cublasGemmAlgo_t, cublasOperation_t, cudaDataType_t,
};
use cudarc::cublas::{Gemm, GemmConfig};
use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg};

use super::{check, dev, flat, int, Cuda, CudaBuf, BLOCK, GEMV_ROWS};
use crate::backend::BResult;

impl Cuda {
    /// `y[rows, n] = x[rows, k] · w[n, k]ᵀ (+ bias) (+ y when accumulate)`.
    ///
    /// bf16 weights with at most [`GEMV_ROWS`] rows (decode) take the `gemv_bf16` kernel, which
    /// reads each weight once and adds bias and residual in the same pass; otherwise cuBLAS.
    /// Row-major `y` is column-major `yᵀ[n, rows] = w · xᵀ`: A = w (stored k-fastest,
    /// transposed), B = x (not transposed).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn matmul(
        &self,
        x: &CudaSlice<f32>,
        rows: usize,
        k: usize,
        w: &CudaBuf,
        n: usize,
        bias: Option<&CudaBuf>,
        y: &mut CudaSlice<f32>,
        accumulate: bool,
    ) -> BResult<()> {
        check("linear input", x.len(), rows * k)?;
        check("linear weight", w.len(), n * k)?;
        check("linear output", y.len(), rows * n)?;
        if rows == 0 || n == 0 {
            return Ok(());
        }
        if let (CudaBuf::Bf16(ws), true) = (w, rows <= GEMV_ROWS && k.is_multiple_of(8)) {
            return self.gemv(x, rows, k, ws, n, bias, y, accumulate);
        }
        self.gemm(x, rows, k, w, n, y, if accumulate { 1.0 } else { 0.0 })?;
        if let Some(b) = bias {
            self.add_bias(y, b, rows, n)?;
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn gemv(
        &self,
        x: &CudaSlice<f32>,
        rows: usize,
        k: usize,
        w: &CudaSlice<u16>,
        n: usize,
        bias: Option<&CudaBuf>,
        y: &mut CudaSlice<f32>,
        accumulate: bool,
    ) -> BResult<()> {
        let b = match bias {
            Some(b) => {
                let bs = self.f32(b, "bias")?;
                check("bias", bs.len(), n)?;
                Some(bs)
            }
            None => None,
        };
        let ints = [
            int(rows, "gemv")?,
            int(k, "gemv")?,
            int(n, "gemv")?,
            i32::from(b.is_some()),
            i32::from(accumulate),
        ];
        let mut l = self.stream.launch_builder(&self.k.gemv_bf16);
        l.arg(y).arg(w).arg(x);
        // Without a bias the kernel never reads `b`, but it still gets a valid pointer.
        l.arg(b.unwrap_or(&self.dummy));
        for v in &ints {
            l.arg(v);
        }
        let warps_per_block = (BLOCK / 32) as usize;
        let cfg = LaunchConfig {
            grid_dim: (n.div_ceil(warps_per_block) as u32, 1, 1),
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: gemv_bf16(float* y, const u16* w, const float* x, const float* b, int rows,
        // int k, int n, int has_bias, int accumulate); w n·k, x rows·k, y rows·n values
        // (checked by the caller), k % 8 == 0 so every row is 16-byte aligned.
        unsafe { l.launch(cfg) }.map_err(dev("gemv_bf16"))?;
        Ok(())
    }

    /// `y = x · wᵀ + beta · y` through cuBLAS.
    #[allow(clippy::too_many_arguments)]
    fn gemm(
        &self,
        x: &CudaSlice<f32>,
        rows: usize,
        k: usize,
        w: &CudaBuf,
        n: usize,
        y: &mut CudaSlice<f32>,
        beta: f32,
    ) -> BResult<()> {
        let (m_, n_, k_) = (int(n, "gemm m")?, int(rows, "gemm n")?, int(k, "gemm k")?);
        match w {
            CudaBuf::F32(ws) => {
                let cfg = GemmConfig {
                    transa: cublasOperation_t::CUBLAS_OP_T,
                    transb: cublasOperation_t::CUBLAS_OP_N,
                    m: m_,
                    n: n_,
                    k: k_,
                    alpha: 1.0f32,
                    lda: k_,
                    ldb: k_,
                    beta,
                    ldc: m_,
                };
                // SAFETY: the sizes were checked above against the leading dimensions.
                unsafe { self.blas.gemm(cfg, ws, x, y) }.map_err(dev("cuBLAS sgemm"))
            }
            CudaBuf::Bf16(ws) => {
                let xb = self.bf16_copy(x, rows * k)?;
                let alpha = 1.0f32;
                let (a, _ra) = ws.device_ptr(&self.stream);
                let (b, _rb) = xb.device_ptr(&self.stream);
                let (c, _rc) = y.device_ptr_mut(&self.stream);
                // SAFETY: A is n·k bf16, B rows·k bf16, C rows·n f32 (checked above); alpha and
                // beta are f32 as CUBLAS_COMPUTE_32F requires.
                unsafe {
                    blas::gemm_ex(
                        *self.blas.handle(),
                        cublasOperation_t::CUBLAS_OP_T,
                        cublasOperation_t::CUBLAS_OP_N,
                        m_,
                        n_,
                        k_,
                        &alpha as *const f32 as *const c_void,
                        a as *const c_void,
                        cudaDataType_t::CUDA_R_16BF,
                        k_,
                        b as *const c_void,
                        cudaDataType_t::CUDA_R_16BF,
                        k_,
                        &beta as *const f32 as *const c_void,
                        c as *mut c_void,
                        cudaDataType_t::CUDA_R_32F,
                        m_,
                        cublasComputeType_t::CUBLAS_COMPUTE_32F,
                        cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
                    )
                }
                .map_err(dev("cuBLAS GemmEx (bf16)"))
            }
        }
    }

    /// `x` rounded to bf16 (round to nearest even).
    fn bf16_copy(&self, x: &CudaSlice<f32>, n: usize) -> BResult<CudaSlice<u16>> {
        // SAFETY: the kernel writes all n values.
        let mut out = unsafe { self.stream.alloc::<u16>(n.max(1)) }.map_err(dev("alloc"))?;
        let n_i = int(n, "to_bf16")?;
        let mut b = self.stream.launch_builder(&self.k.to_bf16);
        b.arg(&mut out).arg(x).arg(&n_i);
        // SAFETY: to_bf16(u16* out, const float* x, int n); both hold n values.
        unsafe { b.launch(flat(n)) }.map_err(dev("to_bf16"))?;
        Ok(out)
    }

    fn add_bias(
        &self,
        y: &mut CudaSlice<f32>,
        bias: &CudaBuf,
        rows: usize,
        n: usize,
    ) -> BResult<()> {
        let bs = self.f32(bias, "bias")?;
        check("bias", bs.len(), n)?;
        let (r, n_i) = (int(rows, "rows")?, int(n, "cols")?);
        let mut b = self.stream.launch_builder(&self.k.add_bias);
        b.arg(y).arg(bs).arg(&r).arg(&n_i);
        // SAFETY: add_bias(float* y, const float* b, int rows, int n); y holds rows·n values.
        unsafe { b.launch(flat(rows * n)) }.map_err(dev("add_bias"))?;
        Ok(())
    }
}
