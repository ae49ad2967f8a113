//! `_native.Env`: one Crafter env with crafter 1.8.3's `reset`/`step`/`render`.

use std::collections::HashMap;
use std::sync::Arc;

use numpy::PyArray3;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use vlm_eval_crafter::render::Renderer;
use vlm_eval_crafter::{Env as Engine, TextureSet};

use crate::convert;
use crate::textures;

/// A history entry: a step with this action id (0..16).
const OP_STEP_MAX: u8 = 16;
/// A history entry: `render()` at the env's own size.
const OP_RENDER: u8 = 0xFE;
/// A history entry: `render(size)`, followed by the width and height (u16 little-endian each).
const OP_RENDER_SIZED: u8 = 0xFF;

/// One env (wrapped by `vlmcrafter.crafter.Env`, which documents it).
#[pyclass(module = "vlmcrafter._native", name = "Env")]
pub struct Env {
    engine: Engine,
    textures: Arc<TextureSet>,
    reward: bool,
    started: bool,
    /// Renderers for `render(size)` at sizes other than the env's.
    renderers: HashMap<[usize; 2], (Renderer, Vec<u8>)>,
    /// Every call since the last `reset` that changed the engine (steps, and renders: a render
    /// at night draws the game RNG), encoded as the `OP_*` bytes: replayed after the same
    /// `reset`, it rebuilds the state exactly (the pickled form of a stepped env).
    history: Vec<u8>,
}

impl Env {
    fn render_sized(&mut self, size: [usize; 2]) -> &[u8] {
        let view = self.engine.config().view;
        let textures = &self.textures;
        let (renderer, buf) = self.renderers.entry(size).or_insert_with(|| {
            (
                Renderer::new(textures, size, view),
                vec![0; size[0] * size[1] * 3],
            )
        });
        self.engine.render_with(renderer, buf);
        buf
    }
}

#[pymethods]
impl Env {
    #[new]
    #[pyo3(signature = (area, view, size, reward, length, seed, textures = None, hint = None, fetch = true))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        area: (i64, i64),
        view: (i64, i64),
        size: (i64, i64),
        reward: bool,
        length: Option<u32>,
        seed: i64,
        textures: Option<&str>,
        hint: Option<&str>,
        fetch: bool,
    ) -> PyResult<Env> {
        let cfg = convert::config(area, view, size, length, seed)?;
        let set = textures::load(textures, hint, fetch)?;
        let engine = Engine::new(cfg, &set).map_err(convert::env_error)?;
        Ok(Env {
            engine,
            textures: set,
            reward,
            started: false,
            renderers: HashMap::new(),
            history: Vec::new(),
        })
    }

    /// Start the next episode; returns its first frame.
    fn reset<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyArray3<u8>>> {
        let size = self.engine.config().size;
        self.history.clear();
        let frame = self.engine.reset();
        self.started = true;
        convert::frame_array(py, frame, size)
    }

    /// One step: `(obs, reward, done, info)` as crafter returns them.
    #[allow(clippy::type_complexity)]
    fn step<'py>(
        &mut self,
        py: Python<'py>,
        action: &Bound<'py, PyAny>,
    ) -> PyResult<(Bound<'py, PyArray3<u8>>, f64, bool, Bound<'py, PyDict>)> {
        let action = convert::action(action)?;
        if !self.started {
            return Err(PyRuntimeError::new_err(
                "step() before reset(): call reset() first to start an episode",
            ));
        }
        let out = self.engine.step(action);
        self.history.push(action as u8);
        let obs = convert::frame_array(py, self.engine.frame(), self.engine.config().size)?;
        let info = convert::info_dict(py, &self.engine, out.reward)?;
        let reward = if self.reward { out.reward } else { 0.0 };
        Ok((obs, reward, out.done, info))
    }

    /// Re-render the current state (drawing night noise as crafter's `render` does), at the
    /// env's size or at `size` (width, height).
    #[pyo3(signature = (size = None))]
    fn render<'py>(
        &mut self,
        py: Python<'py>,
        size: Option<(i64, i64)>,
    ) -> PyResult<Bound<'py, PyArray3<u8>>> {
        if !self.started {
            return Err(PyRuntimeError::new_err(
                "render() before reset(): call reset() first to start an episode",
            ));
        }
        let own = self.engine.config().size;
        let size = match size {
            None => own,
            Some((w, h)) => {
                let view = self.engine.config().view;
                if w < view[0] as i64 || h < view[1] as i64 || w > 4096 || h > 4096 {
                    return Err(PyValueError::new_err(format!(
                        "render size ({w}, {h}): each side must be between the view ({}, {}) and 4096 pixels",
                        view[0], view[1]
                    )));
                }
                [w as usize, h as usize]
            }
        };
        if size == own {
            self.history.push(OP_RENDER);
            let frame = self.engine.render();
            return convert::frame_array(py, frame, size);
        }
        self.history.push(OP_RENDER_SIZED);
        for side in size {
            self.history.extend_from_slice(&(side as u16).to_le_bytes());
        }
        let buf = self.render_sized(size);
        convert::frame_array(py, buf, size)
    }

    /// A copy of this env in its current state (the same world, RNG and episode; the copy and
    /// the original go on independently).
    fn clone_env(&self) -> Env {
        Env {
            engine: self.engine.clone(),
            textures: Arc::clone(&self.textures),
            reward: self.reward,
            started: self.started,
            renderers: HashMap::new(),
            history: self.history.clone(),
        }
    }

    /// What changed the engine since the last `reset` (bytes; see `replay`), or None before
    /// the first `reset`.
    fn history<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        self.started.then(|| PyBytes::new(py, &self.history))
    }

    /// Start episode `episode` (the count `reset` reaches) and replay `history` (from
    /// `history()` of an env with the same arguments): the state that env had, exactly.
    fn replay(&mut self, episode: i64, history: &[u8]) -> PyResult<()> {
        let bad = || {
            PyValueError::new_err(
                "replay: the history is damaged (not the bytes history() returned); pickle the env again",
            )
        };
        self.engine.set_episode(episode - 1);
        self.history.clear();
        self.engine.reset();
        self.started = true;
        let mut i = 0;
        while i < history.len() {
            match history[i] {
                op @ 0..=OP_STEP_MAX => {
                    let action = convert::action_id(i64::from(op))?;
                    self.engine.step(action);
                    i += 1;
                }
                OP_RENDER => {
                    self.engine.render();
                    i += 1;
                }
                OP_RENDER_SIZED => {
                    let side = |at: usize| -> PyResult<usize> {
                        let b = history.get(at..at + 2).ok_or_else(bad)?;
                        Ok(u16::from_le_bytes([b[0], b[1]]) as usize)
                    };
                    let size = [side(i + 1)?, side(i + 3)?];
                    let view = self.engine.config().view;
                    if size[0] < view[0] || size[1] < view[1] || size[0] > 4096 || size[1] > 4096 {
                        return Err(bad());
                    }
                    self.render_sized(size);
                    i += 5;
                }
                _ => return Err(bad()),
            }
        }
        self.history = history.to_vec();
        Ok(())
    }

    /// The text observation (`"state"` or `"balrog"`) of the current state.
    #[pyo3(signature = (fmt = "state"))]
    fn text(&self, fmt: &str) -> PyResult<String> {
        let format = convert::obs_format(fmt)?;
        if !self.started {
            return Err(PyRuntimeError::new_err(
                "text() before reset(): call reset() first to start an episode",
            ));
        }
        Ok(vlm_eval_observe::observe(&self.engine, format))
    }

    /// Episodes started so far (crafter's `_episode`); setting it makes the next `reset` start
    /// episode `value + 1`.
    #[getter]
    fn episode(&self) -> i64 {
        self.engine.episode()
    }

    #[setter]
    fn set_episode(&mut self, value: i64) {
        self.engine.set_episode(value);
    }

    /// Steps taken in the current episode.
    #[getter]
    fn step_count(&self) -> u32 {
        self.engine.step_count()
    }

    /// This episode's world seed (`hash((seed, episode)) % (2**31 - 1)`).
    #[getter]
    fn world_seed(&self) -> u32 {
        self.engine.world_seed()
    }

    /// Where the textures came from: `"builtin"` or a folder of crafter's files.
    #[getter]
    fn texture_source(&self) -> String {
        textures::source_name(&self.textures)
    }

    /// The semantic map of the current state (as in `info["semantic"]`).
    fn semantic<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, numpy::PyArray2<u8>>> {
        convert::semantic(py, &self.engine)
    }
}
