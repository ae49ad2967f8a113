//! Device and precision choice, and the one place that turns them into a backend (the
//! precision itself, [`DType`], is the backends' storage type: `backend::DType`).
//!
//! Code that works on any backend implements [`WithBackend`]; [`with_backend`] builds the
//! requested backend (CPU f32 reference, or CUDA when the binary has the `cuda` feature and the
//! machine has the libraries) and calls it.

use super::backend::cpu::packed::CpuPacked;
use super::backend::{Backend, DType};
use super::LocalError;

/// Where the model runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Device {
    /// The f32 CPU reference backend.
    Cpu,
    /// An NVIDIA GPU (binaries built with `--features cuda`).
    Cuda,
}

impl Device {
    /// Lower-case name, as on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Device::Cpu => "cpu",
            Device::Cuda => "cuda",
        }
    }
}

/// Whether a thinking model (Qwen3.5) reasons in a `<think>` block before replying: the
/// chat template's `enable_thinking`. Off by default: on, the model spends hundreds of tokens
/// per turn before its action (slow, and a reply cut by `--max-tokens` holds no action).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Thinking {
    /// `enable_thinking=true`: the generation prompt opens `<think>`.
    On,
    /// `enable_thinking=false`: the generation prompt holds an empty think block.
    #[default]
    Off,
}

impl Thinking {
    /// Its name in run.json and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Thinking::On => "on",
            Thinking::Off => "off",
        }
    }
}

/// Work that runs on whichever backend the user chose.
pub trait WithBackend {
    /// What the work returns.
    type Output;
    /// Run on a freshly built backend.
    fn run<B: Backend>(self, be: B) -> Result<Self::Output, LocalError>;
}

/// The precision a device uses when none is asked for: f32 on CPU, bf16 on CUDA.
pub fn default_dtype(device: Device) -> DType {
    match device {
        Device::Cpu => DType::F32,
        Device::Cuda => DType::Bf16,
    }
}

/// Build the backend for `device`/`dtype` (CUDA device 0) and run `work` on it.
pub fn with_backend<W: WithBackend>(
    device: Device,
    dtype: Option<DType>,
    work: W,
) -> Result<W::Output, LocalError> {
    let dtype = dtype.unwrap_or(default_dtype(device));
    match device {
        Device::Cpu => {
            CpuPacked::check_env()?;
            work.run(CpuPacked::new(dtype == DType::Bf16))
        }
        Device::Cuda => run_cuda(dtype, work),
    }
}

#[cfg(feature = "cuda")]
fn run_cuda<W: WithBackend>(dtype: DType, work: W) -> Result<W::Output, LocalError> {
    work.run(super::backend::cuda::Cuda::new(0, dtype)?)
}

#[cfg(not(feature = "cuda"))]
fn run_cuda<W: WithBackend>(_dtype: DType, _work: W) -> Result<W::Output, LocalError> {
    Err(LocalError::Device(
        "--device cuda: this binary was built without the `cuda` feature; rebuild with \
         `cargo build --release --features cuda` or use --device cpu"
            .into(),
    ))
}
