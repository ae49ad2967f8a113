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
        }
    }

    /// The request for the next turn, given its user message.
    pub fn request(&self, user: &Message) -> ChatRequest {
        let mut messages = vec![Message::text(Role::System, self.cfg.system.clone())];
        let keep_images = self.cfg.image_history.saturating_sub(1);
        let n = self.turns.len();
        for (i, turn) in self.turns.iter().enumerate() {
            let mut u = turn.user.clone();
            if n - i > keep_images {
                let had = u.image_count() > 0;
                u.content.retain(|p| !matches!(p, Part::Png(_)));
                if had
                    && u.content
                        .iter()
                        .all(|p| matches!(p, Part::Text(t) if t.ends_with("Current frame:")))
                {
                    u.content = vec![Part::Text("[earlier frame omitted]".into())];
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
        };
        // Every tool call needs an answer for the next request to be valid.
        let result = reply.tool_calls.first().map(|call| Message {
            role: Role::Tool,
            content: vec![Part::Text(executed.to_string())],
            tool_calls: Vec::new(),
            tool_call_id: Some(call.id.clone()),
        });
        let mut assistant = assistant;
        assistant.tool_calls.truncate(1);
        self.turns.push_back(Turn {
            user,
            assistant,
            result,
        });
        while self.turns.len() > self.cfg.history {
            self.turns.pop_front();
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
