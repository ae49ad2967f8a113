//! `vlm-eval baseline save`: a run's per-seed values and summary as a baseline file.

use std::path::PathBuf;

use clap::Args;

use super::common::partial_error;
use super::error::CliError;
use crate::report::baseline::{baseline_from_run, save_baseline, unfinished_seeds};
use crate::report::validate::open_checked_run;

/// `vlm-eval baseline save` arguments.
#[derive(Args, Debug)]
pub struct BaselineSaveArgs {
    /// Run folder (results/<run>).
    pub run: PathBuf,
    /// Baseline file to write (JSON).
    pub file: PathBuf,
    /// Accept a run with unfinished episodes.
    #[arg(long)]
    pub allow_partial: bool,
}

/// Run `vlm-eval baseline save`.
pub fn cmd_baseline_save(a: BaselineSaveArgs) -> Result<i32, CliError> {
    let run = open_checked_run(&a.run).map_err(|e| CliError::usage(e.to_string()))?;
    let b = baseline_from_run(&run);
    let unfinished = unfinished_seeds(&run);
    if !a.allow_partial && !unfinished.is_empty() {
        return Err(partial_error(
            &run.dir,
            &unfinished,
            run.episodes.len() + unfinished.len(),
        ));
    }
    // A failed write is a failed command (exit 1), as in every command; 2 is bad input.
    save_baseline(&a.file, &b).map_err(|e| CliError {
        code: 1,
        message: e.to_string(),
    })?;
    println!(
        "baseline of {} episodes (model {}, run {}; progression {:.2} ± {:.2}) saved to {}",
        b.episodes.len(),
        b.model,
        b.run,
        b.summary.progression_mean,
        b.summary.progression_se,
        a.file.display()
    );
    Ok(0)
}
