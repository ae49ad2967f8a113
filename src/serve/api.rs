//! The JSON API's request bodies, their validation, and the JSON error type.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use super::session::{Frames, Input, SessionOptions};
use crate::agent::observe::ObsFormat;
use crate::agent::parse::{ParserMode, Protocol};
use crate::agent::preset::{Feedback, Layout, Preset};
use crate::crafter::Action;

/// Most actions one `actions` list may hold.
pub const MAX_ACTIONS_PER_REQUEST: usize = 1024;

/// An error answered as `{"error": "..."}` with a status code.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// One-line message naming the problem and the fix.
    pub message: String,
}

impl ApiError {
    /// 400 Bad Request.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, message)
    }

    /// Any status.
    pub fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut r = (self.status, axum::Json(json!({ "error": self.message }))).into_response();
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        if self.status == StatusCode::UNAUTHORIZED {
            r.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        r
    }
}

/// Server-wide defaults that a create request may override.
#[derive(Clone, Debug, PartialEq)]
pub struct Defaults {
    /// Frame size in pixels.
    pub image_size: usize,
    /// Text observation format.
    pub obs_format: ObsFormat,
    /// Episode length in env steps.
    pub length: u32,
    /// Text parsing protocol.
    pub protocol: Protocol,
    /// Actions per text reply (tool protocol).
    pub max_actions: usize,
}

impl Default for Defaults {
    fn default() -> Self {
        // The evaluator's defaults (`vlm-eval run`).
        Defaults {
            image_size: 64,
            obs_format: ObsFormat::State,
            length: 10_000,
            protocol: Protocol::Tool,
            max_actions: 8,
        }
    }
}

/// `POST /v1/sessions` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateRequest {
    /// Env seed (required).
    pub seed: Option<serde_json::Value>,
    /// Frame size in pixels, 9..=1024.
    pub image_size: Option<usize>,
    /// `state` or `balrog`.
    pub obs_format: Option<serde_json::Value>,
    /// Episode length in env steps (0: unlimited).
    pub length: Option<u32>,
    /// `tool` or `text`.
    pub protocol: Option<serde_json::Value>,
    /// Actions per text reply, 1..=64 (tool protocol).
    pub max_actions: Option<usize>,
    /// Frame in the response: `last` (default) or `none`.
    pub frames: Option<serde_json::Value>,
    /// A preset (`vlm-eval presets`) whose settings replace the server's defaults: frame size,
    /// observation format, length, protocol, parser, reset, render and feedback.
    pub preset: Option<String>,
    /// `lenient`, `strict` or `balrog` [default: the preset's, else lenient].
    pub parser: Option<serde_json::Value>,
}

/// `POST /v1/sessions/{id}/step` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepRequest {
    /// The model's raw output.
    pub text: Option<String>,
    /// Action names (or ids 0..=16).
    pub actions: Option<Vec<serde_json::Value>>,
    /// `last` (default), `all` or `none`.
    pub frames: Option<serde_json::Value>,
}

/// Parse a JSON body into `T`, answering 400 with one line that names the field (never a Rust
/// type): the body must be a JSON object, not an array, string, number or null.
pub fn parse_body<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request(
            "the request body is empty: send a JSON object (Content-Type: application/json)",
        ));
    }
    let value: serde_json::Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("the request body is not valid JSON: {e}")))?;
    let kind = match &value {
        serde_json::Value::Object(_) => None,
        serde_json::Value::Array(_) => Some("an array"),
        serde_json::Value::String(_) => Some("a string"),
        serde_json::Value::Number(_) => Some("a number"),
        serde_json::Value::Bool(_) => Some("a boolean"),
        serde_json::Value::Null => Some("null"),
    };
    if let Some(kind) = kind {
        return Err(ApiError::bad_request(format!(
            "the request body is {kind}: send a JSON object of named fields (see docs/RL.md); fields are never taken by position"
        )));
    }
    serde_json::from_value(value).map_err(|e| {
        // serde names the Rust type in some messages ("expected struct CreateRequest"); the
        // client knows only the fields.
        let msg = e.to_string();
        let msg = match msg.find(", expected struct ") {
            Some(i) => msg[..i].to_string(),
            None => msg,
        };
        ApiError::bad_request(format!("bad request field: {msg}"))
    })
}

/// Read an optional enum-valued field, naming the field and its choices when the value is bad.
fn choice<T: serde::de::DeserializeOwned>(
    field: &str,
    value: &Option<serde_json::Value>,
    choices: &str,
) -> Result<Option<T>, ApiError> {
    match value {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(v) => serde_json::from_value(v.clone()).map(Some).map_err(|_| {
            ApiError::bad_request(format!("`{field}` must be one of {choices}; got {v}"))
        }),
    }
}

impl CreateRequest {
    /// The `frames` choice (`last` or `none`).
    pub fn frames(&self) -> Result<Frames, ApiError> {
        match choice("frames", &self.frames, "\"last\", \"none\"")? {
            Some(Frames::All) => Err(ApiError::bad_request(
                "`frames` must be one of \"last\", \"none\" when creating a session",
            )),
            f => Ok(f.unwrap_or_default()),
        }
    }

    /// Check the values and fill in the server's defaults.
    pub fn options(&self, d: &Defaults) -> Result<SessionOptions, ApiError> {
        let seed = match &self.seed {
            None => {
                return Err(ApiError::bad_request(
                    "missing `seed`: send {\"seed\": <integer>}",
                ))
            }
            Some(v) => v.as_i64().ok_or_else(|| {
                ApiError::bad_request(format!(
                    "`seed` must be an integer between -2^63 and 2^63-1, got {v}"
                ))
            })?,
        };
        self.frames()?;
        let preset = match &self.preset {
            Some(name) => {
                Some(Preset::builtin(name).map_err(|e| ApiError::bad_request(e.to_string()))?)
            }
            None => None,
        };
        let d = &match &preset {
            Some(p) => Defaults {
                image_size: p.observation.image_size,
                obs_format: p.observation.obs_format,
                length: p.episode.episode_length,
                protocol: p.prompt.protocol,
                max_actions: p.prompt.max_actions_per_turn,
            },
            None => d.clone(),
        };
        let image_size = self.image_size.unwrap_or(d.image_size);
        if !(9..=1024).contains(&image_size) {
            return Err(ApiError::bad_request(format!(
                "`image_size` {image_size} is out of range: use 9..=1024 pixels (64 is crafter's)"
            )));
        }
        let protocol =
            choice("protocol", &self.protocol, "\"tool\", \"text\"")?.unwrap_or(d.protocol);
        let obs_format = choice("obs_format", &self.obs_format, "\"state\", \"balrog\"")?
            .unwrap_or(d.obs_format);
        let max_actions = self.max_actions.unwrap_or(d.max_actions);
        if !(1..=64).contains(&max_actions) {
            return Err(ApiError::bad_request(format!(
                "`max_actions` {max_actions} is out of range: use 1..=64"
            )));
        }
        let parser = choice::<ParserMode>(
            "parser",
            &self.parser,
            "\"lenient\", \"strict\", \"balrog\"",
        )?
        .or(preset.as_ref().map(|p| p.parser.parser))
        .unwrap_or_default();
        if let Some(p) = preset
            .as_ref()
            .filter(|p| p.prompt.layout == Layout::Balrog)
        {
            if protocol != Protocol::Text || max_actions != 1 {
                return Err(ApiError::bad_request(format!(
                    "preset `{}` plays one action per text reply: drop `protocol` and `max_actions`",
                    p.name
                )));
            }
        }
        Ok(SessionOptions {
            preset: preset
                .as_ref()
                .map_or_else(|| "vlm-eval".to_string(), |p| p.name.clone()),
            parser,
            feedback: preset
                .as_ref()
                .map_or(Feedback::VlmEval, |p| p.parser.feedback),
            reset_noop: preset.as_ref().is_some_and(|p| p.observation.reset_noop),
            render_twice: preset.as_ref().is_some_and(|p| p.observation.render_twice),
            seed,
            image_size,
            obs_format,
            length: self.length.unwrap_or(d.length),
            protocol,
            max_actions: if protocol == Protocol::Text {
                1
            } else {
                max_actions
            },
        })
    }
}

fn action_of(v: &serde_json::Value) -> Result<Action, ApiError> {
    let found = match v {
        serde_json::Value::String(s) => Action::from_name(s.trim()),
        serde_json::Value::Number(n) => n.as_i64().and_then(Action::from_id),
        _ => None,
    };
    found.ok_or_else(|| {
        let mut shown = v.to_string();
        if shown.len() > 60 {
            shown = format!("{}…", shown.chars().take(60).collect::<String>());
        }
        ApiError::bad_request(format!(
            "unknown action {shown}: use a canonical name (noop, move_left, move_right, move_up, \
             move_down, do, sleep, place_stone, place_table, place_furnace, place_plant, \
             make_wood_pickaxe, make_stone_pickaxe, make_iron_pickaxe, make_wood_sword, \
             make_stone_sword, make_iron_sword) or an id 0..=16, or send the model's output as `text`"
        ))
    })
}

impl StepRequest {
    /// Exactly one of `text` and `actions`, with every action known.
    pub fn input(self) -> Result<(Input, Frames), ApiError> {
        let frames =
            choice("frames", &self.frames, "\"last\", \"all\", \"none\"")?.unwrap_or_default();
        let input = match (self.text, self.actions) {
            (Some(_), Some(_)) => {
                return Err(ApiError::bad_request(
                    "send either `text` (the model's raw output) or `actions`, not both",
                ))
            }
            (None, None) => {
                return Err(ApiError::bad_request(
                    "missing `text` or `actions`: send {\"text\": \"<model output>\"} or {\"actions\": [\"move_left\", \"do\"]}",
                ))
            }
            (Some(t), None) => Input::Text(t),
            (None, Some(list)) => {
                if list.is_empty() {
                    return Err(ApiError::bad_request(
                        "`actions` is empty: give at least one action",
                    ));
                }
                if list.len() > MAX_ACTIONS_PER_REQUEST {
                    return Err(ApiError::bad_request(format!(
                        "`actions` has {} entries; at most {MAX_ACTIONS_PER_REQUEST} per request",
                        list.len()
                    )));
                }
                Input::Actions(list.iter().map(action_of).collect::<Result<_, _>>()?)
            }
        };
        Ok((input, frames))
    }
}

/// Compare two byte strings in time that depends only on their lengths.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_validation_names_the_field() {
        let d = Defaults::default();
        let r: CreateRequest = parse_body(br#"{"seed": 5}"#).unwrap();
        let o = r.options(&d).unwrap();
        assert_eq!(
            (o.seed, o.image_size, o.length, o.max_actions),
            (5, 64, 10_000, 8)
        );
        let bad = |body: &str| {
            parse_body::<CreateRequest>(body.as_bytes())
                .and_then(|r| r.options(&d))
                .unwrap_err()
                .message
        };
        assert!(bad(r#"{"seed": "x"}"#).contains("`seed` must be an integer"));
        assert!(bad(r#"{"seed": 1.5}"#).contains("`seed` must be an integer"));
        assert!(bad(r#"{}"#).contains("missing `seed`"));
        assert!(bad(r#"{"seeds": 1}"#).contains("unknown field `seeds`"));
        assert!(bad(r#"{"seed": 1, "image_size": 5}"#).contains("image_size"));
        assert!(
            bad(r#"{"seed": 1, "obs_format": "pixels"}"#).contains("`obs_format` must be one of")
        );
        assert!(bad(r#"{"seed": 1, "frames": "all"}"#).contains("`frames` must be one of"));
        assert!(bad("").contains("empty"));
        let text: CreateRequest = parse_body(br#"{"seed": 1, "protocol": "text"}"#).unwrap();
        assert_eq!(text.options(&d).unwrap().max_actions, 1);
    }

    #[test]
    fn step_input_is_text_xor_known_actions() {
        let p = |s: &str| parse_body::<StepRequest>(s.as_bytes()).and_then(StepRequest::input);
        assert_eq!(
            p(r#"{"actions": ["move_left", 5, " do "]}"#).unwrap().0,
            Input::Actions(vec![Action::MoveLeft, Action::Do, Action::Do])
        );
        assert!(p(r#"{"actions": ["fly"]}"#)
            .unwrap_err()
            .message
            .contains("unknown action \"fly\""));
        assert!(p(r#"{"actions": [17]}"#).is_err());
        assert!(p(r#"{"actions": []}"#).is_err());
        assert!(p(r#"{"text": "a", "actions": ["do"]}"#).is_err());
        assert!(p(r#"{}"#).is_err());
        assert!(p(r#"{"text": "x", "frames": "some"}"#).is_err());
    }

    #[test]
    fn constant_time_eq_compares_bytes() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
    }
}
