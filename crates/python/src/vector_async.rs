//! `_native.AsyncVectorEnv`: EnvPool's asynchronous API over n Crafter engines (wrapped by
//! `vlmcrafter.envpool`, which documents it). `send` queues actions for some envs and returns at
//! once; worker threads step them in the background, each env into its own frame; `recv` waits
//! (GIL released, Python's signal handlers run every 20 ms so Ctrl-C raises KeyboardInterrupt)
//! for the first `batch_size` envs whose step finished and returns them batched, in completion
//! order, with `info["env_id"]`. An env whose episode ended is reset by its next step
//! (EnvPool's autoreset: the action is ignored, reward 0), exactly as the vector env's NextStep.
//!
//! The API follows EnvPool's Python interface
//! (https://envpool.readthedocs.io/en/latest/content/python_interface.html, "Extended API",
//! "Batch Size", "Auto Reset"): `send(action, env_id)`, `recv()`, `async_reset()`.
//!
//! Python calls take `ctl` for their whole run (a second thread's call is refused naming the
//! env); the workers touch only the queues and the cells of the envs in flight, so `close()`
//! (any thread, a signal handler too) never waits for a call: it stops the workers after their
//! current step and a waiting `recv` raises.

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, TryLockError};
use std::thread::JoinHandle;
use std::time::Duration;

use numpy::{PyArray1, PyArray4, PyArrayMethods, PyReadonlyArray1};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use vlm_eval_crafter::rules::Action;

use crate::convert;
use crate::textures;
use crate::vector_info::{self, Layout};
use crate::vector_slot::{Autoreset, Extras, Slot, State};

/// How often a waiting `recv` runs Python's signal handlers.
const POLL: Duration = Duration::from_millis(20);

/// The most worker threads a pool may use.
const MAX_THREADS: usize = 256;

/// One sub-env and its own frame (its worker writes it; `recv` copies it out).
struct Cell {
    slot: Slot,
    frame: Vec<u8>,
}

/// The actions queued for the workers and the envs whose step finished, in completion order.
#[derive(Default)]
struct Queues {
    jobs: VecDeque<(usize, Action)>,
    done: VecDeque<usize>,
}

/// What the workers share with the Python calls.
struct Shared {
    cells: Vec<Mutex<Cell>>,
    queues: Mutex<Queues>,
    /// Jobs queued, or shutdown.
    work: Condvar,
    /// An env finished its step.
    finished: Condvar,
    shutdown: AtomicBool,
    /// A step panicked: the env's state is undefined.
    panicked: AtomicBool,
    extras: Extras,
}

/// A lock that a panic elsewhere does not make unusable (the `panicked` flag reports it).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// One worker: take a queued action, advance that env (reset if pending, else step), report it.
fn worker(shared: &Shared) {
    loop {
        let (index, action) = {
            let mut q = lock(&shared.queues);
            loop {
                if shared.shutdown.load(Ordering::SeqCst) {
                    return;
                }
                if let Some(job) = q.jobs.pop_front() {
                    break job;
                }
                q = shared.work.wait(q).unwrap_or_else(|p| p.into_inner());
            }
        };
        let stepped = catch_unwind(AssertUnwindSafe(|| {
            let mut cell = lock(&shared.cells[index]);
            let cell = &mut *cell;
            cell.slot
                .advance(Some(action), shared.extras, &mut cell.frame);
        }));
        if stepped.is_err() {
            shared.panicked.store(true, Ordering::SeqCst);
        }
        lock(&shared.queues).done.push_back(index);
        shared.finished.notify_all();
    }
}

/// Which envs the Python side has handed to the workers and not received back yet.
struct Control {
    in_flight: Vec<bool>,
    count: usize,
    /// The env has been reset at least once (by `async_reset` or `reset`).
    ready: Vec<bool>,
}

/// What `recv` returns: frames `(B, H, W, 3)`, rewards, terminated, truncated, infos.
type Batch<'py> = (
    Bound<'py, PyArray4<u8>>,
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<bool>>,
    Bound<'py, PyArray1<bool>>,
    Bound<'py, PyDict>,
);

/// n envs stepped asynchronously (wrapped by `vlmcrafter.envpool`, which documents it).
#[pyclass(module = "vlmcrafter._native", name = "AsyncVectorEnv", frozen)]
pub struct AsyncVectorEnv {
    shared: Arc<Shared>,
    ctl: Mutex<Control>,
    workers: Mutex<Vec<JoinHandle<()>>>,
    closed: AtomicBool,
    n: usize,
    batch_size: usize,
    threads: usize,
    /// Frame width and height.
    size: [usize; 2],
    layout: Layout,
}

impl Drop for AsyncVectorEnv {
    fn drop(&mut self) {
        self.stop();
    }
}

#[pymethods]
impl AsyncVectorEnv {
    #[new]
    #[pyo3(signature = (seeds, area, view, size, reward, length, batch_size, threads, textures = None, hint = None, fetch = true, obs_text = None, semantic = false))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        seeds: Vec<i64>,
        area: (i64, i64),
        view: (i64, i64),
        size: (i64, i64),
        reward: bool,
        length: Option<u32>,
        batch_size: i64,
        threads: Option<i64>,
        textures: Option<&str>,
        hint: Option<&str>,
        fetch: bool,
        obs_text: Option<&str>,
        semantic: bool,
    ) -> PyResult<AsyncVectorEnv> {
        let text = obs_text.map(convert::obs_format).transpose()?;
        let n = seeds.len();
        if n == 0 {
            return Err(PyValueError::new_err(
                "num_envs=0: a pool needs at least one env",
            ));
        }
        if batch_size < 1 || batch_size as usize > n {
            return Err(PyValueError::new_err(format!(
                "batch_size={batch_size}: must be between 1 and num_envs={n} (recv() returns that many envs)"
            )));
        }
        let batch_size = batch_size as usize;
        let limit = n.min(MAX_THREADS);
        let threads = match threads {
            None => std::thread::available_parallelism()
                .map(|p| p.get())
                .unwrap_or(1)
                .min(batch_size)
                .clamp(1, limit),
            Some(t) if t < 1 || t as usize > limit => {
                return Err(PyValueError::new_err(format!(
                    "num_threads={t}: must be between 1 and min(num_envs, {MAX_THREADS}) = {limit} (or None for min(batch_size, the available cores))"
                )))
            }
            Some(t) => t as usize,
        };
        let cfg = convert::config(area, view, size, length, 0)?;
        let set = textures::load(textures, hint, fetch)?;
        let [w, h] = cfg.size;
        let cells = Slot::for_seeds(&cfg, &set, seeds)?
            .into_iter()
            .map(|slot| {
                Mutex::new(Cell {
                    slot,
                    frame: vec![0; w * h * 3],
                })
            })
            .collect();
        let shared = Arc::new(Shared {
            cells,
            queues: Mutex::new(Queues::default()),
            work: Condvar::new(),
            finished: Condvar::new(),
            shutdown: AtomicBool::new(false),
            panicked: AtomicBool::new(false),
            extras: Extras {
                mode: Autoreset::NextStep,
                reward,
                text,
                semantic,
            },
        });
        let env = AsyncVectorEnv {
            shared,
            ctl: Mutex::new(Control {
                in_flight: vec![false; n],
                count: 0,
                ready: vec![false; n],
            }),
            workers: Mutex::new(Vec::with_capacity(threads)),
            closed: AtomicBool::new(false),
            n,
            batch_size,
            threads,
            size: [w, h],
            layout: Layout {
                text: text.is_some(),
                semantic: semantic.then_some([cfg.area[0] as usize, cfg.area[1] as usize]),
            },
        };
        for i in 0..threads {
            let shared = Arc::clone(&env.shared);
            let handle = std::thread::Builder::new()
                .name(format!("vlm-eval-pool-{i}"))
                .spawn(move || worker(&shared))
                .map_err(|e| {
                    // `env` drops here, which stops the workers already started.
                    PyRuntimeError::new_err(format!("cannot start {threads} threads: {e}"))
                })?;
            lock(&env.workers).push(handle);
        }
        Ok(env)
    }

    /// Number of envs.
    #[getter]
    fn num_envs(&self) -> usize {
        self.n
    }

    /// How many envs `recv()` returns.
    #[getter]
    fn batch_size(&self) -> usize {
        self.batch_size
    }

    /// Worker threads stepping the envs.
    #[getter]
    fn threads(&self) -> usize {
        self.threads
    }

    /// Closed (by `close()` from any thread).
    #[getter]
    fn closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// The envs sent (or reset) whose results `recv()` has not returned yet, in id order.
    fn in_flight(&self) -> PyResult<Vec<usize>> {
        let ctl = self.control("in_flight")?;
        Ok((0..self.n).filter(|&i| ctl.in_flight[i]).collect())
    }

    /// Queue a reset of the envs `env_ids` (every env when None); `recv()` returns their first
    /// frames. Refused while any env is in flight.
    #[pyo3(signature = (env_ids = None))]
    fn reset_send(&self, env_ids: Option<Vec<i64>>) -> PyResult<()> {
        let what = if env_ids.is_none() {
            "async_reset()"
        } else {
            "reset()"
        };
        let mut ctl = self.control(what)?;
        if ctl.count > 0 {
            let busy: Vec<usize> = (0..self.n).filter(|&i| ctl.in_flight[i]).collect();
            return Err(PyRuntimeError::new_err(format!(
                "{what}: envs {busy:?} have actions in flight: recv() their results first (a reset needs every env back)"
            )));
        }
        let ids = match env_ids {
            None => (0..self.n).collect(),
            Some(ids) => self.check_ids(&ctl, &ids, what, false)?,
        };
        for &i in &ids {
            lock(&self.shared.cells[i]).slot.pending_reset = true;
            ctl.ready[i] = true;
        }
        self.queue(&mut ctl, ids.into_iter().map(|i| (i, Action::Noop)));
        Ok(())
    }

    /// Queue `actions[k]` for env `env_ids[k]` and return at once (the workers step them).
    fn send<'py>(
        &self,
        actions: PyReadonlyArray1<'py, i64>,
        env_ids: PyReadonlyArray1<'py, i64>,
    ) -> PyResult<()> {
        let mut ctl = self.control("send()")?;
        let actions = actions.as_slice()?;
        let ids = env_ids.as_slice()?;
        if actions.len() != ids.len() {
            return Err(PyValueError::new_err(format!(
                "send(): got {} actions for {} env_ids: pass one action per env_id",
                actions.len(),
                ids.len()
            )));
        }
        let ids = self.check_ids(&ctl, ids, "send()", true)?;
        let actions: Vec<Action> = actions
            .iter()
            .map(|&a| convert::action_id(a))
            .collect::<PyResult<_>>()?;
        self.queue(&mut ctl, ids.into_iter().zip(actions));
        Ok(())
    }

    /// Wait (GIL released, signals answered) for `count` envs (default `batch_size`) to finish
    /// and return them: `(frames (B, H, W, 3), rewards, terminated, truncated, infos)` in
    /// completion order, or in env id order with `sort`. The arrays are new on every call.
    #[pyo3(signature = (count = None, sort = false))]
    fn recv<'py>(&self, py: Python<'py>, count: Option<usize>, sort: bool) -> PyResult<Batch<'py>> {
        let mut ctl = self.control("recv()")?;
        let want = count.unwrap_or(self.batch_size);
        if ctl.count == 0 {
            return Err(PyRuntimeError::new_err(
                "recv(): no env has an action in flight: call async_reset() first, then send() actions for the env_ids each recv() returns",
            ));
        }
        if ctl.count < want {
            return Err(PyRuntimeError::new_err(format!(
                "recv(): only {} envs have actions in flight, fewer than the {want} it returns (batch_size): it would wait for ever; send() actions for the envs of the last recv() (info[\"env_id\"]) first",
                ctl.count
            )));
        }
        let mut ids = py.detach(|| self.wait(want))?;
        for &i in &ids {
            ctl.in_flight[i] = false;
        }
        ctl.count -= ids.len();
        if sort {
            ids.sort_unstable();
        }
        // Still holding `ctl`: no send() can queue these envs again before they are read.
        self.batch(py, &ids)
    }

    /// Close the pool from any thread: the workers stop after their current step, a `recv`
    /// waiting in another thread raises, and every later call raises "closed".
    fn close(&self, py: Python<'_>) {
        self.closed.store(true, Ordering::SeqCst);
        py.detach(|| self.stop());
    }
}

impl AsyncVectorEnv {
    fn closed_error(&self) -> PyErr {
        PyRuntimeError::new_err(format!(
            "this pool (num_envs={}) is closed: make a new one to go on",
            self.n
        ))
    }

    /// Take the pool for one call: a clear error when it is closed or another thread is in it.
    fn control(&self, what: &str) -> PyResult<MutexGuard<'_, Control>> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(self.closed_error());
        }
        match self.ctl.try_lock() {
            Ok(g) => Ok(g),
            Err(TryLockError::Poisoned(p)) => Ok(p.into_inner()),
            Err(TryLockError::WouldBlock) => Err(PyRuntimeError::new_err(format!(
                "{what}: this pool (num_envs={}) is busy: another thread is calling it right now. One pool serves one thread at a time: share it behind a lock",
                self.n
            ))),
        }
    }

    /// `ids` as env indices: each in range, once, not in flight, and (`started`) reset before.
    fn check_ids(
        &self,
        ctl: &Control,
        ids: &[i64],
        what: &str,
        started: bool,
    ) -> PyResult<Vec<usize>> {
        let n = self.n;
        let mut seen = vec![false; n];
        let mut out = Vec::with_capacity(ids.len());
        for &id in ids {
            let i = usize::try_from(id).ok().filter(|&i| i < n).ok_or_else(|| {
                PyValueError::new_err(format!(
                    "{what}: env_id {id} is out of range for num_envs={n}: use ids 0..{} (recv() returns them in info[\"env_id\"])",
                    n - 1
                ))
            })?;
            if seen[i] {
                return Err(PyValueError::new_err(format!(
                    "{what}: env_id {i} appears more than once: give each env at most one action per call"
                )));
            }
            seen[i] = true;
            if ctl.in_flight[i] {
                return Err(PyValueError::new_err(format!(
                    "{what}: env_id {i} already has an action in flight (sent, not yet returned by recv()): send an env's next action after recv() returned it"
                )));
            }
            if started && !ctl.ready[i] {
                return Err(PyRuntimeError::new_err(format!(
                    "{what}: env_id {i} was never reset: call async_reset() (or reset()) first to start the episodes"
                )));
            }
            out.push(i);
        }
        Ok(out)
    }

    /// Mark the jobs' envs in flight and hand the jobs to the workers.
    fn queue(&self, ctl: &mut Control, jobs: impl Iterator<Item = (usize, Action)>) {
        let mut q = lock(&self.shared.queues);
        for (i, a) in jobs {
            ctl.in_flight[i] = true;
            ctl.count += 1;
            q.jobs.push_back((i, a));
        }
        drop(q);
        self.shared.work.notify_all();
    }

    /// Wait (without the GIL) until `want` envs are done and take them, in completion order.
    /// Raises a signal handler's exception (KeyboardInterrupt), or when the pool is closed or
    /// a step panicked; what is in flight stays so, for a later `recv`.
    fn wait(&self, want: usize) -> PyResult<Vec<usize>> {
        loop {
            {
                let mut q = lock(&self.shared.queues);
                if q.done.len() < want {
                    q = self
                        .shared
                        .finished
                        .wait_timeout(q, POLL)
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                }
                if self.shared.panicked.load(Ordering::SeqCst) {
                    return Err(PyRuntimeError::new_err(
                        "a step of this pool panicked and its state is undefined: make a new pool",
                    ));
                }
                if q.done.len() >= want {
                    return Ok(q.done.drain(..want).collect());
                }
            }
            // The queues are free here: a signal handler may call close(), which stops the
            // workers.
            if self.closed.load(Ordering::SeqCst) {
                return Err(PyRuntimeError::new_err(format!(
                    "this pool (num_envs={}) was closed (by close()) during recv()",
                    self.n
                )));
            }
            Python::attach(|py| py.check_signals())?;
        }
    }

    /// The envs `ids` (done, not in flight) as one batch.
    fn batch<'py>(&self, py: Python<'py>, ids: &[usize]) -> PyResult<Batch<'py>> {
        let cells: Vec<MutexGuard<'_, Cell>> =
            ids.iter().map(|&i| lock(&self.shared.cells[i])).collect();
        let [w, h] = self.size;
        let mut frames = Vec::with_capacity(ids.len() * w * h * 3);
        for c in &cells {
            frames.extend_from_slice(&c.frame);
        }
        let obs = PyArray1::from_vec(py, frames).reshape([ids.len(), h, w, 3])?;
        let rewards: Vec<f64> = cells.iter().map(|c| c.slot.reward).collect();
        let terminated: Vec<bool> = cells.iter().map(|c| c.slot.terminated).collect();
        let truncated: Vec<bool> = cells.iter().map(|c| c.slot.truncated).collect();
        let entries: Vec<Option<(State, _)>> = cells
            .iter()
            .map(|c| {
                Some((
                    State::of(&c.slot.engine, c.slot.info_reward),
                    &c.slot.observed,
                ))
            })
            .collect();
        let infos = vector_info::infos(py, &entries, self.layout)?;
        let env_id: Vec<i32> = ids.iter().map(|&i| i as i32).collect();
        infos.set_item("env_id", PyArray1::from_vec(py, env_id))?;
        let elapsed: Vec<i32> = cells
            .iter()
            .map(|c| c.slot.engine.step_count() as i32)
            .collect();
        infos.set_item("elapsed_step", PyArray1::from_vec(py, elapsed))?;
        Ok((
            obs,
            PyArray1::from_vec(py, rewards),
            PyArray1::from_vec(py, terminated),
            PyArray1::from_vec(py, truncated),
            infos,
        ))
    }

    /// Stop the workers after their current step and wait for them (idempotent).
    fn stop(&self) {
        self.shared.shutdown.store(true, Ordering::SeqCst);
        // Taking the queues' lock orders the flag before any worker's next wait.
        drop(lock(&self.shared.queues));
        self.shared.work.notify_all();
        let handles = std::mem::take(&mut *lock(&self.workers));
        for handle in handles {
            let _ = handle.join();
        }
    }
}
