//! The vector env's per-env state as gymnasium's dict-of-arrays `infos` (with the `_key` masks),
//! built from plain snapshots so that the ended episodes of a same-step autoreset keep theirs.

use numpy::{PyArray1, PyArray2, PyArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use vlm_eval_crafter::rules::{N_ACHIEVEMENTS, N_ITEMS};
use vlm_eval_crafter::world::PLAYER;
use vlm_eval_crafter::Env as Engine;

use crate::convert;

/// What `infos` reports of one env: its state after a step (or a reset) and that step's reward.
#[derive(Clone, Copy)]
pub struct State {
    /// crafter's `info["reward"]`: the step's real reward, also when the env hides rewards
    /// (0.0 after a reset).
    pub reward: f64,
    pub discount: f32,
    pub pos: [i64; 2],
    pub inventory: [i32; N_ITEMS],
    pub achievements: [i32; N_ACHIEVEMENTS],
}

impl State {
    /// The engine's current state, with `reward` the last step's.
    pub fn of(engine: &Engine, reward: f64) -> State {
        let w = engine.world();
        let p = w.player_pos();
        let mut achievements = [0; N_ACHIEVEMENTS];
        for (a, &c) in achievements.iter_mut().zip(w.player.achievements.iter()) {
            *a = c as i32;
        }
        State {
            reward,
            discount: if w.health(PLAYER) <= 0 { 0.0 } else { 1.0 },
            pos: [p[0] as i64, p[1] as i64],
            inventory: w.player.inventory,
            achievements,
        }
    }
}

/// gymnasium's `infos` for `states` (one per env; `None` where an env has nothing to report,
/// which reads as zeros with its mask False): `reward` float64 (n,), `discount` float32 (n,),
/// `player_pos` int64 (n, 2), `inventory` int32 (n, 16), `achievements` int32 (n, 22), each
/// with its `_key` bool mask (n,).
pub fn infos<'py>(py: Python<'py>, states: &[Option<State>]) -> PyResult<Bound<'py, PyDict>> {
    let n = states.len();
    let mut reward = Vec::with_capacity(n);
    let mut discount = Vec::with_capacity(n);
    let mut pos = Vec::with_capacity(n * 2);
    let mut inventory = Vec::with_capacity(n * N_ITEMS);
    let mut achievements = Vec::with_capacity(n * N_ACHIEVEMENTS);
    let mut mask = Vec::with_capacity(n);
    for s in states {
        let s = match s {
            Some(s) => {
                mask.push(true);
                *s
            }
            None => {
                mask.push(false);
                State {
                    reward: 0.0,
                    discount: 0.0,
                    pos: [0, 0],
                    inventory: [0; N_ITEMS],
                    achievements: [0; N_ACHIEVEMENTS],
                }
            }
        };
        reward.push(s.reward);
        discount.push(s.discount);
        pos.extend(s.pos);
        inventory.extend(s.inventory);
        achievements.extend(s.achievements);
    }
    let k = convert::keys(py);
    let out = PyDict::new(py);
    let masked = |key: &Py<pyo3::types::PyString>, value: Bound<'py, PyAny>| -> PyResult<()> {
        let key = key.bind(py);
        out.set_item(key, value)?;
        out.set_item(format!("_{key}"), PyArray1::from_slice(py, &mask))?;
        Ok(())
    };
    masked(&k.reward, PyArray1::from_vec(py, reward).into_any())?;
    masked(&k.discount, PyArray1::from_vec(py, discount).into_any())?;
    masked(&k.player_pos, reshape2(py, pos, n, 2)?.into_any())?;
    masked(
        &k.inventory,
        reshape2(py, inventory, n, N_ITEMS)?.into_any(),
    )?;
    masked(
        &k.achievements_key,
        reshape2(py, achievements, n, N_ACHIEVEMENTS)?.into_any(),
    )?;
    Ok(out)
}

fn reshape2<'py, T: numpy::Element>(
    py: Python<'py>,
    v: Vec<T>,
    rows: usize,
    cols: usize,
) -> PyResult<Bound<'py, PyArray2<T>>> {
    PyArray1::from_vec(py, v).reshape([rows, cols])
}
