//! Plumbing several commands share: the async runtime, texture loading, size and action
//! parsing, the env geometry flags, and common input checks.

use std::path::{Path, PathBuf};

use clap::Args;

use super::error::CliError;
use super::table::{render, COMPARE_DROP, SPEND_DROP};
use crate::crafter::textures::FetchPolicy;
use crate::crafter::{Action, EnvConfig, TextureSet};
use crate::report::compare::{
    group_runs, main_tables, protocol_marks, Group, GroupBy, Table, NOISE_NOTE,
};
use crate::report::spend::spend_tables;
use crate::results::run::RunData;

/// Geometry and texture flags shared by env commands.
#[derive(Args, Debug, Clone)]
pub struct EnvArgs {
    /// Frame size in pixels: W or W,H [default: 64, or the preset's].
    #[arg(long, value_parser = parse_pair)]
    pub size: Option<[usize; 2]>,
    /// World area in tiles: W,H (or W).
    #[arg(long, default_value = "64,64", value_parser = parse_pair)]
    pub area: [usize; 2],
    /// View in tiles: W,H (or W), including the two inventory rows.
    #[arg(long, default_value = "9,9", value_parser = parse_pair)]
    pub view: [usize; 2],
    /// Episode length in steps (0: unlimited) [default: 10000, or the preset's].
    #[arg(long)]
    pub length: Option<u32>,
    /// Directory with crafter's official textures (else $CRAFTER_ASSETS, the cache, or an
    /// installed crafter package; else built-in sprites).
    #[arg(long)]
    pub assets: Option<PathBuf>,
}

/// `--size` when neither the flag nor a preset gives one.
pub const DEFAULT_FRAME_SIZE: [usize; 2] = [64, 64];
/// `--length` when neither the flag nor a preset gives one.
pub const DEFAULT_EPISODE_LENGTH: u32 = 10_000;

/// A multi-threaded tokio runtime for the async commands.
pub fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError {
            code: 1,
            message: format!("cannot start the async runtime: {e}"),
        })
}

/// Parse `W` or `W,H` (also `WxH`) into a pair of positive integers.
pub fn parse_pair(s: &str) -> Result<[usize; 2], String> {
    let parts: Vec<&str> = s.split([',', 'x']).map(str::trim).collect();
    let num = |p: &str| {
        p.parse::<usize>()
            .map_err(|_| format!("'{s}' is not W or W,H with positive whole numbers"))
    };
    let pair = match parts.as_slice() {
        [w] => [num(w)?; 2],
        [w, h] => [num(w)?, num(h)?],
        _ => return Err(format!("'{s}' is not W or W,H")),
    };
    if pair.contains(&0) {
        return Err(format!("'{s}' has a zero side; sizes must be positive"));
    }
    Ok(pair)
}

/// Load textures as every rendering command does: official ones found or fetched once into the
/// cache (announced on one line), else the built-in sprites with a warning.
pub fn load_textures(assets: Option<&Path>) -> Result<TextureSet, CliError> {
    let (set, warning) = TextureSet::discover_with(assets, FetchPolicy::from_env(), &mut |msg| {
        eprintln!("{msg}")
    })
    .map_err(|e| CliError::usage(e.to_string()))?;
    if let Some(w) = warning {
        tracing::warn!("{w}");
    }
    Ok(set)
}

/// Parse an action given as an id (0..=16) or a canonical name.
pub fn parse_action(s: &str) -> Result<Action, CliError> {
    let s = s.trim();
    let found = match s.parse::<i64>() {
        Ok(id) => Action::from_id(id),
        Err(_) => Action::from_name(s),
    };
    found.ok_or_else(|| {
        CliError::usage(format!(
            "unknown action '{s}': use an id 0..=16 or a name such as noop, move_left, do, place_table"
        ))
    })
}

/// The env config of the env commands' geometry flags.
pub fn env_config(a: &EnvArgs, seed: i64, render: bool) -> Result<EnvConfig, CliError> {
    let area = [
        i32::try_from(a.area[0]).unwrap_or(i32::MAX),
        i32::try_from(a.area[1]).unwrap_or(i32::MAX),
    ];
    let cfg = EnvConfig {
        area,
        view: a.view,
        size: a.size.unwrap_or(DEFAULT_FRAME_SIZE),
        length: Some(a.length.unwrap_or(DEFAULT_EPISODE_LENGTH)),
        seed,
        render,
    };
    cfg.validate().map_err(|e| CliError::usage(e.to_string()))?;
    Ok(cfg)
}

/// Validate a confidence level given on the command line.
pub fn check_confidence(c: f64) -> Result<(), CliError> {
    if !(0.5..1.0).contains(&c) {
        return Err(CliError::usage(format!(
            "--confidence {c} is out of range: give a level in [0.5, 1), e.g. 0.95"
        )));
    }
    Ok(())
}

/// The one-line error for a run folder with unfinished episodes.
pub fn partial_error(path: &Path, unfinished: &[i64], planned: usize) -> CliError {
    let seeds: Vec<String> = unfinished.iter().take(10).map(i64::to_string).collect();
    CliError::usage(format!(
        "{} is a partial run: {} of {planned} planned episodes have no episode.json (seeds {}{}): finish it by rerunning the same command, or pass --allow-partial",
        path.display(),
        unfinished.len(),
        seeds.join(", "),
        if unfinished.len() > 10 { ", …" } else { "" }
    ))
}

/// Write a table as CSV (atomically).
pub fn write_table_csv(path: &Path, t: &Table) -> Result<(), CliError> {
    let header: Vec<&str> = t.header.iter().map(String::as_str).collect();
    crate::results::summary::write_csv(path, &header, &t.rows).map_err(|e| CliError {
        code: 1,
        message: e.to_string(),
    })
}

/// `FILE` → `FILE-stem.<suffix>.csv` beside it.
pub fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "compare".into());
    path.with_file_name(format!("{stem}.{suffix}.csv"))
}

/// Print runs' comparison as `vlm-eval compare` shows it (the main table, the protocol
/// differences, unfinished and errored episodes, the noise note when `noise_note`, the spend
/// table); with `csv`, write the main table there and the spend table beside it
/// (`<stem>.spend.csv`). Returns the groups for the tables that follow.
pub fn print_comparison(
    runs: &[RunData],
    by: GroupBy,
    columns: &[&str],
    csv: Option<&Path>,
    noise_note: bool,
) -> Result<Vec<Group>, CliError> {
    let groups = group_runs(runs, by);
    let (shown, csv_table) = main_tables(&groups, by, columns);
    println!("{}", render(&shown, COMPARE_DROP));
    for (i, (g, marks)) in groups.iter().zip(protocol_marks(&groups)).enumerate() {
        if marks.is_empty() {
            continue;
        }
        let lines: Vec<String> = marks.into_iter().map(|(_, line)| line).collect();
        if i == 0 {
            println!(
                "protocol: {} pools runs whose protocols differ ({}): its numbers mix protocols",
                g.label,
                lines.join("; ")
            );
        } else {
            println!(
                "protocol: {} differs from {} ({}): its numbers do not compare with the first row's",
                g.label,
                groups[0].label,
                lines.join("; ")
            );
        }
    }
    for g in &groups {
        if !g.unfinished.is_empty() {
            let seeds: Vec<String> = g.unfinished.iter().map(i64::to_string).collect();
            println!(
                "note: {}: {} of {} episodes unfinished (seeds {}); metrics are over the {} complete ones (rerun the same command to finish)",
                g.label,
                g.unfinished.len(),
                g.planned(),
                seeds.join(", "),
                g.episodes.len()
            );
        }
        if g.summary.errors > 0 {
            println!(
                "note: {}: {} episodes ended in an error and are left out of the metrics",
                g.label, g.summary.errors
            );
        }
    }
    if groups.iter().any(|g| g.summary.completed <= 20) && noise_note {
        println!("note: {NOISE_NOTE}");
    }
    let (spend_shown, spend_csv) = spend_tables(&groups, by);
    println!();
    println!("spent (every request of every episode, errored and budget-stopped ones included)");
    println!("{}", render(&spend_shown, SPEND_DROP));
    if let Some(path) = csv {
        write_table_csv(path, &csv_table)?;
        write_table_csv(&sibling(path, "spend"), &spend_csv)?;
    }
    Ok(groups)
}

/// Write runs' comparison CSVs as [`print_comparison`] writes them (the main table at `csv`,
/// the spend table beside it), printing nothing: the model matrix under `--quiet`.
pub fn write_comparison(
    runs: &[RunData],
    by: GroupBy,
    columns: &[&str],
    csv: &Path,
) -> Result<(), CliError> {
    let groups = group_runs(runs, by);
    let (_, csv_table) = main_tables(&groups, by, columns);
    let (_, spend_csv) = spend_tables(&groups, by);
    write_table_csv(csv, &csv_table)?;
    write_table_csv(&sibling(csv, "spend"), &spend_csv)
}

/// Hold a run folder for this `run` (one writer per folder, `results::lock`): exit 2 naming
/// the holder when another process has it; the lock's warnings go to the log (one line each).
pub fn hold_run_folder(dir: &Path) -> Result<crate::results::lock::RunLock, CliError> {
    let lock = crate::results::lock::acquire(dir).map_err(|e| CliError {
        code: e.exit_code(),
        message: e.to_string(),
    })?;
    for w in &lock.warnings {
        tracing::warn!("{w}");
    }
    Ok(lock)
}

/// Say on stderr (one line) when a run folder being read is still being written by a `run`.
pub fn note_in_progress(dir: &Path) {
    if let Some(h) = crate::results::lock::holder(dir) {
        eprintln!(
            "in progress: {} is still being written by `vlm-eval run` ({h}); reading the episodes finished so far",
            dir.display()
        );
    }
}
