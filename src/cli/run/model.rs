//! Choosing and configuring the model of a run: the OpenAI-compatible
//! client's options, and the local model loader.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::args::RunArgs;
use crate::cli::error::CliError;
use crate::model::openai::OpenAiConfig;

pub(crate) fn is_local(url: &str) -> bool {
    let rest = url.split("://").nth(1).unwrap_or(url);
    ["localhost", "127.", "[::1]", "0.0.0.0"]
        .iter()
        .any(|p| rest.starts_with(p))
}

/// Load `--model local:DIR` with `--device` / `--dtype`; one model serves all episodes.
pub(crate) fn load_local(
    name: String,
    dir: &Path,
    a: &RunArgs,
    concurrency: usize,
) -> Result<crate::model::local::LocalModel, CliError> {
    use crate::model::local::{LocalModel, LocalOptions};
    use vlm_eval_local::device::Device;
    let opts = LocalOptions {
        dir: dir.to_path_buf(),
        device: a.device.unwrap_or(Device::Cpu),
        dtype: a.dtype,
        max_batch: concurrency.max(1),
        thinking: a.thinking.unwrap_or_default(),
    };
    tracing::info!("loading local model from {}", dir.display());
    LocalModel::load(name, &opts).map_err(|e| match e {
        // Device errors carry their own fix (drivers, libraries, --device cpu).
        vlm_eval_local::LocalError::Device(_) => CliError::usage(e.to_string()),
        _ => CliError::usage(format!(
            "--model local:{}: {e} (fix the checkpoint folder or choose another model)",
            dir.display()
        )),
    })
}

/// Provider options that shape requests.
pub(crate) struct Quirks {
    pub(crate) max_retries: u32,
    pub(crate) use_max_completion_tokens: bool,
    pub(crate) send_tool_choice: bool,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) image_detail: Option<String>,
    pub(crate) adaptive: Option<Arc<crate::model::limit::AdaptiveLimit>>,
    pub(crate) max_retry_wait: Duration,
    pub(crate) turn_deadline: Option<Duration>,
    pub(crate) content_parts: bool,
    pub(crate) auth_hint: Option<String>,
    pub(crate) reasoning_effort: Option<String>,
}

/// What an auth error (or a local server's first error while no key is sent) adds: whether a
/// key was sent, from where, and how to set one. Never the key.
pub(crate) fn auth_hint(sent: bool, key_env: &str, key_file: Option<&Path>) -> String {
    match (sent, key_file) {
        (true, Some(file)) => format!(
            "an API key was sent (read from --api-key-file {}); if it is not the server's, put the right one in that file or use --api-key-env NAME",
            file.display()
        ),
        (true, None) => format!(
            "an API key was sent (from ${key_env}); if it is not the server's (for a LiteLLM proxy: its master key), export {key_env}=<key> or name another variable with --api-key-env"
        ),
        (false, Some(file)) => format!(
            "no API key was sent (--api-key-file {} is empty); if this server needs one, write it there or use --api-key-env NAME",
            file.display()
        ),
        (false, None) => format!(
            "no API key was sent (${key_env} is not set); if this server needs one, export {key_env}=<key> or pass --api-key-env NAME / --api-key-file PATH"
        ),
    }
}

pub(crate) fn openai_config(
    base_url: String,
    api_key: Option<String>,
    model: String,
    timeout: Duration,
    q: &Quirks,
) -> OpenAiConfig {
    let mut cfg = OpenAiConfig::new(base_url, model);
    cfg.api_key = api_key;
    cfg.request_timeout = timeout;
    cfg.max_retries = q.max_retries;
    cfg.use_max_completion_tokens = q.use_max_completion_tokens;
    cfg.send_tool_choice = q.send_tool_choice;
    cfg.extra_headers = q.headers.clone();
    cfg.image_detail = q.image_detail.clone();
    cfg.adaptive = q.adaptive.clone();
    cfg.max_retry_wait = q.max_retry_wait;
    cfg.turn_deadline = q.turn_deadline;
    cfg.content_parts = q.content_parts;
    cfg.auth_hint = q.auth_hint.clone();
    cfg.reasoning_effort = q.reasoning_effort.clone();
    cfg
}
