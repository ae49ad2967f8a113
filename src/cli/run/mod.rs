//! `vlm-eval run` (the default command): flags and config file merged into a run, the model
//! chosen, the run executed, and its summary printed.

use std::path::PathBuf;

mod args;
mod estimate;
mod limits;
mod matrix;
mod model;
mod preset;
mod record;
mod resolve;
mod start;

use crate::cli::common::runtime;
use crate::cli::error::CliError;
use crate::eval::shard::Shard;
pub use args::RunArgs;

/// Run the `run` command; returns the process exit code. Its steps: the flags merged with
/// `--config` and checked (`limits`: names, bounds), then resolved (`resolve`), the run
/// record (`record`, run.json), the start (`start`: runner launched, table printed). Every
/// input check happens before the first folder, file, server or request.
pub fn cmd_run(a: RunArgs) -> Result<i32, CliError> {
    let mut a = resolve::merge_config(a)?;
    limits::check(&mut a)?;
    // `--shard auto`: the index (and count) from the scheduler's environment.
    a.shard = a
        .shard
        .map(Shard::resolve_env)
        .transpose()
        .map_err(CliError::usage)?;
    if a.estimate {
        return run_estimate(&a);
    }
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
    start::print_summary(&outcome.summary, &outcome.dir, a.quiet);
    Ok(start::exit_code(&outcome, a.allow_errors))
}

/// `run --estimate`: every model resolved (as a run would be: bad input is exit 2), then
/// its estimate printed; nothing is created or sent.
fn run_estimate(a: &RunArgs) -> Result<i32, CliError> {
    estimate::check_flags(a)?;
    // The counts need the game's text, not its pictures: the built-in sprites, so that an
    // estimate looks for (or fetches) no texture set.
    let textures = std::sync::Arc::new(crate::crafter::TextureSet::builtin());
    let runs = match matrix::model_list(a)? {
        Some(models) => {
            for e in &models {
                let mut args = matrix::model_args(a, e);
                limits::check(&mut args)?;
                resolve::check_price(&args)?;
            }
            let mut runs = Vec::new();
            for e in &models {
                let mut args = matrix::model_args(a, e);
                limits::check(&mut args)?;
                runs.push(resolve::resolve_run(&args, Some(textures.clone()))?);
            }
            runs
        }
        None => vec![resolve::resolve_run(a, Some(textures))?],
    };
    for (i, rr) in runs.iter().enumerate() {
        if i > 0 {
            println!();
        }
        estimate::print_estimate(rr);
    }
    Ok(0)
}
