//! `run`'s last step: the start. A resolved run and its record become the runner's options
//! and a model (a local checkpoint loaded, the mock server started, or a client for the
//! endpoint); the runner plays the episodes; the summary table is printed and the exit code
//! chosen.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::model::{auth_hint, load_local, openai_config, Quirks};
use super::resolve::ResolvedRun;
use crate::cli::error::CliError;
use crate::eval::budget::Budget;
use crate::eval::cache::ResponseCache;
use crate::eval::episode::EpisodeConfig;
use crate::eval::runner::{run_shown, Display, RunOptions, RunOutcome};
use crate::model::baseline::{BalrogScriptedModel, RandomModel, ScriptedModel};
use crate::model::local::LocalModel;
use crate::model::mock::MockServer;
use crate::model::openai::OpenAiModel;
use crate::model::ChatModel;
use crate::results::store::RunDir;
use crate::results::summary::Summary;

/// A run ready to start: the runner's options, its folder, and what its model is made of.
pub(super) struct RunPlan {
    /// The runner's options (episode settings, seeds, run.json content).
    pub opts: RunOptions,
    /// The run folder.
    pub store: RunDir,
    model_name: String,
    balrog_layout: bool,
    base_url: String,
    api_key: Option<String>,
    timeout: Duration,
    quirks: Quirks,
    local_model: Option<LocalModel>,
    /// The run folder's lock (`results::lock`), held until the run ends.
    _lock: crate::results::lock::RunLock,
}

/// Turn a resolved run and its record into a plan; a local checkpoint is loaded here, before
/// anything else runs, so bad files fail fast.
pub(super) fn plan_run(rr: ResolvedRun, run_info: Value) -> Result<RunPlan, CliError> {
    let a = &rr.args;
    let r = &rr.r;
    let episode = EpisodeConfig {
        model: rr.model_name.clone(),
        turns: rr.turns,
        episode_length: r.episode_length,
        image_size: rr.image_size,
        obs_format: r.obs_format,
        conversation: rr.conversation.clone(),
        textures: rr.textures.clone(),
        prices: rr.prices,
        budget: Arc::new(Budget::new(a.max_cost, a.max_tokens_total)),
        cache: a.cache.clone().map(|dir| {
            Arc::new(ResponseCache::new(
                dir,
                &rr.model_name,
                (!rr.builtin).then_some(rr.base_url.as_str()),
            ))
        }),
        api_seed: a.seed_param,
        prompt_cache_key: rr.prompt_cache_key.clone(),
        play: r.play.clone(),
        frames: a.frames.unwrap_or_default(),
    };
    let opts = RunOptions {
        episode,
        seeds: rr.seeds.clone(),
        concurrency: rr.concurrency,
        force: a.force,
        progress: !a.quiet,
        run_info,
        stop_on_ctrl_c: true,
    };
    // A local checkpoint loads before the run folder is made, so a bad one leaves no folder.
    let local_model = match &rr.local_dir {
        Some(dir) => Some(load_local(rr.model_name.clone(), dir, a, rr.concurrency)?),
        None => None,
    };
    let store = RunDir::new(rr.out.join(&rr.run_name));
    // A folder holding a run with other settings is refused before it is locked or touched.
    crate::eval::runner::check_resume(&store, &opts.run_info, a.force).map_err(run_error)?;
    // One writer per run folder: refused here, before any request or change in the folder.
    let lock = crate::cli::common::hold_run_folder(&store.root)?;
    let timeout = Duration::from_secs_f64(a.request_timeout.unwrap_or(120.0).max(0.001));
    let quirks = Quirks {
        max_retries: a.max_retries.unwrap_or(6),
        use_max_completion_tokens: r.max_tokens_field != "max_tokens",
        send_tool_choice: r.tool_choice,
        content_parts: r.content_parts,
        reasoning_effort: a.reasoning_effort.map(|e| e.as_str().to_string()),
        headers: rr.headers.clone(),
        image_detail: a.image_detail.clone(),
        // One limiter per endpoint: halves on 429, grows back by one per 10 successes.
        adaptive: Some(Arc::new(crate::model::limit::AdaptiveLimit::new(
            rr.concurrency,
            10,
        ))),
        max_retry_wait: Duration::from_secs_f64(a.max_retry_wait.unwrap_or(60.0).max(0.0)),
        turn_deadline: a
            .turn_deadline
            .map(|s| Duration::from_secs_f64(s.max(0.001))),
        auth_hint: Some(auth_hint(
            rr.api_key.is_some(),
            &rr.key_env,
            a.api_key_file.as_deref(),
        )),
    };
    Ok(RunPlan {
        opts,
        store,
        model_name: rr.model_name,
        balrog_layout: rr.balrog_layout,
        base_url: rr.base_url,
        api_key: rr.api_key,
        timeout,
        quirks,
        local_model,
        _lock: lock,
    })
}

/// Start the plan's model and play the run (inside the tokio runtime), its progress shown on
/// `display` (the default: its own bar).
pub(super) async fn start_run(plan: RunPlan, display: &Display) -> Result<RunOutcome, CliError> {
    let RunPlan {
        opts,
        store,
        model_name,
        balrog_layout,
        base_url,
        api_key,
        timeout,
        quirks,
        local_model,
        _lock,
    } = plan;
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
            let mut cfg = openai_config(server.base_url(), None, "mock".into(), timeout, &quirks);
            cfg.auth_hint = None;
            _server = Some(server);
            Arc::new(OpenAiModel::new(cfg).map_err(|e| CliError::usage(e.to_string()))?)
        }
        _ => {
            let cfg = openai_config(base_url, api_key, model_name.clone(), timeout, &quirks);
            Arc::new(OpenAiModel::new(cfg).map_err(|e| CliError::usage(e.to_string()))?)
        }
    };
    run_shown(opts, store, model, display)
        .await
        .map_err(run_error)
}

/// A runner's error as the command's: a folder holding another run is bad input (exit 2), a
/// failed write or read a failed run (exit 1).
fn run_error(e: crate::eval::runner::RunError) -> CliError {
    use crate::eval::runner::RunError;
    let code = match e {
        RunError::Mismatch(_) => crate::cli::error::EXIT_USAGE,
        RunError::Store(_) | RunError::Read(_) => 1,
    };
    CliError {
        code,
        message: e.to_string(),
    }
}

/// The exit code of a finished run: 130 when interrupted, 1 when episodes ended in errors
/// (unless `--allow-errors`), else 0.
pub(super) fn exit_code(outcome: &RunOutcome, allow_errors: bool) -> i32 {
    if outcome.interrupted {
        return 130;
    }
    if outcome.summary.errors > 0 && !allow_errors {
        1
    } else {
        0
    }
}

/// Print a finished run's one-row table (fitted to the terminal: `cli::table::RUN_DROP`), its
/// spend line and its folder; with `--quiet` only its folder.
pub(super) fn print_summary(s: &Summary, dir: &Path, quiet: bool) {
    use crate::cli::table::{render, RUN_DROP};
    if quiet {
        println!("results: {}", dir.display());
        return;
    }
    let tokens = match (s.input_tokens, s.output_tokens) {
        (Some(i), Some(o)) => format!("{i} in / {o} out"),
        _ => "unknown".into(),
    };
    let cells: [(&str, String); 11] = [
        ("model", s.model.clone()),
        (
            "episodes",
            if s.errors > 0 {
                format!("{} ({} errors)", s.episodes, s.errors)
            } else {
                s.episodes.to_string()
            },
        ),
        (
            "progression",
            format!("{:.1}% ± {:.1}", s.progression_mean, s.progression_se),
        ),
        ("crafter score", format!("{:.2}%", s.crafter_score)),
        ("achievements", format!("{:.2}", s.score_mean)),
        ("steps", format!("{:.1}", s.steps_mean)),
        ("deaths", format!("{:.0}%", 100.0 * s.death_rate)),
        (
            "replies exact/repaired",
            match (s.format_exact_rate, s.format_repaired_rate) {
                (Some(e), Some(r)) => format!("{:.1}% / {:.1}%", 100.0 * e, 100.0 * r),
                _ => "n/a".into(),
            },
        ),
        ("tokens", tokens),
        (
            "cost",
            s.cost_usd
                .map(|c| format!("${c:.4}"))
                .unwrap_or_else(|| "unknown".into()),
        ),
        (
            "latency p50/p95",
            format!("{:.0}/{:.0} ms", s.latency_p50_ms, s.latency_p95_ms),
        ),
    ];
    let table = crate::report::compare::Table {
        header: cells.iter().map(|(h, _)| h.to_string()).collect(),
        rows: vec![cells.into_iter().map(|(_, v)| v).collect()],
    };
    println!("{}", render(&table, RUN_DROP));
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
        "spent (all episodes, all requests): {} requests ({} retries), {} in ({} cached) / {} out tokens{missing}, {cost}",
        p.requests,
        p.retries,
        p.input_tokens,
        crate::report::spend::cached_share(p.cached_input_tokens, p.input_tokens),
        p.output_tokens
    )
}
