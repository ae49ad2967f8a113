//! Opening the device (what `Cuda::new` is made of), finding the CUDA libraries, compiling the
//! NVRTC kernels and loading their entry points. Nothing here knows the backend's type.

use std::sync::Arc;
use std::time::Instant;

use cudarc::cublas::CudaBlas;
use cudarc::driver::sys::CUresult;
use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaStream, DriverError};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions, Ptx};

use super::super::{BResult, DType};
use crate::LocalError;

/// A CUDA call's error as a device error naming the call: `.map_err(dev("alloc"))`.
pub(super) fn dev<E: std::fmt::Display>(what: &'static str) -> impl FnOnce(E) -> LocalError {
    move |e| LocalError::Device(format!("CUDA {what}: {e}"))
}

/// NVRTC source of every kernel.
pub const KERNELS: &str = include_str!("kernels.cu");

/// Where the CUDA libraries usually are, for error messages.
pub const LIB_HINT: &str = "install the NVIDIA driver and put the folder holding libcublas and \
    libnvrtc (CUDA 12 or 13; pip wheels: site-packages/nvidia/cu13/lib) on LD_LIBRARY_PATH, or \
    use --device cpu";

/// The CUDA libraries cudarc cannot find, by name (empty when all are present).
pub fn missing_libraries() -> Vec<&'static str> {
    let mut missing = Vec::new();
    // SAFETY: each check only tries to dlopen the library's candidate names.
    unsafe {
        if !cudarc::driver::sys::is_culib_present() {
            missing.push("libcuda.so.1 (NVIDIA driver)");
        }
        if !cudarc::cublas::sys::is_culib_present() {
            missing.push("libcublas (cuBLAS)");
        }
    }
    if !nvrtc_present() {
        missing.push("libnvrtc (NVRTC)");
    }
    missing
}

/// Whether NVRTC can be loaded (compiling kernels needs no GPU).
pub fn nvrtc_present() -> bool {
    // SAFETY: only tries to dlopen the library's candidate names.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

/// Compile [`KERNELS`] to PTX for a virtual architecture such as `compute_90`.
pub fn compile_kernels(arch: &'static str) -> BResult<Ptx> {
    if !nvrtc_present() {
        return Err(LocalError::Device(format!(
            "--device cuda: libnvrtc (NVRTC) not found; {LIB_HINT}"
        )));
    }
    let opts = CompileOptions {
        arch: Some(arch),
        name: Some("vlm_eval_kernels.cu".into()),
        ..Default::default()
    };
    compile_ptx_with_opts(KERNELS, opts).map_err(|e| match e {
        cudarc::nvrtc::CompileError::CompileError { log, .. } => LocalError::Internal(format!(
            "NVRTC could not compile the kernels: {}",
            log.to_string_lossy().replace('\n', " | ")
        )),
        other => LocalError::Device(format!("NVRTC: {other}")),
    })
}

/// An opened device: its one stream, the cuBLAS handle on it, the kernels' entry points and what
/// was found.
pub(super) struct Opened {
    pub(super) stream: Arc<CudaStream>,
    pub(super) blas: CudaBlas,
    pub(super) k: Kernels,
    pub(super) info: DeviceInfo,
}

/// Open device `ordinal`, compile the kernels and create the cuBLAS handle. Missing libraries,
/// no device, or a device too old for `dtype` are errors, never panics.
pub(super) fn open(ordinal: usize, dtype: DType) -> BResult<Opened> {
    let missing = missing_libraries();
    if !missing.is_empty() {
        return Err(LocalError::Device(format!(
            "--device cuda: {} not found; {LIB_HINT}",
            missing.join(", ")
        )));
    }
    let count = CudaContext::device_count().map_err(dev("device count"))?;
    if ordinal as i64 >= count as i64 {
        return Err(LocalError::Device(format!(
            "--device cuda: no CUDA device {ordinal} ({count} visible); check nvidia-smi \
             and CUDA_VISIBLE_DEVICES, or use --device cpu"
        )));
    }
    let ctx = CudaContext::new(ordinal).map_err(dev("context"))?;
    // SAFETY: the backend uses one stream, so no cross-stream synchronisation is needed.
    unsafe { ctx.disable_event_tracking() };
    let cc = ctx
        .compute_capability()
        .map_err(dev("compute capability"))?;
    if dtype == DType::Bf16 && cc.0 < 8 {
        return Err(LocalError::Device(format!(
            "--dtype bf16 needs compute capability 8.0 or newer (this GPU has {}.{}); use \
             --dtype f32",
            cc.0, cc.1
        )));
    }
    let arch: &'static str = Box::leak(format!("compute_{}{}", cc.0, cc.1).into_boxed_str());
    let t0 = Instant::now();
    let ptx = compile_kernels(arch)?;
    let kernel_compile_ms = t0.elapsed().as_secs_f64() * 1e3;
    let module = ctx.load_module(ptx).map_err(module_load_error)?;
    let k = Kernels::load(&module)?;
    let stream = ctx.default_stream();
    let blas = CudaBlas::new(stream.clone()).map_err(dev("cuBLAS init"))?;
    let info = DeviceInfo {
        name: ctx.name().map_err(dev("device name"))?,
        compute_capability: cc,
        total_mem_bytes: ctx.total_mem().map_err(dev("device memory"))?,
        kernel_compile_ms,
    };
    tracing::info!(
        "CUDA device {ordinal}: {} (sm_{}{}), kernels compiled in {kernel_compile_ms:.0} ms",
        info.name,
        cc.0,
        cc.1
    );
    Ok(Opened {
        stream,
        blas,
        k,
        info,
    })
}

/// `(major, minor)` of a CUDA version number such as 13050.
fn cuda_version(v: i32) -> (i32, i32) {
    (v / 1000, (v % 1000) / 10)
}

/// A CUDA version as `(major, minor)`, when it could be read.
type Version = Option<(i32, i32)>;

/// The CUDA version the driver supports and NVRTC's own.
fn driver_and_nvrtc_versions() -> (Version, Version) {
    let (mut v, mut major, mut minor) = (0, 0, 0);
    // SAFETY: plain queries writing into the locals; both libraries are loaded by now.
    let driver = unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut v) };
    let nvrtc = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
    (
        (driver == CUresult::CUDA_SUCCESS).then(|| cuda_version(v)),
        (nvrtc == cudarc::nvrtc::sys::nvrtcResult::NVRTC_SUCCESS).then_some((major, minor)),
    )
}

/// The error for loading the kernels' PTX. A driver older than NVRTC cannot JIT its PTX (a pip
/// NVRTC newer than the installed driver): say so, with the way out.
pub(super) fn module_load_error(e: DriverError) -> LocalError {
    if e.0 != CUresult::CUDA_ERROR_UNSUPPORTED_PTX_VERSION {
        return LocalError::Device(format!("CUDA module load: {e}"));
    }
    let show = |v: Version| v.map_or("?".to_string(), |(a, b)| format!("{a}.{b}"));
    let (driver, nvrtc) = driver_and_nvrtc_versions();
    LocalError::Device(format!(
        "--device cuda: the NVIDIA driver (CUDA {}) cannot load the kernels NVRTC {} compiled \
         (PTX newer than the driver); put an NVRTC no newer than CUDA {} on LD_LIBRARY_PATH, or \
         update the driver, or use --device cpu",
        show(driver),
        show(nvrtc),
        show(driver)
    ))
}

/// What the backend found at start-up (for benchmark reports).
#[derive(Clone, Debug, serde::Serialize)]
pub struct DeviceInfo {
    /// Device name.
    pub name: String,
    /// Compute capability (major, minor).
    pub compute_capability: (i32, i32),
    /// Device memory in bytes.
    pub total_mem_bytes: usize,
    /// NVRTC compile time of the kernels, milliseconds.
    pub kernel_compile_ms: f64,
}

pub(super) struct Kernels {
    pub(super) rms_norm: CudaFunction,
    pub(super) layer_norm: CudaFunction,
    pub(super) rope: CudaFunction,
    pub(super) silu_mul: CudaFunction,
    pub(super) quick_gelu: CudaFunction,
    pub(super) gelu_erf: CudaFunction,
    pub(super) add_assign: CudaFunction,
    pub(super) add_bias: CudaFunction,
    pub(super) gather_f32: CudaFunction,
    pub(super) gather_bf16: CudaFunction,
    pub(super) slice_cols: CudaFunction,
    pub(super) to_bf16: CudaFunction,
    pub(super) attention: CudaFunction,
    pub(super) gemv_bf16: CudaFunction,
    pub(super) split_qkv_rope: CudaFunction,
    pub(super) rope_partial: CudaFunction,
    pub(super) mul_sigmoid: CudaFunction,
    pub(super) gelu_tanh: CudaFunction,
    pub(super) l2_norm: CudaFunction,
    pub(super) rms_norm_gated: CudaFunction,
    pub(super) conv1d_silu: CudaFunction,
    pub(super) delta_gates: CudaFunction,
    pub(super) delta_rule: CudaFunction,
    pub(super) gather_weighted: CudaFunction,
}

impl Kernels {
    pub(super) fn load(m: &Arc<CudaModule>) -> BResult<Kernels> {
        let f = |name: &'static str| {
            m.load_function(name)
                .map_err(|e| LocalError::Internal(format!("kernel `{name}`: {e}")))
        };
        Ok(Kernels {
            rms_norm: f("rms_norm")?,
            layer_norm: f("layer_norm")?,
            rope: f("rope")?,
            silu_mul: f("silu_mul")?,
            quick_gelu: f("quick_gelu")?,
            gelu_erf: f("gelu_erf")?,
            add_assign: f("add_assign")?,
            add_bias: f("add_bias")?,
            gather_f32: f("gather_f32")?,
            gather_bf16: f("gather_bf16")?,
            slice_cols: f("slice_cols")?,
            to_bf16: f("to_bf16")?,
            attention: f("attention")?,
            gemv_bf16: f("gemv_bf16")?,
            split_qkv_rope: f("split_qkv_rope")?,
            rope_partial: f("rope_partial")?,
            mul_sigmoid: f("mul_sigmoid")?,
            gelu_tanh: f("gelu_tanh")?,
            l2_norm: f("l2_norm")?,
            rms_norm_gated: f("rms_norm_gated")?,
            conv1d_silu: f("conv1d_silu")?,
            delta_gates: f("delta_gates")?,
            delta_rule: f("delta_rule")?,
            gather_weighted: f("gather_weighted")?,
        })
    }
}
