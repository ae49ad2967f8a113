//! Finding crafter's textures: an explicit folder, $CRAFTER_ASSETS, the per-user cache, or an
//! installed crafter Python package; else the built-in sprites with a warning.

use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{TextureError, TextureSet, CACHE_SUBDIR, CRAFTER_VERSION, PYTHON_PROBE_TIMEOUT};

impl TextureSet {
    /// Find official textures: explicit dir, else $CRAFTER_ASSETS, else the per-user cache that
    /// [`super::fetch_official`] fills, else an installed `crafter` Python package (via
    /// $VLM_EVAL_PYTHON or `python3`); an explicit folder (argument or $CRAFTER_ASSETS) that is
    /// bad is an error. If nothing is found, returns [`TextureSet::builtin`] and a one-line
    /// warning.
    pub fn discover(explicit: Option<&Path>) -> Result<(TextureSet, Option<String>), TextureError> {
        if let Some(dir) = explicit {
            return Ok((Self::load_official(dir)?, None));
        }
        if let Some(dir) = non_empty_env("CRAFTER_ASSETS") {
            tracing::debug!(dir = ?dir, "loading textures from $CRAFTER_ASSETS");
            return Ok((Self::load_official(Path::new(&dir))?, None));
        }
        if let Ok(cache) = cache_dir() {
            let dir = cache.join(CACHE_SUBDIR);
            if dir.is_dir() {
                tracing::debug!(dir = %dir.display(), "loading textures from the cache");
                return Ok((Self::load_official(&dir)?, None));
            }
        }
        let mut note = String::new();
        if let Some(dir) = python_crafter_assets() {
            match Self::load_official(&dir) {
                Ok(set) => {
                    tracing::debug!(dir = %dir.display(), "loading textures from the installed crafter package");
                    return Ok((set, None));
                }
                Err(err) => {
                    tracing::debug!(%err, "installed crafter package's textures are unusable");
                    note = format!(" (the installed crafter package is unusable: {err})");
                }
            }
        }
        let warning = format!(
            "crafter {CRAFTER_VERSION}'s textures were not found{note}; using vlm-eval's built-in \
             sprites, so observations differ from official Crafter (pass --assets DIR with \
             crafter's assets folder, or run `vlm-eval assets fetch` once)"
        );
        Ok((Self::builtin(), Some(warning)))
    }
}

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

/// `<crafter package>/assets` of an importable `crafter`, or None on any failure or timeout.
pub(super) fn python_crafter_assets() -> Option<PathBuf> {
    let python = python_interpreter();
    let mut child = Command::new(&python)
        .args([
            "-c",
            "import crafter, os; print(os.path.dirname(crafter.__file__))",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let deadline = Instant::now() + PYTHON_PROBE_TIMEOUT;
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => break,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    let mut out = String::new();
    child.stdout.take()?.read_to_string(&mut out).ok()?;
    let line = out.lines().rev().find(|l| !l.trim().is_empty())?.trim();
    let dir = PathBuf::from(line).join("assets");
    dir.is_dir().then_some(dir)
}

// ---------------------------------------------------------------------------------------------
// Fetching.
