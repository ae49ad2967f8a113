//! `vlm-eval score`: the Crafter paper's metrics (success rates, score, reward, length) of
//! crafter `stats.jsonl` files, as text, JSON or CSV.

use std::path::PathBuf;

use clap::Args;

use super::error::CliError;
use crate::report::crafter_score::compute;

/// `vlm-eval score` arguments.
#[derive(Args, Debug)]
#[command(
    after_help = "Reads the stats.jsonl lines crafter's Recorder writes (also vlmcrafter's \
Recorder and VectorRecorder), one per finished episode. Success rate: % of episodes with the \
achievement's count ≥ 1. Score: exp(mean(ln(1 + p))) − 1 over the 22 success rates p in \
percent, all episodes pooled. Reward and length: mean ± standard deviation over episodes. With \
two or more files (e.g. one per seed) each file's score and their standard deviation are \
printed too, as the paper's ± over seeds. Python: vlmcrafter.score.compute(paths)."
)]
pub struct ScoreArgs {
    /// stats.jsonl files, or folders searched (recursively) for stats.jsonl files.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Print the metrics as one JSON object (the keys of vlmcrafter.score.compute).
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print the metrics as `metric,value` CSV rows.
    #[arg(long)]
    pub csv: bool,
}

/// Run `vlm-eval score`.
pub fn cmd_score(a: ScoreArgs) -> Result<i32, CliError> {
    let s = compute(&a.paths).map_err(|e| CliError::usage(e.to_string()))?;
    if let Some(w) = s.warning() {
        eprintln!("warning: {w}");
    }
    if a.json {
        println!("{}", s.to_json());
        return Ok(0);
    }
    if a.csv {
        println!("metric,value");
        for (k, v) in s.csv_rows() {
            println!("{k},{v}");
        }
        return Ok(0);
    }
    let runs = match s.score_std {
        Some(std) => format!(" ± {std:.2} (std over {} files)", s.run_scores.len()),
        None => String::new(),
    };
    println!(
        "Crafter score over {} episodes in {} file{}",
        s.episodes,
        s.files.len(),
        if s.files.len() == 1 { "" } else { "s" }
    );
    println!("score    {:.2} %{runs}", s.score);
    println!(
        "reward   {:.2} ± {:.2} (std over episodes)",
        s.reward_mean, s.reward_std
    );
    println!(
        "length   {:.1} ± {:.1} (std over episodes)",
        s.length_mean, s.length_std
    );
    println!("success rates (% of episodes):");
    for (name, p) in &s.success_rates {
        println!("  {name:<22} {p:6.2}");
    }
    Ok(0)
}
