//! The `compare` command: flags, loading the runs, printing the tables and writing CSV files.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::common::{check_confidence, print_comparison, sibling, write_table_csv};
use super::error::CliError;
use super::table::{render, NO_DROP, PAIRED_DROP};
use crate::report::compare::{
    achievement_table, paired, paired_csv, paired_table, parse_columns, GroupBy, NOISE_NOTE,
};
use crate::report::stats::DEFAULT_RESAMPLES;
use crate::results::run::open_run;

/// Row grouping on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum By {
    /// One row per run folder.
    Run,
    /// One row per model (episodes of its runs pooled; a seed finished by several of them
    /// counts once, from the first run given, with a note).
    Model,
}

/// `vlm-eval compare` flags.
#[derive(Args, Debug)]
#[command(
    after_help = "Metrics are computed from the episodes (episode.json), so partial runs \
work; unfinished episodes are counted and reported. Rows whose protocol (preset, parser, \
layout, observation format, reply protocol, modality, image size, textures, history, prompt \
hash; from run.json) differs from the first row's are marked in a `protocol` column and named \
on a `protocol:` line under the table. With --csv FILE the main table goes to \
FILE, the spend table to FILE's stem + `.spend.csv`, the --achievements matrix to stem + \
`.achievements.csv` and the --paired table to stem + `.paired.csv` (e.g. cmp.csv, \
cmp.spend.csv, cmp.achievements.csv, cmp.paired.csv). The metrics are over completed episodes; \
the spend table counts every request of every episode (errored and budget-stopped ones, failed \
attempts and earlier tries a rerun replaced included)."
)]
pub struct CompareArgs {
    /// Run folders (results/<run>); with --paired the first is the reference.
    #[arg(required = true)]
    pub runs: Vec<PathBuf>,
    /// Also write the tables as CSV (see below for the file names).
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// One row per run, or per model with its runs' episodes pooled.
    #[arg(long, value_enum, default_value_t = By::Run)]
    pub by: By,
    /// Columns to show, comma-separated: episodes, progression, crafter_score, return, score,
    /// steps, death_rate, invalid_rate, format_exact_rate, format_repaired_rate, tokens, cost,
    /// latency_p50 (default: all).
    #[arg(long, value_delimiter = ',')]
    pub metrics: Option<Vec<String>>,
    /// Add the per-achievement unlock-rate matrix (rows: achievements, columns: runs).
    #[arg(long)]
    pub achievements: bool,
    /// Add paired progression deltas of each run against the first on shared seeds, with a
    /// bootstrap CI and a sign-flip permutation p-value.
    #[arg(long)]
    pub paired: bool,
    /// Confidence level of the paired intervals.
    #[arg(long, default_value_t = 0.95)]
    pub confidence: f64,
    /// Bootstrap and Monte Carlo resamples.
    #[arg(long, default_value_t = DEFAULT_RESAMPLES)]
    pub resamples: usize,
    /// Seed of the resampling RNG (same inputs and seed → same numbers).
    #[arg(long, default_value_t = 0)]
    pub seed: u32,
}

/// Run `vlm-eval compare`.
pub fn cmd_compare(a: CompareArgs) -> Result<i32, CliError> {
    let columns = parse_columns(a.metrics.as_deref()).map_err(CliError::usage)?;
    check_confidence(a.confidence)?;
    if a.resamples == 0 {
        return Err(CliError::usage("--resamples must be at least 1"));
    }
    let key = |p: &PathBuf| p.canonicalize().unwrap_or_else(|_| p.clone());
    for (i, p) in a.runs.iter().enumerate() {
        if let Some(q) = a.runs[..i].iter().find(|q| key(q) == key(p)) {
            let what = if p == q {
                format!("{} is given twice", p.display())
            } else {
                format!("{} and {} are the same folder", q.display(), p.display())
            };
            return Err(CliError::usage(format!(
                "{what}: pass each run folder once"
            )));
        }
    }
    let runs = a
        .runs
        .iter()
        .map(|p| open_run(p).map_err(|e| CliError::usage(e.to_string())))
        .collect::<Result<Vec<_>, _>>()?;
    a.runs
        .iter()
        .for_each(|p| super::common::note_in_progress(p));
    let by = match a.by {
        By::Run => GroupBy::Run,
        By::Model => GroupBy::Model,
    };
    let groups = print_comparison(&runs, by, &columns, a.csv.as_deref(), !a.paired)?;
    for g in &groups {
        for (run, seeds) in &g.duplicate_seeds {
            let list: Vec<String> = seeds.iter().take(10).map(i64::to_string).collect();
            println!(
                "note: {}: {run} repeats seed(s) {}{} that an earlier run of the row finished; each seed counts once (from the first run given), so the standard error is not shrunk by repeats",
                g.label,
                list.join(", "),
                if seeds.len() > 10 { ", …" } else { "" }
            );
        }
    }
    if a.achievements {
        let t = achievement_table(&groups);
        println!(
            "\nachievement unlock rates (% of episodes)\n{}",
            render(&t, NO_DROP)
        );
        if let Some(path) = &a.csv {
            write_table_csv(&sibling(path, "achievements"), &t)?;
        }
    }
    if a.paired {
        if groups.len() < 2 {
            return Err(CliError::usage(
                "--paired needs at least two runs (or two models with --by model)",
            ));
        }
        let rows = paired(&groups, a.confidence, a.resamples, a.seed);
        let t = paired_table(&rows, a.confidence);
        println!();
        println!(
            "paired progression deltas vs {} on shared seeds (bootstrap {:.0}% CI, {} resamples, seed {}; two-sided sign-flip p, exact up to 20 seeds)",
            groups[0].label,
            100.0 * a.confidence,
            a.resamples,
            a.seed,
        );
        println!("{}", render(&t, PAIRED_DROP));
        for (label, p) in &rows {
            match p {
                None => println!(
                    "note: {label} shares no seed with {}: no paired comparison (run both on the same --seeds)",
                    groups[0].label
                ),
                Some(p) if p.only_this + p.only_reference > 0 => println!(
                    "note: seed sets differ: {label} and {} share {} seeds ({} only in {label}, {} only in {}); deltas use the shared ones",
                    p.reference, p.shared, p.only_this, p.only_reference, p.reference
                ),
                Some(_) => {}
            }
        }
        println!("note: {NOISE_NOTE}");
        if let Some(path) = &a.csv {
            write_table_csv(&sibling(path, "paired"), &paired_csv(&rows, a.confidence))?;
        }
    }
    Ok(0)
}
