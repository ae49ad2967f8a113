//! Plumbing several commands share: the async runtime, texture loading, size and action
//! parsing, the env geometry flags, and common input checks.

use std::path::{Path, PathBuf};

use clap::Args;

use super::error::CliError;
use crate::crafter::textures::FetchPolicy;
use crate::crafter::{Action, EnvConfig, TextureSet};

/// Geometry and texture flags shared by env commands.
#[derive(Args, Debug, Clone)]
pub struct EnvArgs {
    /// Frame size in pixels: W or W,H.
    #[arg(long, default_value = "64", value_parser = parse_pair)]
    pub size: [usize; 2],
    /// World area in tiles: W,H (or W).
    #[arg(long, default_value = "64,64", value_parser = parse_pair)]
    pub area: [usize; 2],
    /// View in tiles: W,H (or W), including the two inventory rows.
    #[arg(long, default_value = "9,9", value_parser = parse_pair)]
    pub view: [usize; 2],
    /// Episode length in steps (0: unlimited).
    #[arg(long, default_value_t = 10_000)]
    pub length: u32,
    /// Directory with crafter's official textures (else $CRAFTER_ASSETS, the cache, or an
    /// installed crafter package; else built-in sprites).
    #[arg(long)]
    pub assets: Option<PathBuf>,
}

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
        size: a.size,
        length: Some(a.length),
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
