//! The local model's tests, one binary: each module was a test file of its own. The engine
//! against transformers' references (scripts/make_qwen2vl_fixtures.py,
//! scripts/make_qwen35_fixtures.py) on the tiny checkpoints in tests/fixtures/, and the CUDA
//! backend against the CPU backend (`--features cuda`). What runs the `vlm-eval` binary on these
//! fixtures (runs, `bench local`, `bench parity`, CUDA error lines) is vlm-eval's
//! tests/local_cli/.

mod support;

#[cfg(feature = "cuda")]
mod cuda_backend;
mod local_bench;
mod local_qwen35;
mod local_vlm;
