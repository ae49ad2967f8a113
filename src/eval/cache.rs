//! Response cache (`--cache DIR`): replies stored under a key of the full request (model, base
//! URL, messages with image hashes, tools, sampling options) plus the episode seed and turn, so
//! a rerun with a warm cache makes no model calls and reproduces the run exactly.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::crafter::trace::sha256_hex;
use crate::model::{CallFailure, ChatModel, ChatReply, ChatRequest, Part, ToolCall, Usage};

use crate::results::store::write_json;

/// A reply as stored in the cache.
#[derive(Serialize, Deserialize)]
struct Entry {
    key_material: Value,
    text: Option<String>,
    tool_calls: Vec<ToolCall>,
    reasoning: Option<String>,
    finish_reason: Option<String>,
    usage: Usage,
    latency_ms: f64,
    raw: Value,
}

/// A directory of cached replies for one model at one endpoint.
#[derive(Debug, Clone)]
pub struct ResponseCache {
    dir: PathBuf,
    namespace: Value,
}

/// The request as canonical JSON, images replaced by their sha256.
pub fn request_key_material(request: &ChatRequest) -> Value {
    let messages: Vec<Value> = request
        .messages
        .iter()
        .map(|m| {
            let parts: Vec<Value> = m
                .content
                .iter()
                .map(|p| match p {
                    Part::Text(t) => json!({"text": t}),
                    Part::Png(b) => json!({"png_sha256": sha256_hex(b)}),
                })
                .collect();
            let mut v = json!({"role": m.role, "content": parts, "tool_calls": m.tool_calls, "tool_call_id": m.tool_call_id});
            // Only when present, so the keys of turns without such fields stay as they were.
            if !m.extra.is_empty() {
                v["extra"] = m.extra.to_json();
            }
            v
        })
        .collect();
    json!({
        "messages": messages,
        "tools": request.tools,
        "tool_choice": request.tool_choice,
        "temperature": request.temperature,
        "max_tokens": request.max_tokens,
        "seed": request.seed,
    })
}

impl ResponseCache {
    /// A cache in `dir` for a model at an endpoint (`base_url` is None for in-process models).
    pub fn new(dir: PathBuf, model: &str, base_url: Option<&str>) -> ResponseCache {
        ResponseCache {
            dir,
            namespace: json!({"model": model, "base_url": base_url}),
        }
    }

    fn key(&self, request: &ChatRequest, seed: i64, turn: u32) -> (String, Value) {
        let material = json!({
            "namespace": self.namespace,
            "episode_seed": seed,
            "turn": turn,
            "request": request_key_material(request),
        });
        (sha256_hex(material.to_string().as_bytes()), material)
    }

    /// The cached reply, or the model's (stored on success). Returns whether it was a hit; a
    /// hit sends no request, so its reply has no attempts.
    pub async fn chat(
        &self,
        model: &dyn ChatModel,
        request: &ChatRequest,
        seed: i64,
        turn: u32,
    ) -> Result<(ChatReply, bool), CallFailure> {
        let (key, material) = self.key(request, seed, turn);
        let path = self.dir.join(&key[..2]).join(format!("{key}.json"));
        if let Ok(text) = std::fs::read_to_string(&path) {
            if let Ok(e) = serde_json::from_str::<Entry>(&text) {
                if e.key_material == material {
                    let reply = ChatReply {
                        text: e.text,
                        tool_calls: e.tool_calls,
                        reasoning: e.reasoning,
                        finish_reason: e.finish_reason,
                        usage: e.usage,
                        latency_ms: e.latency_ms,
                        raw: e.raw,
                        ..ChatReply::default()
                    };
                    return Ok((reply, true));
                }
            }
        }
        let reply = model.chat_traced(request).await?;
        let entry = Entry {
            key_material: material,
            text: reply.text.clone(),
            tool_calls: reply.tool_calls.clone(),
            reasoning: reply.reasoning.clone(),
            finish_reason: reply.finish_reason.clone(),
            usage: reply.usage,
            latency_ms: reply.latency_ms,
            raw: reply.raw.clone(),
        };
        if let Err(e) = write_json(&path, &entry) {
            tracing::warn!("response cache: {e}");
        }
        Ok((reply, false))
    }
}
