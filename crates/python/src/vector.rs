//! `_native.VectorEnv`: n envs stepped in native threads with the GIL released, frames written
//! into one preallocated `(n, H, W, 3)` array, gymnasium 1.x's three autoreset modes
//! (next-step, same-step with the ended episodes' last frames and states kept, disabled with
//! masked resets) and per-env reseeding.
//!
//! One call at a time: a second thread's call while one runs is refused with an error naming
//! the env; `close()` from any thread stops a running call (its workers skip what is left) and
//! closes the env. Ctrl-C stops a running `step`/`reset` (vector_run.rs); the env then needs a
//! `reset()`.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

use numpy::{PyArray1, PyArray2, PyArray4, PyArrayMethods, PyReadonlyArray1};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use vlm_eval_crafter::rules::{Action, N_ACHIEVEMENTS};
use vlm_eval_crafter::{Env as Engine, EnvConfig, TextureSet};

use crate::convert;
use crate::stats_line;
use crate::textures;
use crate::vector_info::{self, Layout};
use crate::vector_run;
use crate::vector_slot::{Autoreset, Extras, Finished, Slot, State};

// Copies and states (get_state/set_state, deepcopy, pickle): a child module, for the private
// fields.
#[path = "vector_state.rs"]
pub(crate) mod state;

/// The most worker threads a vector env may use.
const MAX_THREADS: usize = 256;

thread_local! {
    /// This thread's token (its address is unique among live threads).
    static TOKEN: Cell<u8> = const { Cell::new(0) };
}

fn thread_token() -> usize {
    TOKEN.with(|t| t as *const Cell<u8> as usize)
}

/// What one call holds while it runs (behind the env's lock).
struct Inner {
    slots: Vec<Slot>,
    frame_len: usize,
    extras: Extras,
    layout: Layout,
    /// The shared settings and textures, to make a sub-env anew when it is reseeded.
    cfg: EnvConfig,
    textures: Arc<TextureSet>,
    pool: Option<rayon::ThreadPool>,
    started: bool,
    /// The last step or reset was stopped by a signal: `step` waits for a `reset`.
    interrupted: bool,
    /// The episodes that ended on the last step, by env index (empty after a reset).
    last_finished: Vec<(usize, Finished)>,
}

impl Inner {
    fn free(&mut self) {
        self.pool = None;
        self.slots.clear();
        self.last_finished.clear();
    }
}

/// n envs (wrapped by `vlmcrafter.crafter.VectorEnv`, which documents it).
#[pyclass(module = "vlmcrafter._native", name = "VectorEnv", frozen)]
pub struct VectorEnv {
    inner: Mutex<Inner>,
    /// Set by `close()` or a signal: the workers skip the slots they have not reached.
    cancel: AtomicBool,
    closed: AtomicBool,
    /// The thread whose call holds `inner` (0: none), so that a `close()` from that same
    /// thread (a signal handler run during the call) does not wait for itself.
    owner: AtomicUsize,
    obs: Py<PyArray4<u8>>,
    n: usize,
    threads: usize,
}

/// What `step` returns: rewards, terminated, truncated, infos, and with same-step autoreset the
/// ended envs' `(mask, final frames (n, H, W, 3), final infos)` (None when none ended).
type StepResult<'py> = (
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<bool>>,
    Bound<'py, PyArray1<bool>>,
    Bound<'py, PyDict>,
    Option<(
        Bound<'py, PyArray1<bool>>,
        Bound<'py, PyArray4<u8>>,
        Bound<'py, PyDict>,
    )>,
);

/// The env's lock, held by one call; it records the calling thread as the owner.
struct Held<'a> {
    guard: MutexGuard<'a, Inner>,
    owner: &'a AtomicUsize,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.owner.store(0, Ordering::SeqCst);
    }
}

impl std::ops::Deref for Held<'_> {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.guard
    }
}

impl std::ops::DerefMut for Held<'_> {
    fn deref_mut(&mut self) -> &mut Inner {
        &mut self.guard
    }
}

#[pymethods]
impl VectorEnv {
    #[new]
    #[pyo3(signature = (seeds, area, view, size, reward, length, threads, textures = None, hint = None, fetch = true, autoreset = "NextStep", obs_text = None, semantic = false))]
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
        obs_text: Option<&str>,
        semantic: bool,
    ) -> PyResult<VectorEnv> {
        let mode = Autoreset::parse(autoreset)?;
        let text = obs_text.map(convert::obs_format).transpose()?;
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
        let slots = Slot::for_seeds(&cfg, &set, seeds)?;
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
        let area = [cfg.area[0] as usize, cfg.area[1] as usize];
        Ok(VectorEnv {
            inner: Mutex::new(Inner {
                slots,
                frame_len: w * h * 3,
                extras: Extras {
                    mode,
                    reward,
                    text,
                    semantic,
                },
                layout: Layout {
                    text: text.is_some(),
                    semantic: semantic.then_some(area),
                },
                cfg,
                textures: set,
                pool,
                started: false,
                interrupted: false,
                last_finished: Vec::new(),
            }),
            cancel: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            owner: AtomicUsize::new(0),
            obs,
            n,
            threads,
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
        self.n
    }

    /// Closed (by `close()` from any thread).
    #[getter]
    fn closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Make env `index` anew with engine seed `seed` (its episode count back to 0): its next
    /// reset starts episode 1 of that seed.
    fn reseed(&self, index: usize, seed: i64) -> PyResult<()> {
        let mut inner = self.lock()?;
        let n = self.n;
        let mut c = inner.cfg.clone();
        c.seed = seed;
        let engine = Engine::new(c, &inner.textures).map_err(convert::env_error)?;
        let slot = inner.slots.get_mut(index).ok_or_else(|| {
            PyValueError::new_err(format!("env index {index} is out of range for {n} envs"))
        })?;
        *slot = Slot::new(engine);
        // Reset before its next step, also when the `reset` that reseeds it is interrupted
        // before it gets there.
        slot.pending_reset = true;
        Ok(())
    }

    /// Start the next episode of every env, or of the envs where `mask` is True (the others
    /// keep their state and frame); returns the infos (masked as `mask`).
    #[pyo3(signature = (mask = None))]
    fn reset<'py>(&self, py: Python<'py>, mask: Option<Vec<bool>>) -> PyResult<Bound<'py, PyDict>> {
        let mut inner = self.lock()?;
        let n = self.n;
        let mask = mask.unwrap_or_else(|| vec![true; n]);
        if mask.len() != n {
            return Err(PyValueError::new_err(format!(
                "reset mask has {} values for {n} envs: give one per env",
                mask.len()
            )));
        }
        if !inner.started && !mask.iter().all(|&m| m) {
            return Err(PyRuntimeError::new_err(
                "a masked reset before the first full reset() (or after an interrupted call): reset every env first",
            ));
        }
        let work: Vec<Option<Action>> = mask.iter().map(|&m| m.then_some(Action::Noop)).collect();
        for (s, &m) in inner.slots.iter_mut().zip(&mask) {
            if m {
                s.pending_reset = true;
            }
        }
        self.run(py, &mut inner, &work)?;
        inner.last_finished.clear();
        inner.started = true;
        inner.interrupted = false;
        let entries: Vec<Option<(State, _)>> = inner
            .slots
            .iter()
            .zip(&mask)
            .map(|(s, &m)| m.then(|| (State::of(&s.engine, 0.0), &s.observed)))
            .collect();
        vector_info::infos(py, &entries, inner.layout)
    }

    /// Step every env with `actions` (int64, length n); frames go into the buffer. Returns
    /// `(rewards float64 (n,), terminated bool (n,), truncated bool (n,), infos, ended)`, with
    /// `ended` None or (same-step autoreset) `(mask, final frames, final infos)`.
    fn step<'py>(
        &self,
        py: Python<'py>,
        actions: PyReadonlyArray1<'py, i64>,
    ) -> PyResult<StepResult<'py>> {
        let mut inner = self.lock()?;
        let n = self.n;
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
        if !inner.started {
            return Err(PyRuntimeError::new_err(if inner.interrupted {
                "step() after an interrupted step()/reset() (KeyboardInterrupt): call reset() to start the episodes again"
            } else {
                "step() before reset(): call reset() first to start the episodes"
            }));
        }
        if inner.extras.mode == Autoreset::Disabled {
            let waiting: Vec<usize> = (0..n).filter(|&i| inner.slots[i].pending_reset).collect();
            if !waiting.is_empty() {
                return Err(PyRuntimeError::new_err(format!(
                    "envs {waiting:?} ended their episodes and autoreset is disabled: reset them first with reset(options={{\"reset_mask\": mask}})"
                )));
            }
        }
        self.run(py, &mut inner, &work)?;
        let inner = &mut *inner;
        inner.last_finished.clear();
        for (i, s) in inner.slots.iter().enumerate() {
            if let Some(f) = s.finished {
                inner.last_finished.push((i, f));
            }
        }
        let rewards: Vec<f64> = inner.slots.iter().map(|s| s.reward).collect();
        let terminated: Vec<bool> = inner.slots.iter().map(|s| s.terminated).collect();
        let truncated: Vec<bool> = inner.slots.iter().map(|s| s.truncated).collect();
        let entries: Vec<Option<(State, _)>> = inner
            .slots
            .iter()
            .map(|s| Some((State::of(&s.engine, s.info_reward), &s.observed)))
            .collect();
        let infos = vector_info::infos(py, &entries, inner.layout)?;
        Ok((
            PyArray1::from_vec(py, rewards),
            PyArray1::from_vec(py, terminated),
            PyArray1::from_vec(py, truncated),
            infos,
            self.ended(py, inner)?,
        ))
    }

    /// Episodes started so far by each env.
    #[getter]
    fn episodes(&self) -> PyResult<Vec<i64>> {
        Ok(self
            .lock()?
            .slots
            .iter()
            .map(|s| s.engine.episode())
            .collect())
    }

    #[setter]
    fn set_episodes(&self, episodes: Vec<i64>) -> PyResult<()> {
        let mut inner = self.lock()?;
        if episodes.len() != self.n {
            return Err(PyValueError::new_err(format!(
                "got {} episode counts for {} envs",
                episodes.len(),
                self.n
            )));
        }
        for (s, e) in inner.slots.iter_mut().zip(episodes) {
            s.engine.set_episode(e);
        }
        Ok(())
    }

    /// The episodes that ended on the last step, in env order: `(index, length, reward,
    /// achievements)` with crafter's `Recorder` counts (length without the reset, the sum of the
    /// real rewards, the 22 counts in crafter's order); None when none ended (or after a reset).
    #[allow(clippy::type_complexity)]
    fn finished(&self) -> PyResult<Option<Vec<(usize, u32, f64, [i32; N_ACHIEVEMENTS])>>> {
        let out: Vec<_> = self
            .lock()?
            .last_finished
            .iter()
            .map(|&(i, f)| (i, f.length, f.reward, f.achievements))
            .collect();
        Ok((!out.is_empty()).then_some(out))
    }

    /// The `stats.jsonl` lines of the episodes that ended on the last step (crafter's
    /// `Recorder` line, `json.dumps`'s text exactly, UTF-8) and their count; None when none ended. The
    /// text is None where a reward sum is out of the range written here (|r| ≥ 1e14, which
    /// crafter's rewards never reach): the caller then writes the lines in Python.
    fn stats_lines<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<Option<(Option<Bound<'py, PyBytes>>, usize)>> {
        let inner = self.lock()?;
        if inner.last_finished.is_empty() {
            return Ok(None);
        }
        let mut text = String::with_capacity(800 * inner.last_finished.len());
        let exact = inner.last_finished.iter().all(|(_, f)| {
            stats_line::push_line(&mut text, f.length, f.reward, &f.achievements).is_some()
        });
        Ok(Some((
            exact.then(|| PyBytes::new(py, text.as_bytes())),
            inner.last_finished.len(),
        )))
    }

    /// Which envs reset on the next step (their episode ended on the last one) or, with
    /// autoreset disabled, wait for a masked reset.
    #[getter]
    fn pending_reset(&self) -> PyResult<Vec<bool>> {
        Ok(self.lock()?.slots.iter().map(|s| s.pending_reset).collect())
    }

    /// The text observation (`"state"` or `"balrog"`) of env `index`'s current state.
    #[pyo3(signature = (index, fmt = "state"))]
    fn text(&self, index: i64, fmt: &str) -> PyResult<String> {
        let format = convert::obs_format(fmt)?;
        let inner = self.lock()?;
        let slot = self.started_slot(&inner, index, "text")?;
        Ok(vlm_eval_observe::observe(&slot.engine, format))
    }

    /// The semantic map of env `index`'s current state (as the single env's `info["semantic"]`).
    fn semantic<'py>(&self, py: Python<'py>, index: i64) -> PyResult<Bound<'py, PyArray2<u8>>> {
        let inner = self.lock()?;
        let slot = self.started_slot(&inner, index, "semantic")?;
        convert::semantic(py, &slot.engine)
    }

    /// Close the env from any thread: a call running in another thread stops (its workers skip
    /// the envs they have not reached) and raises; every later call raises "closed".
    fn close(&self, py: Python<'_>) {
        self.closed.store(true, Ordering::SeqCst);
        self.cancel.store(true, Ordering::SeqCst);
        if self.owner.load(Ordering::SeqCst) == thread_token() {
            // Called from a signal handler during this thread's own call: that call frees the
            // envs when it sees `closed`.
            return;
        }
        py.detach(|| {
            let mut inner = match self.inner.lock() {
                Ok(g) => g,
                Err(poisoned) => poisoned.into_inner(),
            };
            inner.free();
        });
    }
}

impl VectorEnv {
    fn closed_error(&self) -> PyErr {
        PyRuntimeError::new_err(format!(
            "this VectorEnv (num_envs={}) is closed: make a new one to go on",
            self.n
        ))
    }

    /// Take the env for one call: a clear error when it is closed, busy in another thread, or
    /// broken by a panic.
    fn lock(&self) -> PyResult<Held<'_>> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(self.closed_error());
        }
        let guard = match self.inner.try_lock() {
            Ok(g) => g,
            Err(TryLockError::WouldBlock) => {
                return Err(PyRuntimeError::new_err(format!(
                    "this VectorEnv (num_envs={}) is busy: another thread is calling it right now. One vector env serves one thread at a time: give each thread its own env, or share it behind a lock",
                    self.n
                )))
            }
            Err(TryLockError::Poisoned(_)) => {
                return Err(PyRuntimeError::new_err(
                    "this VectorEnv panicked in an earlier call and its state is undefined: create a new one",
                ))
            }
        };
        let held = Held {
            guard,
            owner: &self.owner,
        };
        self.owner.store(thread_token(), Ordering::SeqCst);
        if self.closed.load(Ordering::SeqCst) {
            return Err(self.closed_error());
        }
        Ok(held)
    }

    fn started_slot<'a>(&self, inner: &'a Inner, index: i64, what: &str) -> PyResult<&'a Slot> {
        let n = self.n;
        let slot = usize::try_from(index)
            .ok()
            .and_then(|i| inner.slots.get(i))
            .ok_or_else(|| {
                pyo3::exceptions::PyIndexError::new_err(format!(
                    "env index {index} is out of range for {n} envs: use 0..{n}"
                ))
            })?;
        if !inner.started {
            return Err(PyRuntimeError::new_err(format!(
                "{what}() before reset(): call reset() first to start the episodes"
            )));
        }
        Ok(slot)
    }

    /// The envs whose episode ended on this step (same-step autoreset): their mask, final
    /// frames `(n, H, W, 3)` (zeros for the others, as gymnasium's `SyncVectorEnv` gives them)
    /// and final infos (masked to them).
    #[allow(clippy::type_complexity)]
    fn ended<'py>(
        &self,
        py: Python<'py>,
        inner: &Inner,
    ) -> PyResult<
        Option<(
            Bound<'py, PyArray1<bool>>,
            Bound<'py, PyArray4<u8>>,
            Bound<'py, PyDict>,
        )>,
    > {
        let mask: Vec<bool> = inner.slots.iter().map(|s| s.ended).collect();
        if !mask.iter().any(|&m| m) {
            return Ok(None);
        }
        let [w, h] = inner.cfg.size;
        let mut frames = vec![0u8; self.n * inner.frame_len];
        let mut entries = Vec::with_capacity(self.n);
        for ((s, out), &m) in inner
            .slots
            .iter()
            .zip(frames.chunks_mut(inner.frame_len))
            .zip(&mask)
        {
            match (&s.last, m) {
                (Some(last), true) => {
                    out.copy_from_slice(&last.frame);
                    entries.push(Some((last.state, &last.observed)));
                }
                _ => entries.push(None),
            }
        }
        let frames = PyArray1::from_vec(py, frames).reshape([self.n, h, w, 3])?;
        let infos = vector_info::infos(py, &entries, inner.layout)?;
        Ok(Some((PyArray1::from_vec(py, mask), frames, infos)))
    }

    /// Advance the slots that have work (reset if pending, else step) on the worker threads.
    /// A signal handler's exception (KeyboardInterrupt) stops them and is raised, leaving the
    /// env waiting for a `reset()`; a `close()` from another thread stops them too.
    fn run(&self, py: Python<'_>, inner: &mut Inner, work: &[Option<Action>]) -> PyResult<()> {
        let obs = self.obs.bind(py);
        // SAFETY: the array is alive (we hold it) and only the call holding the lock writes it.
        let buf = unsafe { obs.as_slice_mut() }
            .map_err(|e| PyRuntimeError::new_err(format!("the frame buffer is unusable: {e}")))?;
        let done = vector_run::run(
            py,
            buf,
            &mut inner.slots,
            inner.frame_len,
            work,
            inner.extras,
            inner.pool.as_ref(),
            &self.cancel,
        );
        if self.closed.load(Ordering::SeqCst) {
            inner.free();
            return Err(PyRuntimeError::new_err(format!(
                "this VectorEnv (num_envs={}) was closed (by close()) during this call",
                self.n
            )));
        }
        if done.is_err() {
            self.cancel.store(false, Ordering::SeqCst);
            inner.started = false;
            inner.interrupted = true;
            inner.last_finished.clear();
        }
        done
    }
}
