//! A local vision-language model (Qwen2-VL or Qwen3.5, chosen by config.json's `model_type`):
//! checkpoint loading, HF-identical preprocessing, each family written once over a small
//! [`backend::Backend`] trait (CPU backends, and CUDA under the `cuda` feature), batched
//! generation, and the benchmark and parity measurements behind `vlm-eval bench local` and
//! `bench parity`. It knows nothing of the harness: vlm-eval's `model::local` adapts an
//! [`engine::Engine`] to its chat interface. Adding a model family: `model/mod.rs` (and
//! crates/local/README.md).

pub mod backend;
pub mod bench;
pub mod config;
pub mod device;
pub mod engine;
pub mod model;
pub mod parity;
pub mod preprocess;
pub mod resize;
pub mod sampling;
pub mod tokenizer;
pub mod weights;

use std::path::PathBuf;

/// Why loading or running the local model failed. Messages are one line and name the file and
/// field (or tensor) at fault.
#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    /// A file is missing or unreadable.
    #[error("{}: {msg}", file.display())]
    File { file: PathBuf, msg: String },
    /// A field is missing or inconsistent.
    #[error("{}: field `{field}` {msg}", file.display())]
    Field {
        file: PathBuf,
        field: String,
        msg: String,
    },
    /// A tensor is missing or malformed.
    #[error("{}: tensor `{name}` {msg}", file.display())]
    Tensor {
        file: PathBuf,
        name: String,
        msg: String,
    },
    /// The chat template or tokenizer failed on a request.
    #[error("chat template: {0}")]
    Template(String),
    /// An image could not be used.
    #[error("image: {0}")]
    Image(String),
    /// The requested device or dtype is unavailable.
    #[error("{0}")]
    Device(String),
    /// A bug or an impossible state (shapes that cannot happen for valid checkpoints).
    #[error("internal error: {0}")]
    Internal(String),
}
