//! `run --estimate`'s counting: the requests a run would send, their input tokens (text and
//! images apart) and the part of each that repeats the previous request's prefix, with no
//! model and no file. Each sampled seed's env is reset and its first observation built as a
//! run builds it; the conversation is then played on that first observation, every reply a
//! fixed one-action reply (a `noop` tool call, or `ACTION: noop` as text), so the history and
//! image windows fill as in a run. The game's text changes from turn to turn in a real run:
//! the estimate takes the first turn's as typical. Once both windows are full every request
//! has the same shape, so a seed is built only that far and the last request stands for the
//! remaining turns. Every episode is assumed to play all its turns (deaths end them early).

use std::sync::Arc;

use crate::agent::conversation::ConversationConfig;
use crate::agent::dialog::{Dialog, PlayOptions};
use crate::agent::observe::ObsFormat;
use crate::crafter::{Env, EnvConfig, TextureSet};
use crate::model::image_tokens::ImageRule;
use crate::model::request_tokens::{Counter, RequestTokens};
use crate::model::{ChatReply, ToolCall};

/// Most seeds whose first turn is built; a run of more seeds is scaled from them.
pub const MAX_SAMPLED_SEEDS: usize = 100;

/// What the estimate needs of a run.
pub struct EstimateSetup<'a> {
    /// Request building.
    pub conversation: ConversationConfig,
    /// The protocol (layout, reset Noop, parser).
    pub play: PlayOptions,
    /// Text observation format.
    pub obs_format: ObsFormat,
    /// Frame size, pixels.
    pub image_size: usize,
    /// Game length per episode.
    pub episode_length: u32,
    /// Textures.
    pub textures: &'a TextureSet,
    /// Model turns per episode.
    pub turns: u32,
    /// The run's seeds.
    pub seeds: &'a [i64],
}

/// A request shape and how many of the run's requests have it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shape {
    /// Requests of this shape in the whole run (scaled to all seeds).
    pub count: f64,
    /// Its tokens.
    pub tokens: RequestTokens,
}

/// The run's requests, as shapes.
#[derive(Clone, Debug, Default)]
pub struct Estimate {
    /// Requests in the run.
    pub requests: u64,
    /// Seeds whose first turn was built.
    pub sampled_seeds: usize,
    /// The shapes (their counts sum to `requests`).
    pub shapes: Vec<Shape>,
    /// Tokens of the fixed reply the estimate plays (its output floor per request).
    pub reply_tokens: u64,
}

impl Estimate {
    /// Sum of `f` over every request.
    pub fn total(&self, f: impl Fn(&RequestTokens) -> u64) -> f64 {
        self.shapes
            .iter()
            .map(|s| s.count * f(&s.tokens) as f64)
            .sum()
    }
}

/// The fixed reply: a `noop` tool call (tool protocol) or `ACTION: noop` (text).
fn fixed_reply(tool: bool) -> ChatReply {
    if tool {
        ChatReply {
            tool_calls: vec![ToolCall {
                id: "call_0".into(),
                name: crate::agent::tools::TOOL_NAME.into(),
                arguments: serde_json::json!({"actions": ["noop"]}).to_string().into(),
            }],
            ..ChatReply::default()
        }
    } else {
        ChatReply {
            text: Some("ACTION: noop".into()),
            ..ChatReply::default()
        }
    }
}

/// Count a run's requests for a model whose images follow `rule` (`low`: `detail: low`).
pub fn estimate(s: &EstimateSetup, rule: Option<ImageRule>, low: bool) -> Estimate {
    let mut counter = Counter::new(rule, s.image_size as u32, low);
    let tool = !fixed_reply_is_text(&s.conversation);
    let reply = fixed_reply(tool);
    let reply_tokens = match reply.tool_calls.first() {
        Some(c) => crate::model::request_tokens::o200k_len(&c.arguments.to_string()),
        None => crate::model::request_tokens::o200k_len(reply.text.as_deref().unwrap_or("")),
    };
    let step = (s.seeds.len() / MAX_SAMPLED_SEEDS).max(1);
    let sampled: Vec<i64> = s
        .seeds
        .iter()
        .step_by(step)
        .take(MAX_SAMPLED_SEEDS)
        .copied()
        .collect();
    let scale = s.seeds.len() as f64 / sampled.len().max(1) as f64;
    let window = s.conversation.history.max(s.conversation.image_history) + 2;
    let built = (s.turns as usize).min(window);
    let mut shapes = Vec::new();
    for &seed in &sampled {
        let cfg = EnvConfig {
            seed,
            size: [s.image_size, s.image_size],
            length: Some(s.episode_length),
            ..EnvConfig::default()
        };
        let Ok(mut env) = Env::new(cfg, s.textures) else {
            continue;
        };
        env.reset();
        if s.play.reset_noop {
            s.play.step(&mut env, crate::crafter::Action::Noop);
        }
        let mut dialog = Dialog::new(s.conversation.clone(), s.play.clone(), s.obs_format);
        let mut previous = None;
        for turn in 0..built {
            // A distinct frame per turn, so that two frames never look alike to the prefix.
            let frame = Arc::new(turn.to_le_bytes().to_vec());
            let prompted = dialog.prompt(&env, frame);
            let tokens = counter.request(&prompted.request, previous.as_ref());
            let count = if turn + 1 == built {
                (s.turns as usize - turn) as f64
            } else {
                1.0
            };
            shapes.push(Shape {
                count: count * scale,
                tokens,
            });
            previous = Some(prompted.request.clone());
            let mut r = reply.clone();
            if let Some(c) = r.tool_calls.first_mut() {
                c.id = format!("call_{turn}");
            }
            let judged = dialog.judge(&r);
            dialog.record(prompted, &r, &judged, "Executed 1 action(s): noop.");
        }
    }
    Estimate {
        requests: s.seeds.len() as u64 * u64::from(s.turns),
        sampled_seeds: sampled.len(),
        shapes,
        reply_tokens,
    }
}

fn fixed_reply_is_text(c: &ConversationConfig) -> bool {
    c.protocol == crate::agent::parse::Protocol::Text
}
