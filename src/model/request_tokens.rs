//! Prompt tokens of a request, counted offline (for `run --estimate`): text with OpenAI's
//! o200k encoding (`tiktoken-rs`, which embeds it), images by the provider's rule
//! ([`super::image_tokens`]).
//!
//! o200k is the tokenizer of OpenAI's gpt-4o, gpt-4.1, gpt-5 and o-series models. Anthropic
//! and Google publish no tokenizer for Claude and Gemini: for them the o200k count stands in,
//! an approximation. The chat framing follows OpenAI's cookbook ("How to count tokens with
//! tiktoken"): 3 tokens per message plus its role and content, 3 to prime the reply; the
//! tool schema is counted as the o200k tokens of its JSON (OpenAI does not document how it
//! renders tools, so that part is approximate for every provider).

use std::collections::HashMap;

use super::image_tokens::{image_tokens, ImageRule};
use super::{ChatRequest, Message, Part, Role};

/// o200k tokens of a text.
pub fn o200k_len(text: &str) -> u64 {
    tiktoken_rs::o200k_base_singleton()
        .encode_ordinary(text)
        .len() as u64
}

/// Whether a model's own tokenizer is o200k (else o200k is an approximation).
pub fn o200k_is_exact(model: &str) -> bool {
    let m = model.rsplit('/').next().unwrap_or(model);
    ["gpt-4o", "gpt-4.1", "gpt-5", "o1", "o3", "o4"]
        .iter()
        .any(|p| m == *p || m.starts_with(&format!("{p}-")) || m.starts_with(&format!("{p}.")))
}

/// Counts of one request.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RequestTokens {
    /// Text tokens (messages, framing, tools).
    pub text: u64,
    /// Image tokens.
    pub image: u64,
    /// Images sent.
    pub images: u64,
    /// Tokens of the request's longest prefix that equals the previous request's (tools
    /// and the leading messages both share), the part a provider's prefix cache can hit.
    pub shared_prefix: u64,
}

impl RequestTokens {
    /// All prompt tokens.
    pub fn input(&self) -> u64 {
        self.text + self.image
    }
}

/// Counts requests' tokens, remembering texts already counted.
pub struct Counter {
    rule: Option<ImageRule>,
    image_px: u32,
    low_detail: bool,
    memo: HashMap<String, u64>,
}

impl Counter {
    /// A counter for images of `image_px` square under `rule` (None: images count 0).
    pub fn new(rule: Option<ImageRule>, image_px: u32, low_detail: bool) -> Counter {
        Counter {
            rule,
            image_px,
            low_detail,
            memo: HashMap::new(),
        }
    }

    fn text(&mut self, t: &str) -> u64 {
        if let Some(n) = self.memo.get(t) {
            return *n;
        }
        let n = o200k_len(t);
        self.memo.insert(t.to_string(), n);
        n
    }

    /// (text, image tokens, images) of one message, its framing included.
    pub fn message(&mut self, m: &Message) -> (u64, u64, u64) {
        let role = match m.role {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        };
        let mut text = 3 + self.text(role);
        let (mut image, mut images) = (0, 0);
        for p in &m.content {
            match p {
                Part::Text(t) => text += self.text(t),
                Part::Png(_) => {
                    images += 1;
                    image += self.rule.map_or(0, |r| {
                        image_tokens(r, self.image_px, self.image_px, self.low_detail)
                    });
                }
            }
        }
        for call in &m.tool_calls {
            text += self.text(&call.name);
            let args = match &call.arguments {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            text += self.text(&args);
        }
        if let Some(id) = &m.tool_call_id {
            text += self.text(id);
        }
        (text, image, images)
    }

    /// The tokens of a request; `previous` is the request before it in the same episode (for
    /// the shared prefix).
    pub fn request(&mut self, req: &ChatRequest, previous: Option<&ChatRequest>) -> RequestTokens {
        let tools = if req.tools.is_empty() {
            0
        } else {
            let json = super::openai::tools_json(&req.tools)
                .map(|v| v.to_string())
                .unwrap_or_default();
            self.text(&json)
        };
        let mut out = RequestTokens {
            text: tools + 3,
            ..RequestTokens::default()
        };
        let same_tools = previous.is_some_and(|p| p.tools == req.tools);
        let mut shared = previous.is_some() && same_tools;
        if shared {
            out.shared_prefix = tools;
        }
        for (i, m) in req.messages.iter().enumerate() {
            let (t, im, n) = self.message(m);
            out.text += t;
            out.image += im;
            out.images += n;
            shared = shared && previous.is_some_and(|p| p.messages.get(i) == Some(m));
            if shared {
                out.shared_prefix += t + im;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn o200k_counts_known_strings() {
        // tiktoken's own test vectors for o200k_base: "hello world" → [24912, 2375].
        assert_eq!(
            tiktoken_rs::o200k_base_singleton().encode_ordinary("hello world"),
            vec![24912, 2375]
        );
        assert_eq!(o200k_len(""), 0);
        assert!(o200k_is_exact("gpt-4o-mini") && o200k_is_exact("gpt-5.1"));
        assert!(!o200k_is_exact("claude-sonnet-4-5") && !o200k_is_exact("gemini-2.5-pro"));
    }

    #[test]
    fn shared_prefix_stops_at_the_first_changed_message() {
        let sys = Message::text(Role::System, "rules of the game");
        let u0 = Message::text(Role::User, "turn zero");
        let u1 = Message::text(Role::User, "turn one");
        let a = ChatRequest {
            messages: vec![sys.clone(), u0.clone()],
            ..ChatRequest::default()
        };
        let b = ChatRequest {
            messages: vec![sys.clone(), u0.clone(), u1.clone()],
            ..ChatRequest::default()
        };
        let c = ChatRequest {
            messages: vec![sys.clone(), u1.clone()],
            ..ChatRequest::default()
        };
        let mut k = Counter::new(None, 64, false);
        let (s, _, _) = k.message(&sys);
        let (m0, _, _) = k.message(&u0);
        assert_eq!(k.request(&a, None).shared_prefix, 0);
        assert_eq!(k.request(&b, Some(&a)).shared_prefix, s + m0);
        assert_eq!(k.request(&c, Some(&b)).shared_prefix, s);
        assert_eq!(k.request(&b, None).text, 3 + s + m0 + k.message(&u1).0);
    }
}
