//! `vlm-eval run` (the default command): flags and config file merged into a run, the model
//! chosen, the run executed, and its summary printed.

use std::path::PathBuf;

use clap::Args;
use serde::Deserialize;

mod matrix;
mod model;
mod preset;
mod record;
mod resolve;
mod start;

use crate::agent::conversation::Modality;
use crate::agent::observe::ObsFormat;
use crate::agent::parse::{ParserMode, Protocol};
use crate::cli::common::runtime;
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
    /// model name at an OpenAI-compatible endpoint. Several, comma-separated (`a,b,c`): each
    /// plays the same seeds into its own run folder, then their comparison is printed.
    #[arg(long)]
    pub model: Option<String>,
    /// Play env seeds 0..N-1.
    #[arg(long, conflicts_with = "seed_list")]
    pub seeds: Option<u32>,
    /// Play these env seeds (comma-separated).
    #[arg(long, value_delimiter = ',', allow_hyphen_values = true)]
    pub seed_list: Option<Vec<i64>>,
    /// Model turns per episode [default: 10].
    #[arg(long)]
    pub steps: Option<u32>,
    /// Game length in env steps [default: 10000].
    #[arg(long)]
    pub episode_length: Option<u32>,
    /// Episodes in flight at once [default: 8].
    #[arg(long)]
    pub concurrency: Option<usize>,
    /// Sampling temperature.
    #[arg(long)]
    pub temperature: Option<f32>,
    /// Output token limit per turn.
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
    /// Frame size in pixels sent to the model, also the game's render size [default: 64].
    #[arg(long)]
    pub image_size: Option<usize>,
    /// What each observation holds [default: both].
    #[arg(long, value_enum)]
    pub modality: Option<Modality>,
    /// Text observation format [default: state].
    #[arg(long, value_enum)]
    pub obs_format: Option<ObsFormat>,
    /// Previous turns kept in the prompt [default: 3].
    #[arg(long)]
    pub history: Option<usize>,
    /// Frames kept in the prompt, counting the current one [default: 1].
    #[arg(long)]
    pub image_history: Option<usize>,
    /// Action protocol [default: tool].
    #[arg(long, value_enum)]
    pub protocol: Option<Protocol>,
    /// Actions allowed per turn [default: 8].
    #[arg(long)]
    pub max_actions_per_turn: Option<usize>,
    /// Folder with prompt templates (system_tool.txt, system_text.txt).
    #[arg(long)]
    pub prompts: Option<PathBuf>,
    /// TOML file with the same keys as these flags (kebab-case); flags override it.
    #[arg(long)]
    #[serde(skip)]
    pub config: Option<PathBuf>,
    /// USD per 1M input tokens (default: a built-in table for common models).
    #[arg(long)]
    pub price_in: Option<f64>,
    /// USD per 1M output tokens.
    #[arg(long)]
    pub price_out: Option<f64>,
    /// Redo finished episodes.
    #[arg(long)]
    #[serde(default)]
    pub force: bool,
    /// Directory with crafter's textures.
    #[arg(long)]
    pub assets: Option<PathBuf>,
    /// Per-request timeout in seconds [default: 120].
    #[arg(long)]
    pub request_timeout: Option<f64>,
    /// Retries per request [default: 6].
    #[arg(long)]
    pub max_retries: Option<u32>,
    /// No progress bar and no per-episode lines.
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
    /// Stop starting new turns once this much USD has been spent.
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
    /// Extra HTTP header, `Name: value` (repeatable), e.g. OpenRouter's HTTP-Referer.
    #[arg(long = "header", value_name = "K:V")]
    #[serde(default)]
    pub headers: Vec<String>,
    /// Longest wait between retries (backoff or Retry-After), seconds [default: 60].
    #[arg(long)]
    pub max_retry_wait: Option<f64>,
    /// Total time allowed for one turn's model call, retries included, seconds.
    #[arg(long)]
    pub turn_deadline: Option<f64>,
    /// Device for `--model local:DIR` [default: cpu].
    #[arg(long, value_enum)]
    pub device: Option<crate::model::local::chat::Device>,
    /// Weight precision for `--model local:DIR` [default: f32 on cpu, bf16 on cuda].
    #[arg(long, value_enum)]
    pub dtype: Option<crate::model::local::chat::DType>,
    /// Thinking for `--model local:DIR` with a thinking model (Qwen3.5): the chat template's
    /// `enable_thinking` [default: off, short replies that hold the action].
    #[arg(long, value_enum)]
    pub thinking: Option<crate::model::local::chat::Thinking>,
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
    /// rest again [default: all].
    #[arg(long, value_enum)]
    pub frames: Option<crate::results::frames::FramesMode>,
    /// `[[models]]` in `--config`: the model matrix, each model with its own endpoint.
    #[arg(skip)]
    #[serde(default)]
    pub models: Vec<matrix::ModelEntry>,
    /// Serve the live view of the output folder while the run plays (`vlm-eval view`), on
    /// this port of 127.0.0.1 (`--view` alone: any free port); the URL is printed.
    #[arg(long, value_name = "PORT", num_args = 0..=1, default_missing_value = "0")]
    #[serde(skip)]
    pub view: Option<u16>,
}

/// Run the `run` command; returns the process exit code. Its steps: the flags resolved
/// (`resolve`), the run record (`record`, run.json), the start (`start`: runner launched,
/// table printed).
pub fn cmd_run(a: RunArgs) -> Result<i32, CliError> {
    let mut a = resolve::merge_config(a)?;
    // `--shard auto`: the index (and count) from the scheduler's environment.
    a.shard = a
        .shard
        .map(Shard::resolve_env)
        .transpose()
        .map_err(CliError::usage)?;
    // `--view`: the server starts now (a port in use fails before anything plays); its URL
    // is printed once the run's folder is known: this run's live page, or one per model.
    let view = match a.view {
        Some(port) => {
            let out = a.out.clone().unwrap_or_else(|| PathBuf::from("results"));
            let url = crate::view::spawn_for_run(&out, port)
                .map_err(|e| CliError::usage(format!("--view: {e}")))?;
            Some(url)
        }
        None => None,
    };
    if let Some(models) = matrix::model_list(&a)? {
        return matrix::run_matrix(a, models, view.as_deref());
    }
    let resolved = resolve::resolve_run(&a, None)?;
    let run_info = record::run_record(&resolved)?;
    let plan = start::plan_run(resolved, run_info)?;
    if let Some(base) = &view {
        eprintln!(
            "live view: {}",
            crate::view::run_page_url(base, &plan.store.root)
        );
    }
    let outcome = runtime()?.block_on(start::start_run(plan, &Default::default()))?;
    start::print_summary(&outcome.summary, &outcome.dir);
    Ok(start::exit_code(&outcome, a.allow_errors))
}
