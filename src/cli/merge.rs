//! `vlm-eval merge`: the command around [`crate::eval::merge::merge_runs`].

use std::path::PathBuf;

use clap::Args;

use super::error::CliError;
use crate::eval::merge::{check_running, merge_runs};

/// `vlm-eval merge` flags.
#[derive(Args, Debug)]
pub struct MergeArgs {
    /// Run folders to join (e.g. results/<run>_shard0of4 … _shard3of4).
    #[arg(required = true, num_args = 1..)]
    pub runs: Vec<PathBuf>,
    /// The new run folder to create.
    #[arg(long)]
    pub out: PathBuf,
    /// Replace --out if it exists: only an earlier run folder (with run.json) or an empty folder.
    #[arg(long)]
    pub force: bool,
    /// Merge inputs still being written by a running `vlm-eval run` (only their finished
    /// episodes); without it such an input is refused.
    #[arg(long)]
    pub allow_running: bool,
}

/// Run `vlm-eval merge`.
pub fn cmd_merge(a: MergeArgs) -> Result<i32, CliError> {
    let running = check_running(&a.runs, &a.out, a.allow_running).map_err(|e| CliError {
        code: e.exit_code(),
        message: e.to_string(),
    })?;
    running.iter().for_each(|w| tracing::warn!("{w}"));
    let outcome = merge_runs(&a.runs, &a.out, a.force).map_err(|e| CliError {
        code: e.exit_code(),
        message: e.to_string(),
    })?;
    for w in &outcome.warnings {
        tracing::warn!("{w}");
    }
    let s = &outcome.summary;
    println!(
        "merged {} run(s): {} episode(s) into {} ({} frame(s) hard-linked, {} copied)",
        a.runs.len(),
        outcome.episodes,
        a.out.display(),
        outcome.linked,
        outcome.copied
    );
    println!(
        "{}: progression {:.1}% ± {:.1}, crafter score {:.2}%, {} error(s)",
        s.model, s.progression_mean, s.progression_se, s.crafter_score, s.errors
    );
    Ok(0)
}
