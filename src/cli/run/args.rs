//! The `run` command's flags (`RunArgs`) and `--config`'s `[[models]]` entries, checked
//! against each other: the types every step of `run` reads (a leaf of `cli/run/`).

use std::path::{Path, PathBuf};

use clap::Args;
use serde::Deserialize;

use crate::agent::conversation::Modality;
use crate::agent::observe::ObsFormat;
use crate::agent::parse::{ParserMode, Protocol};
use crate::cli::error::CliError;
use crate::eval::shard::Shard;

/// `vlm-eval run` flags (all optional here so a `--config` file can fill them; defaults apply last).
#[derive(Args, Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RunArgs {
    /// Protocol preset (`vlm-eval presets` lists them): `vlm-eval` (the defaults below) or
    /// `balrog` (BALROG's Crafter evaluation; needs --balrog-src). Flags override its settings.
    #[arg(long)]
    pub preset: Option<String>,
    /// Model: `mock` (offline, scripted policy behind a local OpenAI-compatible server),
    /// `scripted`, `random`, `local:DIR` (a Qwen2-VL checkpoint folder run in-process), or a
    /// model name at an OpenAI-compatible endpoint (names are trimmed; an empty one is
    /// refused). Several, comma-separated (`a,b,c`, at most 64): each plays the same seeds
    /// into its own run folder, then their comparison is printed.
    #[arg(long)]
    pub model: Option<String>,
    /// Play env seeds 0..N-1 (N at most 1000000).
    #[arg(long, conflicts_with = "seed_list")]
    pub seeds: Option<u32>,
    /// Play these env seeds (comma-separated, each once, at most 1000000).
    #[arg(long, value_delimiter = ',', allow_hyphen_values = true)]
    pub seed_list: Option<Vec<i64>>,
    /// Model turns per episode, 1..=100000 [default: 10].
    #[arg(long)]
    pub steps: Option<u32>,
    /// Game length in env steps, 0 for no limit (the turns end it) [default: 10000].
    #[arg(long)]
    pub episode_length: Option<u32>,
    /// Episodes in flight at once, 1..=1024 [default: 8].
    #[arg(long)]
    pub concurrency: Option<usize>,
    /// Sampling temperature, 0 to 2.
    #[arg(long)]
    pub temperature: Option<f32>,
    /// Output token limit per turn, 1..=1000000.
    #[arg(long)]
    pub max_tokens: Option<u32>,
    /// OpenAI-compatible base URL (else $OPENAI_BASE_URL, else https://api.openai.com/v1).
    #[arg(long)]
    pub base_url: Option<String>,
    /// Environment variable holding the API key [default: OPENAI_API_KEY].
    #[arg(long)]
    pub api_key_env: Option<String>,
    /// Output folder [default: results].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Run folder name [default: derived from model and settings].
    #[arg(long)]
    pub run_name: Option<String>,
    /// Frame size in pixels sent to the model, also the game's render size, 9..=1024
    /// [default: 64].
    #[arg(long)]
    pub image_size: Option<usize>,
    /// What each observation holds [default: both].
    #[arg(long, value_enum)]
    pub modality: Option<Modality>,
    /// Text observation format [default: state].
    #[arg(long, value_enum)]
    pub obs_format: Option<ObsFormat>,
    /// Previous turns kept in the prompt, 0..=1000 [default: 3].
    #[arg(long)]
    pub history: Option<usize>,
    /// Frames kept in the prompt, counting the current one, 0..=1000 [default: 1].
    #[arg(long)]
    pub image_history: Option<usize>,
    /// Action protocol [default: tool].
    #[arg(long, value_enum)]
    pub protocol: Option<Protocol>,
    /// Actions allowed per turn, 1..=64 [default: 8].
    #[arg(long)]
    pub max_actions_per_turn: Option<usize>,
    /// Folder with prompt templates (system_tool.txt, system_text.txt).
    #[arg(long)]
    pub prompts: Option<PathBuf>,
    /// TOML file with the same keys as these flags (kebab-case); flags override it.
    #[arg(long)]
    #[serde(skip)]
    pub config: Option<PathBuf>,
    /// USD per 1M input tokens, 0 to 1000000 (default: the price table, `vlm-eval prices`).
    #[arg(long)]
    pub price_in: Option<f64>,
    /// USD per 1M cached input tokens, 0 to 1000000 (with --price-in and --price-out;
    /// default: the --price-in rate).
    #[arg(long)]
    pub price_cached_in: Option<f64>,
    /// USD per 1M output tokens, 0 to 1000000.
    #[arg(long)]
    pub price_out: Option<f64>,
    /// A price table (TOML, the format of `vlm-eval prices`'s table) whose rows override or
    /// extend the built-in one.
    #[arg(long, value_name = "FILE")]
    pub prices: Option<PathBuf>,
    /// Print what the run would send and cost (requests, input tokens of text and images,
    /// output tokens up to --max-tokens, a cost range), per model; send nothing, create
    /// nothing.
    #[arg(long)]
    #[serde(skip)]
    pub estimate: bool,
    /// Redo finished episodes.
    #[arg(long)]
    #[serde(default)]
    pub force: bool,
    /// Directory with crafter's textures.
    #[arg(long)]
    pub assets: Option<PathBuf>,
    /// Per-request timeout in seconds, more than 0 up to 86400 [default: 120].
    #[arg(long)]
    pub request_timeout: Option<f64>,
    /// Retries per request, 0..=100 [default: 6].
    #[arg(long)]
    pub max_retries: Option<u32>,
    /// No progress bar, no per-episode lines and no summary table: only the run folder's
    /// path (`results: DIR`) is printed.
    #[arg(long)]
    #[serde(default)]
    pub quiet: bool,
    /// Read the API key from this file instead of the environment.
    #[arg(long)]
    pub api_key_file: Option<PathBuf>,
    /// Exit 0 even when episodes ended in errors.
    #[arg(long)]
    #[serde(default)]
    pub allow_errors: bool,
    /// Stop starting new turns once this much USD has been spent (more than 0, up to 1000000).
    #[arg(long)]
    pub max_cost: Option<f64>,
    /// Stop starting new turns once this many tokens (in + out) have been used.
    #[arg(long)]
    pub max_tokens_total: Option<u64>,
    /// Cache replies here; a rerun with a warm cache makes no model calls.
    #[arg(long)]
    pub cache: Option<PathBuf>,
    /// Name of the output-limit field: max_completion_tokens (OpenAI) or max_tokens (older servers).
    #[arg(long, value_parser = ["max_completion_tokens", "max_tokens"])]
    pub max_tokens_field: Option<String>,
    /// Do not send `tool_choice` (for servers that reject `required`).
    #[arg(long)]
    #[serde(default)]
    pub no_tool_choice: bool,
    /// Send each episode's env seed as the API `seed` parameter.
    #[arg(long)]
    #[serde(default)]
    pub seed_param: bool,
    /// Extra HTTP header, `Name: value` (repeatable, at most 64), e.g. OpenRouter's
    /// HTTP-Referer.
    #[arg(long = "header", value_name = "K:V")]
    #[serde(default)]
    pub headers: Vec<String>,
    /// Longest wait between retries (backoff or Retry-After), 0 to 86400 seconds [default: 60].
    #[arg(long)]
    pub max_retry_wait: Option<f64>,
    /// Total time allowed for one turn's model call, retries included, more than 0 up to
    /// 86400 seconds.
    #[arg(long)]
    pub turn_deadline: Option<f64>,
    /// Device for `--model local:DIR` [default: cpu].
    #[arg(long, value_enum)]
    pub device: Option<vlm_eval_local::device::Device>,
    /// Weight precision for `--model local:DIR` [default: f32 on cpu, bf16 on cuda].
    #[arg(long, value_enum)]
    pub dtype: Option<vlm_eval_local::backend::DType>,
    /// Thinking for `--model local:DIR` with a thinking model (Qwen3.5): the chat template's
    /// `enable_thinking` [default: off, short replies that hold the action].
    #[arg(long, value_enum)]
    pub thinking: Option<vlm_eval_local::device::Thinking>,
    /// Image detail sent with frames: low, high or auto (omitted by default).
    #[arg(long, value_parser = ["low", "high", "auto"])]
    pub image_detail: Option<String>,
    /// Play only slice i of n (0-based) of the seed list, e.g. 0/4; join with `vlm-eval merge`.
    /// `auto` (or `auto/N`) reads i (and n) from a Slurm array or Kubernetes Indexed Job.
    #[arg(long, value_name = "I/N|auto")]
    pub shard: Option<Shard>,
    /// Reply rule: lenient (recover actions from almost any reply), strict (only the exact
    /// form; a repaired reply plays noop and counts as invalid) or balrog (BALROG's exact
    /// match) [default: the preset's: lenient, or balrog under --preset balrog].
    #[arg(long, value_enum)]
    pub parser: Option<ParserMode>,
    /// A BALROG checkout (commit af7d1f1) to read its prompt texts from, for --preset balrog
    /// [default: $BALROG_SRC].
    #[arg(long)]
    pub balrog_src: Option<PathBuf>,
    /// Run even when the BALROG checkout's texts differ from commit af7d1f1 (recorded).
    #[arg(long)]
    #[serde(default)]
    pub allow_balrog_drift: bool,
    /// Frame files to write: all (every env step), sent (only frames shown to the model) or
    /// none; every frame's sha256 is recorded whichever, and `vlm-eval replay` renders the
    /// rest again; sent and none add `_frames-<mode>` to the default run name [default: all].
    #[arg(long, value_enum)]
    pub frames: Option<crate::results::frames::FramesMode>,
    /// `reasoning_effort` sent with every request, for OpenAI's reasoning models and Gemini:
    /// none, minimal, low, medium or high (recorded; part of the protocol) [default: not sent,
    /// the server's own default].
    #[arg(long, value_enum)]
    pub reasoning_effort: Option<ReasoningEffort>,
    /// OpenAI's `prompt_cache_key`, one per episode (a hash of the run name, and the seed):
    /// auto (sent to api.openai.com only), on (to any endpoint) or off [default: auto].
    #[arg(long, value_enum)]
    pub prompt_cache_key: Option<CacheKeyMode>,
    /// Request layout of the history: window (the last --history turns, frames beyond
    /// --image-history dropped every turn) or append (each request is the previous one plus
    /// the new turn, byte for byte, so the provider's prompt cache hits; a frame past
    /// --image-history becomes a fixed stub once; when 2×--history turns are kept the oldest
    /// --history go at once) (recorded; part of the protocol) [default: window].
    #[arg(long, value_enum)]
    pub history_layout: Option<crate::agent::conversation::HistoryLayout>,
    /// `[[models]]` in `--config`: the model matrix, each model with its own endpoint.
    #[arg(skip)]
    #[serde(default)]
    pub models: Vec<ModelEntry>,
    /// Serve the live view of the output folder while the run plays (`vlm-eval view`), on
    /// this port of 127.0.0.1 (`--view` alone: any free port); the URL is printed.
    #[arg(long, value_name = "PORT", num_args = 0..=1, default_missing_value = "0")]
    #[serde(skip)]
    pub view: Option<u16>,
}

/// `--reasoning-effort`'s values (OpenAI's `reasoning_effort`; Gemini maps them to its
/// thinking levels).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum ReasoningEffort {
    /// No reasoning (gpt-5.1 and later; Gemini 2.5 Flash: thinking off).
    None,
    /// The least reasoning (gpt-5 family).
    Minimal,
    /// Low.
    Low,
    /// Medium (OpenAI's default).
    Medium,
    /// High.
    High,
}

impl ReasoningEffort {
    /// The value sent.
    pub fn as_str(self) -> &'static str {
        match self {
            ReasoningEffort::None => "none",
            ReasoningEffort::Minimal => "minimal",
            ReasoningEffort::Low => "low",
            ReasoningEffort::Medium => "medium",
            ReasoningEffort::High => "high",
        }
    }
}

/// When `prompt_cache_key` is sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum CacheKeyMode {
    /// To OpenAI's own endpoint (api.openai.com) only.
    #[default]
    Auto,
    /// To any endpoint.
    On,
    /// Never.
    Off,
}

/// One `[[models]]` entry of `--config`: a model and its own endpoint settings. A key left out
/// comes from the flags or the file's top level, as for a single model.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ModelEntry {
    /// The model, as `--model` names it.
    pub model: String,
    /// Its OpenAI-compatible base URL.
    pub base_url: Option<String>,
    /// The environment variable holding its API key.
    pub api_key_env: Option<String>,
    /// A file holding its API key.
    pub api_key_file: Option<PathBuf>,
    /// USD per 1M input tokens.
    pub price_in: Option<f64>,
    /// USD per 1M cached input tokens.
    pub price_cached_in: Option<f64>,
    /// USD per 1M output tokens, 0 to 1000000.
    pub price_out: Option<f64>,
    /// Extra HTTP headers, `Name: value`.
    #[serde(default)]
    pub headers: Vec<String>,
    /// Its run folder's name [default: derived from the model and the settings].
    pub run_name: Option<String>,
}

/// Check `--config`'s `[[models]]` against the command line (`cli`, before the file is
/// merged): an entry's key that a flag also sets must agree with it, and a `--model` flag may
/// only pick models the file lists.
pub(super) fn check_entries(cli: &RunArgs, file: &RunArgs, path: &Path) -> Result<(), CliError> {
    if file.models.is_empty() {
        return Ok(());
    }
    let at = format!("--config {}", path.display());
    if file.model.is_some() {
        return Err(CliError::usage(format!(
            "{at} gives both `model` and [[models]]: keep one (each [[models]] entry names its model)"
        )));
    }
    for e in &file.models {
        let m = &e.model;
        let clash = |flag: &str, given: String, entry: String| {
            CliError::usage(format!(
                "--{flag} {given} disagrees with {at}'s [[models]] entry {m:?} ({flag} = {entry}): drop the flag or the entry's key"
            ))
        };
        let pairs: [(&str, Option<String>, Option<String>); 7] = [
            ("base-url", cli.base_url.clone(), e.base_url.clone()),
            (
                "api-key-env",
                cli.api_key_env.clone(),
                e.api_key_env.clone(),
            ),
            (
                "api-key-file",
                cli.api_key_file.as_ref().map(|p| p.display().to_string()),
                e.api_key_file.as_ref().map(|p| p.display().to_string()),
            ),
            (
                "price-in",
                cli.price_in.map(|p| p.to_string()),
                e.price_in.map(|p| p.to_string()),
            ),
            (
                "price-out",
                cli.price_out.map(|p| p.to_string()),
                e.price_out.map(|p| p.to_string()),
            ),
            (
                "price-cached-in",
                cli.price_cached_in.map(|p| p.to_string()),
                e.price_cached_in.map(|p| p.to_string()),
            ),
            ("run-name", cli.run_name.clone(), e.run_name.clone()),
        ];
        for (flag, given, entry) in pairs {
            if let (Some(g), Some(v)) = (given, entry) {
                if g != v {
                    return Err(clash(flag, g, v));
                }
            }
        }
        if !cli.headers.is_empty() && !e.headers.is_empty() && cli.headers != e.headers {
            return Err(clash(
                "header",
                format!("{:?}", cli.headers),
                format!("{:?}", e.headers),
            ));
        }
        if e.price_cached_in.is_some() && e.price_in.is_none() {
            return Err(CliError::usage(format!(
                "{at}'s [[models]] entry {m:?} gives price-cached-in without price-in and price-out: give all three"
            )));
        }
        if e.price_in.is_some() != e.price_out.is_some() {
            return Err(CliError::usage(format!(
                "{at}'s [[models]] entry {m:?} gives only one of price-in and price-out: give both, or neither"
            )));
        }
    }
    if let Some(flag) = &cli.model {
        let listed: Vec<&str> = file.models.iter().map(|e| e.model.as_str()).collect();
        for name in split_models(flag)? {
            if !listed.contains(&name.as_str()) {
                return Err(CliError::usage(format!(
                    "--model {name} is not among {at}'s [[models]] ({}): name models the file lists, or drop --model to run them all",
                    listed.join(", ")
                )));
            }
        }
    }
    Ok(())
}

/// `a,b,c` → its names, each trimmed; an empty name is an error.
pub(super) fn split_models(list: &str) -> Result<Vec<String>, CliError> {
    let names: Vec<String> = list.split(',').map(|s| s.trim().to_string()).collect();
    if names.iter().any(String::is_empty) {
        return Err(CliError::usage(format!(
            "--model {list:?} has an empty name: list models as a,b,c"
        )));
    }
    Ok(names)
}
