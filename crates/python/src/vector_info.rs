//! The vector env's per-env state as gymnasium's dict-of-arrays `infos`, laid out exactly as
//! gymnasium's `SyncVectorEnv` lays out the single env's `info` dicts (`VectorEnv._add_info`):
//! every key with its `_key` bool mask, crafter's `inventory` and `achievements` dicts as
//! nested dicts of int64 arrays (each with its own masks), `discount` and `reward` float64.
//! Built from plain snapshots so that the ended episodes of a same-step autoreset keep theirs.

use numpy::{PyArray1, PyArrayMethods};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyString};
use vlm_eval_crafter::rules::{ACHIEVEMENT_NAMES, ITEM_NAMES};

use crate::vector_slot::{Observed, State};

/// Which optional keys the infos carry.
#[derive(Clone, Copy)]
pub struct Layout {
    /// `text`: an object array of str (None where masked out).
    pub text: bool,
    /// `semantic`: uint8 `(n, area[0], area[1])`.
    pub semantic: Option<[usize; 2]>,
}

/// Interned keys and their `_key` mask names, made once per interpreter (never formatted from
/// Python objects).
struct Keys {
    items: Vec<(Py<PyString>, Py<PyString>)>,
    achievements: Vec<(Py<PyString>, Py<PyString>)>,
    top: [(Py<PyString>, Py<PyString>); 7],
}

const TOP: [&str; 7] = [
    "inventory",
    "achievements",
    "discount",
    "semantic",
    "player_pos",
    "reward",
    "text",
];

fn keys(py: Python<'_>) -> &Keys {
    static KEYS: PyOnceLock<Keys> = PyOnceLock::new();
    KEYS.get_or_init(py, || {
        let pair = |t: &str| {
            (
                PyString::intern(py, t).unbind(),
                PyString::intern(py, &format!("_{t}")).unbind(),
            )
        };
        Keys {
            items: ITEM_NAMES.iter().map(|n| pair(n)).collect(),
            achievements: ACHIEVEMENT_NAMES.iter().map(|n| pair(n)).collect(),
            top: TOP.map(pair),
        }
    })
}

/// gymnasium's `infos` for `entries` (one per env; `None` where an env has nothing to report,
/// which reads as zeros, None text, with its masks False).
pub fn infos<'py>(
    py: Python<'py>,
    entries: &[Option<(State, &Observed)>],
    layout: Layout,
) -> PyResult<Bound<'py, PyDict>> {
    let n = entries.len();
    let mask: Vec<bool> = entries.iter().map(Option::is_some).collect();
    let state = |i: usize| entries[i].as_ref().map_or(&State::ZERO, |(s, _)| s);
    let k = keys(py);
    let out = PyDict::new(py);
    let put = |dict: &Bound<'py, PyDict>,
               (key, mkey): &(Py<PyString>, Py<PyString>),
               value: Bound<'py, PyAny>|
     -> PyResult<()> {
        dict.set_item(key.bind(py), value)?;
        dict.set_item(mkey.bind(py), PyArray1::from_slice(py, &mask))
    };
    let nested = |names: &[(Py<PyString>, Py<PyString>)],
                  get: &dyn Fn(&State, usize) -> i64|
     -> PyResult<Bound<'py, PyDict>> {
        let dict = PyDict::new(py);
        for (j, names) in names.iter().enumerate() {
            let col: Vec<i64> = (0..n).map(|i| get(state(i), j)).collect();
            put(&dict, names, PyArray1::from_vec(py, col).into_any())?;
        }
        Ok(dict)
    };
    let inventory = nested(&k.items, &|s, j| s.inventory[j] as i64)?;
    put(&out, &k.top[0], inventory.into_any())?;
    let achievements = nested(&k.achievements, &|s, j| s.achievements[j] as i64)?;
    put(&out, &k.top[1], achievements.into_any())?;
    let discount: Vec<f64> = (0..n).map(|i| state(i).discount).collect();
    put(&out, &k.top[2], PyArray1::from_vec(py, discount).into_any())?;
    if let Some([w, h]) = layout.semantic {
        let mut sem = vec![0u8; n * w * h];
        for (chunk, e) in sem.chunks_mut(w * h).zip(entries) {
            if let Some((_, o)) = e {
                if o.semantic.len() == chunk.len() {
                    chunk.copy_from_slice(&o.semantic);
                }
            }
        }
        let sem = PyArray1::from_vec(py, sem).reshape([n, w, h])?;
        put(&out, &k.top[3], sem.into_any())?;
    }
    let pos: Vec<i64> = (0..n).flat_map(|i| state(i).pos).collect();
    put(
        &out,
        &k.top[4],
        PyArray1::from_vec(py, pos).reshape([n, 2])?.into_any(),
    )?;
    let reward: Vec<f64> = (0..n).map(|i| state(i).reward).collect();
    put(&out, &k.top[5], PyArray1::from_vec(py, reward).into_any())?;
    if layout.text {
        let text: Vec<Py<PyAny>> = entries
            .iter()
            .map(|e| match e {
                Some((_, o)) => PyString::new(py, &o.text).into_any().unbind(),
                None => py.None(),
            })
            .collect();
        put(&out, &k.top[6], PyArray1::from_vec(py, text).into_any())?;
    }
    Ok(out)
}
