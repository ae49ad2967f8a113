//! The `vlm-eval leaderboard` command: runs found under the given folders, ranked per protocol
//! and budget, written as one CSV and one self-contained HTML page beside the runs (never over
//! a leaderboard of other folders without `--force`).

use std::path::{Path, PathBuf};

use clap::Args;

use super::common::check_confidence;
use super::error::CliError;
use super::table::{render, LEADERBOARD_DROP};
use crate::report::overwrite::{
    check_leaderboard_csv, check_leaderboard_page, leaderboard_identity,
};

use crate::report::compare::Table;
use crate::report::leaderboard::{
    build_leaderboard, leaderboard_csv, load_runs, LeaderboardOptions,
};
use crate::report::leaderboard_html::leaderboard_html;
use crate::results::summary::write_csv;

/// `vlm-eval leaderboard` flags.
#[derive(Args, Debug)]
pub struct LeaderboardArgs {
    /// Run folders or folders of runs (results/).
    #[arg(required = true)]
    pub dirs: Vec<PathBuf>,
    /// The HTML page to write [default: leaderboard.html in the first folder given, or beside it
    /// when it is a run folder].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// The CSV to write (default: the page's path with `.csv`).
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Confidence level of the intervals.
    #[arg(long, default_value_t = 0.95)]
    pub confidence: f64,
    /// Bootstrap and Monte Carlo resamples.
    #[arg(long, default_value_t = crate::report::stats::DEFAULT_RESAMPLES)]
    pub resamples: usize,
    /// Replace a page or CSV that holds a leaderboard of other folders (or another file).
    #[arg(long)]
    pub force: bool,
}

/// Where the page goes without --out: beside the runs, in the first folder given (its parent
/// when it is a run folder itself).
fn default_out(dirs: &[PathBuf]) -> PathBuf {
    let first = &dirs[0];
    let folder = if crate::results::live::is_run_dir(first) {
        first
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
    } else {
        first.as_path()
    };
    folder.join("leaderboard.html")
}

/// Link from the page to a run's `report.html`, relative to the page's folder; `None` when the
/// run has no report yet (the page then says how to make one).
fn report_link(page: &Path, run: &Path) -> Option<String> {
    if !run.join("report.html").is_file() {
        return None;
    }
    let abs = |p: &Path| std::path::absolute(p).ok();
    let base = page.parent().filter(|p| !p.as_os_str().is_empty());
    let (Some(target), Some(base)) = (
        abs(&run.join("report.html")),
        abs(base.unwrap_or(Path::new("."))),
    ) else {
        return Some(run.join("report.html").display().to_string());
    };
    let (t, b): (Vec<_>, Vec<_>) = (target.components().collect(), base.components().collect());
    let common = t.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut parts: Vec<String> = vec!["..".into(); b.len() - common];
    parts.extend(
        t[common..]
            .iter()
            .map(|c| c.as_os_str().to_string_lossy().into_owned()),
    );
    Some(parts.join("/"))
}

/// Say which runs are still playing, and warn about every complete episode whose trajectory is
/// missing, unreadable or short of the lines its episode.json counts (its numbers still come
/// from episode.json); returns how many there are.
fn warn_unreadable(runs: &[crate::results::run::RunData]) -> usize {
    let mut count = 0;
    for run in runs {
        super::common::note_in_progress(&run.dir);
        for ep in &run.episodes {
            if let Err(damage) = crate::results::verify::trajectory_shape(&run.dir, ep) {
                count += 1;
                tracing::warn!("unreadable trajectory: {damage}");
            }
        }
    }
    count
}

/// Run `vlm-eval leaderboard`; prints where the files went and the groups found.
pub fn cmd_leaderboard(a: LeaderboardArgs) -> Result<i32, CliError> {
    check_confidence(a.confidence)?;
    if a.resamples == 0 {
        return Err(CliError::usage("--resamples must be at least 1"));
    }
    let (runs, unranked, skipped) = load_runs(&a.dirs)
        .map_err(|e| CliError::usage(format!("{e} (pass run folders or folders of runs)")))?;
    if runs.is_empty() {
        let why = unranked
            .first()
            .or(skipped.first())
            .map(|u| format!(": {}: {}", u.dir.display(), u.why))
            .unwrap_or_default();
        return Err(CliError::usage(format!(
            "no run with a complete episode under {}{why} (pass folders written by `vlm-eval run`)",
            a.dirs
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    for u in &unranked {
        tracing::warn!("not ranked: {}: {}", u.dir.display(), u.why);
    }
    let unreadable = warn_unreadable(&runs);
    let opts = LeaderboardOptions {
        level: a.confidence,
        resamples: a.resamples,
        seed: 0,
    };
    let mut lb = build_leaderboard(runs, unranked, opts);
    lb.skipped.extend(skipped);
    let identity = leaderboard_identity(&a.dirs);
    lb.identity = Some(identity.clone());
    let out = a.out.clone().unwrap_or_else(|| default_out(&a.dirs));
    let csv_path = a.csv.clone().unwrap_or_else(|| out.with_extension("csv"));
    let table = leaderboard_csv(&lb);
    let header: Vec<&str> = table.header.iter().map(String::as_str).collect();
    // Both checked before either is written.
    check_leaderboard_page(&out, &identity, a.force)
        .and_then(|()| check_leaderboard_csv(&csv_path, &header, &a.dirs, a.force))
        .map_err(|e| CliError::usage(e.message))?;
    write_csv(&csv_path, &header, &table.rows).map_err(|e| CliError {
        code: 1,
        message: format!("{e} (pass --csv to write it elsewhere)"),
    })?;
    let html = leaderboard_html(&lb, "vlm-eval leaderboard", &|run: &Path| {
        report_link(&out, run)
    });
    crate::results::store::write_atomic(&out, html.as_bytes()).map_err(|e| CliError {
        code: 1,
        message: format!("{e} (pass --out to write the page elsewhere)"),
    })?;
    let ranked: usize = lb.groups.iter().map(|g| g.rows.len()).sum();
    println!(
        "wrote {} and {}: {ranked} run(s) ranked in {} protocol group(s){}{}{}",
        out.display(),
        csv_path.display(),
        lb.groups.len(),
        match lb.unranked.len() {
            0 => String::new(),
            n => format!(", {n} not ranked (listed in the page)"),
        },
        match lb.skipped.len() {
            0 => String::new(),
            n => format!(", {n} skipped"),
        },
        match unreadable {
            0 => String::new(),
            n => format!(", {n} episode(s) with an unreadable trajectory (warned above)"),
        }
    );
    for s in &lb.skipped {
        println!("skipped {}: {}", s.dir.display(), s.why);
    }
    let no_report = lb
        .groups
        .iter()
        .flat_map(|g| &g.rows)
        .filter(|r| !r.dir.join("report.html").is_file())
        .count();
    if no_report > 0 {
        println!(
            "{no_report} ranked run(s) have no report page yet, so the page names them unlinked: `vlm-eval report <run>` makes one"
        );
    }
    let mut table = Table {
        header: ["protocol", "runs", "leader", "progression % ± SE"]
            .iter()
            .map(|h| h.to_string())
            .collect(),
        rows: Vec::new(),
    };
    for g in &lb.groups {
        if let Some(r) = g.rows.first() {
            table.rows.push(vec![
                g.name.clone(),
                g.rows.len().to_string(),
                r.label.clone(),
                format!(
                    "{:.1} ± {:.1}",
                    r.summary.progression_mean, r.summary.progression_se
                ),
            ]);
        }
    }
    println!("{}", render(&table, LEADERBOARD_DROP));
    Ok(0)
}
