//! `vlm-eval check`: the regression gate.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use super::common::{check_confidence, partial_error};
use super::error::CliError;
use crate::report::baseline::{config_differences, load_results, Metric, ResultSet, SourceKind};
use crate::report::check::{check_metric, junit, markdown, CheckOptions};
use crate::report::protocol::protocol_differences;
use crate::report::stats::DEFAULT_RESAMPLES;
use crate::report::validate::open_checked_run;

const CHECK_HELP: &str = "\
Rule, per metric (higher is better for all but format_repaired_rate): delta = run - baseline. \
U is the upper one-sided \
bound of delta at --confidence: from a paired percentile bootstrap over the seeds both share \
(when the baseline has per-seed values and at least 2 seeds are shared), else an unpaired \
bootstrap (each side resampled separately), else - for a summary.json baseline - the normal \
approximation delta + z*sqrt(SE_base^2 + SE_run^2). The run REGRESSED iff U < -max_drop, i.e. \
we are at least --confidence sure the drop exceeds the tolerance; it passes otherwise, \
including when there are too few episodes to tell. For format_repaired_rate (lower is better) \
the mirror rule holds: it REGRESSED iff the lower one-sided bound of delta > max_drop.

Protocol: the run's protocol (preset, parser, layout, observation format, reply protocol, \
modality, image size, textures, history, prompt hash) must equal the baseline's; if not, check \
exits 2 naming the differing settings, unless --allow-protocol-change. A baseline file saved \
before vlm-eval recorded the protocol is checked with a warning.

--max-drop is in the metric's units: progression and crafter_score in percentage points, \
score in achievements per episode, return in reward, format_exact_rate and \
format_repaired_rate in percentage points of turns. Give one value for all metrics or one \
per metric (comma-separated, same order as --metric).

Exit codes: 0 pass, 1 regressed (or --junit could not be written), 2 bad input (missing, \
corrupt or partial files; a baseline or run value that is not finite, out of its metric's range, \
a repeated seed, or episodes that contradict their summary; bad flags). \
The Markdown verdict goes to stdout and is appended to $GITHUB_STEP_SUMMARY when set.";

/// `vlm-eval check` flags.
#[derive(Args, Debug)]
#[command(after_help = CHECK_HELP)]
pub struct CheckArgs {
    /// Baseline: a run folder, a baseline file (`vlm-eval baseline save`) or a summary.json.
    #[arg(long)]
    pub baseline: PathBuf,
    /// The run folder to check.
    #[arg(long)]
    pub run: PathBuf,
    /// Metrics to check, comma-separated: progression, score, return, crafter_score,
    /// format_exact_rate, format_repaired_rate.
    #[arg(long, value_delimiter = ',', default_value = "progression")]
    pub metric: Vec<String>,
    /// Largest tolerated drop, in the metric's units (one value, or one per metric).
    #[arg(long, value_delimiter = ',', default_value = "0")]
    pub max_drop: Vec<f64>,
    /// Confidence level of the one-sided bound, in [0.5, 1).
    #[arg(long, default_value_t = 0.95)]
    pub confidence: f64,
    /// Also write JUnit XML (one testcase per metric) to this file.
    #[arg(long)]
    pub junit: Option<PathBuf>,
    /// Seed of the resampling RNG (same inputs and seed → same verdict).
    #[arg(long, default_value_t = 0)]
    pub seed: u32,
    /// Bootstrap and Monte Carlo resamples.
    #[arg(long, default_value_t = DEFAULT_RESAMPLES)]
    pub resamples: usize,
    /// Accept run folders with unfinished episodes (by default they are bad input: exit 2).
    #[arg(long)]
    pub allow_partial: bool,
    /// Check even when the run's protocol differs from the baseline's (by default: exit 2).
    #[arg(long)]
    pub allow_protocol_change: bool,
}

/// Compare the two protocols: Ok(notes) to go on with, Err when they differ and the change is
/// not allowed.
fn protocol_guard(
    baseline: &ResultSet,
    run: &ResultSet,
    allow: bool,
) -> Result<Vec<String>, CliError> {
    let (Some(b), Some(r)) = (&baseline.protocol, &run.protocol) else {
        let msg = if baseline.kind == SourceKind::Summary {
            format!(
                "{} is a summary.json without its run.json beside it, so the run's protocol is not checked against it",
                baseline.path.display()
            )
        } else {
            format!(
                "{} records no protocol (saved before vlm-eval recorded it), so the run's protocol is not checked against it; save the baseline again with `vlm-eval baseline save`",
                baseline.path.display()
            )
        };
        eprintln!("warning: {msg}");
        return Ok(vec![msg]);
    };
    let diffs: Vec<String> = protocol_differences(b, r)
        .into_iter()
        .map(|(_, line)| line)
        .collect();
    if diffs.is_empty() {
        return Ok(Vec::new());
    }
    if !allow {
        return Err(CliError::usage(format!(
            "the run's protocol differs from the baseline's ({}; baseline vs run): the numbers do not compare; pass --allow-protocol-change to check anyway",
            diffs.join("; ")
        )));
    }
    let msg = format!(
        "protocol differs from the baseline's ({}; baseline vs run): checked anyway (--allow-protocol-change)",
        diffs.join("; ")
    );
    eprintln!("warning: {msg}");
    Ok(vec![msg])
}

fn refuse_partial(r: &ResultSet, allow: bool) -> Result<(), CliError> {
    if !allow && !r.unfinished.is_empty() {
        let planned = r.summary.episodes + r.unfinished.len();
        return Err(partial_error(&r.path, &r.unfinished, planned));
    }
    Ok(())
}

fn parse_metrics(a: &CheckArgs) -> Result<Vec<(Metric, f64)>, CliError> {
    let valid: Vec<&str> = Metric::ALL.iter().map(|m| m.name()).collect();
    let mut metrics = Vec::new();
    for name in &a.metric {
        let m = Metric::parse(name).ok_or_else(|| {
            CliError::usage(format!(
                "unknown --metric '{name}': valid names are {}",
                valid.join(", ")
            ))
        })?;
        if !metrics.contains(&m) {
            metrics.push(m);
        }
    }
    if metrics.is_empty() {
        return Err(CliError::usage(format!(
            "--metric is empty: give one or more of {}",
            valid.join(", ")
        )));
    }
    if a.max_drop.len() != 1 && a.max_drop.len() != metrics.len() {
        return Err(CliError::usage(format!(
            "--max-drop has {} values for {} metrics: give one value, or one per metric",
            a.max_drop.len(),
            metrics.len()
        )));
    }
    if let Some(bad) = a.max_drop.iter().find(|d| !d.is_finite() || **d < 0.0) {
        return Err(CliError::usage(format!(
            "--max-drop {bad} is invalid: give a tolerance ≥ 0 in the metric's units"
        )));
    }
    Ok(metrics
        .into_iter()
        .enumerate()
        .map(|(i, m)| (m, a.max_drop[i.min(a.max_drop.len() - 1)]))
        .collect())
}

fn notes(baseline: &ResultSet, run: &ResultSet) -> Vec<String> {
    let mut out = Vec::new();
    // Protocol settings are compared by the guard when both sides record a protocol.
    let guarded = baseline.protocol.is_some() && run.protocol.is_some();
    let diffs = config_differences(&baseline.config, &run.config, guarded);
    if !diffs.is_empty() {
        out.push(format!(
            "configs differ ({}): the comparison may not be like for like",
            diffs.join("; ")
        ));
    }
    if baseline.kind == SourceKind::Summary {
        let folder = baseline
            .path
            .parent()
            .filter(|p| p.join("run.json").is_file());
        out.push(match folder {
            Some(f) => format!(
                "baseline is a summary.json (means and SEs only), so the test is unpaired; pass the folder {} for a paired test",
                f.display()
            ),
            None => "baseline is a summary.json (means and SEs only), so the test is unpaired and uses a normal approximation".into(),
        });
    } else {
        let base: std::collections::BTreeSet<i64> =
            baseline.points.iter().map(|p| p.seed).collect();
        let this: std::collections::BTreeSet<i64> = run.points.iter().map(|p| p.seed).collect();
        let shared = base.intersection(&this).count();
        if base != this {
            out.push(format!(
                "seed sets differ: {shared} shared, {} only in the baseline, {} only in the run",
                base.len() - shared,
                this.len() - shared
            ));
        }
        if shared < 2 {
            out.push("fewer than 2 shared seeds: unpaired test over all episodes".into());
        }
    }
    if run.summary.errors > 0 {
        out.push(format!(
            "the run has {} episodes that ended in an error; they are left out",
            run.summary.errors
        ));
    }
    if !run.unfinished.is_empty() {
        out.push(format!(
            "the run is partial ({} unfinished episodes, allowed by --allow-partial)",
            run.unfinished.len()
        ));
    }
    if run.points.len() < 10 {
        out.push(format!(
            "only {} run episodes: intervals from so few episodes are rough; with ~10 episodes, progression gaps below ~8 points are mostly noise",
            run.points.len()
        ));
    }
    out
}

fn append_step_summary(md: &str) {
    let Some(path) = std::env::var_os("GITHUB_STEP_SUMMARY").filter(|p| !p.is_empty()) else {
        return;
    };
    let result = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| writeln!(f, "{md}"));
    if let Err(e) = result {
        tracing::warn!(
            "cannot append the verdict to $GITHUB_STEP_SUMMARY ({}): {e}",
            PathBuf::from(path).display()
        );
    }
}

/// Run `vlm-eval check`; returns 0 (pass) or 1 (regressed).
pub fn cmd_check(a: CheckArgs) -> Result<i32, CliError> {
    check_confidence(a.confidence)?;
    if a.resamples == 0 {
        return Err(CliError::usage("--resamples must be at least 1"));
    }
    let metrics = parse_metrics(&a)?;
    let run = open_checked_run(&a.run)
        .map(|r| ResultSet::from_run(&r))
        .map_err(|e| CliError::usage(e.to_string()))?;
    refuse_partial(&run, a.allow_partial)?;
    let baseline = load_results(&a.baseline).map_err(|e| CliError::usage(e.to_string()))?;
    refuse_partial(&baseline, a.allow_partial)?;
    let protocol_notes = protocol_guard(&baseline, &run, a.allow_protocol_change)?;
    let mut verdicts = Vec::new();
    let mut opts = CheckOptions {
        max_drop: 0.0,
        confidence: a.confidence,
        resamples: a.resamples,
        seed: a.seed,
    };
    for (m, drop) in metrics {
        opts.max_drop = drop;
        let v =
            check_metric(&baseline, &run, m, &opts).map_err(|e| CliError::usage(e.to_string()))?;
        verdicts.push(v);
    }
    let mut all_notes = protocol_notes;
    all_notes.extend(notes(&baseline, &run));
    let md = markdown(&baseline, &run, &verdicts, &opts, &all_notes);
    println!("{md}");
    append_step_summary(&md);
    if let Some(path) = &a.junit {
        crate::results::store::write_atomic(path, junit(&verdicts, &opts).as_bytes()).map_err(
            |e| CliError {
                code: 1,
                message: format!("cannot write --junit {}: {e}", path.display()),
            },
        )?;
    }
    Ok(if verdicts.iter().any(|v| v.regressed) {
        1
    } else {
        0
    })
}
