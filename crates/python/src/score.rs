//! The Crafter score of `stats.jsonl` files for `vlmcrafter.score`: the crafter crate's
//! `score` module, the one the CLI's `vlm-eval score` calls, so both read, accept and refuse
//! files alike, with the same messages.

use std::path::PathBuf;

use pyo3::exceptions::{PyFileNotFoundError, PyOSError, PyValueError};
use pyo3::prelude::*;
use vlm_eval_crafter::score::{self, ScoreError};

fn error(e: ScoreError) -> PyErr {
    let text = e.to_string();
    match e {
        ScoreError::NoStats(_) => PyFileNotFoundError::new_err(text),
        ScoreError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            PyFileNotFoundError::new_err(text)
        }
        ScoreError::Io { .. } => PyOSError::new_err(text),
        _ => PyValueError::new_err(text),
    }
}

/// `(metrics as the JSON text vlm-eval score --json prints, the warning or None)`.
#[pyfunction]
pub fn score_compute(py: Python<'_>, paths: Vec<PathBuf>) -> PyResult<(String, Option<String>)> {
    let s = py.detach(|| score::compute(&paths)).map_err(error)?;
    Ok((s.to_json().to_string(), s.warning()))
}

/// The stats files `paths` names, in reading order, each once.
#[pyfunction]
pub fn score_files(paths: Vec<PathBuf>) -> PyResult<Vec<PathBuf>> {
    score::stats_files(&paths).map_err(error)
}

/// One file's episodes as `(length, reward, [22 counts])`, and the line number of a cut last
/// line skipped (or None).
#[pyfunction]
#[allow(clippy::type_complexity)]
pub fn score_read(path: PathBuf) -> PyResult<(Vec<(u64, f64, Vec<u64>)>, Option<usize>)> {
    let (episodes, cut) = score::read_stats(&path).map_err(error)?;
    let rows = episodes
        .into_iter()
        .map(|e| (e.length, e.reward, e.achievements))
        .collect();
    Ok((rows, cut))
}
