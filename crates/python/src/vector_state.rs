//! The vector env's copies and states (a child module of vector.rs, for its private fields):
//! `clone_env` (deepcopy: every slot's engine cloned, the frames copied), `snapshot`/`restore`
//! (`get_state`/`set_state` of the whole env or of one sub-env) and the pickled form of a
//! snapshot (`encode`/`decode`: each sub-env's seed, episode count and the action ids of its
//! running episode, replayed on loading, as single.rs pickles one env).

use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Arc, Mutex};

use numpy::PyArrayMethods;
use pyo3::exceptions::{PyIndexError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use vlm_eval_crafter::rules::{Action, N_ACHIEVEMENTS};
use vlm_eval_crafter::Env as Engine;

use crate::convert;
use crate::textures;
use crate::vector::{Inner, VectorEnv};
use crate::vector_slot::{Extras, Finished, Slot};

/// One sub-env as a state holds it: its slot, its current frame and the episode it ended on
/// the last step (what `finished()` reports for it).
#[derive(Clone)]
struct SlotState {
    slot: Slot,
    frame: Vec<u8>,
    finished: Option<Finished>,
}

/// A state of a whole vector env or of one sub-env (`VectorEnv.snapshot`); immutable: `restore`
/// copies it, so one state serves any number of restores.
#[pyclass(module = "vlmcrafter._native", name = "VectorSnapshot", frozen)]
pub struct Snapshot {
    slots: Vec<SlotState>,
    /// A whole env's `(started, interrupted)`; None for one sub-env's state.
    whole: Option<(bool, bool)>,
}

/// One sub-env in the pickled form: engine seed, episode count, `(episode at its reset, action
/// ids since)` or None before its first reset, pending reset, and the episode it ended on the
/// last step `(length, reward, achievements)`.
type Encoded<'py> = (
    i64,
    i64,
    Option<(i64, Bound<'py, PyBytes>)>,
    bool,
    Option<(u32, f64, [i32; N_ACHIEVEMENTS])>,
);

#[pymethods]
impl Snapshot {
    /// Sub-envs in the state (1 for one sub-env's).
    #[getter]
    fn num_envs(&self) -> usize {
        self.slots.len()
    }

    /// The state of a whole env (else of one sub-env).
    #[getter]
    fn whole(&self) -> bool {
        self.whole.is_some()
    }

    /// Each sub-env's episode count and steps taken in its episode.
    #[getter]
    fn progress(&self) -> Vec<(i64, u32)> {
        self.slots
            .iter()
            .map(|s| (s.slot.engine.episode(), s.slot.engine.step_count()))
            .collect()
    }

    /// The pickled form: `(whole, [per sub-env Encoded])` (see `VectorEnv.decode`).
    #[allow(clippy::type_complexity)]
    fn encode<'py>(&self, py: Python<'py>) -> (Option<(bool, bool)>, Vec<Encoded<'py>>) {
        let envs = self
            .slots
            .iter()
            .map(|s| {
                let engine = &s.slot.engine;
                (
                    engine.config().seed,
                    engine.episode(),
                    s.slot
                        .history
                        .as_ref()
                        .map(|(e, steps)| (*e, PyBytes::new(py, steps))),
                    s.slot.pending_reset,
                    s.finished.map(|f| (f.length, f.reward, f.achievements)),
                )
            })
            .collect();
        (self.whole, envs)
    }
}

#[pymethods]
impl VectorEnv {
    /// A copy of this env in its current state (every sub-env's world, RNG, episode, pending
    /// reset and frame; the same settings and thread count); the two go on independently.
    fn clone_env(&self, py: Python<'_>) -> PyResult<VectorEnv> {
        let inner = self.lock()?;
        let frames = self.frame_bytes(py, &inner, 0..self.n)?;
        let [w, h] = inner.cfg.size;
        let obs = numpy::PyArray1::from_vec(py, frames)
            .reshape([self.n, h, w, 3])?
            .unbind();
        Ok(VectorEnv {
            inner: Mutex::new(Inner {
                slots: inner.slots.clone(),
                frame_len: inner.frame_len,
                extras: inner.extras,
                layout: inner.layout,
                cfg: inner.cfg.clone(),
                textures: Arc::clone(&inner.textures),
                pool: pool(self.threads)?,
                started: inner.started,
                interrupted: inner.interrupted,
                last_finished: inner.last_finished.clone(),
            }),
            cancel: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            owner: AtomicUsize::new(0),
            obs,
            n: self.n,
            threads: self.threads,
        })
    }

    /// Where the textures came from: `"builtin"` or a folder of crafter's files.
    #[getter]
    fn texture_source(&self) -> PyResult<String> {
        Ok(textures::source_name(&self.lock()?.textures))
    }

    /// The state of every sub-env (index None) or of sub-env `index` (after the first reset).
    #[pyo3(signature = (index = None))]
    fn snapshot(&self, py: Python<'_>, index: Option<i64>) -> PyResult<Snapshot> {
        let inner = self.lock()?;
        let envs = match index {
            None => 0..self.n,
            Some(index) => {
                let i = self.started_index(&inner, index, "get_state")?;
                i..i + 1
            }
        };
        let frames = self.frame_bytes(py, &inner, envs.clone())?;
        let slots = envs
            .clone()
            .zip(frames.chunks(inner.frame_len))
            .map(|(i, frame)| SlotState {
                slot: inner.slots[i].clone(),
                frame: frame.to_vec(),
                finished: finished_of(&inner, i),
            })
            .collect();
        Ok(Snapshot {
            slots,
            whole: index
                .is_none()
                .then_some((inner.started, inner.interrupted)),
        })
    }

    /// Set every sub-env (index None; a whole env's state) or sub-env `index` (one sub-env's
    /// state, after the first reset) to `snapshot`. The caller checked that the state's
    /// settings are this env's; what is checked here leaves the env unchanged when it fails.
    #[pyo3(signature = (snapshot, index = None))]
    fn restore(&self, py: Python<'_>, snapshot: &Snapshot, index: Option<i64>) -> PyResult<()> {
        let mut inner = self.lock()?;
        let fl = inner.frame_len;
        if snapshot.slots.iter().any(|s| s.frame.len() != fl) {
            return Err(PyValueError::new_err(
                "set_state: the state's frames are of another size: use a state of an env made with the same size",
            ));
        }
        let obs = self.obs.bind(py);
        // SAFETY: the array is alive (we hold it) and only the call holding the lock writes it.
        let buf = unsafe { obs.as_slice_mut() }
            .map_err(|e| PyRuntimeError::new_err(format!("the frame buffer is unusable: {e}")))?;
        match (index, snapshot.whole) {
            (None, Some((started, interrupted))) => {
                if snapshot.slots.len() != self.n {
                    return Err(PyValueError::new_err(format!(
                        "set_state: the state has {} envs, this env {}: use a state of an env with num_envs={}",
                        snapshot.slots.len(),
                        self.n,
                        self.n
                    )));
                }
                inner.last_finished.clear();
                for (i, s) in snapshot.slots.iter().enumerate() {
                    inner.slots[i] = s.slot.clone();
                    buf[i * fl..(i + 1) * fl].copy_from_slice(&s.frame);
                    if let Some(f) = s.finished {
                        inner.last_finished.push((i, f));
                    }
                }
                inner.started = started;
                inner.interrupted = interrupted;
            }
            (Some(index), None) => {
                let i = self.started_index(&inner, index, "set_state")?;
                let s = &snapshot.slots[0];
                inner.slots[i] = s.slot.clone();
                buf[i * fl..(i + 1) * fl].copy_from_slice(&s.frame);
                inner.last_finished.retain(|&(j, _)| j != i);
                if let Some(f) = s.finished {
                    inner.last_finished.push((i, f));
                    inner.last_finished.sort_by_key(|&(j, _)| j);
                }
            }
            (None, None) => {
                return Err(PyValueError::new_err(
                    "set_state: this is the state of one sub-env (get_state(index)): give the index to set, set_state(state, index)",
                ))
            }
            (Some(_), Some(_)) => {
                return Err(PyValueError::new_err(
                    "set_state: this is the state of a whole vector env (get_state()): set it without an index, set_state(state)",
                ))
            }
        }
        Ok(())
    }

    /// A snapshot from its pickled form (`VectorSnapshot.encode` of an env with this env's
    /// settings): each sub-env made anew from its seed, reset to its episode and stepped
    /// through its actions, as it went.
    #[allow(clippy::type_complexity)]
    fn decode<'py>(
        &self,
        whole: Option<(bool, bool)>,
        envs: Vec<Encoded<'py>>,
    ) -> PyResult<Snapshot> {
        let bad = || {
            PyValueError::new_err(
                "the pickled vector env state is damaged (not what pickling wrote): pickle the env again",
            )
        };
        let inner = self.lock()?;
        if envs.is_empty() || (whole.is_none() && envs.len() != 1) {
            return Err(bad());
        }
        // Text and semantic maps are remade by every advance: the replay skips them.
        let extras = Extras {
            text: None,
            semantic: false,
            ..inner.extras
        };
        let mut slots = Vec::with_capacity(envs.len());
        for (seed, episode, history, pending, finished) in envs {
            let mut cfg = inner.cfg.clone();
            cfg.seed = seed;
            let mut slot =
                Slot::new(Engine::new(cfg, &inner.textures).map_err(convert::env_error)?);
            let mut frame = vec![0u8; inner.frame_len];
            if let Some((reset_episode, steps)) = history {
                slot.engine.set_episode(reset_episode - 1);
                slot.pending_reset = true;
                slot.advance(Some(Action::Noop), extras, &mut frame);
                for &id in steps.as_bytes() {
                    let action = Action::from_id(i64::from(id)).ok_or_else(bad)?;
                    if slot.pending_reset || slot.ended {
                        return Err(bad()); // steps past the episode's end
                    }
                    slot.advance(Some(action), extras, &mut frame);
                }
            }
            slot.engine.set_episode(episode);
            slot.pending_reset = pending;
            slot.ended = false;
            let finished = finished.map(|(length, reward, achievements)| Finished {
                length,
                reward,
                achievements,
            });
            slots.push(SlotState {
                slot,
                frame,
                finished,
            });
        }
        Ok(Snapshot { slots, whole })
    }
}

/// The episode sub-env `i` ended on the last step, if any.
fn finished_of(inner: &Inner, i: usize) -> Option<Finished> {
    inner
        .last_finished
        .iter()
        .find(|&&(j, _)| j == i)
        .map(|&(_, f)| f)
}

/// Worker threads for a copy, as `VectorEnv::new` starts them.
fn pool(threads: usize) -> PyResult<Option<rayon::ThreadPool>> {
    if threads <= 1 {
        return Ok(None);
    }
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("vlm-eval-env-{i}"))
        .build()
        .map(Some)
        .map_err(|e| PyRuntimeError::new_err(format!("cannot start {threads} threads: {e}")))
}

impl VectorEnv {
    /// Frames `envs` of the frame buffer, copied (the caller holds the lock).
    fn frame_bytes(
        &self,
        py: Python<'_>,
        inner: &Inner,
        envs: std::ops::Range<usize>,
    ) -> PyResult<Vec<u8>> {
        let obs = self.obs.bind(py);
        // SAFETY: the array is alive (we hold it) and only the call holding the lock writes it.
        let frames = unsafe { obs.as_slice() }
            .map_err(|e| PyRuntimeError::new_err(format!("the frame buffer is unusable: {e}")))?;
        Ok(frames[envs.start * inner.frame_len..envs.end * inner.frame_len].to_vec())
    }

    /// `index` as a sub-env index, once the env has started its episodes.
    fn started_index(&self, inner: &Inner, index: i64, what: &str) -> PyResult<usize> {
        let n = self.n;
        let i = usize::try_from(index)
            .ok()
            .filter(|&i| i < n)
            .ok_or_else(|| {
                PyIndexError::new_err(format!(
                    "{what}: env index {index} is out of range for {n} envs: use 0..{n}"
                ))
            })?;
        if !inner.started {
            return Err(PyRuntimeError::new_err(format!(
                "{what}(index) before reset() (or after an interrupted call): call reset() first to start the episodes"
            )));
        }
        Ok(i)
    }
}
