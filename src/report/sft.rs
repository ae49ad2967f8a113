//! SFT export: one OpenAI fine-tuning chat row per completed model turn of a run, read from the
//! results store only (run.json's `system_prompt` and `tools`, trajectory lines, frame files).
//!
//! A row is `{"messages": [system, user, assistant], "tools": […], "parallel_tool_calls": false,
//! "metadata": {…}}`. The user message is the text the model was sent (`user_text`), as a plain
//! string, or as content parts (text, then the frame as a PNG data URL) when the turn's frame was
//! sent. Frames are read from the episode folder and checked against the trajectory's sha256.
//! The assistant message is the model's reply: its `tool_calls`, and its text as `content`.
//! Rows are single-turn: the history the run also sent is not repeated in them.

use std::collections::BTreeSet;

use base64::Engine as _;
use serde_json::{json, Map, Value};

use crate::crafter::ACHIEVEMENT_NAMES;
use crate::results::formats::EpisodeResult;
use crate::results::frame_reader::{FrameError, FrameReader, Replayer};
use crate::results::frames::{step_of_rel, FrameHashKind};

use crate::results::run::RunData;
use crate::results::summary::ReadError;
use crate::results::verify::checked_trajectory;

/// Which episodes and turns become rows.
#[derive(Clone, Debug, Default)]
pub struct SftFilter {
    /// Keep only rows whose user message carries an image.
    pub images_only: bool,
    /// Keep only episodes that unlocked every one of these achievements.
    pub require: Vec<String>,
    /// Keep only episodes whose progression (unique achievements / 22, a fraction) is at least this.
    pub min_progression: Option<f64>,
}

impl SftFilter {
    /// Whether an episode passes the episode-level filters.
    pub fn keeps(&self, ep: &EpisodeResult) -> bool {
        let unlocked = |a: &String| ep.achievements.get(a).copied().unwrap_or(0) > 0;
        self.require.iter().all(unlocked)
            && self
                .min_progression
                .is_none_or(|min| ep.progression + 1e-9 >= min)
    }
}

/// Counts of what was exported and what was left out.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SftStats {
    /// Rows produced.
    pub rows: usize,
    /// Rows with an image.
    pub image_rows: usize,
    /// Episodes that contributed turns.
    pub episodes: usize,
    /// Complete episodes left out by `--require-achievement` / `--min-progression`.
    pub episodes_filtered: usize,
    /// Unfinished episodes (no episode.json) left out.
    pub episodes_unfinished: usize,
    /// Complete episodes left out because their trajectory is missing, unreadable or does not
    /// have the lines their `episode.json` counts (`results::verify`).
    pub episodes_unreadable: usize,
    /// Turns whose model call failed (trajectory lines with `error`).
    pub error_turns: usize,
    /// Turns where the model said nothing (no text, no tool call).
    pub empty_turns: usize,
    /// Text-only turns left out by `--images-only`.
    pub text_only_turns: usize,
}

/// Per-run facts every row of the run needs.
struct RunContext {
    name: String,
    model: String,
    system: Option<String>,
    tools: Option<Value>,
    image_only_modality: bool,
}

fn corrupt(path: &std::path::Path, message: impl Into<String>) -> ReadError {
    ReadError::Corrupt {
        path: path.display().to_string(),
        message: message.into(),
    }
}

impl RunContext {
    fn new(run: &RunData, warnings: &mut Vec<String>) -> RunContext {
        let run_json = run.dir.join("run.json");
        let system = run.info["system_prompt"].as_str().map(str::to_string);
        if system.is_none() {
            warnings.push(format!(
                "{} has no system_prompt (written by an older vlm-eval): its rows have no system message",
                run_json.display()
            ));
        }
        let tool_protocol = run.info["config"]["protocol"].as_str() != Some("text");
        let tools = match run.info.get("tools") {
            Some(Value::Array(a)) if a.is_empty() => None,
            Some(t @ Value::Array(_)) => Some(t.clone()),
            _ => {
                if tool_protocol {
                    warnings.push(format!(
                        "{} has no tools (written by an older vlm-eval): its rows have no `tools` field",
                        run_json.display()
                    ));
                }
                None
            }
        };
        RunContext {
            name: run.name(),
            model: run.model(),
            system,
            tools,
            image_only_modality: run.info["config"]["modality"].as_str() == Some("image"),
        }
    }
}

/// The user text of a turn: `user_text`, or for older runs rebuilt from `note` and
/// `observation` the way the run composed it. Returns (text, rebuilt).
fn user_text(t: &Value, ctx: &RunContext) -> Option<(String, bool)> {
    if let Some(text) = t["user_text"].as_str() {
        return Some((text.to_string(), false));
    }
    let note = t["note"]
        .as_str()
        .map(|n| format!("{n}\n\n"))
        .unwrap_or_default();
    let body = if ctx.image_only_modality {
        "Current frame:".to_string()
    } else {
        t["observation"].as_str()?.to_string()
    };
    Some((format!("{note}{body}"), true))
}

/// The assistant message of a reply, or None when the model said nothing.
fn assistant_message(reply: &Value) -> Option<(Value, usize)> {
    let text = reply["text"].as_str().unwrap_or_default();
    let calls: Vec<Value> = reply["tool_calls"]
        .as_array()
        .map(|calls| {
            calls
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let arguments = match &c["arguments"] {
                        Value::String(s) => s.clone(),
                        Value::Null => "{}".to_string(),
                        other => other.to_string(),
                    };
                    json!({
                        "id": c["id"].as_str().map(str::to_string).unwrap_or_else(|| format!("call_{i}")),
                        "type": "function",
                        "function": {"name": c["name"].as_str().unwrap_or_default(), "arguments": arguments},
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    if text.is_empty() && calls.is_empty() {
        return None;
    }
    let mut m = Map::new();
    m.insert("role".into(), json!("assistant"));
    if !text.is_empty() {
        m.insert("content".into(), json!(text));
    }
    let n = calls.len();
    if n > 0 {
        m.insert("tool_calls".into(), Value::Array(calls));
    }
    Some((Value::Object(m), n))
}

/// The frame of a turn as a data URL (its file, else replayed), verified against the recorded
/// hash (of the episode's kind: the PNG's pixels, or its bytes in older runs).
fn frame_url(
    run: &RunData,
    seed: i64,
    kind: FrameHashKind,
    t: &Value,
    line: usize,
    frames: &mut FrameReader<'_>,
) -> Result<String, ReadError> {
    let dir = run.episode_dir(seed);
    let traj = dir.join("trajectory.jsonl");
    let rel = t["frame"]["path"]
        .as_str()
        .ok_or_else(|| corrupt(&traj, format!("line {line}: frame.path is missing")))?;
    if !crate::results::run::is_frame_rel(rel) {
        return Err(corrupt(
            &traj,
            format!("line {line}: frame.path {rel:?} is not frames/<file>.png inside the episode folder"),
        ));
    }
    let path = dir.join(rel);
    let loaded = match step_of_rel(rel) {
        Some(step) => frames.load(seed, step).map(|(png, _)| png),
        None => std::fs::read(&path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => FrameError::Missing {
                path: path.display().to_string(),
                why: "no such file".into(),
            },
            _ => FrameError::Io {
                path: path.display().to_string(),
                source: e,
            },
        }),
    };
    let png = loaded.map_err(|e| match e {
        FrameError::Io { source, .. } => ReadError::Io {
            path: path.display().to_string(),
            source,
        },
        e => corrupt(
            &path,
            format!("missing (the frame of turn line {line} in {}) and not replayable: {}; copy the run folder whole, or make its textures findable (--assets)", traj.display(), e.reason()),
        ),
    })?;
    let got = kind.of_png(&png).map_err(|e| {
        corrupt(
            &path,
            format!(
                "does not match the {} recorded in {} line {line}: it is {e}; the frame was changed after the run",
                kind.as_str(),
                traj.display()
            ),
        )
    })?;
    if let Some(want) = t["frame"]["sha256"].as_str() {
        if want != got {
            return Err(corrupt(
                &path,
                format!(
                    "{} {got} does not match {want} recorded in {} line {line}; the frame was changed after the run",
                    kind.as_str(),
                    traj.display()
                ),
            ));
        }
    }
    Ok(format!(
        "data:image/png;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(&png)
    ))
}

/// Export the rows of one run, calling `emit` for each; warnings are appended to `warnings`.
pub fn export_run(
    run: &RunData,
    filter: &SftFilter,
    stats: &mut SftStats,
    warnings: &mut Vec<String>,
    emit: impl FnMut(Value) -> Result<(), ReadError>,
) -> Result<(), ReadError> {
    export_run_with(run, filter, stats, warnings, None, emit)
}

/// [`export_run`] with a way to replay the frames the run folder lacks (`--frames sent|none`).
pub fn export_run_with(
    run: &RunData,
    filter: &SftFilter,
    stats: &mut SftStats,
    warnings: &mut Vec<String>,
    replayer: Option<&dyn Replayer>,
    mut emit: impl FnMut(Value) -> Result<(), ReadError>,
) -> Result<(), ReadError> {
    let mut frames = FrameReader::new(&run.dir, replayer);
    let ctx = RunContext::new(run, warnings);
    stats.episodes_unfinished += run.incomplete.len();
    if !run.incomplete.is_empty() {
        warnings.push(format!(
            "{}: {} unfinished episode(s) left out (seeds {:?}); rerun the run's command to finish them",
            run.dir.display(),
            run.incomplete.len(),
            run.incomplete
        ));
    }
    let mut rebuilt_user = false;
    for ep in &run.episodes {
        if !filter.keeps(ep) {
            stats.episodes_filtered += 1;
            continue;
        }
        let trajectory = match checked_trajectory(&run.dir, ep) {
            Ok(t) => t,
            Err(damage) => {
                warnings.push(format!(
                    "{damage} (seed {} left out of the export)",
                    ep.seed
                ));
                stats.episodes_unreadable += 1;
                continue;
            }
        };
        let mut cumulative: Vec<String> = Vec::new();
        let mut contributed = false;
        for (i, t) in trajectory.iter().enumerate() {
            let line = i + 1;
            if t.get("error").is_some_and(|e| !e.is_null()) {
                stats.error_turns += 1;
                continue;
            }
            // Achievements first: they accumulate whether or not the turn becomes a row.
            let mut new_unique = Vec::new();
            for step in t["executed"].as_array().into_iter().flatten() {
                for name in step["unlocked"].as_array().into_iter().flatten() {
                    if let Some(name) = name.as_str() {
                        if !cumulative.iter().any(|c| c == name) {
                            cumulative.push(name.to_string());
                            new_unique.push(name.to_string());
                        }
                    }
                }
            }
            let Some((assistant, n_calls)) = assistant_message(&t["reply"]) else {
                stats.empty_turns += 1;
                continue;
            };
            let has_image = t["frame"]["sent"].as_bool().unwrap_or(false);
            if filter.images_only && !has_image {
                stats.text_only_turns += 1;
                continue;
            }
            let Some((text, rebuilt)) = user_text(t, &ctx) else {
                let path = run.episode_dir(ep.seed).join("trajectory.jsonl");
                return Err(corrupt(
                    &path,
                    format!("line {line} has neither user_text nor observation"),
                ));
            };
            rebuilt_user |= rebuilt;
            let content = if has_image {
                let mut parts = Vec::new();
                if !text.is_empty() {
                    parts.push(json!({"type": "text", "text": text}));
                }
                parts.push(json!({"type": "image_url", "image_url": {"url": frame_url(run, ep.seed, ep.frames.as_ref().map(|f| f.hash).unwrap_or_default(), t, line, &mut frames)?}}));
                Value::Array(parts)
            } else {
                Value::String(text)
            };
            let mut messages = Vec::with_capacity(3);
            if let Some(system) = &ctx.system {
                messages.push(json!({"role": "system", "content": system}));
            }
            messages.push(json!({"role": "user", "content": content}));
            messages.push(assistant);
            let mut row = Map::new();
            row.insert("messages".into(), Value::Array(messages));
            if let Some(tools) = &ctx.tools {
                row.insert("tools".into(), tools.clone());
                if n_calls <= 1 {
                    row.insert("parallel_tool_calls".into(), json!(false));
                }
            }
            let known: BTreeSet<&str> = ACHIEVEMENT_NAMES.iter().copied().collect();
            new_unique.retain(|n| known.contains(n.as_str()));
            row.insert(
                "metadata".into(),
                json!({
                    "run": ctx.name,
                    "model": ctx.model,
                    "seed": ep.seed,
                    "turn": t["turn"],
                    "step": t["step"],
                    "has_image": has_image,
                    "user_has_image": has_image,
                    "assistant_has_image": false,
                    "invalid": t["invalid"].as_bool().unwrap_or(false),
                    "source": t["parsed"]["source"],
                    "achievements": {
                        "new_unique": new_unique,
                        "cumulative": cumulative,
                        "cumulative_unique": cumulative.len(),
                    },
                }),
            );
            emit(Value::Object(row))?;
            stats.rows += 1;
            stats.image_rows += usize::from(has_image);
            contributed = true;
        }
        stats.episodes += usize::from(contributed);
    }
    if rebuilt_user {
        warnings.push(format!(
            "{}: trajectories have no user_text (written by an older vlm-eval); user messages were rebuilt from note + observation",
            run.dir.display()
        ));
    }
    Ok(())
}

/// Parse `--min-progression`: a fraction 0..=1 (`0.25`) or a percent 0..=100 (`25%`).
pub fn parse_min_progression(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let (num, percent) = match t.strip_suffix('%') {
        Some(n) => (n.trim(), true),
        None => (t, false),
    };
    let bad = || {
        format!(
            "--min-progression '{s}' is not a fraction 0..1 (e.g. 0.25) or a percent (e.g. 25%)"
        )
    };
    let v: f64 = num.parse().map_err(|_| bad())?;
    let v = if percent { v / 100.0 } else { v };
    if !v.is_finite() || !(0.0..=1.0).contains(&v) {
        return Err(bad());
    }
    Ok(v)
}

/// Check achievement names; an unknown one is an error listing the 22 valid names.
pub fn check_achievements(names: &[String]) -> Result<(), String> {
    for n in names {
        if !ACHIEVEMENT_NAMES.contains(&n.as_str()) {
            return Err(format!(
                "unknown achievement '{n}' in --require-achievement: use one of {}",
                ACHIEVEMENT_NAMES.join(", ")
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn min_progression_forms() {
        assert_eq!(parse_min_progression("0.25").unwrap(), 0.25);
        assert_eq!(parse_min_progression("25%").unwrap(), 0.25);
        assert_eq!(parse_min_progression("100 %").unwrap(), 1.0);
        assert_eq!(parse_min_progression("0").unwrap(), 0.0);
        for bad in ["25", "1.5", "-0.1", "x", "150%", "NaN", ""] {
            assert!(parse_min_progression(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn achievement_names_checked() {
        assert!(check_achievements(&["collect_wood".into(), "eat_cow".into()]).is_ok());
        let e = check_achievements(&["collect_woood".into()]).unwrap_err();
        assert!(
            e.contains("collect_woood") && e.contains("collect_diamond") && e.contains("wake_up")
        );
    }

    #[test]
    fn assistant_message_shapes() {
        let (m, n) = assistant_message(&json!({"text": null, "tool_calls": [
            {"id": "c1", "name": "interact_many", "arguments": "{\"actions\":[\"do\"]}"},
            {"name": "interact_many", "arguments": {"actions": ["noop"]}}]}))
        .unwrap();
        assert_eq!(n, 2);
        assert!(m.get("content").is_none());
        assert_eq!(m["tool_calls"][0]["id"], "c1");
        assert_eq!(m["tool_calls"][0]["type"], "function");
        assert_eq!(m["tool_calls"][1]["id"], "call_1");
        let args: Value = serde_json::from_str(
            m["tool_calls"][1]["function"]["arguments"]
                .as_str()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(args, json!({"actions": ["noop"]}));
        let (m, n) = assistant_message(&json!({"text": "ACTION: do", "tool_calls": []})).unwrap();
        assert_eq!((m["content"].as_str(), n), (Some("ACTION: do"), 0));
        assert!(m.get("tool_calls").is_none());
        assert!(assistant_message(&json!({"text": "", "tool_calls": []})).is_none());
    }
}
