//! `_native.VectorEnv`: n envs stepped in native threads with the GIL released, frames written
//! into one preallocated `(n, H, W, 3)` array, gymnasium 1.x `next_step` autoreset.

use numpy::{PyArray1, PyArray2, PyArray4, PyArrayMethods, PyReadonlyArray1};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use rayon::prelude::*;
use vlm_eval_crafter::rules::{Action, N_ACHIEVEMENTS, N_ITEMS};
use vlm_eval_crafter::world::PLAYER;
use vlm_eval_crafter::Env as Engine;

use crate::convert;
use crate::textures;

/// The most worker threads a vector env may use.
const MAX_THREADS: usize = 256;

/// One sub-env and what its last step gave.
struct Slot {
    engine: Engine,
    /// The episode ended on the last step: the next step resets it.
    pending_reset: bool,
    reward: f32,
    terminated: bool,
    truncated: bool,
}

impl Slot {
    /// Reset or step this sub-env, rendering its frame straight into `out` (its slot of the
    /// shared array: no per-step copy).
    fn advance(&mut self, action: Action, reward_on: bool, out: &mut [u8]) {
        if self.pending_reset {
            self.engine.reset_into(out);
            self.pending_reset = false;
            self.reward = 0.0;
            self.terminated = false;
            self.truncated = false;
            return;
        }
        let step = self.engine.step_into(action, out);
        self.reward = if reward_on { step.reward as f32 } else { 0.0 };
        self.terminated = step.dead;
        self.truncated = step.done && !step.dead;
        self.pending_reset = step.done;
    }
}

/// A raw pointer to the frame buffer, sent to the worker threads while the GIL is released.
struct FramePtr(*mut u8, usize);
// SAFETY: the buffer is owned by a numpy array this env keeps alive, and each sub-env writes
// only its own disjoint frame of it while `step` holds the env exclusively.
unsafe impl Send for FramePtr {}

/// n envs (wrapped by `vlmcrafter.crafter.VectorEnv`, which documents it).
#[pyclass(module = "vlmcrafter._native", name = "VectorEnv")]
pub struct VectorEnv {
    slots: Vec<Slot>,
    obs: Py<PyArray4<u8>>,
    frame_len: usize,
    reward: bool,
    pool: Option<rayon::ThreadPool>,
    threads: usize,
    started: bool,
    /// Set while a step runs; still set afterwards only when that step panicked.
    busy: bool,
}

#[pymethods]
impl VectorEnv {
    #[new]
    #[pyo3(signature = (seeds, area, view, size, reward, length, threads, textures = None, hint = None, fetch = true))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        seeds: Vec<i64>,
        area: (i64, i64),
        view: (i64, i64),
        size: (i64, i64),
        reward: bool,
        length: Option<u32>,
        threads: Option<i64>,
        textures: Option<&str>,
        hint: Option<&str>,
        fetch: bool,
    ) -> PyResult<VectorEnv> {
        let n = seeds.len();
        if n == 0 {
            return Err(PyValueError::new_err(
                "n=0: a VectorEnv needs at least one env",
            ));
        }
        let threads = match threads {
            None => std::thread::available_parallelism()
                .map(|p| p.get())
                .unwrap_or(1)
                .clamp(1, MAX_THREADS)
                .min(n),
            Some(t) if t < 1 || t as usize > MAX_THREADS || t as usize > n => {
                return Err(PyValueError::new_err(format!(
                    "threads={t}: must be between 1 and min(n, {MAX_THREADS}) = {} (or None for the available cores)",
                    n.min(MAX_THREADS)
                )))
            }
            Some(t) => t as usize,
        };
        let cfg = convert::config(area, view, size, length, 0)?;
        let set = textures::load(textures, hint, fetch)?;
        let mut slots = Vec::with_capacity(n);
        for seed in seeds {
            let mut c = cfg.clone();
            c.seed = seed;
            slots.push(Slot {
                engine: Engine::new(c, &set).map_err(convert::env_error)?,
                pending_reset: false,
                reward: 0.0,
                terminated: false,
                truncated: false,
            });
        }
        let [w, h] = cfg.size;
        let obs = PyArray4::<u8>::zeros(py, [n, h, w, 3], false).unbind();
        let pool = if threads > 1 {
            Some(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .thread_name(|i| format!("vlm-eval-env-{i}"))
                    .build()
                    .map_err(|e| {
                        PyRuntimeError::new_err(format!("cannot start {threads} threads: {e}"))
                    })?,
            )
        } else {
            None
        };
        Ok(VectorEnv {
            slots,
            obs,
            frame_len: w * h * 3,
            reward,
            pool,
            threads,
            started: false,
            busy: false,
        })
    }

    /// The frame buffer `(n, H, W, 3)`: the same array object for the env's whole life.
    #[getter]
    fn obs<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray4<u8>> {
        self.obs.bind(py).clone()
    }

    /// Worker threads stepping the envs.
    #[getter]
    fn threads(&self) -> usize {
        self.threads
    }

    /// Number of envs.
    #[getter]
    fn num_envs(&self) -> usize {
        self.slots.len()
    }

    /// Reset every env (each starts its next episode); returns the frame buffer.
    fn reset<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyArray4<u8>>> {
        self.check_usable()?;
        let noop = vec![Action::Noop; self.slots.len()];
        for s in &mut self.slots {
            s.pending_reset = true;
        }
        self.run(py, &noop)?;
        self.started = true;
        Ok(self.obs.bind(py).clone())
    }

    /// Step every env with `actions` (int64, length n); frames go into the buffer. Returns
    /// `(rewards float32 (n,), terminated bool (n,), truncated bool (n,), infos)`.
    #[allow(clippy::type_complexity)]
    fn step<'py>(
        &mut self,
        py: Python<'py>,
        actions: PyReadonlyArray1<'py, i64>,
    ) -> PyResult<(
        Bound<'py, PyArray1<f32>>,
        Bound<'py, PyArray1<bool>>,
        Bound<'py, PyArray1<bool>>,
        Bound<'py, PyDict>,
    )> {
        self.check_usable()?;
        let n = self.slots.len();
        let ids = actions.as_slice()?;
        if ids.len() != n {
            return Err(PyValueError::new_err(format!(
                "got {} actions for {n} envs: pass one action per env",
                ids.len()
            )));
        }
        let actions: Vec<Action> = ids
            .iter()
            .map(|&id| convert::action_id(id))
            .collect::<PyResult<_>>()?;
        if !self.started {
            return Err(PyRuntimeError::new_err(
                "step() before reset(): call reset() first to start the episodes",
            ));
        }
        self.run(py, &actions)?;
        let rewards: Vec<f32> = self.slots.iter().map(|s| s.reward).collect();
        let terminated: Vec<bool> = self.slots.iter().map(|s| s.terminated).collect();
        let truncated: Vec<bool> = self.slots.iter().map(|s| s.truncated).collect();
        Ok((
            PyArray1::from_vec(py, rewards),
            PyArray1::from_vec(py, terminated),
            PyArray1::from_vec(py, truncated),
            self.infos(py)?,
        ))
    }

    /// Per-env state as arrays: `discount` float32 (n,), `player_pos` int64 (n, 2),
    /// `inventory` int32 (n, 16), `achievements` int32 (n, 22).
    fn infos<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let n = self.slots.len();
        let mut discount = Vec::with_capacity(n);
        let mut pos = Vec::with_capacity(n * 2);
        let mut inventory = Vec::with_capacity(n * N_ITEMS);
        let mut achievements = Vec::with_capacity(n * N_ACHIEVEMENTS);
        for s in &self.slots {
            let w = s.engine.world();
            discount.push(if w.health(PLAYER) <= 0 { 0.0f32 } else { 1.0 });
            let p = w.player_pos();
            pos.extend([p[0] as i64, p[1] as i64]);
            inventory.extend(w.player.inventory.iter().copied());
            achievements.extend(w.player.achievements.iter().map(|&c| c as i32));
        }
        let k = convert::keys(py);
        let infos = PyDict::new(py);
        infos.set_item(k.discount.bind(py), PyArray1::from_vec(py, discount))?;
        infos.set_item(k.player_pos.bind(py), reshape2(py, pos, n, 2)?)?;
        infos.set_item(k.inventory.bind(py), reshape2(py, inventory, n, N_ITEMS)?)?;
        infos.set_item(
            k.achievements_key.bind(py),
            reshape2(py, achievements, n, N_ACHIEVEMENTS)?,
        )?;
        Ok(infos)
    }

    /// Episodes started so far by each env.
    #[getter]
    fn episodes(&self) -> Vec<i64> {
        self.slots.iter().map(|s| s.engine.episode()).collect()
    }

    #[setter]
    fn set_episodes(&mut self, episodes: Vec<i64>) -> PyResult<()> {
        if episodes.len() != self.slots.len() {
            return Err(PyValueError::new_err(format!(
                "got {} episode counts for {} envs",
                episodes.len(),
                self.slots.len()
            )));
        }
        for (s, e) in self.slots.iter_mut().zip(episodes) {
            s.engine.set_episode(e);
        }
        Ok(())
    }

    /// Which envs reset on the next step (their episode ended on the last one).
    #[getter]
    fn pending_reset(&self) -> Vec<bool> {
        self.slots.iter().map(|s| s.pending_reset).collect()
    }

    /// The text observation (`"state"` or `"balrog"`) of env `index`'s current state.
    #[pyo3(signature = (index, fmt = "state"))]
    fn text(&self, index: usize, fmt: &str) -> PyResult<String> {
        let format = convert::obs_format(fmt)?;
        let slot = self.slots.get(index).ok_or_else(|| {
            PyValueError::new_err(format!(
                "env index {index} is out of range for {} envs",
                self.slots.len()
            ))
        })?;
        if !self.started {
            return Err(PyRuntimeError::new_err(
                "text() before reset(): call reset() first to start the episodes",
            ));
        }
        Ok(vlm_eval_observe::observe(&slot.engine, format))
    }

    /// Stop the worker threads; the env cannot step afterwards.
    fn close(&mut self) {
        self.pool = None;
        self.slots.clear();
    }
}

impl VectorEnv {
    fn check_usable(&self) -> PyResult<()> {
        if self.busy {
            return Err(PyRuntimeError::new_err(
                "this VectorEnv panicked in an earlier step and its state is undefined: create a new one",
            ));
        }
        if self.slots.is_empty() {
            return Err(PyRuntimeError::new_err("this VectorEnv is closed"));
        }
        Ok(())
    }

    /// Advance every slot (reset if pending, else step) with the GIL released.
    fn run(&mut self, py: Python<'_>, actions: &[Action]) -> PyResult<()> {
        let obs = self.obs.bind(py);
        // SAFETY: the pointer stays valid (we hold the array) and only this call writes it.
        let buf = unsafe { obs.as_slice_mut() }
            .map_err(|e| PyRuntimeError::new_err(format!("the frame buffer is unusable: {e}")))?;
        let ptr = FramePtr(buf.as_mut_ptr(), buf.len());
        let frame_len = self.frame_len;
        let reward = self.reward;
        let slots = &mut self.slots;
        let pool = self.pool.as_ref();
        self.busy = true;
        py.detach(move || {
            let ptr = ptr;
            // SAFETY: see `FramePtr`; the GIL is released but nobody else writes the buffer.
            let buf = unsafe { std::slice::from_raw_parts_mut(ptr.0, ptr.1) };
            match pool {
                Some(pool) => pool.install(|| {
                    slots
                        .par_iter_mut()
                        .zip(buf.par_chunks_mut(frame_len))
                        .zip(actions.par_iter().copied())
                        .with_max_len(1)
                        .for_each(|((s, out), a)| s.advance(a, reward, out))
                }),
                None => slots
                    .iter_mut()
                    .zip(buf.chunks_mut(frame_len))
                    .zip(actions.iter().copied())
                    .for_each(|((s, out), a)| s.advance(a, reward, out)),
            }
        });
        self.busy = false;
        Ok(())
    }
}

fn reshape2<'py, T: numpy::Element>(
    py: Python<'py>,
    v: Vec<T>,
    rows: usize,
    cols: usize,
) -> PyResult<Bound<'py, PyArray2<T>>> {
    PyArray1::from_vec(py, v).reshape([rows, cols])
}
