//! `vlm-eval merge`: the command around [`crate::eval::merge::merge_runs`].

use std::path::PathBuf;

use clap::Args;

use super::error::CliError;
use crate::eval::merge::{check_distinct, check_inputs, check_running, merge_runs, MergeError};
use crate::eval::shard_status::{shard_status, Status};

/// `vlm-eval merge` flags.
#[derive(Args, Debug)]
pub struct MergeArgs {
    /// Run folders to join (e.g. results/<run>_shard0of4 … _shard3of4).
    #[arg(required = true, num_args = 1..)]
    pub runs: Vec<PathBuf>,
    /// The new run folder to create.
    #[arg(long, required_unless_present = "check")]
    pub out: Option<PathBuf>,
    /// Replace --out if it exists: only an earlier merge's folder (run.json with merged_from) or
    /// an empty folder.
    #[arg(long)]
    pub force: bool,
    /// Merge inputs still being written by a running `vlm-eval run` (only their finished
    /// episodes; the seeds still playing are left out, as with --allow-missing); without it
    /// such an input is refused.
    #[arg(long)]
    pub allow_running: bool,
    /// Only report which shards and seeds are missing, unfinished or errored, and the Slurm
    /// array subset to resubmit; exit 1 if any, 0 if the set is complete. Writes nothing.
    #[arg(long, conflicts_with_all = ["out", "force", "allow_missing"])]
    pub check: bool,
    /// Merge even when seeds of the run have no finished episode in any input (a missing or
    /// unfinished shard); they are left out, with a warning.
    #[arg(long)]
    pub allow_missing: bool,
}

fn merge_error(e: MergeError) -> CliError {
    CliError {
        code: e.exit_code(),
        message: e.to_string(),
    }
}

fn seed_list(seeds: &[i64]) -> String {
    let text: Vec<String> = seeds.iter().map(i64::to_string).collect();
    format!("[{}]", text.join(", "))
}

/// Print `--check`'s report; returns the exit code (1 when something must run again).
fn print_status(st: &Status) -> i32 {
    for p in &st.parts {
        let name = match p.shard {
            Some(s) => format!("shard {s}"),
            None => "run".to_string(),
        };
        let state = if p.dir.is_none() {
            "missing: no folder".to_string()
        } else if p.is_done() {
            "complete".to_string()
        } else {
            let mut why = Vec::new();
            if !p.unfinished.is_empty() {
                why.push(format!("unfinished seeds {}", seed_list(&p.unfinished)));
            }
            if !p.errored.is_empty() {
                why.push(format!("errored seeds {}", seed_list(&p.errored)));
            }
            why.join(", ")
        };
        let place = p
            .dir
            .as_ref()
            .map(|d| format!("  {}", d.display()))
            .unwrap_or_default();
        println!(
            "{name}: {}/{} episode(s) done, {state}{place}",
            p.complete.len(),
            p.seeds.len()
        );
    }
    if st.is_done() {
        println!("complete: merge them with `vlm-eval merge … --out DIR`");
        return 0;
    }
    if !st.missing.is_empty() {
        println!("missing seeds: {}", seed_list(&st.missing));
    }
    let redo = st.redo();
    if let (Some(count), false) = (st.count, redo.is_empty()) {
        let list: Vec<String> = redo.iter().map(usize::to_string).collect();
        println!(
            "resubmit: sbatch --array={} --export=ALL,VLM_EVAL_SHARD_COUNT={count} <array script> <the same run flags>  (or deploy/slurm/submit.sh --shards {count} --array {} …); a resubmitted shard resumes its folder",
            list.join(","),
            list.join(",")
        );
    }
    if st.parts.iter().any(|p| p.shard.is_none() && !p.is_done()) {
        println!("rerun an unfinished run's own command to resume it");
    }
    1
}

/// Run `vlm-eval merge`.
pub fn cmd_merge(a: MergeArgs) -> Result<i32, CliError> {
    check_distinct(&a.runs).map_err(merge_error)?;
    let status = shard_status(&a.runs).map_err(|e| CliError::usage(e.to_string()));
    if a.check {
        return Ok(print_status(&status?));
    }
    let out = a.out.clone().unwrap_or_default();
    let running = check_running(&a.runs, &out, a.allow_running).map_err(merge_error)?;
    running.iter().for_each(|w| tracing::warn!("{w}"));
    let refusal = match status {
        Err(e) => Some(e),
        Ok(st) if !st.missing.is_empty() && !a.allow_missing && running.is_empty() => Some(CliError::usage(format!(
            "{} seed(s) of the run have no finished episode in these inputs: {} (shards {}); `vlm-eval merge --check` shows which to resubmit, or pass --allow-missing to merge without them",
            st.missing.len(),
            seed_list(&st.missing),
            st.parts
                .iter()
                .filter(|p| !p.unfinished.is_empty())
                .map(|p| match (p.shard, &p.dir) {
                    (Some(s), _) => s.to_string(),
                    (None, Some(d)) => d.display().to_string(),
                    (None, None) => "?".into(),
                })
                .collect::<Vec<_>>()
                .join(", ")
        ))),
        Ok(_) => None,
    };
    if let Some(refusal) = refusal {
        // Inputs of other settings or with a seed twice are named first: they are the cause.
        check_inputs(&a.runs).map_err(merge_error)?;
        return Err(refusal);
    }
    let outcome = merge_runs(&a.runs, &out, a.force).map_err(merge_error)?;
    for w in &outcome.warnings {
        tracing::warn!("{w}");
    }
    let s = &outcome.summary;
    println!(
        "merged {} run(s): {} episode(s) into {} ({} frame(s) hard-linked, {} copied)",
        a.runs.len(),
        outcome.episodes,
        out.display(),
        outcome.linked,
        outcome.copied
    );
    println!(
        "{}: progression {:.1}% ± {:.1}, crafter score {:.2}%, {} error(s)",
        s.model, s.progression_mean, s.progression_se, s.crafter_score, s.errors
    );
    Ok(0)
}
