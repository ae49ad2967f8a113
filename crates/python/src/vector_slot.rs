//! One sub-env of the native vector env: its engine, what its last advance gave, and the
//! ended episode a same-step autoreset keeps.

use pyo3::exceptions::PyValueError;
use pyo3::PyResult;
use vlm_eval_crafter::rules::{Action, N_ACHIEVEMENTS, N_ITEMS};
use vlm_eval_crafter::world::PLAYER;
use vlm_eval_crafter::{Env as Engine, EnvConfig, TextureSet};
use vlm_eval_observe::ObsFormat;

use crate::convert;

/// gymnasium 1.x's autoreset modes (`AutoresetMode`'s values name them in Python).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Autoreset {
    /// The step after an episode ends resets the env (its action ignored).
    NextStep,
    /// The step that ends an episode resets the env at once; its last frame and state are kept.
    SameStep,
    /// No autoreset: the caller resets ended envs with a mask.
    Disabled,
}

impl Autoreset {
    pub fn parse(value: &str) -> PyResult<Autoreset> {
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

/// What every slot computes besides its frame: the settings shared by all slots of an env.
#[derive(Clone, Copy)]
pub struct Extras {
    pub mode: Autoreset,
    /// `step` returns the real reward (else 0.0).
    pub reward: bool,
    /// The text observation of each state, for `infos["text"]`.
    pub text: Option<ObsFormat>,
    /// The semantic map of each state, for `infos["semantic"]`.
    pub semantic: bool,
}

/// What `infos` reports of one env: its state after a step (or a reset) and that step's reward.
#[derive(Clone, Copy)]
pub struct State {
    /// crafter's `info["reward"]`: the step's real reward, also when the env hides rewards
    /// (0.0 after a reset).
    pub reward: f64,
    pub discount: f64,
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

    pub const ZERO: State = State {
        reward: 0.0,
        discount: 0.0,
        pos: [0, 0],
        inventory: [0; N_ITEMS],
        achievements: [0; N_ACHIEVEMENTS],
    };
}

/// What the infos report of one env beyond `State`: its text and semantic map (empty when
/// the env computes none).
#[derive(Clone, Default)]
pub struct Observed {
    pub text: String,
    pub semantic: Vec<u8>,
}

impl Observed {
    fn fill(&mut self, engine: &Engine, extras: Extras) {
        if let Some(format) = extras.text {
            self.text = vlm_eval_observe::observe(engine, format);
        }
        if extras.semantic {
            self.semantic = engine.world().semantic();
        }
    }
}

/// An ended episode's last frame and state (same-step autoreset).
#[derive(Clone)]
pub struct Final {
    pub frame: Vec<u8>,
    pub state: State,
    pub observed: Observed,
}

/// An episode that ended on the last step, as crafter's `Recorder` counts it: its steps (the
/// reset not counted), the sum of its real rewards (float64, in step order) and its
/// achievement counts at the end.
#[derive(Clone, Copy)]
pub struct Finished {
    pub length: u32,
    pub reward: f64,
    pub achievements: [i32; N_ACHIEVEMENTS],
}

/// One sub-env and what its last step gave (cloned whole by the env's copies and states).
#[derive(Clone)]
pub struct Slot {
    pub engine: Engine,
    /// The episode ended on the last step: the next step resets it (next-step autoreset), or
    /// stepping is refused until a masked reset (autoreset disabled).
    pub pending_reset: bool,
    /// The reward `step` returns (0.0 when the env hides rewards).
    pub reward: f64,
    /// The step's real reward, for `infos["reward"]` (0.0 after a reset).
    pub info_reward: f64,
    pub terminated: bool,
    pub truncated: bool,
    /// Same-step autoreset: the episode ended on this step and `last` holds its end.
    pub ended: bool,
    pub last: Option<Box<Final>>,
    /// Text and semantic map of the current state (when the env reports them).
    pub observed: Observed,
    /// Steps and real reward of the running episode (for the stats recorder).
    ep_length: u32,
    ep_reward: f64,
    /// The episode that ended on this env's last advance (cleared by the next one). A slot a
    /// masked reset leaves out keeps it, but `VectorEnv::last_finished`, cleared by every
    /// reset, is what is read, and every step advances every slot.
    pub finished: Option<Finished>,
    /// The running episode's number (the engine's count at its reset) and its steps' action
    /// ids, single.rs's history encoding: replayed after the same reset, they rebuild this slot
    /// exactly (the pickled form, vector_state.rs). None before the slot's first reset.
    pub history: Option<(i64, Vec<u8>)>,
}

impl Slot {
    /// One slot per seed, each a fresh engine of `cfg` with that seed (the vector env's and the
    /// async pool's sub-envs).
    pub fn for_seeds(cfg: &EnvConfig, set: &TextureSet, seeds: Vec<i64>) -> PyResult<Vec<Slot>> {
        seeds
            .into_iter()
            .map(|seed| {
                let mut c = cfg.clone();
                c.seed = seed;
                Engine::new(c, set)
                    .map(Slot::new)
                    .map_err(convert::env_error)
            })
            .collect()
    }

    pub fn new(engine: Engine) -> Slot {
        Slot {
            engine,
            pending_reset: false,
            reward: 0.0,
            info_reward: 0.0,
            terminated: false,
            truncated: false,
            ended: false,
            last: None,
            observed: Observed::default(),
            ep_length: 0,
            ep_reward: 0.0,
            finished: None,
            history: None,
        }
    }

    /// Reset or step this sub-env, rendering its frame straight into `out` (its slot of the
    /// shared array: no per-step copy). `None`: this env sits this call out.
    pub fn advance(&mut self, action: Option<Action>, extras: Extras, out: &mut [u8]) {
        let Some(action) = action else { return };
        self.ended = false;
        self.finished = None;
        if self.pending_reset {
            self.engine.reset_into(out);
            self.restart_history();
            self.pending_reset = false;
            self.ep_length = 0;
            self.ep_reward = 0.0;
            self.reward = 0.0;
            self.info_reward = 0.0;
            self.terminated = false;
            self.truncated = false;
            self.observed.fill(&self.engine, extras);
            return;
        }
        let step = self.engine.step_into(action, out);
        if let Some((_, steps)) = &mut self.history {
            steps.push(action as u8);
        }
        self.info_reward = step.reward;
        self.reward = if extras.reward { step.reward } else { 0.0 };
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
        if extras.mode != Autoreset::SameStep || !step.done {
            self.pending_reset = step.done && extras.mode != Autoreset::SameStep;
            self.observed.fill(&self.engine, extras);
            return;
        }
        let state = State::of(&self.engine, step.reward);
        let last = self.last.get_or_insert_with(|| {
            Box::new(Final {
                frame: vec![0; out.len()],
                state,
                observed: Observed::default(),
            })
        });
        last.frame.copy_from_slice(out);
        last.state = state;
        last.observed.fill(&self.engine, extras);
        self.engine.reset_into(out);
        self.restart_history();
        self.observed.fill(&self.engine, extras);
        self.info_reward = 0.0;
        self.ep_length = 0;
        self.ep_reward = 0.0;
        self.ended = true;
    }

    /// A reset just started a new episode: its history starts empty (the buffer reused).
    fn restart_history(&mut self) {
        let episode = self.engine.episode();
        match &mut self.history {
            Some((e, steps)) => {
                *e = episode;
                steps.clear();
            }
            None => self.history = Some((episode, Vec::new())),
        }
    }
}
