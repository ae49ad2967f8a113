//! The messages BALROG's naive agent sends (`HistoryPromptBuilder` with the naive agent, commit
//! af7d1f1), rebuilt: the instruction prompt as the first **user** message; then an event window
//! of `2 × max(max_text_history, max_image_history)` observations and actions, so the oldest
//! entry may be an action with no observation before it; older observations as
//! `Observation:\n<view>`, actions as assistant messages holding the filtered reply (skipped
//! when it filtered to nothing), and the current observation as
//! `Current Observation:\n<status>\n<view>` plus, when its frame is attached,
//! `\nImage observation provided.`; the naive instruction is appended to that last message
//! after a blank line. Text is kept for the last `max_text_history` observations, frames for
//! the last `max_image_history`. The prose (instruction, naive instruction) comes from the
//! user's BALROG checkout ([`super::texts`]); the labels here are the builder's layout.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::model::{ChatRequest, Message, Part, Role};

const CURRENT: &str = "Current Observation:";
const PAST: &str = "Observation:";
const IMAGE: &str = "Image observation provided.";

/// How the requests are built.
#[derive(Clone, Debug, PartialEq)]
pub struct HistoryConfig {
    /// The instruction prompt (first user message; empty: none).
    pub instruction: String,
    /// Appended to the current observation after a blank line.
    pub naive_instruction: String,
    /// Observations whose text is kept (`max_text_history`).
    pub max_text_history: usize,
    /// Observations whose frame is kept (`max_image_history`).
    pub max_image_history: usize,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// Output token limit.
    pub max_tokens: Option<u32>,
    /// API seed.
    pub seed: Option<i64>,
}

#[derive(Clone, Debug)]
enum Event {
    Observation {
        text: String,
        image: Option<Arc<Vec<u8>>>,
    },
    Action(String),
}

/// One episode's event window.
#[derive(Clone, Debug)]
pub struct History {
    cfg: HistoryConfig,
    events: VecDeque<Event>,
    last_short: String,
}

impl History {
    /// A new, empty history.
    pub fn new(cfg: HistoryConfig) -> History {
        History {
            cfg,
            events: VecDeque::new(),
            last_short: String::new(),
        }
    }

    fn push(&mut self, e: Event) {
        let cap = 2 * self.cfg.max_text_history.max(self.cfg.max_image_history);
        self.events.push_back(e);
        while self.events.len() > cap {
            self.events.pop_front();
        }
    }

    /// The naive agent's `act`: remember the previous action (when non-empty), add the
    /// observation (`long` the view, possibly prefixed with feedback; `short` the status),
    /// and build the request.
    pub fn act(
        &mut self,
        previous_action: Option<&str>,
        long: &str,
        short: &str,
        image: Option<Arc<Vec<u8>>>,
    ) -> ChatRequest {
        if let Some(a) = previous_action.filter(|a| !a.is_empty()) {
            self.push(Event::Action(a.to_string()));
        }
        self.last_short = short.to_string();
        self.push(Event::Observation {
            text: long.to_string(),
            image,
        });
        self.request()
    }

    /// The request for the current window.
    pub fn request(&self) -> ChatRequest {
        let mut messages = Vec::new();
        if !self.cfg.instruction.is_empty() {
            messages.push(Message::text(Role::User, self.cfg.instruction.clone()));
        }
        let n = self.events.len();
        let (mut text_left, mut images_left) =
            (self.cfg.max_text_history, self.cfg.max_image_history);
        let mut include = vec![(false, false); n];
        for (i, e) in self.events.iter().enumerate().rev() {
            if let Event::Observation { image, .. } = e {
                if text_left > 0 {
                    include[i].0 = true;
                    text_left -= 1;
                }
                if images_left > 0 && image.is_some() {
                    include[i].1 = true;
                    images_left -= 1;
                }
            }
        }
        for (i, e) in self.events.iter().enumerate() {
            messages.push(match e {
                Event::Observation { text, image } => {
                    let mut parts: Vec<&str> = Vec::new();
                    if i + 1 == n {
                        parts.push(CURRENT);
                        if !self.last_short.is_empty() {
                            parts.push(&self.last_short);
                        }
                    } else {
                        parts.push(PAST);
                    }
                    let (with_text, with_image) = include[i];
                    if with_text {
                        parts.push(text);
                    }
                    if with_image {
                        parts.push(IMAGE);
                    }
                    let mut content = vec![Part::Text(parts.join("\n"))];
                    if let (true, Some(png)) = (with_image, image) {
                        content.push(Part::Png(png.clone()));
                    }
                    Message {
                        role: Role::User,
                        content,
                        tool_calls: Vec::new(),
                        tool_call_id: None,
                        extra: Default::default(),
                    }
                }
                Event::Action(a) => Message::text(Role::Assistant, a.clone()),
            });
        }
        if let Some(last) = messages.last_mut().filter(|m| m.role == Role::User) {
            if let Some(Part::Text(t)) = last.content.first_mut() {
                t.push_str("\n\n");
                t.push_str(&self.cfg.naive_instruction);
            }
        }
        ChatRequest {
            messages,
            tools: Vec::new(),
            tool_choice: None,
            temperature: self.cfg.temperature,
            max_tokens: self.cfg.max_tokens,
            seed: self.cfg.seed,
            prompt_cache_key: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(text: usize, images: usize) -> HistoryConfig {
        HistoryConfig {
            instruction: "INSTR".into(),
            naive_instruction: "NAIVE".into(),
            max_text_history: text,
            max_image_history: images,
            temperature: Some(1.0),
            max_tokens: Some(8192),
            seed: None,
        }
    }

    #[test]
    fn window_roles_and_image_placement() {
        let png = Arc::new(vec![1u8]);
        let mut h = History::new(cfg(2, 1));
        let r = h.act(None, "view0", "status0", Some(png.clone()));
        let texts: Vec<String> = r.messages.iter().map(|m| m.joined_text()).collect();
        assert_eq!(
            texts,
            [
                "INSTR",
                "Current Observation:\nstatus0\nview0\nImage observation provided.\n\nNAIVE"
            ]
        );
        assert_eq!(r.messages[0].role, Role::User, "no system message");
        h.act(Some("Do"), "view1", "status1", Some(png.clone()));
        h.act(Some(""), "view2", "status2", Some(png.clone()));
        let r = h.act(Some("Noop"), "view3", "status3", Some(png.clone()));
        // Window of 4 events: view1, view2, Noop, view3 ("" was skipped; Do fell out); text
        // only for the last 2 observations.
        let texts: Vec<String> = r.messages.iter().map(|m| m.joined_text()).collect();
        assert_eq!(
            texts,
            [
                "INSTR",
                "Observation:",
                "Observation:\nview2",
                "Noop",
                "Current Observation:\nstatus3\nview3\nImage observation provided.\n\nNAIVE"
            ]
        );
        let images: Vec<usize> = r.messages.iter().map(|m| m.image_count()).collect();
        assert_eq!(images, [0, 0, 0, 0, 1]);
        assert_eq!(r.messages[3].role, Role::Assistant);
        // A window starting with an action: Noop, view3, Sleep, view4.
        let r = h.act(Some("Sleep"), "view4", "status4", Some(png));
        assert_eq!(r.messages[1].role, Role::Assistant);
        assert_eq!(r.messages[1].joined_text(), "Noop");
        // Without a current frame the last observation that has one keeps it.
        let r2 = h.act(Some("Do"), "view5", "s", None);
        assert_eq!(
            r2.messages[2].joined_text(),
            "Observation:\nview4\nImage observation provided."
        );
        assert_eq!(r2.messages[2].image_count(), 1);
        assert_eq!(
            r2.messages.last().unwrap().joined_text(),
            "Current Observation:\ns\nview5\n\nNAIVE"
        );
        assert!(r.tools.is_empty() && r.tool_choice.is_none());
    }
}
