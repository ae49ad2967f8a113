//! Error-body normalisation for the OpenAI backend: whatever a server answers with an error
//! status (OpenAI's object, vLLM's `{"object":"error"}`, integer codes, plain text, HTML), we
//! keep the status, the retry hint (see [`super::retry_hint`]), any usage it reports and a
//! short single-line excerpt. Also why one attempt failed ([`Failure`]): the client's errors
//! classified into what is retried and what is reported, with the key redacted.

use std::fmt;
use std::time::Duration;

use async_openai::error::OpenAIError;
use serde_json::Value;

use super::retry_hint::RetryHint;
use crate::model::{ModelError, Usage};

/// Longest error excerpt, in characters.
pub const EXCERPT_CHARS: usize = 200;

/// A non-2xx answer, with what we need to report and retry it.
#[derive(Debug)]
pub struct HttpFailure {
    /// HTTP status code.
    pub status: u16,
    /// The largest applicable retry hint among its headers, if any.
    pub hint: Option<RetryHint>,
    /// Usage the error body reported (such an attempt was billed), if any.
    pub usage: Option<Usage>,
    /// Short, single-line excerpt of the body (≤ [`EXCERPT_CHARS`] characters).
    pub excerpt: String,
}

impl fmt::Display for HttpFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HTTP {}: {}", self.status, self.excerpt)
    }
}

impl std::error::Error for HttpFailure {}

/// Statuses worth another attempt.
pub fn is_retryable_status(status: u16) -> bool {
    matches!(status, 408 | 409 | 429) || (500..=599).contains(&status)
}

/// A short, single-line summary of an error body, whatever its shape.
///
/// JSON bodies give their message (`{"error":{"message":…}}`, `{"object":"error","message":…}`,
/// `{"error":"…"}`, `{"detail":…}`), with type and code when present; HTML loses its tags;
/// anything else is used as text. Whitespace is collapsed and the result cut to
/// [`EXCERPT_CHARS`] characters.
pub fn error_excerpt(body: &str) -> String {
    let trimmed = body.trim();
    if trimmed.is_empty() {
        return "<empty body>".into();
    }
    if let Ok(value) = serde_json::from_str::<Value>(trimmed) {
        if let Some(summary) = json_error_summary(&value) {
            return excerpt_text(&summary);
        }
        return excerpt_text(trimmed);
    }
    if trimmed.starts_with('<') {
        return excerpt_text(&strip_tags(trimmed));
    }
    excerpt_text(trimmed)
}

pub(crate) fn json_error_summary(value: &Value) -> Option<String> {
    // Gemini's OpenAI-compatible endpoint sometimes answers `[{"error": {…}}]`.
    let value = match value {
        Value::Array(items) => items.first()?,
        other => other,
    };
    let obj = value.as_object()?;
    let inner = match obj.get("error") {
        Some(Value::String(s)) => return Some(s.clone()),
        Some(Value::Object(e)) => e,
        _ => obj,
    };
    let message = ["message", "detail", "msg", "title"]
        .iter()
        .find_map(|k| inner.get(*k).or_else(|| obj.get(*k)))
        .map(scalar_text)?;
    let mut extras = Vec::new();
    for key in ["type", "code"] {
        match inner.get(key) {
            Some(Value::Null) | None => {}
            Some(v) => extras.push(format!("{key} {}", scalar_text(v))),
        }
    }
    if extras.is_empty() {
        Some(message)
    } else {
        Some(format!("{message} ({})", extras.join(", ")))
    }
}

fn scalar_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn strip_tags(html: &str) -> String {
    // Prefer the <title>, which usually says it all ("502 Bad Gateway").
    let lower = html.to_ascii_lowercase();
    if let (Some(start), Some(end)) = (lower.find("<title>"), lower.find("</title>")) {
        if start + 7 <= end {
            let title = html[start + 7..end].trim();
            if !title.is_empty() {
                return title.to_string();
            }
        }
    }
    let mut out = String::with_capacity(html.len());
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => {
                in_tag = false;
                out.push(' ');
            }
            _ if !in_tag => out.push(c),
            _ => {}
        }
    }
    out
}

/// Collapse whitespace and cut to [`EXCERPT_CHARS`] characters.
pub(crate) fn excerpt_text(text: &str) -> String {
    let collapsed = text.split_whitespace().collect::<Vec<_>>().join(" ");
    truncate(&collapsed, EXCERPT_CHARS)
}

/// Cut to at most `max` characters, ending in "…" when cut.
pub(crate) fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// Why one attempt failed.
#[derive(Debug)]
pub(super) enum Failure {
    Http(HttpFailure),
    Timeout,
    Connect(String),
    Bad(String),
    Config(String),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Http(h) => write!(f, "{h}"),
            Failure::Timeout => write!(f, "timed out"),
            Failure::Connect(m) => write!(f, "connection failed: {m}"),
            Failure::Bad(m) | Failure::Config(m) => write!(f, "{m}"),
        }
    }
}

impl Failure {
    pub(super) fn retryable(&self) -> bool {
        match self {
            Failure::Http(h) => is_retryable_status(h.status),
            Failure::Timeout | Failure::Connect(_) => true,
            Failure::Bad(_) | Failure::Config(_) => false,
        }
    }

    pub(super) fn rate_limited(&self) -> bool {
        matches!(self, Failure::Http(h) if h.status == 429)
    }

    pub(super) fn hint(&self) -> Option<RetryHint> {
        match self {
            Failure::Http(h) => h.hint,
            _ => None,
        }
    }

    pub(super) fn status(&self) -> Option<u16> {
        match self {
            Failure::Http(h) => Some(h.status),
            _ => None,
        }
    }

    pub(super) fn usage(&self) -> Option<Usage> {
        match self {
            Failure::Http(h) => h.usage,
            _ => None,
        }
    }

    pub(super) fn into_model_error(self, timeout: Duration, retries: u32) -> ModelError {
        let suffix = if retries > 0 {
            format!(" (after {retries} retries)")
        } else {
            String::new()
        };
        match self {
            Failure::Http(h) => ModelError::Http {
                status: h.status,
                message: format!("{}{suffix}", h.excerpt),
            },
            Failure::Timeout => ModelError::Timeout(timeout.as_secs_f64()),
            Failure::Connect(m) => ModelError::Connect(format!("{m}{suffix}")),
            Failure::Bad(m) => ModelError::BadResponse(m),
            Failure::Config(m) => ModelError::Config(m),
        }
    }
}

/// Replace every occurrence of the key.
pub(super) fn redact(text: &str, api_key: Option<&str>) -> String {
    match api_key {
        Some(key) if !key.is_empty() => text.replace(key, super::REDACTED),
        _ => text.to_string(),
    }
}

pub(super) fn classify(error: OpenAIError, api_key: Option<&str>) -> Failure {
    // Redact before cutting, so a truncated echo of the key cannot survive.
    let clean = |text: &str| truncate(&redact(text, api_key), 300);
    match error {
        OpenAIError::Boxed(boxed) => match boxed.downcast::<HttpFailure>() {
            Ok(h) => Failure::Http(*h),
            Err(other) => Failure::Connect(clean(&error_chain(other.as_ref()))),
        },
        OpenAIError::Reqwest(e) => {
            if e.is_timeout() {
                Failure::Timeout
            } else if e.is_builder() {
                Failure::Config(clean(&error_chain(&e)))
            } else if e.is_decode() && cut_off(&e) {
                // The connection ended inside the body: a transport fault, worth a retry.
                Failure::Connect(clean(&format!(
                    "response body cut off: {}",
                    error_chain(&e)
                )))
            } else if e.is_decode() {
                Failure::Bad(clean(&error_chain(&e)))
            } else {
                Failure::Connect(clean(&error_chain(&e)))
            }
        }
        OpenAIError::JSONDeserialize(e, body) => Failure::Bad(format!(
            "not JSON ({e}): {}",
            excerpt_text(&redact(&body, api_key))
        )),
        OpenAIError::ApiError(api) => Failure::Http(HttpFailure {
            status: api.status_code.as_u16(),
            hint: None,
            usage: None,
            excerpt: excerpt_text(&redact(&api.api_error.message, api_key)),
        }),
        OpenAIError::InvalidArgument(m) => Failure::Config(clean(&m)),
        other => Failure::Bad(clean(&other.to_string())),
    }
}

/// Whether an I/O error (the connection failing while the body was read) caused this one.
fn cut_off(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = error.source();
    while let Some(s) = source {
        if s.is::<std::io::Error>() {
            return true;
        }
        source = s.source();
    }
    false
}

/// An error and its sources, joined by ": ".
fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(s) = source {
        let part = s.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excerpts_every_body_shape() {
        let openai = r#"{"error":{"message":"Bad thing","type":"invalid_request_error","param":null,"code":"x"}}"#;
        assert_eq!(
            error_excerpt(openai),
            "Bad thing (type invalid_request_error, code x)"
        );
        let vllm = r#"{"object":"error","message":"too long","type":"BadRequestError","code":400}"#;
        assert_eq!(
            error_excerpt(vllm),
            "too long (type BadRequestError, code 400)"
        );
        assert_eq!(error_excerpt(r#"{"error":"nope"}"#), "nope");
        // Gemini's array body (https://github.com/n4ze3m/page-assist/issues/406).
        let gemini = r#"[{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}]"#;
        assert_eq!(
            error_excerpt(gemini),
            "Resource has been exhausted (e.g. check quota). (code 429)"
        );
        assert_eq!(error_excerpt(r#"{"detail":"Not Found"}"#), "Not Found");
        let html = "<html><head><title>502 Bad Gateway</title></head><body>x</body></html>";
        assert_eq!(error_excerpt(html), "502 Bad Gateway");
        assert_eq!(error_excerpt("<p>a</p>\n<p>b</p>"), "a b");
        assert_eq!(error_excerpt("  rate\n limited "), "rate limited");
        assert_eq!(error_excerpt(""), "<empty body>");
        let long = "é".repeat(500);
        let cut = error_excerpt(&long);
        assert_eq!(cut.chars().count(), EXCERPT_CHARS);
        assert!(cut.ends_with('…'));
    }

    #[test]
    fn retryable_statuses() {
        for s in [408, 409, 429, 500, 502, 503, 599] {
            assert!(is_retryable_status(s));
        }
        for s in [400, 401, 403, 404, 422] {
            assert!(!is_retryable_status(s));
        }
    }
}
