//! `tokenizer.json` through the `tokenizers` crate and the chat template through minijinja
//! (HF's settings: trim_blocks, lstrip_blocks, a Python-compatible `tojson`).

use std::path::{Path, PathBuf};

use minijinja::{Environment, Error as JinjaError, ErrorKind, Value as JValue};
use serde_json::Value;

use super::config::read_json;
use super::LocalError;

/// Tokenizer plus chat template and the special ids the engine needs. A weights-only
/// checkpoint (no `tokenizer.json`) gets an ids-only tokenizer: prompts are token ids, and
/// anything that needs text fails with an error naming `tokenizer.json`.
pub struct ChatTokenizer {
    /// Tokenizer and chat template; `None` when ids-only.
    text: Option<(tokenizers::Tokenizer, Environment<'static>)>,
    /// `DIR/tokenizer.json`, for errors.
    file: PathBuf,
    /// Whether the template renders a `tools` list itself.
    pub template_has_tools: bool,
    /// `<|image_pad|>`.
    pub image_pad_id: u32,
    /// Number of ids the tokenizer can produce (embedding rows beyond it are never sampled).
    pub vocab_len: usize,
    /// Ids of `<|im_end|>` and `<|endoftext|>` when present.
    pub default_stop_ids: Vec<u32>,
    /// `enable_thinking` passed to the chat template (`None`: not passed, the template's own
    /// default; Qwen3.5's opens a `<think>` block unless it is `false`).
    pub enable_thinking: Option<bool>,
}

/// The image placeholder token in rendered prompts.
pub const IMAGE_PAD: &str = "<|image_pad|>";

/// Python `json.dumps(v, ensure_ascii=False, indent=indent)` (separators `", "` / `": "`).
pub fn python_json(v: &Value, indent: Option<usize>) -> String {
    fn go(v: &Value, indent: Option<usize>, depth: usize, out: &mut String) {
        let (open_sep, item_sep, close_sep) = match indent {
            Some(n) => (
                format!("\n{}", " ".repeat(n * (depth + 1))),
                format!(",\n{}", " ".repeat(n * (depth + 1))),
                format!("\n{}", " ".repeat(n * depth)),
            ),
            None => (String::new(), ", ".to_string(), String::new()),
        };
        match v {
            Value::Array(a) if !a.is_empty() => {
                out.push('[');
                out.push_str(&open_sep);
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        out.push_str(&item_sep);
                    }
                    go(x, indent, depth + 1, out);
                }
                out.push_str(&close_sep);
                out.push(']');
            }
            Value::Object(m) if !m.is_empty() => {
                out.push('{');
                out.push_str(&open_sep);
                for (i, (k, x)) in m.iter().enumerate() {
                    if i > 0 {
                        out.push_str(&item_sep);
                    }
                    out.push_str(&Value::String(k.clone()).to_string());
                    out.push_str(": ");
                    go(x, indent, depth + 1, out);
                }
                out.push_str(&close_sep);
                out.push('}');
            }
            Value::Number(n) if n.is_f64() => {
                let f = n.as_f64().unwrap_or(0.0);
                if f.fract() == 0.0 && f.abs() < 1e16 {
                    out.push_str(&format!("{f:.1}"));
                } else {
                    out.push_str(&n.to_string());
                }
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut out = String::new();
    go(v, indent, 0, &mut out);
    out
}

fn tojson(value: JValue, kwargs: minijinja::value::Kwargs) -> Result<JValue, JinjaError> {
    let indent: Option<usize> = kwargs.get("indent")?;
    let _: Option<bool> = kwargs.get("ensure_ascii")?;
    kwargs.assert_all_used()?;
    let v: Value = serde_json::to_value(&value)
        .map_err(|e| JinjaError::new(ErrorKind::InvalidOperation, format!("tojson: {e}")))?;
    Ok(JValue::from_safe_string(python_json(&v, indent)))
}

fn raise_exception(msg: String) -> Result<JValue, JinjaError> {
    Err(JinjaError::new(ErrorKind::InvalidOperation, msg))
}

/// Find the chat template: `chat_template.jinja`, else `tokenizer_config.json["chat_template"]`.
fn template_source(dir: &Path) -> Result<String, LocalError> {
    let jinja = dir.join("chat_template.jinja");
    if jinja.exists() {
        return std::fs::read_to_string(&jinja).map_err(|e| LocalError::File {
            file: jinja,
            msg: e.to_string(),
        });
    }
    let cfg_path = dir.join("tokenizer_config.json");
    let missing = || LocalError::Field {
        file: cfg_path.clone(),
        field: "chat_template".into(),
        msg: "is missing and there is no chat_template.jinja".into(),
    };
    if !cfg_path.exists() {
        return Err(missing());
    }
    let cfg = read_json(&cfg_path)?;
    match cfg.get("chat_template") {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(list)) => list
            .iter()
            .find(|t| t.get("name").and_then(Value::as_str) == Some("default"))
            .or_else(|| list.first())
            .and_then(|t| t.get("template").and_then(Value::as_str))
            .map(str::to_string)
            .ok_or_else(missing),
        _ => Err(missing()),
    }
}

impl ChatTokenizer {
    /// Load `DIR/tokenizer.json` and the chat template; check the image token id.
    pub fn load(dir: &Path, image_token_id: u32) -> Result<ChatTokenizer, LocalError> {
        let file = dir.join("tokenizer.json");
        if !file.exists() {
            return Err(LocalError::File {
                file,
                msg: "missing".into(),
            });
        }
        let tok = tokenizers::Tokenizer::from_file(&file).map_err(|e| LocalError::File {
            file: file.clone(),
            msg: format!("cannot load tokenizer: {e}"),
        })?;
        let src = template_source(dir)?;
        let mut env = Environment::new();
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_filter("tojson", tojson);
        env.add_function("raise_exception", raise_exception);
        let template_has_tools = src.contains("tools");
        env.add_template_owned("chat", src)
            .map_err(|e| LocalError::File {
                file: dir.join("chat_template.jinja"),
                msg: format!("invalid chat template: {e}"),
            })?;
        let image_pad_id = tok
            .token_to_id(IMAGE_PAD)
            .ok_or_else(|| LocalError::Field {
                file: file.clone(),
                field: "added_tokens".into(),
                msg: format!("has no {IMAGE_PAD} token"),
            })?;
        if image_pad_id != image_token_id {
            return Err(LocalError::Field {
                file: dir.join("config.json"),
                field: "image_token_id".into(),
                msg: format!(
                    "is {image_token_id} but tokenizer.json maps {IMAGE_PAD} to {image_pad_id}"
                ),
            });
        }
        let default_stop_ids = ["<|im_end|>", "<|endoftext|>"]
            .iter()
            .filter_map(|t| tok.token_to_id(t))
            .collect();
        Ok(ChatTokenizer {
            vocab_len: tok.get_vocab_size(true),
            text: Some((tok, env)),
            file,
            template_has_tools,
            image_pad_id,
            default_stop_ids,
            enable_thinking: None,
        })
    }

    /// A tokenizer for a weights-only folder: ids only, every id below `vocab_len` may be
    /// sampled, no default stop ids.
    pub fn ids_only(dir: &Path, vocab_len: usize, image_token_id: u32) -> ChatTokenizer {
        ChatTokenizer {
            text: None,
            file: dir.join("tokenizer.json"),
            template_has_tools: false,
            image_pad_id: image_token_id,
            vocab_len,
            default_stop_ids: Vec::new(),
            enable_thinking: None,
        }
    }

    /// Whether text can be rendered, encoded and decoded (false when ids-only).
    pub fn has_text(&self) -> bool {
        self.text.is_some()
    }

    /// The tokenizer and template, or the error for an ids-only checkpoint.
    fn text(&self) -> Result<&(tokenizers::Tokenizer, Environment<'static>), LocalError> {
        self.text.as_ref().ok_or_else(|| LocalError::File {
            file: self.file.clone(),
            msg: "missing: this checkpoint was loaded ids-only (weights-only folder), so text \
                  cannot be rendered or tokenized; add tokenizer.json and a chat template"
                .into(),
        })
    }

    /// Render messages (HF chat format: content is a string or a list of
    /// `{"type":"image"}` / `{"type":"text","text":…}`) with the chat template.
    pub fn render(&self, messages: &Value, tools: Option<&Value>) -> Result<String, LocalError> {
        let tpl = self
            .text()?
            .1
            .get_template("chat")
            .map_err(|e| LocalError::Template(e.to_string()))?;
        let mut ctx = serde_json::Map::new();
        ctx.insert("messages".into(), messages.clone());
        ctx.insert("tools".into(), tools.cloned().unwrap_or(Value::Null));
        ctx.insert("add_generation_prompt".into(), Value::Bool(true));
        if let Some(t) = self.enable_thinking {
            ctx.insert("enable_thinking".into(), Value::Bool(t));
        }
        tpl.render(JValue::from_serialize(&ctx))
            .map_err(|e| LocalError::Template(format!("{e:#}")))
    }

    /// Split generated ids at the last `</think>`: `(thinking text, reply text)`. Without one
    /// the whole text is the reply. The thinking text drops a leading `<think>`.
    pub fn split_thinking(&self, ids: &[u32]) -> (Option<String>, String) {
        let Some((tok, _)) = &self.text else {
            return (None, String::new());
        };
        let end = tok.token_to_id("</think>");
        match end.and_then(|e| ids.iter().rposition(|&t| t == e)) {
            Some(k) => {
                let think = self.decode(&ids[..k]);
                let think = think
                    .trim()
                    .trim_start_matches("<think>")
                    .trim()
                    .to_string();
                (
                    Some(think),
                    self.decode(&ids[k + 1..]).trim_start().to_string(),
                )
            }
            None => {
                // `</think>` as plain text (a tokenizer without it as one token).
                let text = self.decode(ids);
                match text.rfind("</think>") {
                    Some(k) => {
                        let think = text[..k].trim().trim_start_matches("<think>").trim();
                        let rest = text[k + "</think>".len()..].trim_start();
                        (Some(think.to_string()), rest.to_string())
                    }
                    None => (None, text),
                }
            }
        }
    }

    /// Expand the i-th `<|image_pad|>` into `image_tokens[i]` copies, then encode.
    pub fn encode_prompt(
        &self,
        text: &str,
        image_tokens: &[usize],
    ) -> Result<Vec<u32>, LocalError> {
        let pieces: Vec<&str> = text.split(IMAGE_PAD).collect();
        if pieces.len() != image_tokens.len() + 1 {
            return Err(LocalError::Template(format!(
                "the rendered prompt has {} image placeholders for {} images",
                pieces.len() - 1,
                image_tokens.len()
            )));
        }
        let mut expanded = String::with_capacity(text.len());
        for (i, piece) in pieces.iter().enumerate() {
            expanded.push_str(piece);
            if let Some(&n) = image_tokens.get(i) {
                expanded.push_str(&IMAGE_PAD.repeat(n));
            }
        }
        self.encode(&expanded)
    }

    /// Encode text as HF does for a rendered prompt (special tokens recognised).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, LocalError> {
        let enc = self
            .text()?
            .0
            .encode(text, true)
            .map_err(|e| LocalError::Template(format!("tokenizer: {e}")))?;
        Ok(enc.get_ids().to_vec())
    }

    /// Decode ids, dropping special tokens (empty when ids-only: the ids are the output).
    pub fn decode(&self, ids: &[u32]) -> String {
        match &self.text {
            Some((tok, _)) => tok.decode(ids, true).unwrap_or_default(),
            None => String::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_json_matches_json_dumps() {
        // Expected strings written from Python's json.dumps(v, ensure_ascii=False).
        let v: Value = serde_json::from_str(
            r#"{"b": [1, 2.0, "é\n"], "a": {}, "c": null, "d": [], "e": 0.5}"#,
        )
        .unwrap();
        assert_eq!(
            python_json(&v, None),
            r#"{"b": [1, 2.0, "é\n"], "a": {}, "c": null, "d": [], "e": 0.5}"#
        );
        assert_eq!(python_json(&v, Some(1)), "{\n \"b\": [\n  1,\n  2.0,\n  \"é\\n\"\n ],\n \"a\": {},\n \"c\": null,\n \"d\": [],\n \"e\": 0.5\n}");
    }
}
