//! One served episode: an [`Env`] plus the evaluator's observation and parsing options, stepped
//! exactly as `eval::episode` steps it (parse → cap → noop when nothing usable → step each
//! action, stopping on done), with a preset's protocol when one was named (BALROG's reset
//! Noop, double render, reply rule, observation texts and feedback). No game logic lives here.

use std::sync::Arc;

use base64::Engine as _;
use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

use crate::agent::balrog::{balrog_observation, BalrogObs, BalrogTexts};
use crate::agent::dialog::PlayOptions;
use crate::agent::observe::encode_png;
use crate::agent::observe::{observe, ObsFormat};
use crate::agent::parse::{judge_reply, Judged, ParserMode, Protocol, Reply};
use crate::agent::preset::{Feedback, Layout};
use crate::agent::prompt::INVALID_NOTE;
use crate::crafter::rules::{item, N_ITEMS};
use crate::crafter::{Action, Env, EnvConfig, TextureSet, ACHIEVEMENT_NAMES, ITEM_NAMES};

/// Options fixed when a session is created.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SessionOptions {
    /// Env seed (episode 1 of this seed, as in the evaluator).
    pub seed: i64,
    /// Frame size in pixels (square).
    pub image_size: usize,
    /// Text observation format.
    pub obs_format: ObsFormat,
    /// Episode length in env steps (0: unlimited).
    pub length: u32,
    /// How `text` inputs are parsed.
    pub protocol: Protocol,
    /// Actions taken from one `text` input at most (1 under the text protocol).
    pub max_actions: usize,
    /// The preset named at creation (`vlm-eval` when none).
    pub preset: String,
    /// How `text` inputs are judged.
    pub parser: ParserMode,
    /// What the next observation carries after a `text` input with no usable action.
    pub feedback: Feedback,
    /// One noop is played after reset (BALROG's wrapper).
    pub reset_noop: bool,
    /// Every frame is rendered twice (BALROG's wrapper).
    pub render_twice: bool,
}

impl SessionOptions {
    /// The protocol options these settings make, with BALROG's texts when the server has them.
    pub fn play(&self, balrog: Option<Arc<BalrogTexts>>) -> PlayOptions {
        PlayOptions {
            layout: Layout::VlmEval,
            parser: self.parser,
            feedback: self.feedback,
            reset_noop: self.reset_noop,
            render_twice: self.render_twice,
            balrog,
        }
    }
}

/// Which frames a response carries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Frames {
    /// The frame after the last executed step (`frame_png_b64`).
    #[default]
    Last,
    /// Also one frame per executed step (`frames_png_b64`).
    All,
    /// No frame.
    None,
}

/// What to play in one step request.
#[derive(Clone, Debug, PartialEq)]
pub enum Input {
    /// A model's raw output, parsed as the evaluator parses it.
    Text(String),
    /// Actions given directly.
    Actions(Vec<Action>),
}

/// Why a step was refused.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum StepError {
    /// The episode already ended.
    #[error("the episode is over ({0} at step {1}); DELETE this session and create a new one")]
    Over(&'static str, u32),
}

/// Player vitals (0..=9 each).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Vitals {
    /// Health.
    pub health: i32,
    /// Food.
    pub food: i32,
    /// Drink.
    pub drink: i32,
    /// Energy.
    pub energy: i32,
}

/// The session's state as sent after a reset or a step.
#[derive(Clone, Debug, Serialize)]
pub struct StateView {
    /// Env steps taken this episode.
    pub step: u32,
    /// Health, food, drink, energy.
    pub vitals: Vitals,
    /// Items other than the vitals, in crafter's order.
    pub inventory: Inventory,
    /// Achievements unlocked so far this episode (each once), in crafter's order.
    pub achievements: Vec<&'static str>,
    /// Number of unlocked achievements.
    pub score: usize,
    /// `score / 22`.
    pub progression: f64,
    /// Episode over.
    pub done: bool,
    /// `"death"`, `"length"`, or null while running.
    pub termination: Option<&'static str>,
    /// Text observation in the session's format (what the evaluator sends the model).
    pub observation: String,
    /// BALROG's two texts (`balrog` format only), the view carrying BALROG's feedback after a
    /// `text` input with no usable action, as BALROG's evaluator hands it to the agent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub balrog: Option<BalrogObs>,
    /// PNG of the current frame (absent with `frames: "none"`), sent as `frame_png_b64` by
    /// [`json_with_frame`].
    #[serde(skip)]
    pub frame_png: Option<Vec<u8>>,
}

/// A player's items other than the vitals, written as a JSON object (name → count) in
/// crafter's order, with no map or key strings built per response.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Inventory(pub [i32; N_ITEMS]);

impl Serialize for Inventory {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(N_ITEMS - 4))?;
        for (name, count) in ITEM_NAMES.iter().zip(&self.0).skip(4) {
            map.serialize_entry(name, count)?;
        }
        map.end()
    }
}

/// `value` (a JSON object) with `"frame_png_b64": "<base64 of png>"` as its last field when
/// there is a frame. The base64 goes straight into the body: it needs no escaping, so it is
/// neither built as a string of its own nor scanned by the serializer.
pub fn json_with_frame<T: Serialize>(value: &T, png: Option<&[u8]>) -> serde_json::Result<Vec<u8>> {
    let b64_len = png.map_or(0, |p| p.len().div_ceil(3) * 4);
    let mut out = Vec::with_capacity(1024 + b64_len);
    serde_json::to_writer(&mut out, value)?;
    let Some(png) = png else { return Ok(out) };
    if out.last() != Some(&b'}') {
        return Err(serde::ser::Error::custom(
            "a response body must be a JSON object",
        ));
    }
    out.pop();
    if out.len() > 1 {
        out.push(b',');
    }
    out.extend_from_slice(b"\"frame_png_b64\":\"");
    let start = out.len();
    out.resize(start + b64_len, 0);
    let written = base64::engine::general_purpose::STANDARD
        .encode_slice(png, &mut out[start..])
        .map_err(serde::ser::Error::custom)?;
    out.truncate(start + written);
    out.extend_from_slice(b"\"}");
    Ok(out)
}

/// What one step request did.
#[derive(Clone, Debug, Serialize)]
pub struct StepReport {
    /// Actions executed, in order (fewer than given when the episode ended early).
    pub actions: Vec<&'static str>,
    /// Reward of each executed env step.
    pub rewards: Vec<f64>,
    /// Sum of `rewards`.
    pub reward: f64,
    /// Achievements unlocked for the first time by this request.
    pub unlocked: Vec<&'static str>,
    /// The text had no usable action, so one `noop` was played (as in the evaluator).
    pub invalid: bool,
    /// The note or feedback the evaluator would put before the next observation (set when
    /// `invalid`, unless the protocol gives none).
    pub note: Option<String>,
    /// The parser's result for `text` inputs (actions, source, unknown, truncated, reasoning,
    /// outcome).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parsed: Option<Judged>,
    /// The state after the step.
    #[serde(flatten)]
    pub state: StateView,
    /// One base64 PNG per executed step (only with `frames: "all"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frames_png_b64: Option<Vec<String>>,
}

/// One episode being served.
pub struct Session {
    env: Env,
    opts: SessionOptions,
    play: PlayOptions,
    termination: Option<&'static str>,
    invalid_before: bool,
}

fn b64(png: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(png)
}

impl Session {
    /// Build and reset an env for `opts` (episode 1 of the seed, as the evaluator plays it).
    pub fn new(opts: SessionOptions, textures: &TextureSet) -> Result<Session, String> {
        Session::with_balrog(opts, textures, None)
    }

    /// [`Session::new`] with BALROG's texts (its feedback sentence), for preset sessions.
    pub fn with_balrog(
        opts: SessionOptions,
        textures: &TextureSet,
        balrog: Option<Arc<BalrogTexts>>,
    ) -> Result<Session, String> {
        if opts.feedback == Feedback::Balrog && balrog.is_none() {
            return Err("this session gives BALROG's feedback, which needs a BALROG checkout: start serve-env with --balrog-src DIR (or BALROG_SRC)".into());
        }
        let cfg = EnvConfig {
            seed: opts.seed,
            size: [opts.image_size, opts.image_size],
            length: Some(opts.length),
            ..EnvConfig::default()
        };
        let mut env = Env::new(cfg, textures).map_err(|e| e.to_string())?;
        let play = opts.play(balrog);
        play.reset(&mut env);
        Ok(Session {
            env,
            opts,
            play,
            termination: None,
            invalid_before: false,
        })
    }

    /// The note or feedback after a reply with no usable action.
    fn note(&self) -> Option<String> {
        match (self.opts.feedback, &self.play.balrog) {
            (Feedback::VlmEval, _) => Some(INVALID_NOTE.to_string()),
            (Feedback::Balrog, Some(t)) => Some(t.feedback("Noop")),
            _ => None,
        }
    }

    /// The options it was created with.
    pub fn options(&self) -> &SessionOptions {
        &self.opts
    }

    /// This episode's world seed.
    pub fn world_seed(&self) -> u32 {
        self.env.world_seed()
    }

    /// The env (read-only).
    pub fn env(&self) -> &Env {
        &self.env
    }

    /// The current state, with the current frame unless `frames` is `None`.
    pub fn state(&self, frames: Frames) -> StateView {
        let p = &self.env.world().player;
        let inv = &p.inventory;
        let achievements: Vec<&'static str> = ACHIEVEMENT_NAMES
            .iter()
            .zip(self.env.unlocked())
            .filter(|(_, &u)| u)
            .map(|(n, _)| *n)
            .collect();
        let score = achievements.len();
        let balrog = (self.opts.obs_format == ObsFormat::Balrog).then(|| {
            let mut b = balrog_observation(&self.env);
            if self.invalid_before && self.opts.feedback == Feedback::Balrog {
                if let Some(n) = self.note() {
                    b.long_term_context = format!("{n}{}", b.long_term_context);
                }
            }
            b
        });
        StateView {
            step: self.env.step_count(),
            vitals: Vitals {
                health: inv[item::HEALTH],
                food: inv[item::FOOD],
                drink: inv[item::DRINK],
                energy: inv[item::ENERGY],
            },
            inventory: Inventory(*inv),
            achievements,
            score,
            progression: score as f64 / ACHIEVEMENT_NAMES.len() as f64,
            done: self.termination.is_some(),
            termination: self.termination,
            observation: match &balrog {
                Some(b) => b.joined(),
                None => observe(&self.env, self.opts.obs_format),
            },
            balrog,
            frame_png: (frames != Frames::None)
                .then(|| encode_png(self.env.frame(), self.opts.image_size)),
        }
    }

    /// Play one input: parse text as the evaluator does (noop when nothing usable), then step
    /// each action, stopping at done.
    pub fn step(&mut self, input: Input, frames: Frames) -> Result<StepReport, StepError> {
        if let Some(t) = self.termination {
            return Err(StepError::Over(t, self.env.step_count()));
        }
        let (actions, parsed, invalid) = match input {
            Input::Actions(a) => (a, None, false),
            Input::Text(text) => {
                let judged = judge_reply(
                    Reply::text(&text),
                    self.opts.protocol,
                    self.opts.max_actions,
                    self.opts.parser,
                );
                let invalid = judged.is_invalid();
                let actions = if invalid {
                    vec![Action::Noop]
                } else {
                    judged.parsed.actions.clone()
                };
                (actions, Some(judged), invalid)
            }
        };
        let mut executed = Vec::with_capacity(actions.len());
        let mut rewards = Vec::with_capacity(actions.len());
        let mut unlocked = Vec::new();
        let mut all_frames = (frames == Frames::All).then(Vec::new);
        self.invalid_before = invalid;
        for action in actions {
            let out = self.play.step(&mut self.env, action);
            executed.push(action.name());
            rewards.push(out.reward);
            unlocked.extend(out.unlocked.iter().map(|&i| ACHIEVEMENT_NAMES[i]));
            if let Some(f) = all_frames.as_mut() {
                f.push(b64(&encode_png(self.env.frame(), self.opts.image_size)));
            }
            if out.done {
                self.termination = Some(if out.dead { "death" } else { "length" });
                break;
            }
        }
        Ok(StepReport {
            actions: executed,
            reward: rewards.iter().sum(),
            rewards,
            unlocked,
            invalid,
            note: if invalid { self.note() } else { None },
            parsed,
            state: self.state(frames),
            frames_png_b64: all_frames,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(protocol: Protocol, length: u32) -> SessionOptions {
        SessionOptions {
            seed: 3,
            image_size: 64,
            obs_format: ObsFormat::State,
            length,
            protocol,
            max_actions: 8,
            preset: "vlm-eval".into(),
            parser: ParserMode::Lenient,
            feedback: Feedback::VlmEval,
            reset_noop: false,
            render_twice: false,
        }
    }

    #[test]
    fn text_is_parsed_like_the_evaluator_and_invalid_plays_noop() {
        let tex = TextureSet::builtin();
        let mut s = Session::new(opts(Protocol::Tool, 100), &tex).unwrap();
        let r = s
            .step(
                Input::Text("ACTION: move_left\nACTION: do".into()),
                Frames::None,
            )
            .unwrap();
        assert_eq!(r.actions, ["move_left", "do"]);
        assert!(!r.invalid && r.note.is_none());
        let r = s
            .step(Input::Text("I am thinking.".into()), Frames::None)
            .unwrap();
        assert_eq!(r.actions, ["noop"]);
        assert!(r.invalid);
        assert_eq!(r.note.as_deref(), Some(INVALID_NOTE));
        assert_eq!(r.state.step, 3);
        // The text protocol takes one action per reply.
        let mut t = Session::new(opts(Protocol::Text, 100), &tex).unwrap();
        let r = t
            .step(Input::Text("ACTION: move_left, do".into()), Frames::None)
            .unwrap();
        assert_eq!(r.actions.len(), 1);
    }

    #[test]
    fn the_frame_is_added_as_the_last_field_in_base64() {
        use base64::Engine as _;
        let png: Vec<u8> = (0..=255u8).chain(0..7).collect();
        let with = |v: &serde_json::Value, p: Option<&[u8]>| -> serde_json::Value {
            serde_json::from_slice(&json_with_frame(v, p).unwrap()).unwrap()
        };
        let v = with(&serde_json::json!({"a": 1, "b": "x\"y"}), Some(&png));
        assert_eq!(v["a"], 1);
        assert_eq!(v["b"], "x\"y");
        let b64 = v["frame_png_b64"].as_str().unwrap();
        assert_eq!(
            base64::engine::general_purpose::STANDARD
                .decode(b64)
                .unwrap(),
            png
        );
        // An empty object gets no stray comma; no frame leaves the object as it is.
        let v = with(&serde_json::json!({}), Some(&png[..1]));
        assert_eq!(v, serde_json::json!({"frame_png_b64": "AA=="}));
        assert_eq!(
            with(&serde_json::json!({"a": 1}), None),
            serde_json::json!({"a": 1})
        );
        // Only objects can take a field.
        assert!(json_with_frame(&serde_json::json!([1]), Some(&png)).is_err());
    }

    #[test]
    fn the_inventory_lists_the_items_after_the_vitals_by_name() {
        let mut inv = [0; N_ITEMS];
        inv[item::WOOD] = 3;
        let v = serde_json::to_value(Inventory(inv)).unwrap();
        let names: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(names, ITEM_NAMES[4..]);
        assert_eq!(v["wood"], 3);
    }

    #[test]
    fn length_ends_the_episode_mid_list_and_refuses_more() {
        let tex = TextureSet::builtin();
        let mut s = Session::new(opts(Protocol::Tool, 3), &tex).unwrap();
        let r = s
            .step(Input::Actions(vec![Action::Noop; 5]), Frames::All)
            .unwrap();
        assert_eq!(r.actions.len(), 3);
        assert_eq!(r.frames_png_b64.as_ref().map(Vec::len), Some(3));
        assert!(r.state.done);
        assert_eq!(r.state.termination, Some("length"));
        assert_eq!(
            s.step(Input::Actions(vec![Action::Noop]), Frames::Last)
                .unwrap_err(),
            StepError::Over("length", 3)
        );
    }
}
