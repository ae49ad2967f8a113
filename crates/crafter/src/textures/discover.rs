//! Finding crafter's textures: an explicit folder, $CRAFTER_ASSETS, the per-user cache, an
//! installed crafter Python package (copied into the cache), a one-time download into the
//! cache; else the built-in sprites with a warning.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::fetch::{fetch_official, install_from_dir};
use super::machine::{cache_dir, non_empty_env, python_interpreter};
use super::{TextureError, TextureSet, CACHE_SUBDIR, CRAFTER_VERSION, PYTHON_PROBE_TIMEOUT};

/// Whether discovery may download crafter's textures when they are nowhere on this machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FetchPolicy {
    /// Fetch them once into the cache with pip (the verified `assets fetch` path).
    Fetch,
    /// Never download: fall back to the built-in sprites with a warning.
    NoFetch,
}

impl FetchPolicy {
    /// `NoFetch` when `$VLM_EVAL_NO_FETCH` is set to anything but `0` or empty, else `Fetch`.
    pub fn from_env() -> FetchPolicy {
        match non_empty_env("VLM_EVAL_NO_FETCH") {
            Some(v) if v != "0" => FetchPolicy::NoFetch,
            _ => FetchPolicy::Fetch,
        }
    }
}

impl TextureSet {
    /// [`TextureSet::discover_with`] without downloading and without notices.
    pub fn discover(explicit: Option<&Path>) -> Result<(TextureSet, Option<String>), TextureError> {
        Self::discover_with(explicit, FetchPolicy::NoFetch, &mut |_| {})
    }

    /// Find official textures, in order: the explicit folder, `$CRAFTER_ASSETS`, the per-user
    /// cache (no subprocess is started when one of these has them); then an installed
    /// `crafter` Python package (via `$VLM_EVAL_PYTHON` or `python3`), whose verified files are
    /// copied into the cache for later starts; then, under [`FetchPolicy::Fetch`], a one-time
    /// download into the cache through [`super::fetch_official`], announced through `notice`
    /// before it starts. An explicit folder (argument or `$CRAFTER_ASSETS`) or a cache that is
    /// bad is an error. If all else fails, returns [`TextureSet::builtin`] and a one-line
    /// warning saying why.
    pub fn discover_with(
        explicit: Option<&Path>,
        policy: FetchPolicy,
        notice: &mut dyn FnMut(&str),
    ) -> Result<(TextureSet, Option<String>), TextureError> {
        if let Some(dir) = explicit {
            return Ok((Self::load_official(dir)?, None));
        }
        if let Some(dir) = non_empty_env("CRAFTER_ASSETS") {
            tracing::debug!(dir = ?dir, "loading textures from $CRAFTER_ASSETS");
            return Ok((Self::load_official(Path::new(&dir))?, None));
        }
        let cache = cache_dir().map(|c| c.join(CACHE_SUBDIR));
        if let Ok(dir) = &cache {
            if dir.is_dir() {
                tracing::debug!(dir = %dir.display(), "loading textures from the cache");
                return Self::load_official(dir)
                    .map(|set| (set, None))
                    .map_err(|err| TextureError::BadCache {
                        dir: dir.clone(),
                        reason: err.to_string(),
                    });
            }
        }
        let mut note = String::new();
        if let Some(dir) = python_crafter_assets() {
            match Self::load_official(&dir) {
                Ok(set) => {
                    tracing::debug!(dir = %dir.display(), "loading textures from the installed crafter package");
                    if let Ok(dest) = &cache {
                        match install_from_dir(&dir, dest) {
                            Ok(()) => tracing::info!(
                                dest = %dest.display(),
                                "copied the installed crafter package's textures into the cache"
                            ),
                            Err(err) => {
                                tracing::debug!(%err, "could not copy the textures into the cache")
                            }
                        }
                    }
                    return Ok((set, None));
                }
                Err(err) => {
                    tracing::debug!(%err, "installed crafter package's textures are unusable");
                    note = format!(" (the installed crafter package is unusable: {err})");
                }
            }
        }
        if policy == FetchPolicy::Fetch {
            match &cache {
                Ok(dest) => {
                    notice(&format!(
                        "crafter {CRAFTER_VERSION}'s textures are not on this machine: fetching them \
                         once into {} (pip download crafter=={CRAFTER_VERSION}, every file checked \
                         against its sha256; VLM_EVAL_NO_FETCH=1 skips this)",
                        dest.display()
                    ));
                    match fetch_official(Some(dest)).and_then(|d| Self::load_official(&d)) {
                        Ok(set) => return Ok((set, None)),
                        Err(err) => note = format!(" (fetching them failed: {err})"),
                    }
                }
                Err(err) => note = format!(" (and they cannot be fetched: {err})"),
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
