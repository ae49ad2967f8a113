//! Finding crafter's textures for the Python envs, once per process and folder.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use vlm_eval_crafter::textures::{FetchPolicy, TextureSource, CRAFTER_VERSION};
use vlm_eval_crafter::TextureSet;

/// Loaded sets by request (`builtin`, an explicit folder, or discovery), shared by every env.
type Cache = Mutex<HashMap<String, Arc<TextureSet>>>;

fn cache() -> &'static Cache {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The texture set for `textures` (`"builtin"`, a folder, or `None` to discover crafter's),
/// with `hint` the assets folder of a crafter package importable by this interpreter (tried
/// before the CLI's discovery, which would start a `python3` to look for one).
pub fn load(textures: Option<&str>, hint: Option<&str>, fetch: bool) -> PyResult<Arc<TextureSet>> {
    let crafter_assets = std::env::var("CRAFTER_ASSETS").unwrap_or_default();
    let key = match textures {
        Some(t) => format!("explicit:{t}"),
        None => format!("discover:{crafter_assets}"),
    };
    if let Some(set) = cache().lock().map_err(poisoned)?.get(&key) {
        return Ok(set.clone());
    }
    let set = match textures {
        Some("builtin") => TextureSet::builtin(),
        Some(dir) => TextureSet::load_official(Path::new(dir)).map_err(|e| {
            PyValueError::new_err(format!(
                "textures={dir:?}: {e} (pass crafter {CRAFTER_VERSION}'s assets folder, textures=None to find them, or textures=\"builtin\")"
            ))
        })?,
        None => discover(hint, fetch, crafter_assets.is_empty())?,
    };
    let set = Arc::new(set);
    cache().lock().map_err(poisoned)?.insert(key, set.clone());
    Ok(set)
}

fn discover(hint: Option<&str>, fetch: bool, use_hint: bool) -> PyResult<TextureSet> {
    if let (Some(dir), true) = (hint, use_hint) {
        if let Ok(set) = TextureSet::load_official(Path::new(dir)) {
            return Ok(set);
        }
    }
    let policy = if fetch {
        FetchPolicy::Fetch
    } else {
        FetchPolicy::NoFetch
    };
    let (set, warning) = TextureSet::discover_with(None, policy, &mut |msg| eprintln!("{msg}"))
        .map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    match warning {
        None => Ok(set),
        Some(_) if !fetch => Err(PyRuntimeError::new_err(format!(
            "crafter {CRAFTER_VERSION}'s textures were not found and fetch=False: pass \
             textures=DIR (crafter's assets folder), set CRAFTER_ASSETS, pip install \
             crafter=={CRAFTER_VERSION}, run `vlm-eval assets fetch` once, allow fetch=True, or \
             pass textures=\"builtin\" for vlm-eval's own sprites (frames then differ from crafter's)"
        ))),
        Some(w) => Err(PyRuntimeError::new_err(format!(
            "{w}; from Python pass textures=DIR, or textures=\"builtin\" to accept the built-in sprites"
        ))),
    }
}

/// Where a texture set came from: `"builtin"` or the folder of crafter's files.
pub fn source_name(set: &TextureSet) -> String {
    match set.source() {
        TextureSource::Official { dir } => dir.display().to_string(),
        TextureSource::Builtin => "builtin".to_string(),
    }
}

/// Which textures `textures`/`fetch` resolve to, without making an env: `"builtin"` or a
/// folder of crafter's verified files.
#[pyfunction]
#[pyo3(signature = (textures = None, hint = None, fetch = true))]
pub fn texture_source(textures: Option<&str>, hint: Option<&str>, fetch: bool) -> PyResult<String> {
    let set = load(textures, hint, fetch)?;
    Ok(source_name(&set))
}

fn poisoned<T>(_: T) -> PyErr {
    PyRuntimeError::new_err("the texture cache was poisoned by an earlier panic")
}
