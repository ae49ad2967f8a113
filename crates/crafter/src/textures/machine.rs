//! What this machine says about where things are, through its environment: the per-user
//! cache folder (where fetched or copied textures live) and the Python interpreter (which
//! locates an installed crafter and runs pip). Discovery and fetching both read these; neither
//! owns them.

use std::ffi::OsString;
use std::path::PathBuf;

use super::TextureError;

/// Per-user cache dir: $VLM_EVAL_CACHE, else $XDG_CACHE_HOME/vlm-eval, else
/// $HOME/.cache/vlm-eval; textures go under `<cache>/crafter-1.8.3-assets/`.
pub fn cache_dir() -> Result<PathBuf, TextureError> {
    if let Some(dir) = non_empty_env("VLM_EVAL_CACHE") {
        return Ok(PathBuf::from(dir));
    }
    if let Some(dir) = non_empty_env("XDG_CACHE_HOME") {
        return Ok(PathBuf::from(dir).join("vlm-eval"));
    }
    if let Some(home) = non_empty_env("HOME") {
        return Ok(PathBuf::from(home).join(".cache").join("vlm-eval"));
    }
    Err(TextureError::NoCacheDir)
}

/// The value of environment variable `key`, unless unset or empty.
pub(super) fn non_empty_env(key: &str) -> Option<OsString> {
    std::env::var_os(key).filter(|v| !v.is_empty())
}

/// The Python interpreter to use: $VLM_EVAL_PYTHON, else `python3`.
pub(super) fn python_interpreter() -> OsString {
    non_empty_env("VLM_EVAL_PYTHON").unwrap_or_else(|| OsString::from("python3"))
}
