//! `vlmcrafter._native`: the Crafter engine for Python. The pure-Python package (`python/vlmcrafter`)
//! wraps these classes into the public API (`vlmcrafter.crafter.Env`, `VectorEnv`); everything
//! here is private to it and may change without notice.

mod convert;
mod reply;
mod score;
mod single;
mod stats_line;
mod textures;
mod vector;
mod vector_async;
mod vector_info;
mod vector_run;
mod vector_slot;

use pyo3::prelude::*;
use vlm_eval_crafter::{ACHIEVEMENT_NAMES, ACTION_NAMES, ITEM_NAMES};

/// Panic on purpose (a documented test hook): the panic unwinds into a Python
/// `pyo3_runtime.PanicException` instead of aborting the interpreter. With `in_thread=True` the
/// panic happens in a native worker thread while the GIL is released, the path `VectorEnv.step`
/// takes.
#[pyfunction]
#[pyo3(signature = (in_thread = false))]
fn _panic_for_test(py: Python<'_>, in_thread: bool) {
    if in_thread {
        py.detach(|| {
            let joined = std::thread::scope(|s| {
                s.spawn(|| {
                    panic!(
                        "vlmcrafter._native._panic_for_test: a panic in a worker thread, on purpose"
                    )
                })
                .join()
            });
            if let Err(payload) = joined {
                std::panic::resume_unwind(payload);
            }
        });
    }
    panic!("vlmcrafter._native._panic_for_test: a panic on purpose");
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("ACTION_NAMES", ACTION_NAMES.to_vec())?;
    m.add("ITEM_NAMES", ITEM_NAMES.to_vec())?;
    m.add("ACHIEVEMENT_NAMES", ACHIEVEMENT_NAMES.to_vec())?;
    m.add(
        "CRAFTER_VERSION",
        vlm_eval_crafter::textures::CRAFTER_VERSION,
    )?;
    m.add_class::<single::Env>()?;
    m.add_class::<vector::VectorEnv>()?;
    m.add_class::<vector_async::AsyncVectorEnv>()?;
    m.add_class::<vector::state::Snapshot>()?;
    m.add_function(wrap_pyfunction!(_panic_for_test, m)?)?;
    m.add_function(wrap_pyfunction!(stats_line::stats_line, m)?)?;
    m.add_function(wrap_pyfunction!(textures::texture_source, m)?)?;
    m.add_function(wrap_pyfunction!(score::score_compute, m)?)?;
    m.add_function(wrap_pyfunction!(score::score_files, m)?)?;
    m.add_function(wrap_pyfunction!(score::score_read, m)?)?;
    reply::register(m)?;
    Ok(())
}
