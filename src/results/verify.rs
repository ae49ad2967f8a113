//! A finished episode checked against its own record, before anything trusts it: its
//! trajectory has the lines `episode.json` counts (one per turn, plus the line of the failed call
//! that ended an errored episode), the trajectory's frame hashes add up to `episode.json`'s
//! `frames.sha256`, and every frame file the episode holds decodes to the hash recorded for its
//! step (the files `--frames all` or `sent` must have are there). `merge` refuses an episode
//! that fails; `report`, `export-sft` and `leaderboard` warn about it and count it.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use super::formats::{EpisodeResult, Termination};
use super::frames::{frame_rel, frames_sha256, step_of_rel, FramesMode};
use super::run::{episode_dir, read_trajectory};
use super::summary::ReadError;

/// Why a finished episode does not match its own record: the file and what differs.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {what}")]
pub struct Damage {
    /// The damaged file (or the missing one).
    pub path: String,
    /// What differs, and what to do (one line).
    pub what: String,
}

fn damage(path: &Path, what: impl Into<String>) -> Damage {
    Damage {
        path: path.display().to_string(),
        what: what.into(),
    }
}

/// The trajectory lines a finished episode has: one per turn, plus one for the failed call that
/// ended an errored episode.
pub fn expected_lines(ep: &EpisodeResult) -> usize {
    ep.turns as usize + usize::from(ep.termination == Termination::Error)
}

/// What to do about a damaged episode.
const FIX: &str = "delete the episode's folder and rerun its run's command to play it again";

/// The trajectory of a finished episode, checked: it can be read, and it has the lines
/// `episode.json`'s `turns` says it has (a cut-short or deleted file is damage, as is an
/// unreadable line).
pub fn checked_trajectory(run: &Path, ep: &EpisodeResult) -> Result<Vec<Value>, Damage> {
    let path = episode_dir(run, ep.seed).join("trajectory.jsonl");
    let lines = read_trajectory(run, ep.seed).map_err(|e| {
        let what = match e {
            ReadError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                format!(
                    "missing, but episode.json records {} turn(s); {FIX}",
                    ep.turns
                )
            }
            ReadError::Io { source, .. } => format!("cannot be read ({source})"),
            ReadError::Corrupt { message, .. } => format!("{message}; {FIX}"),
            other => other.to_string(),
        };
        damage(&path, what)
    })?;
    let want = expected_lines(ep);
    if lines.len() != want {
        let error_line = if ep.termination == Termination::Error {
            " and the line of the failed call"
        } else {
            ""
        };
        return Err(damage(
            &path,
            format!(
                "has {} complete line(s), but episode.json records {} turn(s){error_line} ({want} line(s)): the file was cut short or edited; {FIX}",
                lines.len(),
                ep.turns
            ),
        ));
    }
    Ok(lines)
}

/// A quick look at a finished episode's trajectory without parsing its JSON (for readers of many
/// runs, such as `leaderboard`): the file is there, each line looks like a JSON object and ends
/// with a newline, and it has the lines `episode.json` counts.
pub fn trajectory_shape(run: &Path, ep: &EpisodeResult) -> Result<(), Damage> {
    let path = episode_dir(run, ep.seed).join("trajectory.jsonl");
    let bytes = std::fs::read(&path).map_err(|e| {
        let what = if e.kind() == std::io::ErrorKind::NotFound {
            format!(
                "missing, but episode.json records {} turn(s); {FIX}",
                ep.turns
            )
        } else {
            format!("cannot be read ({e})")
        };
        damage(&path, what)
    })?;
    let mut lines = 0;
    for (i, line) in bytes.split_inclusive(|&b| b == b'\n').enumerate() {
        let body = line.trim_ascii();
        if body.is_empty() {
            continue;
        }
        if !line.ends_with(b"\n") || !body.starts_with(b"{") || !body.ends_with(b"}") {
            return Err(damage(
                &path,
                format!("line {} is not a whole JSON object; {FIX}", i + 1),
            ));
        }
        lines += 1;
    }
    let want = expected_lines(ep);
    if lines != want {
        return Err(damage(
            &path,
            format!(
                "has {lines} line(s), but episode.json records {} turn(s) ({want} line(s)): the file was cut short or edited; {FIX}",
                ep.turns
            ),
        ));
    }
    Ok(())
}

/// Every frame's recorded hash by env step: `frames.reset`, then each executed action's
/// `frame_sha256`; the hashes must cover steps 0..count and add up to `frames.sha256`.
fn recorded_hashes(
    run: &Path,
    ep: &EpisodeResult,
    lines: &[Value],
) -> Result<Option<BTreeMap<u32, String>>, Damage> {
    let Some(frames) = &ep.frames else {
        return Ok(None);
    };
    let traj = episode_dir(run, ep.seed).join("trajectory.jsonl");
    let mut by_step: BTreeMap<u32, String> = frames
        .reset
        .iter()
        .map(|h| (h.step, h.sha256.clone()))
        .collect();
    for (i, line) in lines.iter().enumerate() {
        for e in line["executed"].as_array().into_iter().flatten() {
            let (Some(step), Some(h)) = (e["step"].as_u64(), e["frame_sha256"].as_str()) else {
                return Err(damage(
                    &traj,
                    format!(
                        "line {} has an executed action without its step or frame_sha256; {FIX}",
                        i + 1
                    ),
                ));
            };
            by_step.insert(step as u32, h.to_string());
        }
    }
    for (i, line) in lines.iter().enumerate() {
        let (Some(step), Some(sent)) = (line["step"].as_u64(), line["frame"]["sha256"].as_str())
        else {
            continue;
        };
        if by_step.get(&(step as u32)).is_some_and(|h| h != sent) {
            return Err(damage(
                &traj,
                format!(
                    "line {}: frame.sha256 differs from the hash recorded for step {step}: the file was edited; {FIX}",
                    i + 1
                ),
            ));
        }
    }
    let contiguous = by_step.keys().copied().eq(0..by_step.len() as u32);
    let total = frames_sha256(by_step.values().map(String::as_str));
    if !contiguous || by_step.len() as u32 != frames.count || total != frames.sha256 {
        return Err(damage(
            &traj,
            format!(
                "its {} frame hash(es) do not add up to episode.json's frames (count {}, sha256 {}…): the trajectory or episode.json was edited; {FIX}",
                by_step.len(),
                frames.count,
                &frames.sha256[..frames.sha256.len().min(12)]
            ),
        ));
    }
    Ok(Some(by_step))
}

/// Check a finished episode's frames against its record: the trajectory's hashes add up to
/// `frames.sha256`, every frame file decodes to its step's hash, and the files its `--frames`
/// mode writes are there. `lines` is its [`checked_trajectory`]. Returns the files checked.
/// Episodes written before frame hashes were recorded have nothing to check against.
pub fn check_frames(run: &Path, ep: &EpisodeResult, lines: &[Value]) -> Result<usize, Damage> {
    let Some(by_step) = recorded_hashes(run, ep, lines)? else {
        return Ok(0);
    };
    let Some(frames) = &ep.frames else {
        return Ok(0);
    };
    let dir = episode_dir(run, ep.seed);
    let mut required: Vec<u32> = match frames.saved {
        FramesMode::All => by_step.keys().copied().collect(),
        FramesMode::Sent => lines
            .iter()
            .filter(|l| l["frame"]["sent"].as_bool() == Some(true))
            .filter_map(|l| l["step"].as_u64().map(|s| s as u32))
            .collect(),
        FramesMode::None => Vec::new(),
    };
    required.sort_unstable();
    required.dedup();
    let mut present = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir.join("frames")) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(step) = step_of_rel(&format!("frames/{name}")) {
                present.push(step);
            }
        }
    }
    present.sort_unstable();
    if let Some(step) = required.iter().find(|s| present.binary_search(s).is_err()) {
        return Err(damage(
            &dir.join(frame_rel(*step)),
            format!(
                "missing, but the episode was played with --frames {} (`vlm-eval replay RUN --restore` writes it back when the replay matches)",
                frames.saved.as_str()
            ),
        ));
    }
    for step in &present {
        let path = dir.join(frame_rel(*step));
        let Some(want) = by_step.get(step) else {
            return Err(damage(
                &path,
                format!(
                    "the episode has only {} frame(s) (steps 0..{}): the file does not belong to it; remove it",
                    frames.count,
                    frames.count.saturating_sub(1)
                ),
            ));
        };
        let bytes =
            std::fs::read(&path).map_err(|e| damage(&path, format!("cannot be read ({e})")))?;
        let got = frames
            .hash
            .of_png(&bytes)
            .map_err(|why| damage(&path, format!("{why}; {FIX}")))?;
        if &got != want {
            return Err(damage(
                &path,
                format!(
                    "it hashes to {}…, but the episode recorded {}… for step {step} ({}): the file was changed after the run; {FIX}",
                    &got[..12],
                    &want[..want.len().min(12)],
                    frames.hash.as_str()
                ),
            ));
        }
    }
    Ok(present.len())
}

/// Check a whole finished episode: its trajectory, then its frames. Returns the frame files
/// checked.
pub fn check_episode(run: &Path, ep: &EpisodeResult) -> Result<usize, Damage> {
    let lines = checked_trajectory(run, ep)?;
    check_frames(run, ep, &lines)
}
