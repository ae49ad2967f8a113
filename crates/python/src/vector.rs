//! `_native.VectorEnv`: n envs stepped in native threads with the GIL released, frames written
//! into one preallocated `(n, H, W, 3)` array, gymnasium 1.x's three autoreset modes
//! (next-step, same-step with the ended episodes' last frames and states kept, disabled with
//! masked resets) and per-env reseeding.

use std::sync::Arc;

use numpy::{PyArray1, PyArray2, PyArray4, PyArrayMethods, PyReadonlyArray1};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use rayon::prelude::*;
use vlm_eval_crafter::rules::{Action, N_ACHIEVEMENTS};
use vlm_eval_crafter::{Env as Engine, EnvConfig, TextureSet};

use crate::convert;
use crate::stats_line;
use crate::textures;
use crate::vector_info::{self, State};

/// The most worker threads a vector env may use.
const MAX_THREADS: usize = 256;

/// gymnasium 1.x's autoreset modes (`AutoresetMode`'s values name them in Python).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Autoreset {
    /// The step after an episode ends resets the env (its action ignored).
    NextStep,
    /// The step that ends an episode resets the env at once; its last frame and state are kept.
    SameStep,
    /// No autoreset: the caller resets ended envs with a mask.
    Disabled,
}

impl Autoreset {
    fn parse(value: &str) -> PyResult<Autoreset> {
        match value {
            "NextStep" => Ok(Autoreset::NextStep),
            "SameStep" => Ok(Autoreset::SameStep),
            "Disabled" => Ok(Autoreset::Disabled),
            other => Err(PyValueError::new_err(format!(
                "unknown autoreset mode {other:?}: use \"NextStep\", \"SameStep\" or \"Disabled\""
            ))),
        }
    }
}

/// An ended episode's last frame and state (same-step autoreset).
struct Final {
    frame: Vec<u8>,
    state: State,
}

/// An episode that ended on the last step, as crafter's `Recorder` counts it: its steps (the
/// reset not counted), the sum of its real rewards (float64, in step order) and its
/// achievement counts at the end.
#[derive(Clone, Copy)]
struct Finished {
    length: u32,
    reward: f64,
    achievements: [i32; N_ACHIEVEMENTS],
}

/// One sub-env and what its last step gave.
struct Slot {
    engine: Engine,
    /// The episode ended on the last step: the next step resets it (next-step autoreset), or
    /// stepping is refused until a masked reset (autoreset disabled).
    pending_reset: bool,
    /// The reward `step` returns (0.0 when the env hides rewards).
    reward: f64,
    /// The step's real reward, for `infos["reward"]` (0.0 after a reset).
    info_reward: f64,
    terminated: bool,
    truncated: bool,
    /// Same-step autoreset: the episode ended on this step and `last` holds its end.
    ended: bool,
    last: Option<Box<Final>>,
    /// Steps and real reward of the running episode (for the stats recorder).
    ep_length: u32,
    ep_reward: f64,
    /// The episode that ended on this env's last advance (cleared by the next one). A slot a
    /// masked reset leaves out keeps it, but `VectorEnv::last_finished`, cleared by every
    /// reset, is what is read, and every step advances every slot.
    finished: Option<Finished>,
}

impl Slot {
    fn new(engine: Engine) -> Slot {
        Slot {
            engine,
            pending_reset: false,
            reward: 0.0,
            info_reward: 0.0,
            terminated: false,
            truncated: false,
            ended: false,
            last: None,
            ep_length: 0,
            ep_reward: 0.0,
            finished: None,
        }
    }

    /// Reset or step this sub-env, rendering its frame straight into `out` (its slot of the
    /// shared array: no per-step copy). `None`: this env sits this call out.
    fn advance(
        &mut self,
        action: Option<Action>,
        mode: Autoreset,
        reward_on: bool,
        out: &mut [u8],
    ) {
        let Some(action) = action else { return };
        self.ended = false;
        self.finished = None;
        if self.pending_reset {
            self.engine.reset_into(out);
            self.pending_reset = false;
            self.ep_length = 0;
            self.ep_reward = 0.0;
            self.reward = 0.0;
            self.info_reward = 0.0;
            self.terminated = false;
            self.truncated = false;
            return;
        }
        let step = self.engine.step_into(action, out);
        self.info_reward = step.reward;
        self.reward = if reward_on { step.reward } else { 0.0 };
        self.terminated = step.dead;
        self.truncated = step.done && !step.dead;
        self.ep_length += 1;
        self.ep_reward += step.reward;
        if step.done {
            self.finished = Some(Finished {
                length: self.ep_length,
                reward: self.ep_reward,
                achievements: State::of(&self.engine, step.reward).achievements,
            });
        }
        if mode != Autoreset::SameStep {
            self.pending_reset = step.done;
            return;
        }
        if step.done {
            let state = State::of(&self.engine, step.reward);
            let last = self.last.get_or_insert_with(|| {
                Box::new(Final {
                    frame: vec![0; out.len()],
                    state,
                })
            });
            last.frame.copy_from_slice(out);
            last.state = state;
            self.engine.reset_into(out);
            self.info_reward = 0.0;
            self.ep_length = 0;
            self.ep_reward = 0.0;
            self.ended = true;
        }
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
    mode: Autoreset,
    /// The shared settings and textures, to make a sub-env anew when it is reseeded.
    cfg: EnvConfig,
    textures: Arc<TextureSet>,
    pool: Option<rayon::ThreadPool>,
    threads: usize,
    started: bool,
    /// Set while a step runs; still set afterwards only when that step panicked.
    busy: bool,
    /// The episodes that ended on the last step, by env index (empty after a reset).
    last_finished: Vec<(usize, Finished)>,
}

/// What `step` returns: rewards, terminated, truncated, infos, and with same-step autoreset the
/// ended envs' `(indices, last frames (k, H, W, 3), final infos)` (None when none ended).
type StepResult<'py> = (
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<bool>>,
    Bound<'py, PyArray1<bool>>,
    Bound<'py, PyDict>,
    Option<(Vec<usize>, Bound<'py, PyArray4<u8>>, Bound<'py, PyDict>)>,
);

#[pymethods]
impl VectorEnv {
    #[new]
    #[pyo3(signature = (seeds, area, view, size, reward, length, threads, textures = None, hint = None, fetch = true, autoreset = "NextStep"))]
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
        autoreset: &str,
    ) -> PyResult<VectorEnv> {
        let mode = Autoreset::parse(autoreset)?;
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
            slots.push(Slot::new(Engine::new(c, &set).map_err(convert::env_error)?));
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
            mode,
            cfg,
            textures: set,
            pool,
            threads,
            started: false,
            busy: false,
            last_finished: Vec::new(),
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

    /// Make env `index` anew with engine seed `seed` (its episode count back to 0): its next
    /// reset starts episode 1 of that seed.
    fn reseed(&mut self, index: usize, seed: i64) -> PyResult<()> {
        self.check_usable()?;
        let n = self.slots.len();
        let slot = self.slots.get_mut(index).ok_or_else(|| {
            PyValueError::new_err(format!("env index {index} is out of range for {n} envs"))
        })?;
        let mut c = self.cfg.clone();
        c.seed = seed;
        *slot = Slot::new(Engine::new(c, &self.textures).map_err(convert::env_error)?);
        Ok(())
    }

    /// Start the next episode of every env, or of the envs where `mask` is True (the others
    /// keep their state and frame); returns the infos (masked as `mask`).
    #[pyo3(signature = (mask = None))]
    fn reset<'py>(
        &mut self,
        py: Python<'py>,
        mask: Option<Vec<bool>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        self.check_usable()?;
        let n = self.slots.len();
        let mask = mask.unwrap_or_else(|| vec![true; n]);
        if mask.len() != n {
            return Err(PyValueError::new_err(format!(
                "reset mask has {} values for {n} envs: give one per env",
                mask.len()
            )));
        }
        if !self.started && !mask.iter().all(|&m| m) {
            return Err(PyRuntimeError::new_err(
                "a masked reset before the first reset(): reset every env first",
            ));
        }
        let work: Vec<Option<Action>> = mask.iter().map(|&m| m.then_some(Action::Noop)).collect();
        for (s, &m) in self.slots.iter_mut().zip(&mask) {
            if m {
                s.pending_reset = true;
            }
        }
        self.run(py, &work)?;
        self.last_finished.clear();
        self.started = true;
        let states: Vec<Option<State>> = self
            .slots
            .iter()
            .zip(&mask)
            .map(|(s, &m)| m.then(|| State::of(&s.engine, 0.0)))
            .collect();
        vector_info::infos(py, &states)
    }

    /// Step every env with `actions` (int64, length n); frames go into the buffer. Returns
    /// `(rewards float64 (n,), terminated bool (n,), truncated bool (n,), infos, ended)`, with
    /// `ended` None or (same-step autoreset) `(indices, last frames, final infos)`.
    fn step<'py>(
        &mut self,
        py: Python<'py>,
        actions: PyReadonlyArray1<'py, i64>,
    ) -> PyResult<StepResult<'py>> {
        self.check_usable()?;
        let n = self.slots.len();
        let ids = actions.as_slice()?;
        if ids.len() != n {
            return Err(PyValueError::new_err(format!(
                "got {} actions for {n} envs: pass one action per env",
                ids.len()
            )));
        }
        let work: Vec<Option<Action>> = ids
            .iter()
            .map(|&id| convert::action_id(id).map(Some))
            .collect::<PyResult<_>>()?;
        if !self.started {
            return Err(PyRuntimeError::new_err(
                "step() before reset(): call reset() first to start the episodes",
            ));
        }
        if self.mode == Autoreset::Disabled {
            let waiting: Vec<usize> = (0..n).filter(|&i| self.slots[i].pending_reset).collect();
            if !waiting.is_empty() {
                return Err(PyRuntimeError::new_err(format!(
                    "envs {waiting:?} ended their episodes and autoreset is disabled: reset them first with reset(options={{\"reset_mask\": mask}})"
                )));
            }
        }
        self.run(py, &work)?;
        self.last_finished.clear();
        for (i, s) in self.slots.iter().enumerate() {
            if let Some(f) = s.finished {
                self.last_finished.push((i, f));
            }
        }
        let rewards: Vec<f64> = self.slots.iter().map(|s| s.reward).collect();
        let terminated: Vec<bool> = self.slots.iter().map(|s| s.terminated).collect();
        let truncated: Vec<bool> = self.slots.iter().map(|s| s.truncated).collect();
        let states: Vec<Option<State>> = self
            .slots
            .iter()
            .map(|s| Some(State::of(&s.engine, s.info_reward)))
            .collect();
        let infos = vector_info::infos(py, &states)?;
        Ok((
            PyArray1::from_vec(py, rewards),
            PyArray1::from_vec(py, terminated),
            PyArray1::from_vec(py, truncated),
            infos,
            self.ended(py)?,
        ))
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

    /// The episodes that ended on the last step, in env order: `(index, length, reward,
    /// achievements)` with crafter's `Recorder` counts (length without the reset, the sum of the
    /// real rewards, the 22 counts in crafter's order); None when none ended (or after a reset).
    #[allow(clippy::type_complexity)]
    fn finished(&self) -> Option<Vec<(usize, u32, f64, [i32; N_ACHIEVEMENTS])>> {
        let out: Vec<_> = self
            .last_finished
            .iter()
            .map(|&(i, f)| (i, f.length, f.reward, f.achievements))
            .collect();
        (!out.is_empty()).then_some(out)
    }

    /// The `stats.jsonl` lines of the episodes that ended on the last step (crafter's
    /// `Recorder` line, `json.dumps`'s text exactly, UTF-8) and their count; None when none ended. The
    /// text is None where a reward sum is out of the range written here (|r| ≥ 1e14, which
    /// crafter's rewards never reach): the caller then writes the lines in Python.
    fn stats_lines<'py>(&self, py: Python<'py>) -> Option<(Option<Bound<'py, PyBytes>>, usize)> {
        if self.last_finished.is_empty() {
            return None;
        }
        let mut text = String::with_capacity(800 * self.last_finished.len());
        let exact = self.last_finished.iter().all(|(_, f)| {
            stats_line::push_line(&mut text, f.length, f.reward, &f.achievements).is_some()
        });
        Some((
            exact.then(|| PyBytes::new(py, text.as_bytes())),
            self.last_finished.len(),
        ))
    }

    /// Which envs reset on the next step (their episode ended on the last one) or, with
    /// autoreset disabled, wait for a masked reset.
    #[getter]
    fn pending_reset(&self) -> Vec<bool> {
        self.slots.iter().map(|s| s.pending_reset).collect()
    }

    /// The text observation (`"state"` or `"balrog"`) of env `index`'s current state.
    #[pyo3(signature = (index, fmt = "state"))]
    fn text(&self, index: usize, fmt: &str) -> PyResult<String> {
        let format = convert::obs_format(fmt)?;
        let slot = self.started_slot(index, "text")?;
        Ok(vlm_eval_observe::observe(&slot.engine, format))
    }

    /// The semantic map of env `index`'s current state (as the single env's `info["semantic"]`).
    fn semantic<'py>(&self, py: Python<'py>, index: usize) -> PyResult<Bound<'py, PyArray2<u8>>> {
        let slot = self.started_slot(index, "semantic")?;
        convert::semantic(py, &slot.engine)
    }

    /// Stop the worker threads; the env cannot step afterwards.
    fn close(&mut self) {
        self.pool = None;
        self.slots.clear();
        self.last_finished.clear();
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

    fn started_slot(&self, index: usize, what: &str) -> PyResult<&Slot> {
        self.check_usable()?;
        let slot = self.slots.get(index).ok_or_else(|| {
            PyValueError::new_err(format!(
                "env index {index} is out of range for {} envs",
                self.slots.len()
            ))
        })?;
        if !self.started {
            return Err(PyRuntimeError::new_err(format!(
                "{what}() before reset(): call reset() first to start the episodes"
            )));
        }
        Ok(slot)
    }

    /// The envs whose episode ended on this step (same-step autoreset): their indices, last
    /// frames `(k, H, W, 3)` and final infos (n-shaped, masked to them).
    #[allow(clippy::type_complexity)]
    fn ended<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<Option<(Vec<usize>, Bound<'py, PyArray4<u8>>, Bound<'py, PyDict>)>> {
        let idx: Vec<usize> = (0..self.slots.len())
            .filter(|&i| self.slots[i].ended)
            .collect();
        if idx.is_empty() {
            return Ok(None);
        }
        let [w, h] = self.cfg.size;
        let mut frames = Vec::with_capacity(idx.len() * self.frame_len);
        let mut states = vec![None; self.slots.len()];
        for &i in &idx {
            if let Some(last) = &self.slots[i].last {
                frames.extend_from_slice(&last.frame);
                states[i] = Some(last.state);
            }
        }
        let frames = PyArray1::from_vec(py, frames).reshape([idx.len(), h, w, 3])?;
        Ok(Some((idx, frames, vector_info::infos(py, &states)?)))
    }

    /// Advance the slots that have work (reset if pending, else step) with the GIL released.
    fn run(&mut self, py: Python<'_>, work: &[Option<Action>]) -> PyResult<()> {
        let obs = self.obs.bind(py);
        // SAFETY: the pointer stays valid (we hold the array) and only this call writes it.
        let buf = unsafe { obs.as_slice_mut() }
            .map_err(|e| PyRuntimeError::new_err(format!("the frame buffer is unusable: {e}")))?;
        let ptr = FramePtr(buf.as_mut_ptr(), buf.len());
        let frame_len = self.frame_len;
        let reward = self.reward;
        let mode = self.mode;
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
                        .zip(work.par_iter().copied())
                        .with_max_len(1)
                        .for_each(|((s, out), a)| s.advance(a, mode, reward, out))
                }),
                None => slots
                    .iter_mut()
                    .zip(buf.chunks_mut(frame_len))
                    .zip(work.iter().copied())
                    .for_each(|((s, out), a)| s.advance(a, mode, reward, out)),
            }
        });
        self.busy = false;
        Ok(())
    }
}
