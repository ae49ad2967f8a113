//! `vlm-eval replay RUN`: play a run's recorded actions again, check every frame against the
//! hash the run recorded (each episode says which: the raw pixels, or the PNG for older runs),
//! and write the frames to `--out DIR` (or, with `--restore`, the ones the run folder lacks
//! back into it). Without either it only checks.

use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Args;
use serde_json::json;

use super::error::CliError;
use crate::crafter::textures::FetchPolicy;
use crate::crafter::TextureSet;
use crate::eval::replay::{replay_episode, ReplayError, ReplaySettings, Sink};
use crate::results::frames::{frame_rel, sha256_hex, FrameHashKind};
use crate::results::run::open_run;
use crate::results::store::write_atomic;

/// `vlm-eval replay` flags.
#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// The run folder (results/<run>).
    pub run: PathBuf,
    /// Replay only these seeds (repeatable or comma-separated) [default: every complete episode].
    #[arg(long = "seed", value_delimiter = ',', allow_hyphen_values = true)]
    pub seeds: Vec<i64>,
    /// Write the frames here, as DIR/episodes/seed_<S>/frames/step_NNNN.png (never inside the run).
    #[arg(long, conflicts_with = "restore")]
    pub out: Option<PathBuf>,
    /// Write the frames the run folder lacks back into it (each atomically); frames it has are
    /// checked against the replay.
    #[arg(long)]
    pub restore: bool,
    /// Directory with crafter's textures (for runs made with them) [default: $CRAFTER_ASSETS,
    /// the cache, an installed crafter].
    #[arg(long)]
    pub assets: Option<PathBuf>,
}

fn failed(e: ReplayError) -> CliError {
    CliError {
        code: e.exit_code(),
        message: e.to_string(),
    }
}

fn write_err(path: &Path, e: impl std::fmt::Display) -> ReplayError {
    ReplayError::Write(format!("cannot write {}: {e}", path.display()))
}

/// The marker `--out` folders get, naming the run their frames come from.
const MARKER: &str = "replay.json";

/// Check that `out` may receive this run's frames: not inside the run, not another run's folder,
/// not a folder of other files; then mark it.
fn prepare_out(run: &Path, out: &Path, info_started: &str) -> Result<(), CliError> {
    let run_abs = std::fs::canonicalize(run).unwrap_or_else(|_| run.to_path_buf());
    if let Ok(out_abs) = std::fs::canonicalize(out) {
        if out_abs.starts_with(&run_abs) {
            return Err(CliError::usage(format!(
                "--out {} is inside the run folder: replay writes there only with --restore",
                out.display()
            )));
        }
    } else if let Some(parent) = out.parent().and_then(|p| std::fs::canonicalize(p).ok()) {
        if parent.starts_with(&run_abs) {
            return Err(CliError::usage(format!(
                "--out {} is inside the run folder: replay writes there only with --restore",
                out.display()
            )));
        }
    }
    let marker = out.join(MARKER);
    let this = json!({"run": run_abs, "started_at": info_started});
    if out.join("run.json").exists() {
        return Err(CliError::usage(format!(
            "--out {} holds a run (run.json): pick an empty or new folder",
            out.display()
        )));
    }
    if marker.is_file() {
        let old: serde_json::Value = std::fs::read_to_string(&marker)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default();
        if old != this {
            return Err(CliError::usage(format!(
                "--out {} holds frames replayed from another run ({}): pick an empty or new folder",
                out.display(),
                old["run"].as_str().unwrap_or("unknown")
            )));
        }
    } else if std::fs::read_dir(out).is_ok_and(|mut d| d.next().is_some()) {
        return Err(CliError::usage(format!(
            "--out {} is not empty and holds no replay of this run: pick an empty or new folder",
            out.display()
        )));
    }
    std::fs::create_dir_all(out).map_err(|e| CliError {
        code: 1,
        message: format!("cannot create --out {}: {e}", out.display()),
    })?;
    let mut bytes = serde_json::to_vec_pretty(&this).unwrap_or_default();
    bytes.push(b'\n');
    write_atomic(&marker, &bytes).map_err(|e| CliError {
        code: 1,
        message: e.to_string(),
    })
}

/// Run `vlm-eval replay`.
pub fn cmd_replay(a: ReplayArgs) -> Result<i32, CliError> {
    let run = open_run(&a.run).map_err(|e| CliError::usage(e.to_string()))?;
    super::common::note_in_progress(&a.run);
    let assets = a.assets.clone();
    let settings = ReplaySettings::from_run(&run.info, || {
        TextureSet::discover_with(assets.as_deref(), FetchPolicy::from_env(), &mut |m| {
            eprintln!("{m}")
        })
        .map(|(set, _)| set)
        .map_err(|e| e.to_string())
    })
    .map_err(|e| CliError::usage(format!("{}: {e}", a.run.display())))?;
    let complete: Vec<i64> = run.episodes.iter().map(|e| e.seed).collect();
    let seeds = if a.seeds.is_empty() {
        complete.clone()
    } else {
        for s in &a.seeds {
            if !complete.contains(s) {
                return Err(CliError::usage(format!(
                    "--seed {s}: {} has no complete episode for seed {s} (complete: {})",
                    a.run.display(),
                    complete
                        .iter()
                        .map(i64::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
        }
        a.seeds.clone()
    };
    if let Some(out) = &a.out {
        prepare_out(
            &a.run,
            out,
            run.info["started_at"].as_str().unwrap_or_default(),
        )?;
    }
    for seed in seeds {
        let frames_dir = match (&a.out, a.restore) {
            (Some(out), _) => Some(out.join(format!("episodes/seed_{seed}"))),
            (None, true) => Some(run.episode_dir(seed)),
            (None, false) => None,
        };
        if let Some(d) = &frames_dir {
            std::fs::create_dir_all(d.join("frames")).map_err(|e| failed(write_err(d, e)))?;
        }
        let (mut written, mut kept) = (0u32, 0u32);
        let t = Instant::now();
        let mut write = |step: u32, png: &[u8]| {
            let Some(d) = &frames_dir else {
                return Ok(());
            };
            let path = d.join(frame_rel(step));
            if a.restore {
                match std::fs::read(&path) {
                    Ok(old) if old == png => kept += 1,
                    Ok(old) => {
                        return Err(ReplayError::Mismatch(format!(
                            "seed {seed} step {step}: {} (sha256 {}) differs from the replayed frame (sha256 {}); the file was changed after the run",
                            path.display(),
                            &sha256_hex(&old)[..12],
                            &sha256_hex(png)[..12]
                        )))
                    }
                    Err(_) => {
                        write_atomic(&path, png).map_err(|e| write_err(&path, e))?;
                        written += 1;
                    }
                }
            } else {
                std::fs::write(&path, png).map_err(|e| write_err(&path, e))?;
                written += 1;
            }
            Ok(())
        };
        let sink: Option<&mut Sink<'_>> = if frames_dir.is_some() {
            Some(&mut write)
        } else {
            None
        };
        let done = replay_episode(&settings, &run.dir, seed, sink).map_err(failed)?;
        let secs = t.elapsed().as_secs_f64();
        let what = match (&a.out, a.restore) {
            (Some(out), _) => format!(", written to {}", out.display()),
            (None, true) => format!(", {written} restored, {kept} already there"),
            (None, false) => String::new(),
        };
        println!(
            "seed {seed}: {} frames replayed and checked against their {} hashes ({}) at {} px in {secs:.2} s ({:.0} frames/s){what}",
            done.frames,
            done.hash.as_str(),
            match done.hash {
                FrameHashKind::Rgb => "raw pixels",
                FrameHashKind::Png => "the PNG re-encoded, a run written before rgb-sha256",
            },
            settings.image_size(),
            done.frames as f64 / secs.max(1e-9)
        );
    }
    Ok(0)
}
