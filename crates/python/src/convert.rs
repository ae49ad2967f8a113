//! What the Python envs share: argument checks, the per-step `info` dict, numpy frames.

use numpy::{PyArray1, PyArray2, PyArray3, PyArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyInt, PyString};
use vlm_eval_crafter::rules::{Action, ACHIEVEMENT_NAMES, ITEM_NAMES};
use vlm_eval_crafter::{Env, EnvConfig, EnvError};
use vlm_eval_observe::ObsFormat;

/// Interned dict keys, made once per interpreter.
pub struct Keys {
    pub items: Vec<Py<PyString>>,
    pub achievements: Vec<Py<PyString>>,
    pub inventory: Py<PyString>,
    pub achievements_key: Py<PyString>,
    pub discount: Py<PyString>,
    pub semantic: Py<PyString>,
    pub player_pos: Py<PyString>,
    pub reward: Py<PyString>,
}

pub fn keys(py: Python<'_>) -> &Keys {
    static KEYS: PyOnceLock<Keys> = PyOnceLock::new();
    KEYS.get_or_init(py, || {
        let s = |t: &str| PyString::intern(py, t).unbind();
        Keys {
            items: ITEM_NAMES.iter().map(|n| s(n)).collect(),
            achievements: ACHIEVEMENT_NAMES.iter().map(|n| s(n)).collect(),
            inventory: s("inventory"),
            achievements_key: s("achievements"),
            discount: s("discount"),
            semantic: s("semantic"),
            player_pos: s("player_pos"),
            reward: s("reward"),
        }
    })
}

/// crafter's `info` after a step: inventory and achievements as dicts of ints in crafter's key
/// order, `discount` (0.0 when dead), `semantic` (uint8, area-shaped, [x][y]), `player_pos`
/// (int64 (2,)), and the step's `reward` (also when the env hides rewards).
pub fn info_dict<'py>(py: Python<'py>, env: &Env, reward: f64) -> PyResult<Bound<'py, PyDict>> {
    let k = keys(py);
    let world = env.world();
    let player = &world.player;
    let inventory = PyDict::new(py);
    for (key, &v) in k.items.iter().zip(player.inventory.iter()) {
        inventory.set_item(key.bind(py), v)?;
    }
    let achievements = PyDict::new(py);
    for (key, &v) in k.achievements.iter().zip(player.achievements.iter()) {
        achievements.set_item(key.bind(py), v)?;
    }
    let info = PyDict::new(py);
    info.set_item(k.inventory.bind(py), inventory)?;
    info.set_item(k.achievements_key.bind(py), achievements)?;
    let dead = world.health(vlm_eval_crafter::world::PLAYER) <= 0;
    info.set_item(k.discount.bind(py), if dead { 0.0 } else { 1.0 })?;
    info.set_item(k.semantic.bind(py), semantic(py, env)?)?;
    let pos = world.player_pos();
    let pos = PyArray1::from_slice(py, &[pos[0] as i64, pos[1] as i64]);
    info.set_item(k.player_pos.bind(py), pos)?;
    info.set_item(k.reward.bind(py), reward)?;
    Ok(info)
}

/// The semantic map as crafter's `SemanticView` gives it: uint8 `(area[0], area[1])`, [x][y].
pub fn semantic<'py>(py: Python<'py>, env: &Env) -> PyResult<Bound<'py, PyArray2<u8>>> {
    let area = env.config().area;
    let flat = PyArray1::from_vec(py, env.world().semantic());
    flat.reshape([area[0] as usize, area[1] as usize])
}

/// A new `(height, width, 3)` uint8 array holding `frame` (`size` is width, height).
pub fn frame_array<'py>(
    py: Python<'py>,
    frame: &[u8],
    size: [usize; 2],
) -> PyResult<Bound<'py, PyArray3<u8>>> {
    // SAFETY: the array is fully written before it is returned to Python.
    let arr = unsafe { PyArray3::<u8>::new(py, [size[1], size[0], 3], false) };
    unsafe { arr.as_slice_mut() }
        .map_err(|e| PyValueError::new_err(e.to_string()))?
        .copy_from_slice(frame);
    Ok(arr)
}

/// An action id from any Python int-like (int, numpy integer); floats, strings and the like are
/// a TypeError, ids outside 0..=16 a ValueError.
pub fn action(obj: &Bound<'_, PyAny>) -> PyResult<Action> {
    let id: i64 = match obj.extract::<i64>() {
        Ok(id) => id,
        Err(_) if obj.is_instance_of::<PyInt>() => i64::MAX,
        Err(_) => {
            return Err(PyTypeError::new_err(format!(
                "action must be an int 0..16 (an id into crafter's action names), not {}",
                obj.get_type().name()?
            )))
        }
    };
    action_id(id)
}

/// An action from its id, or a ValueError naming the valid range.
pub fn action_id(id: i64) -> PyResult<Action> {
    Action::from_id(id).ok_or_else(|| {
        PyValueError::new_err(format!(
            "action {} is out of range: crafter's actions are ids 0..16",
            if id == i64::MAX {
                "(a very large int)".to_string()
            } else {
                id.to_string()
            }
        ))
    })
}

/// A text observation format from its name.
pub fn obs_format(name: &str) -> PyResult<ObsFormat> {
    match name {
        "state" => Ok(ObsFormat::State),
        "balrog" => Ok(ObsFormat::Balrog),
        other => Err(PyValueError::new_err(format!(
            "unknown text format {other:?}: use \"state\" or \"balrog\""
        ))),
    }
}

/// The engine's options from the Python arguments (already normalised to pairs by the wrapper).
pub fn config(
    area: (i64, i64),
    view: (i64, i64),
    size: (i64, i64),
    length: Option<u32>,
    seed: i64,
) -> PyResult<EnvConfig> {
    let pos = |what: &str, (a, b): (i64, i64)| -> PyResult<[i64; 2]> {
        if a <= 0 || b <= 0 {
            return Err(PyValueError::new_err(format!(
                "{what}=({a}, {b}): both sides must be positive"
            )));
        }
        Ok([a, b])
    };
    let area = pos("area", area)?;
    let view = pos("view", view)?;
    let size = pos("size", size)?;
    let cfg = EnvConfig {
        area: [
            area[0].min(i32::MAX as i64) as i32,
            area[1].min(i32::MAX as i64) as i32,
        ],
        view: [view[0] as usize, view[1] as usize],
        size: [size[0] as usize, size[1] as usize],
        length,
        seed,
        render: true,
    };
    cfg.validate().map_err(env_error)?;
    Ok(cfg)
}

/// An engine error as a ValueError naming the Python argument.
pub fn env_error(e: EnvError) -> PyErr {
    let EnvError::Invalid { what, value, why } = e;
    let what = what.trim_start_matches("--");
    PyValueError::new_err(format!("invalid {what} {value}: {why}"))
}
