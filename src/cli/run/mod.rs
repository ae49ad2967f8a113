//! `vlm-eval run` (the default command): flags and config file merged into a run, the model
//! chosen, the run executed, and its summary printed.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use serde::Deserialize;
use serde_json::{json, Value};

mod model;
mod preset;

use crate::agent::conversation::{ConversationConfig, Modality};
use crate::agent::observe::ObsFormat;
use crate::agent::parse::{ParserMode, Protocol};
use crate::agent::preset::Layout;
use crate::agent::prompt::Prompts;
use crate::cli::common::{load_textures, runtime};
use crate::cli::error::CliError;
use crate::crafter::trace::sha256_hex;
use crate::eval::budget::Budget;
use crate::eval::cache::ResponseCache;
use crate::eval::episode::EpisodeConfig;
use crate::eval::runner::{run, RunOptions};
use crate::eval::shard::Shard;
use crate::model::baseline::{BalrogScriptedModel, RandomModel, ScriptedModel};
use crate::model::mock::MockServer;
use crate::model::openai::OpenAiModel;
use crate::model::ChatModel;
use crate::results::store::{check_path_component, RunDir};
use crate::results::summary::Summary;
use model::{auth_hint, builtin_price, is_local, load_local, openai_config, Quirks};

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
    /// model name at an OpenAI-compatible endpoint.
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
    #[arg(long, value_name = "I/N")]
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
}

macro_rules! merge {
    ($cli:ident, $file:ident, $($f:ident),*) => { $( if $cli.$f.is_none() { $cli.$f = $file.$f.clone(); } )* };
}

fn read_config(path: &Path) -> Result<RunArgs, CliError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::usage(format!("cannot read --config {}: {e}", path.display())))?;
    toml::from_str(&text).map_err(|e| {
        let msg = e.message().replace('\n', " ");
        CliError::usage(format!(
            "--config {}: {msg} (keys are the flag names, e.g. seeds = 10)",
            path.display()
        ))
    })
}

/// Run the `run` command; returns the process exit code.
pub fn cmd_run(mut a: RunArgs) -> Result<i32, CliError> {
    if let Some(path) = a.config.clone() {
        let file = read_config(&path)?;
        merge!(
            a,
            file,
            preset,
            parser,
            thinking,
            balrog_src,
            model,
            seeds,
            seed_list,
            steps,
            episode_length,
            concurrency,
            temperature,
            max_tokens,
            base_url,
            api_key_env,
            out,
            run_name,
            image_size,
            modality,
            obs_format,
            history,
            image_history,
            protocol,
            max_actions_per_turn,
            prompts,
            price_in,
            price_out,
            assets,
            request_timeout,
            max_retries,
            api_key_file,
            max_cost,
            max_tokens_total,
            cache,
            max_tokens_field,
            image_detail,
            max_retry_wait,
            turn_deadline,
            shard,
            device,
            dtype
        );
        a.force |= file.force;
        a.quiet |= file.quiet;
        a.allow_errors |= file.allow_errors;
        a.no_tool_choice |= file.no_tool_choice;
        a.seed_param |= file.seed_param;
        a.allow_balrog_drift |= file.allow_balrog_drift;
        if a.headers.is_empty() {
            a.headers = file.headers.clone();
        }
    }
    let model_name = a.model.clone().ok_or_else(|| {
        CliError::usage("--model is required: e.g. --model mock (offline), --model gpt-4o-mini, or --model random")
    })?;
    let r = preset::resolve(&a)?;
    let seeds: Vec<i64> = match (&a.seed_list, a.seeds) {
        (Some(list), _) if !list.is_empty() => list.clone(),
        (_, Some(n)) if n > 0 => (0..n as i64).collect(),
        (_, Some(_)) => return Err(CliError::usage("--seeds must be at least 1")),
        _ => (0..r.seeds as i64).collect(),
    };
    let mut uniq = seeds.clone();
    uniq.sort_unstable();
    uniq.dedup();
    if uniq.len() != seeds.len() {
        return Err(CliError::usage(
            "--seed-list has duplicate seeds; list each seed once",
        ));
    }
    let all_seeds = seeds.clone();
    let seeds = match a.shard {
        Some(shard) => shard.seeds_of(&seeds).map_err(CliError::usage)?,
        None => seeds,
    };
    let turns = r.steps;
    if turns == 0 {
        return Err(CliError::usage(
            "--steps must be at least 1 (model turns per episode)",
        ));
    }
    let image_size = r.image_size;
    if !(9..=1024).contains(&image_size) {
        return Err(CliError::usage(format!("--image-size {image_size} is out of range: use 9..=1024 pixels (64 is crafter's default)")));
    }
    let max_actions = r.max_actions;
    if !(1..=64).contains(&max_actions) {
        return Err(CliError::usage("--max-actions-per-turn must be 1..=64"));
    }
    let concurrency = a.concurrency.unwrap_or(8);
    if concurrency == 0 {
        return Err(CliError::usage("--concurrency must be at least 1"));
    }
    let protocol = r.protocol;
    let prompts = match &a.prompts {
        Some(dir) => Prompts::load(dir).map_err(|e| CliError::usage(e.to_string()))?,
        None => Prompts::builtin(),
    };
    let balrog_layout = r.play.layout == Layout::Balrog;
    let system = prompts.system(protocol, max_actions);
    let conversation = ConversationConfig {
        system: system.clone(),
        protocol,
        modality: r.modality,
        history: r.history,
        image_history: r.image_history,
        max_actions: if protocol == Protocol::Text {
            1
        } else {
            max_actions
        },
        temperature: r.temperature,
        max_tokens: r.max_tokens,
        seed: None,
        tool_choice: r.tool_choice,
    };

    // Endpoint and key (checked before anything slow happens).
    let local_dir = model_name.strip_prefix("local:").map(PathBuf::from);
    let builtin =
        matches!(model_name.as_str(), "mock" | "scripted" | "random") || local_dir.is_some();
    let base_url = a
        .base_url
        .clone()
        .or_else(|| {
            std::env::var("OPENAI_BASE_URL")
                .ok()
                .filter(|s| !s.is_empty())
        })
        .unwrap_or_else(|| "https://api.openai.com/v1".to_string());
    let key_env = a
        .api_key_env
        .clone()
        .unwrap_or_else(|| "OPENAI_API_KEY".to_string());
    let api_key = match &a.api_key_file {
        Some(path) => Some(
            std::fs::read_to_string(path)
                .map_err(|e| {
                    CliError::usage(format!(
                        "cannot read --api-key-file {}: {e}",
                        path.display()
                    ))
                })?
                .trim()
                .to_string(),
        )
        .filter(|k| !k.is_empty()),
        None => std::env::var(&key_env)
            .ok()
            .map(|k| k.trim().to_string())
            .filter(|k| !k.is_empty()),
    };
    let mut headers = Vec::new();
    for h in &a.headers {
        match h.split_once(':') {
            Some((k, v)) if !k.trim().is_empty() => {
                headers.push((k.trim().to_string(), v.trim().to_string()))
            }
            _ => {
                return Err(CliError::usage(format!(
                    "--header '{h}' is not 'Name: value'"
                )))
            }
        }
    }
    if a.max_cost.is_some_and(|c| c.is_nan() || c <= 0.0) || a.max_tokens_total == Some(0) {
        return Err(CliError::usage(
            "--max-cost and --max-tokens-total must be positive",
        ));
    }
    if !builtin && api_key.is_none() && !is_local(&base_url) {
        let source = match &a.api_key_file {
            Some(p) => format!("--api-key-file {} is empty", p.display()),
            None => format!("{key_env} is not set: export {key_env}=<your key> (or pick another variable with --api-key-env)"),
        };
        return Err(CliError::usage(format!(
            "{source}, or try --model mock to run offline"
        )));
    }

    let run_name = a.run_name.clone().unwrap_or_else(|| {
        let safe: String = model_name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        format!(
            "{safe}_{}_{}_{}px_{}t{}",
            if balrog_layout {
                "balrog"
            } else {
                protocol_name(protocol)
            },
            modality_name(conversation.modality),
            image_size,
            turns,
            a.shard.map(|s| s.name_suffix()).unwrap_or_default()
        )
    });
    check_path_component(&run_name).map_err(|why| {
        CliError::usage(format!(
            "--run-name {:?}: {why}; the run folder is --out/<run name>",
            run_name
        ))
    })?;

    let textures = Arc::new(load_textures(a.assets.as_deref())?);
    if balrog_layout && textures.kind() != "official" {
        return Err(CliError::usage(format!(
            "--preset {} sends crafter's official textures, but only the built-in sprites were found: run `vlm-eval assets fetch`, or pass --assets DIR (or set CRAFTER_ASSETS)",
            r.preset.name
        )));
    }
    let prices = match (a.price_in, a.price_out) {
        (Some(i), Some(o)) => Some((i, o)),
        (None, None) if builtin => Some((0.0, 0.0)),
        (None, None) => builtin_price(&model_name),
        _ => {
            return Err(CliError::usage(
                "give both --price-in and --price-out, or neither",
            ))
        }
    };
    let obs_format = r.obs_format;
    let episode_length = r.episode_length;
    let out = a.out.clone().unwrap_or_else(|| PathBuf::from("results"));
    let tools = offered_tools(&conversation)?;
    let mut config = json!({
        "model": model_name,
        "seeds": seeds,
        "steps": turns,
        "episode_length": episode_length,
        "concurrency": concurrency,
        "temperature": r.temperature,
        "max_tokens": r.max_tokens,
        "endpoint": if builtin { Value::Null } else { Value::String(base_url.clone()) },
        "image_size": image_size,
        "modality": conversation.modality,
        "obs_format": obs_format,
        "history": conversation.history,
        "image_history": conversation.image_history,
        "protocol": protocol,
        "max_actions_per_turn": conversation.max_actions,
        "prices_usd_per_1m": prices.map(|(i, o)| json!({"input": i, "output": o})),
        "max_tokens_field": r.max_tokens_field,
        "tool_choice": r.tool_choice,
        "seed_param": a.seed_param,
        "header_names": headers.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>(),
        "image_detail": a.image_detail,
        "run_name": run_name,
        "out": out,
    });
    if let (Some(obj), Value::Object(keys)) = (config.as_object_mut(), r.config_keys(r.play.parser))
    {
        obj.extend(keys);
    }
    if let Some(shard) = a.shard {
        config["shard"] =
            json!({"index": shard.index, "count": shard.count, "all_seeds": all_seeds});
    }
    if local_dir.is_some() {
        config["thinking"] = json!(a.thinking.unwrap_or_default().as_str());
    }
    let mut run_info = json!({
        "vlm_eval_version": env!("CARGO_PKG_VERSION"),
        "git_commit": option_env!("VLM_EVAL_GIT_COMMIT"),
        "crafter_reference": "crafter 1.8.3 (creation-order balancing)",
        "config": config,
        "prompt_sha256": sha256_hex(system.as_bytes()),
        "system_prompt": system,
        "tools": tools,
        "textures": {"kind": textures.kind(), "fingerprint": textures.fingerprint()},
    });
    if let Some(texts) = &r.play.balrog {
        run_info["balrog"] = texts.record(a.allow_balrog_drift);
        if balrog_layout {
            // No system message: the instruction is BALROG's first user message.
            run_info["prompt_sha256"] = json!(texts.prompt_sha256());
            run_info["system_prompt"] = Value::Null;
        }
    }
    let episode = EpisodeConfig {
        model: model_name.clone(),
        turns,
        episode_length,
        image_size,
        obs_format,
        conversation,
        textures,
        prices,
        budget: Arc::new(Budget::new(a.max_cost, a.max_tokens_total)),
        cache: a.cache.clone().map(|dir| {
            Arc::new(ResponseCache::new(
                dir,
                &model_name,
                (!builtin).then_some(base_url.as_str()),
            ))
        }),
        api_seed: a.seed_param,
        play: r.play.clone(),
    };
    let opts = RunOptions {
        episode,
        seeds,
        concurrency,
        force: a.force,
        progress: !a.quiet,
        run_info,
    };
    let store = RunDir::new(out.join(&run_name));
    let timeout = Duration::from_secs_f64(a.request_timeout.unwrap_or(120.0).max(0.001));
    let quirks = Quirks {
        max_retries: a.max_retries.unwrap_or(6),
        use_max_completion_tokens: r.max_tokens_field != "max_tokens",
        send_tool_choice: r.tool_choice,
        content_parts: r.content_parts,
        headers,
        image_detail: a.image_detail.clone(),
        // One limiter per endpoint: halves on 429, grows back by one per 10 successes.
        adaptive: Some(Arc::new(crate::model::limit::AdaptiveLimit::new(
            concurrency,
            10,
        ))),
        max_retry_wait: Duration::from_secs_f64(a.max_retry_wait.unwrap_or(60.0).max(0.0)),
        turn_deadline: a
            .turn_deadline
            .map(|s| Duration::from_secs_f64(s.max(0.001))),
        auth_hint: Some(auth_hint(
            api_key.is_some(),
            &key_env,
            a.api_key_file.as_deref(),
        )),
    };

    // A local checkpoint is loaded before anything else runs, so bad files fail fast.
    let local_model = match &local_dir {
        Some(dir) => Some(load_local(model_name.clone(), dir, &a, concurrency)?),
        None => None,
    };
    let runtime = runtime()?;
    let outcome = runtime.block_on(async move {
        let mut _server = None;
        let model: Arc<dyn ChatModel> = match (local_model, model_name.as_str()) {
            (Some(m), _) => Arc::new(m),
            (None, "scripted") if balrog_layout => Arc::new(BalrogScriptedModel),
            (None, "scripted") => Arc::new(ScriptedModel),
            (None, "random") => Arc::new(RandomModel),
            (None, "mock") => {
                let responder: Arc<dyn ChatModel> = if balrog_layout {
                    Arc::new(BalrogScriptedModel)
                } else {
                    Arc::new(ScriptedModel)
                };
                let server = MockServer::start(responder).await.map_err(|e| CliError {
                    code: 1,
                    message: format!("cannot start the mock server on 127.0.0.1: {e}"),
                })?;
                let mut cfg =
                    openai_config(server.base_url(), None, "mock".into(), timeout, &quirks);
                cfg.auth_hint = None;
                _server = Some(server);
                Arc::new(OpenAiModel::new(cfg).map_err(|e| CliError::usage(e.to_string()))?)
            }
            _ => {
                let cfg = openai_config(base_url, api_key, model_name.clone(), timeout, &quirks);
                Arc::new(OpenAiModel::new(cfg).map_err(|e| CliError::usage(e.to_string()))?)
            }
        };
        run(opts, store, model).await.map_err(|e| CliError {
            code: 1,
            message: e.to_string(),
        })
    })?;
    print_summary(&outcome.summary, &outcome.dir);
    if outcome.interrupted {
        return Ok(130);
    }
    Ok(if outcome.summary.errors > 0 && !a.allow_errors {
        1
    } else {
        0
    })
}

/// The tools a run offers, as OpenAI `tools` JSON (recorded in run.json for the SFT export).
fn offered_tools(conversation: &ConversationConfig) -> Result<Value, CliError> {
    let request = crate::agent::conversation::Conversation::new(conversation.clone())
        .request(&crate::model::Message::text(crate::model::Role::User, ""));
    crate::model::openai::tools_json(&request.tools).map_err(|e| CliError {
        code: 1,
        message: e.to_string(),
    })
}

fn protocol_name(p: Protocol) -> &'static str {
    match p {
        Protocol::Tool => "tool",
        Protocol::Text => "text",
    }
}

fn modality_name(m: Modality) -> &'static str {
    match m {
        Modality::Image => "image",
        Modality::Text => "text",
        Modality::Both => "both",
    }
}

fn print_summary(s: &Summary, dir: &Path) {
    use tabled::settings::Style;
    #[derive(tabled::Tabled)]
    struct Row {
        model: String,
        episodes: String,
        progression: String,
        #[tabled(rename = "crafter score")]
        crafter_score: String,
        achievements: String,
        steps: String,
        deaths: String,
        #[tabled(rename = "replies exact/repaired")]
        format: String,
        tokens: String,
        cost: String,
        #[tabled(rename = "latency p50/p95")]
        latency: String,
    }
    let tokens = match (s.input_tokens, s.output_tokens) {
        (Some(i), Some(o)) => format!("{i} in / {o} out"),
        _ => "unknown".into(),
    };
    let row = Row {
        model: s.model.clone(),
        episodes: if s.errors > 0 {
            format!("{} ({} errors)", s.episodes, s.errors)
        } else {
            s.episodes.to_string()
        },
        progression: format!("{:.1}% ± {:.1}", s.progression_mean, s.progression_se),
        crafter_score: format!("{:.2}%", s.crafter_score),
        achievements: format!("{:.2}", s.score_mean),
        steps: format!("{:.1}", s.steps_mean),
        deaths: format!("{:.0}%", 100.0 * s.death_rate),
        format: match (s.format_exact_rate, s.format_repaired_rate) {
            (Some(e), Some(r)) => format!("{:.1}% / {:.1}%", 100.0 * e, 100.0 * r),
            _ => "n/a".into(),
        },
        tokens,
        cost: s
            .cost_usd
            .map(|c| format!("${c:.4}"))
            .unwrap_or_else(|| "unknown".into()),
        latency: format!("{:.0}/{:.0} ms", s.latency_p50_ms, s.latency_p95_ms),
    };
    let mut table = tabled::Table::new([row]);
    table.with(Style::rounded());
    println!("{table}");
    println!("{}", spend_line(s));
    println!("results: {}", dir.display());
}

/// What the run spent, apart from the per-episode metrics of the table (which are over
/// completed episodes): every request, errored and budget-stopped episodes included.
fn spend_line(s: &Summary) -> String {
    let p = &s.spent;
    let cost = p
        .cost_usd
        .map(|c| format!("${c:.4}"))
        .unwrap_or_else(|| "cost unknown".into());
    let missing = if p.replies_without_usage > 0 {
        format!(" ({} replies reported no usage)", p.replies_without_usage)
    } else {
        String::new()
    };
    format!(
        "spent (all episodes, all requests): {} requests ({} retries), {} in / {} out tokens{missing}, {cost}",
        p.requests, p.retries, p.input_tokens, p.output_tokens
    )
}
