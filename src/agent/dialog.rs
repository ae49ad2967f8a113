//! One episode's side of the protocol, whichever the layout: what the model is sent each turn,
//! how its reply is judged, and what the next turn remembers (history, feedback after a reply
//! with no usable action). `eval::episode` and the env server drive it the same way.

use std::sync::Arc;

use crate::crafter::Env;
use crate::model::{ChatReply, ChatRequest, Message};

use super::balrog::{balrog_observation, BalrogObs, BalrogTexts, History, HistoryConfig};
use super::conversation::{Conversation, ConversationConfig, Modality};
use super::observe::{observe, ObsFormat};
use super::parse::{balrog_completion, judge_reply, Judged, ParserMode};
use super::preset::{Feedback, Layout};
use super::prompt::INVALID_NOTE;

/// The protocol settings applied around the model (from the preset and flags).
#[derive(Clone, Debug)]
pub struct PlayOptions {
    /// Request layout.
    pub layout: Layout,
    /// Reply rule.
    pub parser: ParserMode,
    /// What follows a reply with no usable action.
    pub feedback: Feedback,
    /// Play one noop after reset, before the first observation.
    pub reset_noop: bool,
    /// Render every frame twice, as BALROG's wrapper does.
    pub render_twice: bool,
    /// BALROG's texts (needed by the balrog layout and feedback).
    pub balrog: Option<Arc<BalrogTexts>>,
}

impl Default for PlayOptions {
    /// vlm-eval's protocol (the `vlm-eval` preset).
    fn default() -> Self {
        PlayOptions {
            layout: Layout::VlmEval,
            parser: ParserMode::Lenient,
            feedback: Feedback::VlmEval,
            reset_noop: false,
            render_twice: false,
            balrog: None,
        }
    }
}

impl PlayOptions {
    /// Reset an env for a new episode as the protocol does (BALROG plays one noop).
    pub fn reset(&self, env: &mut Env) {
        env.reset();
        if self.reset_noop {
            self.step(env, crate::crafter::Action::Noop);
        }
    }

    /// One env step as the protocol plays it (BALROG's wrapper renders once more).
    pub fn step(
        &self,
        env: &mut Env,
        action: crate::crafter::Action,
    ) -> crate::crafter::StepOutcome {
        let out = env.step(action);
        if self.render_twice {
            env.render();
        }
        out
    }

    /// The BALROG feedback text for the played (default) action, if this protocol gives it.
    fn balrog_feedback(&self) -> Option<String> {
        match (&self.feedback, &self.balrog) {
            (Feedback::Balrog, Some(t)) => Some(t.feedback("Noop")),
            _ => None,
        }
    }
}

/// What one turn sends.
#[derive(Clone, Debug)]
pub struct Prompted {
    /// The observation text (`state` or `balrog` format; under the balrog layout the status,
    /// a newline, and the view with any feedback before it).
    pub observation: String,
    /// BALROG's two texts as sent (feedback included), under the balrog layout.
    pub balrog: Option<BalrogObs>,
    /// The feedback or note placed before the observation, if any.
    pub note: Option<String>,
    /// The current user message.
    pub user: Message,
    /// The request.
    pub request: ChatRequest,
}

enum Kind {
    VlmEval(Conversation),
    Balrog(History),
}

/// One episode's dialog state.
pub struct Dialog {
    kind: Kind,
    play: PlayOptions,
    obs_format: ObsFormat,
    modality: Modality,
    protocol: super::parse::Protocol,
    max_actions: usize,
    invalid_before: bool,
    previous_action: Option<String>,
}

impl Dialog {
    /// A new dialog. Under the balrog layout the conversation's history and image history are
    /// BALROG's `max_text_history` and `max_image_history`, and its texts must be loaded.
    pub fn new(conv: ConversationConfig, play: PlayOptions, obs_format: ObsFormat) -> Dialog {
        let (modality, protocol, max_actions) = (conv.modality, conv.protocol, conv.max_actions);
        let kind = match play.layout {
            Layout::VlmEval => Kind::VlmEval(Conversation::new(conv)),
            Layout::Balrog => {
                let (instruction, naive) = play
                    .balrog
                    .as_ref()
                    .map(|t| (t.instruction_prompt.clone(), t.naive_instruction.clone()))
                    .unwrap_or_default();
                Kind::Balrog(History::new(HistoryConfig {
                    instruction,
                    naive_instruction: naive,
                    max_text_history: conv.history,
                    max_image_history: if conv.modality == Modality::Text {
                        0
                    } else {
                        conv.image_history
                    },
                    temperature: conv.temperature,
                    max_tokens: conv.max_tokens,
                    seed: conv.seed,
                }))
            }
        };
        Dialog {
            kind,
            play,
            obs_format,
            modality,
            protocol,
            max_actions,
            invalid_before: false,
            previous_action: None,
        }
    }

    /// The protocol settings.
    pub fn play(&self) -> &PlayOptions {
        &self.play
    }

    /// Build this turn's request from the env's state and its current frame.
    pub fn prompt(&mut self, env: &Env, frame: Arc<Vec<u8>>) -> Prompted {
        match &mut self.kind {
            Kind::VlmEval(conv) => {
                let observation = observe(env, self.obs_format);
                let note = match self.play.feedback {
                    Feedback::VlmEval if self.invalid_before => Some(INVALID_NOTE.to_string()),
                    Feedback::Balrog if self.invalid_before => self.play.balrog_feedback(),
                    _ => None,
                };
                let user = conv.user_message(&observation, frame, note.as_deref());
                let request = conv.request(&user);
                Prompted {
                    observation,
                    balrog: None,
                    note,
                    user,
                    request,
                }
            }
            Kind::Balrog(history) => {
                let mut obs = balrog_observation(env);
                let note = match self.play.feedback {
                    Feedback::Balrog if self.invalid_before => self.play.balrog_feedback(),
                    Feedback::VlmEval if self.invalid_before => Some(format!("{INVALID_NOTE}\n\n")),
                    _ => None,
                };
                if let Some(n) = &note {
                    obs.long_term_context = format!("{n}{}", obs.long_term_context);
                }
                let image = (self.modality != Modality::Text).then_some(frame);
                let request = history.act(
                    self.previous_action.take().as_deref(),
                    &obs.long_term_context,
                    &obs.short_term_context,
                    image,
                );
                let user = request
                    .messages
                    .last()
                    .cloned()
                    .unwrap_or_else(|| Message::text(crate::model::Role::User, String::new()));
                Prompted {
                    observation: obs.joined(),
                    balrog: Some(obs),
                    note,
                    user,
                    request,
                }
            }
        }
    }

    /// Judge a reply by the protocol's parser.
    pub fn judge(&self, reply: &ChatReply) -> Judged {
        judge_reply(reply, self.protocol, self.max_actions, self.play.parser)
    }

    /// Remember a finished turn: `executed` summarises what was played (vlm-eval's tool
    /// result text).
    pub fn record(
        &mut self,
        prompted: Prompted,
        reply: &ChatReply,
        judged: &Judged,
        executed: &str,
    ) {
        self.invalid_before = judged.is_invalid();
        match &mut self.kind {
            Kind::VlmEval(conv) => conv.record(prompted.user, reply, executed),
            Kind::Balrog(_) => {
                self.previous_action = Some(balrog_completion(reply.text.as_deref().unwrap_or("")));
            }
        }
    }
}
