//! OpenAI-compatible chat-completions backend (OpenAI, vLLM, OpenRouter, Ollama, llama.cpp, …).
//!
//! Requests are built with async-openai's typed builders and sent with `create_byot`, so the
//! reply arrives as a raw `serde_json::Value` that we parse leniently ourselves: compatible
//! servers differ from OpenAI's schema in many small ways (float `created`, missing ids, odd
//! finish reasons, object `arguments`, `reasoning_content`, …).
//!
//! async-openai's built-in retry layer is replaced by our own transport (a tower service) that
//! turns every non-2xx answer into an [`HttpFailure`] carrying the status, `Retry-After` and a
//! short body excerpt, whatever the body looks like; the stock client would lose the status
//! for any body that is not `{"error":{…,"code":"<string>"}}`. Retries (429, 408, 409, 5xx,
//! connection errors, timeouts) are done here with capped exponential backoff and full jitter;
//! every wait is capped by `max_retry_wait`, and an optional `turn_deadline` bounds one call
//! with all its attempts and waits. A wait follows the largest applicable retry hint of the
//! answer (`retry-after` in seconds or as a date, `retry-after-ms`, LiteLLM's
//! `llm_provider-retry-after`, OpenAI's `x-ratelimit-reset-*`; see [`retry_hint`]) exactly;
//! backoff with jitter is used only when no hint came. Every attempt is recorded
//! ([`Attempt`]: status, error, time, billed usage, the wait after it and the hint it
//! followed), on success in [`ChatReply::attempts`] and on failure in [`CallFailure`]. With an
//! [`AdaptiveLimit`], every attempt holds one of its permits while in flight; a 429 halves the
//! limit and successes grow it back. The API key never appears in `Debug` output or in any
//! error message.
//!
//! How faults are classified (retried or not, and the final error):
//!
//! | fault | retried | final error |
//! |---|---|---|
//! | 429, 408, 409, 5xx | yes (after the retry hint or backoff, capped) | `Http { status }` |
//! | other 4xx | no | `Http { status }` |
//! | attempt longer than `request_timeout` | yes | `Timeout(request_timeout)` |
//! | connection refused / reset / closed before the answer | yes | `Connect` |
//! | body cut off by the connection (shorter than its `Content-Length`) | yes | `Connect` |
//! | complete body that is not JSON (e.g. JSON cut off with a matching length) | no | `BadResponse` |
//! | JSON without a usable choice | no | `BadResponse` |
//! | `turn_deadline` passed (or the next wait would pass it) | no | `Timeout(turn_deadline)` |

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use async_openai::middleware::HttpRequestFactory;
use async_openai::Client;
use reqwest::header::{HeaderName, HeaderValue, AUTHORIZATION};
use serde_json::Value;

use super::attempts::{retries, waited_ms};
use super::limit::AdaptiveLimit;
use super::{Attempt, BoxFuture, CallFailure, ChatModel, ChatReply, ChatRequest, ModelError, Wait};

mod errors;
mod quickack;
pub mod retry_hint;
mod wire;

pub use errors::{error_excerpt, is_retryable_status, HttpFailure, EXCERPT_CHARS};
pub use retry_hint::RetryHint;
pub use wire::{arguments_string, parse_response, png_data_url, request_body, tools_json};

use errors::{classify, redact, truncate, Failure};
use quickack::{proxy_in_env, QuickAckClient};
use retry_hint::retry_hint;
use wire::{parse_detail, response_usage};

/// Default of [`OpenAiConfig::max_retry_wait`]: the longest wait between attempts.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);
/// First backoff ceiling (doubled per retry, full jitter below it).
const BACKOFF_BASE: Duration = Duration::from_millis(500);
/// Largest backoff ceiling when the server gives no `Retry-After`.
const BACKOFF_CAP: Duration = Duration::from_secs(20);
/// What replaces the API key wherever it might leak.
const REDACTED: &str = "[redacted]";

/// Settings of one OpenAI-compatible endpoint.
#[derive(Clone)]
pub struct OpenAiConfig {
    /// API base including the version, e.g. `https://api.openai.com/v1` (trailing `/` removed).
    pub base_url: String,
    /// Bearer token; `None` sends no `Authorization` header. Never logged.
    pub api_key: Option<String>,
    /// Model name sent in each request.
    pub model: String,
    /// Time limit of one attempt.
    pub request_timeout: Duration,
    /// Retries after the first attempt (429, 408, 409, 5xx, connection errors, timeouts).
    pub max_retries: u32,
    /// Send `max_completion_tokens` (true) or the older `max_tokens` (false).
    pub use_max_completion_tokens: bool,
    /// Send the request's `tool_choice` (some servers reject it).
    pub send_tool_choice: bool,
    /// Extra HTTP headers sent with every request.
    pub extra_headers: Vec<(String, String)>,
    /// Image `detail` ("low", "high", "auto", "original"); `None` omits it.
    pub image_detail: Option<String>,
    /// Adaptive limit on attempts in flight to this endpoint (share one `Arc` between every
    /// model talking to it); `None`: no limit.
    pub adaptive: Option<Arc<AdaptiveLimit>>,
    /// Longest wait between attempts (backoff or `Retry-After`); larger waits are cut to it.
    pub max_retry_wait: Duration,
    /// Longest time one `chat()` call may take with every attempt and wait (`None`: no limit);
    /// passing it gives [`ModelError::Timeout`].
    pub turn_deadline: Option<Duration>,
    /// Send every message's content as a list of parts, text ones included (BALROG's client
    /// does); otherwise a text-only message's content is a plain string.
    pub content_parts: bool,
    /// Appended to the final error of a call refused with 401/403 (or LiteLLM's "No connected
    /// db"), and, while no key is sent, to any error status before a call has succeeded: says
    /// whether a key was sent, from where, and how to set one (never the key itself).
    pub auth_hint: Option<String>,
    /// On plain `http://` endpoints, acknowledge every read at once (`TCP_QUICKACK`, Linux),
    /// so servers that write headers and body separately without `TCP_NODELAY` do not stall
    /// each keep-alive call for a delayed ACK (see `quickack.rs`). Ignored with an HTTP proxy
    /// in the environment.
    pub quickack: bool,
    /// `reasoning_effort` sent with every request (`none`, `minimal`, `low`, `medium`,
    /// `high`; OpenAI's reasoning models and Gemini); `None` omits it.
    pub reasoning_effort: Option<String>,
}

impl OpenAiConfig {
    /// A config with defaults: no key, 60 s per attempt, 3 retries, `max_completion_tokens`,
    /// `tool_choice` sent, no extra headers, image detail omitted, no adaptive limit, waits
    /// capped at 60 s, no turn deadline, no auth hint, quick ACKs on plain HTTP.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> OpenAiConfig {
        OpenAiConfig {
            base_url: base_url.into(),
            api_key: None,
            model: model.into(),
            request_timeout: Duration::from_secs(60),
            max_retries: 3,
            use_max_completion_tokens: true,
            send_tool_choice: true,
            extra_headers: Vec::new(),
            image_detail: None,
            adaptive: None,
            max_retry_wait: MAX_RETRY_AFTER,
            turn_deadline: None,
            content_parts: false,
            auth_hint: None,
            quickack: true,
            reasoning_effort: None,
        }
    }
}

impl fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let header_names: Vec<&str> = self.extra_headers.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("OpenAiConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| REDACTED))
            .field("model", &self.model)
            .field("request_timeout", &self.request_timeout)
            .field("max_retries", &self.max_retries)
            .field("use_max_completion_tokens", &self.use_max_completion_tokens)
            .field("send_tool_choice", &self.send_tool_choice)
            .field("extra_headers (values redacted)", &header_names)
            .field("image_detail", &self.image_detail)
            .field("adaptive", &self.adaptive)
            .field("max_retry_wait", &self.max_retry_wait)
            .field("turn_deadline", &self.turn_deadline)
            .field("auth_hint", &self.auth_hint)
            .field("quickack", &self.quickack)
            .field("reasoning_effort", &self.reasoning_effort)
            .finish()
    }
}

/// A chat model behind an OpenAI-compatible `/chat/completions` endpoint.
pub struct OpenAiModel {
    config: OpenAiConfig,
    client: Client<OpenAIConfig>,
    jitter: AtomicU64,
    /// A call has succeeded (the no-key hint is for errors before that).
    answered: AtomicBool,
}

impl fmt::Debug for OpenAiModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiModel")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl OpenAiModel {
    /// Validate the config and build the HTTP client (no request is made).
    pub fn new(config: OpenAiConfig) -> Result<OpenAiModel, ModelError> {
        let mut config = config;
        config.base_url = normalise_base_url(&config.base_url)?;
        config.api_key = config.api_key.filter(|k| !k.is_empty());
        if config.model.trim().is_empty() {
            return Err(ModelError::Config("model name is empty".into()));
        }
        if config.request_timeout.is_zero() {
            return Err(ModelError::Config(
                "request timeout must be positive".into(),
            ));
        }
        if config.turn_deadline.is_some_and(|d| d.is_zero()) {
            return Err(ModelError::Config("turn deadline must be positive".into()));
        }
        parse_detail(config.image_detail.as_deref())?;

        let mut openai = OpenAIConfig::default()
            .with_api_base(config.base_url.clone())
            .with_api_key(config.api_key.clone().unwrap_or_default())
            .with_org_id("")
            .with_project_id("");
        if let Some(key) = &config.api_key {
            // async-openai unwraps the parsed header value, so check it here first.
            if HeaderValue::from_str(&format!("Bearer {key}")).is_err() {
                return Err(ModelError::Config(
                    "API key contains characters not allowed in an HTTP header".into(),
                ));
            }
        }
        for (name, value) in &config.extra_headers {
            let header = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| ModelError::Config(format!("invalid header name {name:?}")))?;
            openai = openai
                .with_header(header, value.as_str())
                .map_err(|_| ModelError::Config(format!("invalid value for header {name:?}")))?;
        }

        let connect_timeout = config.request_timeout.min(Duration::from_secs(10));
        let mut builder = reqwest::Client::builder()
            .timeout(config.request_timeout)
            .connect_timeout(connect_timeout);
        if is_plain_http(&config.base_url) {
            // A plain-HTTP endpoint (a local server) needs no certificate store: loading the
            // system's roots costs ~5-10 ms of every start. HTTPS stays refused (no roots).
            builder = builder.tls_certs_only(Vec::new());
        }
        let http = builder
            .build()
            .map_err(|e| ModelError::Config(format!("cannot build HTTP client: {e}")))?;
        let quick = (config.quickack && is_plain_http(&config.base_url) && !proxy_in_env())
            .then(|| QuickAckClient::new(connect_timeout));
        let transport = Transport {
            http: http.clone(),
            quick,
            api_key: config.api_key.clone(),
        };
        // `build`, not `with_config`: that one first makes a default reqwest client, which
        // loads the system's certificate store (~150 files, tens of ms at every start) even
        // for a plain-HTTP endpoint. Then the transport, last: calling `with_http_client`
        // after `with_http_service` would reinstall the library's own retrying executor.
        let client = Client::build(http, openai).with_http_service(transport);
        let seed = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0x5EED);
        Ok(OpenAiModel {
            config,
            client,
            jitter: AtomicU64::new(seed),
            answered: AtomicBool::new(false),
        })
    }

    /// The normalised config in use.
    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }

    /// One request with retries, under the adaptive limit and the turn deadline if set.
    async fn call(&self, request: &ChatRequest) -> Result<ChatReply, CallFailure> {
        let body = request_body(&self.config, request)?;
        let started = Instant::now();
        let deadline = self
            .config
            .turn_deadline
            .map(|d| tokio::time::Instant::now() + d);
        let mut attempts: Vec<Attempt> = Vec::new();
        loop {
            let permit = match &self.config.adaptive {
                Some(limit) => match within(deadline, limit.acquire()).await {
                    Some(permit) => Some(permit),
                    None => return Err(self.deadline_passed(attempts)),
                },
                None => None,
            };
            // The last attempt before the deadline only gets what is left of it.
            let left = deadline.map(|d| d.saturating_duration_since(tokio::time::Instant::now()));
            let attempt_limit = left.map_or(self.config.request_timeout, |l| {
                l.min(self.config.request_timeout)
            });
            let sent = Instant::now();
            let outcome = tokio::time::timeout(
                attempt_limit,
                self.client.chat().create_byot::<_, Value>(&body),
            )
            .await;
            let ms = sent.elapsed().as_secs_f64() * 1000.0;
            let failure = match outcome {
                Ok(Ok(value)) => {
                    if let Some(permit) = permit {
                        permit.succeeded();
                    }
                    let usage = response_usage(&value);
                    return match parse_response(value) {
                        Ok(mut reply) => {
                            self.answered.store(true, Ordering::Relaxed);
                            attempts.push(Attempt {
                                ms,
                                usage,
                                ..Attempt::default()
                            });
                            reply.retries = retries(&attempts);
                            reply.retry_wait_ms = waited_ms(&attempts);
                            reply.latency_ms = started.elapsed().as_secs_f64() * 1000.0;
                            reply.attempts = attempts;
                            Ok(reply)
                        }
                        Err(e) => {
                            let error = self.redact_error(e);
                            attempts.push(Attempt {
                                error: Some(error.to_string()),
                                ms,
                                usage,
                                ..Attempt::default()
                            });
                            Err(CallFailure { error, attempts })
                        }
                    };
                }
                Ok(Err(e)) => classify(e, self.config.api_key.as_deref()),
                Err(_) if attempt_limit < self.config.request_timeout => {
                    attempts.push(Attempt {
                        error: Some("cut by the turn deadline".into()),
                        ms,
                        ..Attempt::default()
                    });
                    return Err(self.deadline_passed(attempts));
                }
                Err(_) => Failure::Timeout,
            };
            match permit {
                Some(permit) if failure.rate_limited() => {
                    if permit.rate_limited() {
                        tracing::debug!(
                            model = %self.config.model,
                            limit = self.concurrency_limit().unwrap_or(0),
                            "rate limited: in-flight limit halved"
                        );
                    }
                }
                other => drop(other),
            }
            // Retries made before this attempt (its index).
            let retries = attempts.len() as u32;
            attempts.push(Attempt {
                status: failure.status(),
                error: Some(self.redact(&failure.to_string())),
                ms,
                usage: failure.usage(),
                wait: None,
            });
            if retries < self.config.max_retries && failure.retryable() {
                let (delay, mut wait) = self.wait_for(retries, failure.hint());
                if deadline.is_some_and(|d| tokio::time::Instant::now() + delay >= d) {
                    return Err(self.deadline_passed(attempts));
                }
                tracing::debug!(
                    model = %self.config.model,
                    retry = retries + 1,
                    delay_ms = delay.as_millis() as u64,
                    after = %wait.after,
                    error = %self.redact(&failure.to_string()),
                    "retrying chat request"
                );
                let slept = Instant::now();
                tokio::time::sleep(delay).await;
                wait.ms = slept.elapsed().as_secs_f64() * 1000.0;
                if let Some(last) = attempts.last_mut() {
                    last.wait = Some(wait);
                }
                continue;
            }
            let error = failure.into_model_error(self.config.request_timeout, retries);
            let error = self.with_auth_hint(self.redact_error(error));
            return Err(CallFailure { error, attempts });
        }
    }

    /// The failure of a call that ran out of its turn deadline.
    fn deadline_passed(&self, attempts: Vec<Attempt>) -> CallFailure {
        let limit = self.config.turn_deadline.unwrap_or_default();
        tracing::debug!(
            model = %self.config.model,
            retries = retries(&attempts),
            deadline_s = limit.as_secs_f64(),
            "turn deadline passed"
        );
        CallFailure {
            error: ModelError::Timeout(limit.as_secs_f64()),
            attempts,
        }
    }

    /// The auth hint appended to an HTTP error that calls for it (see
    /// [`OpenAiConfig::auth_hint`]).
    fn with_auth_hint(&self, error: ModelError) -> ModelError {
        let Some(hint) = &self.config.auth_hint else {
            return error;
        };
        match error {
            ModelError::Http { status, message }
                if matches!(status, 401 | 403)
                    || message.contains("No connected db")
                    || (self.config.api_key.is_none()
                        && !self.answered.load(Ordering::Relaxed)) =>
            {
                ModelError::Http {
                    status,
                    message: format!("{message}; {hint}"),
                }
            }
            other => other,
        }
    }

    /// Delay before retry number `retry_index + 1`, and how it was chosen: the hint exactly
    /// (capped by `max_retry_wait`), else backoff with full jitter.
    fn wait_for(&self, retry_index: u32, hint: Option<RetryHint>) -> (Duration, Wait) {
        let max = self.config.max_retry_wait;
        match hint {
            Some(h) => (
                h.wait.min(max),
                Wait {
                    ms: 0.0,
                    after: h.header.to_string(),
                    hint_ms: Some(h.wait.as_secs_f64() * 1000.0),
                    capped: h.wait > max,
                },
            ),
            None => (
                BACKOFF_BASE
                    .saturating_mul(1u32 << retry_index.min(16))
                    .min(BACKOFF_CAP)
                    .mul_f64(self.next_unit())
                    .min(max),
                Wait {
                    ms: 0.0,
                    after: "backoff".into(),
                    hint_ms: None,
                    capped: false,
                },
            ),
        }
    }

    /// Uniform in [0, 1) from a splitmix64 stream.
    fn next_unit(&self) -> f64 {
        const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut z = self
            .jitter
            .fetch_add(GAMMA, Ordering::Relaxed)
            .wrapping_add(GAMMA);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }

    fn redact(&self, text: &str) -> String {
        redact(text, self.config.api_key.as_deref())
    }

    fn redact_error(&self, error: ModelError) -> ModelError {
        match error {
            ModelError::Http { status, message } => ModelError::Http {
                status,
                message: self.redact(&message),
            },
            ModelError::Connect(m) => ModelError::Connect(self.redact(&m)),
            ModelError::BadResponse(m) => ModelError::BadResponse(self.redact(&m)),
            ModelError::Config(m) => ModelError::Config(self.redact(&m)),
            other @ ModelError::Timeout(_) => other,
        }
    }
}

impl ChatModel for OpenAiModel {
    fn name(&self) -> &str {
        &self.config.model
    }

    fn chat<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<ChatReply, ModelError>> {
        Box::pin(async move { self.call(request).await.map_err(|f| f.error) })
    }

    fn chat_traced<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<ChatReply, CallFailure>> {
        Box::pin(self.call(request))
    }

    fn concurrency_limit(&self) -> Option<usize> {
        self.config.adaptive.as_ref().map(|l| l.current())
    }
}

/// Run `fut` unless `deadline` passes first (`None` when it does).
async fn within<T>(
    deadline: Option<tokio::time::Instant>,
    fut: impl std::future::Future<Output = T>,
) -> Option<T> {
    match deadline {
        Some(d) => tokio::time::timeout_at(d, fut).await.ok(),
        None => Some(fut.await),
    }
}

/// Our tower transport: plain reqwest, no retries, every error status kept.
#[derive(Clone)]
struct Transport {
    http: reqwest::Client,
    /// Plain-HTTP requests go through this when set (quick ACKs).
    quick: Option<QuickAckClient>,
    /// `None`: strip the `Authorization` header. Also redacted from error bodies before they
    /// are cut, so a truncated echo cannot leak part of it.
    api_key: Option<String>,
}

impl tower::Service<HttpRequestFactory> for Transport {
    type Response = reqwest::Response;
    type Error = OpenAIError;
    type Future = BoxFuture<'static, Result<reqwest::Response, OpenAIError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, factory: HttpRequestFactory) -> Self::Future {
        let http = self.http.clone();
        let quick = self.quick.clone();
        let api_key = self.api_key.clone();
        Box::pin(async move {
            let mut request = factory.build().await?;
            if api_key.is_none() {
                request.headers_mut().remove(AUTHORIZATION);
            }
            let response = match quick {
                Some(quick) if request.url().scheme() == "http" => {
                    quick.execute(request).await.map_err(OpenAIError::Boxed)?
                }
                _ => http.execute(request).await?,
            };
            let status = response.status();
            if status.is_success() {
                return Ok(response);
            }
            let hint = retry_hint(response.headers(), SystemTime::now());
            let (body, json) = match response.bytes().await {
                Ok(bytes) => (
                    String::from_utf8_lossy(&bytes).into_owned(),
                    serde_json::from_slice::<Value>(&bytes).ok(),
                ),
                Err(e) if e.is_timeout() => return Err(OpenAIError::Reqwest(e)),
                Err(_) => ("<body unreadable>".to_string(), None),
            };
            let usage = json.as_ref().and_then(response_usage);
            // A hint in the body (Gemini's RetryInfo, "retry in 55s") joins the headers'.
            let from_body = json.as_ref().and_then(retry_hint::body_retry_hint);
            let hint = retry_hint::largest(
                [hint, from_body]
                    .into_iter()
                    .flatten()
                    .map(|h| (h.header, Some(h.wait.as_secs_f64()))),
            );
            Err(OpenAIError::Boxed(Box::new(HttpFailure {
                status: status.as_u16(),
                hint,
                usage,
                excerpt: error_excerpt(&redact(&body, api_key.as_deref())),
            })))
        })
    }
}

fn normalise_base_url(raw: &str) -> Result<String, ModelError> {
    let mut url = raw.trim().trim_end_matches('/').to_string();
    if let Some(stripped) = url.strip_suffix("/chat/completions") {
        url = stripped.trim_end_matches('/').to_string();
    }
    let scheme_ok = url.starts_with("http://") || url.starts_with("https://");
    if !scheme_ok || url.len() <= "https://".len() {
        return Err(ModelError::Config(format!(
            "base URL must start with http:// or https:// (got {:?})",
            truncate(raw, 80)
        )));
    }
    Ok(url)
}

/// Whether `url` is plain `http://` (case-insensitive), so the client needs no TLS roots.
fn is_plain_http(url: &str) -> bool {
    url.get(..7)
        .is_some_and(|p| p.eq_ignore_ascii_case("http://"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_http_urls_are_told_apart_from_https() {
        assert!(is_plain_http("http://127.0.0.1:8000/v1"));
        assert!(is_plain_http("HTTP://localhost/v1"));
        assert!(!is_plain_http("https://api.openai.com/v1"));
        assert!(!is_plain_http("http:/x"));
        assert!(!is_plain_http(""));
    }

    fn config() -> OpenAiConfig {
        OpenAiConfig {
            api_key: Some("sk-unit-SECRET-123".into()),
            image_detail: Some("low".into()),
            ..OpenAiConfig::new("http://127.0.0.1:9/v1/", "test-model")
        }
    }

    #[test]
    fn backoff_is_jittered_and_capped() {
        let model = OpenAiModel::new(config()).unwrap();
        for i in 0..40 {
            let (d, wait) = model.wait_for(i % 8, None);
            let ceiling = BACKOFF_BASE.saturating_mul(1 << (i % 8)).min(BACKOFF_CAP);
            assert!(d <= ceiling);
            assert_eq!((wait.after.as_str(), wait.hint_ms), ("backoff", None));
        }
        let hint = |secs: u64| RetryHint {
            header: "llm_provider-retry-after",
            wait: Duration::from_secs(secs),
        };
        let (d, wait) = model.wait_for(0, Some(hint(600)));
        assert_eq!(d, MAX_RETRY_AFTER);
        assert!(wait.capped);
        assert_eq!(wait.hint_ms, Some(600_000.0));
        // A hint is followed exactly, with no jitter, whatever the retry number.
        for i in 0..5 {
            let (d, wait) = model.wait_for(i, Some(hint(2)));
            assert_eq!(d, Duration::from_secs(2));
            assert_eq!(wait.after, "llm_provider-retry-after");
            assert!(!wait.capped);
        }
        let units: Vec<f64> = (0..100).map(|_| model.next_unit()).collect();
        assert!(units.iter().all(|u| (0.0..1.0).contains(u)));
        assert!(units.iter().any(|u| *u > 0.5) && units.iter().any(|u| *u < 0.5));
    }

    #[test]
    fn config_validation_and_redaction() {
        let model = OpenAiModel::new(config()).unwrap();
        assert_eq!(model.config().base_url, "http://127.0.0.1:9/v1");
        assert_eq!(model.name(), "test-model");
        let debug = format!("{model:?}");
        assert!(!debug.contains("SECRET"), "{debug}");
        assert!(debug.contains(REDACTED));
        let full = OpenAiConfig::new("https://x.test/v1/chat/completions", "m");
        assert_eq!(
            OpenAiModel::new(full).unwrap().config().base_url,
            "https://x.test/v1"
        );
        for bad in [
            OpenAiConfig::new("ftp://x", "m"),
            OpenAiConfig::new("http://x/v1", " "),
            OpenAiConfig {
                api_key: Some("sk-SECRET\nX".into()),
                ..config()
            },
            OpenAiConfig {
                extra_headers: vec![("bad header".into(), "v".into())],
                ..config()
            },
            OpenAiConfig {
                image_detail: Some("medium".into()),
                ..config()
            },
        ] {
            let err = OpenAiModel::new(bad).unwrap_err();
            assert!(matches!(err, ModelError::Config(_)));
            assert!(!err.to_string().contains("SECRET"), "{err}");
        }
        let err = model.redact_error(ModelError::Http {
            status: 401,
            message: "key sk-unit-SECRET-123 is wrong".into(),
        });
        assert_eq!(err.to_string(), "HTTP 401: key [redacted] is wrong");
    }
}
