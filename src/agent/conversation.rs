//! The conversation of one episode: system prompt, a window of previous turns, and the current
//! observation, assembled into a `ChatRequest`.

use std::collections::VecDeque;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::model::{ChatReply, ChatRequest, Message, Part, Role, ToolChoice};

use super::parse::Protocol;
use super::tools::interact_many_tool;

/// What each observation contains.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Modality {
    /// The frame only (with a one-line caption).
    Image,
    /// The text observation only.
    Text,
    /// Text and frame.
    Both,
}

/// How the history is laid out from one request to the next.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum HistoryLayout {
    /// The last `history` turns; every turn the oldest goes and the previous frame is
    /// dropped, so only the system prompt and tools repeat from one request to the next.
    #[default]
    Window,
    /// Each request is the previous one plus the new turn, byte for byte, so a provider's
    /// prompt cache covers all but the newest turn: a frame past `image_history` is replaced
    /// once by a fixed stub, and when `2 × history` turns are kept the oldest `history` go at
    /// once (so between `history` and `2 × history − 1` earlier turns are shown).
    Append,
}

impl HistoryLayout {
    /// The name recorded in run.json.
    pub fn as_str(self) -> &'static str {
        match self {
            HistoryLayout::Window => "window",
            HistoryLayout::Append => "append",
        }
    }
}

/// What replaces a frame that left the image window.
pub const FRAME_STUB: &str = "[earlier frame omitted]";

/// How requests are built.
#[derive(Clone, Debug, PartialEq)]
pub struct ConversationConfig {
    /// System prompt (already filled in).
    pub system: String,
    /// Tool or text protocol.
    pub protocol: Protocol,
    /// Text, image or both.
    pub modality: Modality,
    /// Previous turns kept.
    pub history: usize,
    /// Frames kept, counting the current one (older user messages lose their image).
    pub image_history: usize,
    /// Actions allowed per turn (tool schema `maxItems`).
    pub max_actions: usize,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// Output token limit.
    pub max_tokens: Option<u32>,
    /// API seed to send.
    pub seed: Option<i64>,
    /// Send `tool_choice: required`.
    pub tool_choice: bool,
    /// How the history is laid out.
    pub layout: HistoryLayout,
}

struct Turn {
    user: Message,
    assistant: Message,
    result: Option<Message>,
}

/// One episode's conversation state.
pub struct Conversation {
    cfg: ConversationConfig,
    turns: VecDeque<Turn>,
}

impl Conversation {
    /// A new conversation.
    pub fn new(cfg: ConversationConfig) -> Conversation {
        Conversation {
            cfg,
            turns: VecDeque::new(),
        }
    }

    /// The user message for an observation (`note` is prepended, e.g. "your last reply had no
    /// valid action").
    pub fn user_message(
        &self,
        observation: &str,
        frame_png: Arc<Vec<u8>>,
        note: Option<&str>,
    ) -> Message {
        let note = note.map(|n| format!("{n}\n\n")).unwrap_or_default();
        let content = match self.cfg.modality {
            Modality::Text => vec![Part::Text(format!("{note}{observation}"))],
            Modality::Image => vec![
                Part::Text(format!("{note}Current frame:")),
                Part::Png(frame_png),
            ],
            Modality::Both => vec![
                Part::Text(format!("{note}{observation}")),
                Part::Png(frame_png),
            ],
        };
        Message {
            role: Role::User,
            content,
            tool_calls: Vec::new(),
            tool_call_id: None,
            extra: Default::default(),
        }
    }

    /// The request for the next turn, given its user message.
    pub fn request(&self, user: &Message) -> ChatRequest {
        let mut messages = vec![Message::text(Role::System, self.cfg.system.clone())];
        let keep_images = self.cfg.image_history.saturating_sub(1);
        let n = self.turns.len();
        let window = self.cfg.layout == HistoryLayout::Window;
        for (i, turn) in self.turns.iter().enumerate() {
            let mut u = turn.user.clone();
            // (Under the append layout, `record` has already stubbed the frames out of it.)
            if window && n - i > keep_images {
                let had = u.image_count() > 0;
                u.content.retain(|p| !matches!(p, Part::Png(_)));
                if had
                    && u.content
                        .iter()
                        .all(|p| matches!(p, Part::Text(t) if t.ends_with("Current frame:")))
                {
                    u.content = vec![Part::Text(FRAME_STUB.into())];
                }
            }
            messages.push(u);
            messages.push(turn.assistant.clone());
            if let Some(r) = &turn.result {
                messages.push(r.clone());
            }
        }
        messages.push(user.clone());
        let tool = self.cfg.protocol == Protocol::Tool;
        ChatRequest {
            messages,
            tools: if tool {
                vec![interact_many_tool(self.cfg.max_actions)]
            } else {
                Vec::new()
            },
            tool_choice: (tool && self.cfg.tool_choice).then_some(ToolChoice::Required),
            temperature: self.cfg.temperature,
            max_tokens: self.cfg.max_tokens,
            seed: self.cfg.seed,
            prompt_cache_key: None,
        }
    }

    /// Remember a finished turn: the user message, the model's reply, and what was executed.
    pub fn record(&mut self, user: Message, reply: &ChatReply, executed: &str) {
        let mut text = reply.text.clone().unwrap_or_default();
        if text.is_empty() && reply.tool_calls.is_empty() {
            text = "(no reply)".into();
        }
        let assistant = Message {
            role: Role::Assistant,
            content: if text.is_empty() {
                Vec::new()
            } else {
                vec![Part::Text(text)]
            },
            tool_calls: reply.tool_calls.clone(),
            tool_call_id: None,
            extra: Default::default(),
        };
        // Every tool call needs an answer for the next request to be valid.
        let result = reply.tool_calls.first().map(|call| Message {
            role: Role::Tool,
            content: vec![Part::Text(executed.to_string())],
            tool_calls: Vec::new(),
            tool_call_id: Some(call.id.clone()),
            extra: Default::default(),
        });
        let mut assistant = assistant;
        assistant.tool_calls.truncate(1);
        assistant.extra = reply.wire_extra();
        assistant.extra.truncate_calls(1);
        self.turns.push_back(Turn {
            user,
            assistant,
            result,
        });
        match self.cfg.layout {
            HistoryLayout::Window => {
                while self.turns.len() > self.cfg.history {
                    self.turns.pop_front();
                }
            }
            HistoryLayout::Append => self.append_trim(),
        }
    }

    /// The append layout's upkeep after a turn is kept: the frames that left the image window
    /// become the stub (once: a stubbed turn has no frame left to change), and at `2 × history`
    /// turns the oldest `history` go.
    fn append_trim(&mut self) {
        let history = self.cfg.history;
        if self.turns.len() >= (2 * history).max(1) {
            let drop = self.turns.len() - history;
            self.turns.drain(..drop);
        }
        let keep_images = self.cfg.image_history.saturating_sub(1);
        let n = self.turns.len();
        for turn in self.turns.iter_mut().take(n.saturating_sub(keep_images)) {
            for part in &mut turn.user.content {
                if matches!(part, Part::Png(_)) {
                    *part = Part::Text(FRAME_STUB.into());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ToolCall;

    fn cfg(modality: Modality, history: usize, image_history: usize) -> ConversationConfig {
        ConversationConfig {
            system: "sys".into(),
            protocol: Protocol::Tool,
            modality,
            history,
            image_history,
            max_actions: 8,
            temperature: Some(0.5),
            max_tokens: Some(100),
            seed: None,
            tool_choice: true,
            layout: HistoryLayout::Window,
        }
    }

    fn reply(i: usize) -> ChatReply {
        ChatReply {
            tool_calls: vec![ToolCall {
                id: format!("call_{i}"),
                name: "interact_many".into(),
                arguments: serde_json::json!("{\"actions\":[\"noop\"]}"),
            }],
            ..ChatReply::default()
        }
    }

    #[test]
    fn history_window_and_image_history() {
        let png = Arc::new(vec![1u8, 2, 3]);
        let mut c = Conversation::new(cfg(Modality::Both, 2, 2));
        for i in 0..4 {
            let u = c.user_message(&format!("obs {i}"), png.clone(), None);
            c.record(u, &reply(i), "Executed: noop");
        }
        let u = c.user_message("obs now", png.clone(), Some("note"));
        let req = c.request(&u);
        // system + 2 kept turns × (user, assistant, tool) + current user
        assert_eq!(req.messages.len(), 1 + 2 * 3 + 1);
        assert_eq!(req.messages[1].joined_text(), "obs 2");
        assert_eq!(
            req.messages[1].image_count(),
            0,
            "only the last frame before the current is kept"
        );
        assert_eq!(req.messages[4].joined_text(), "obs 3");
        assert_eq!(req.messages[4].image_count(), 1);
        assert_eq!(req.messages[3].role, Role::Tool);
        assert_eq!(req.messages[3].tool_call_id.as_deref(), Some("call_2"));
        let last = req.messages.last().unwrap();
        assert!(last.joined_text().starts_with("note\n\nobs now"));
        assert_eq!(last.image_count(), 1);
        assert_eq!(req.tools.len(), 1);
        assert_eq!(req.tool_choice, Some(ToolChoice::Required));
    }

    #[test]
    fn append_layout_only_ever_adds_a_turn() {
        let png = |i: u8| Arc::new(vec![i]);
        let mut c = Conversation::new(ConversationConfig {
            layout: HistoryLayout::Append,
            ..cfg(Modality::Both, 3, 2)
        });
        let mut previous: Option<ChatRequest> = None;
        let mut shown = Vec::new();
        for i in 0..13u8 {
            let u = c.user_message(&format!("obs {i}"), png(i), None);
            let req = c.request(&u);
            shown.push(c.turns.len());
            if let Some(prev) = &previous {
                let (p, m) = (&prev.messages, &req.messages);
                let dropped = m.len() < p.len();
                if !dropped {
                    // The previous request's messages, with at most its second-newest frame
                    // (the one leaving the window) stubbed, then the new turn.
                    assert_eq!(m.len(), p.len() + 3, "turn {i}");
                    let changed: Vec<usize> = (0..p.len()).filter(|&k| p[k] != m[k]).collect();
                    assert!(changed.len() <= 1, "turn {i}: {changed:?}");
                    for k in changed {
                        assert_eq!(p[k].image_count(), 1);
                        assert_eq!(m[k].image_count(), 0);
                        assert_eq!(m[k].content[1], Part::Text(FRAME_STUB.into()));
                        assert_eq!(m[k].content[0], p[k].content[0]);
                    }
                }
            }
            // Frames: the current one and one earlier (image_history 2).
            let frames: usize = req.messages.iter().map(|m| m.image_count()).sum();
            assert_eq!(frames, 1 + usize::from(!c.turns.is_empty()));
            c.record(u, &reply(i as usize), "Executed: noop");
            previous = Some(req);
        }
        // history 3: 0, 1, 2 at the start, then 3, 4, 5, 3, 4, 5, ….
        assert_eq!(shown, [0, 1, 2, 3, 4, 5, 3, 4, 5, 3, 4, 5, 3]);
    }

    #[test]
    fn modalities() {
        let png = Arc::new(vec![9u8]);
        let c = Conversation::new(cfg(Modality::Text, 3, 1));
        let u = c.user_message("obs", png.clone(), None);
        assert_eq!((u.joined_text().as_str(), u.image_count()), ("obs", 0));
        let c = Conversation::new(cfg(Modality::Image, 3, 1));
        let u = c.user_message("obs", png, None);
        assert_eq!(u.image_count(), 1);
        assert!(!u.joined_text().contains("obs"));
    }
}
