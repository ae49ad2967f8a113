//! One episode's part of the HTML report: the progression-over-turns series, the animated GIF
//! and the turn table. Older trajectories may lack fields; every lookup has a fallback.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;
use std::path::PathBuf;

use base64::Engine;
use image::codecs::gif::{GifEncoder, Repeat};
use image::codecs::png::{CompressionType, FilterType as PngFilter, PngEncoder};
use image::{Delay, Frame, RgbaImage};
use serde_json::Value;

use crate::results::formats::EpisodeResult;
use crate::results::frame_reader::{FrameReader, Replayer};
use crate::results::frames::step_of_rel;

use super::escape::escape;
use crate::results::run::RunData;

/// Unique achievements after each played turn: element 0 is the start (0), element t + 1 is
/// after turn t. Uses `executed[].unlocked`; trajectories without it fall back to
/// `episode.json`'s `unlock_step` and each turn's `step`. Failed-call lines are skipped.
pub(super) fn episode_progress(lines: &[Value], ep: &EpisodeResult) -> Vec<usize> {
    let turns: Vec<&Value> = lines.iter().filter(|l| l["error"].is_null()).collect();
    let mut out = vec![0];
    let has_unlocked = turns.iter().all(|l| {
        l["executed"]
            .as_array()
            .is_some_and(|ex| ex.iter().all(|e| e["unlocked"].is_array()))
    });
    if has_unlocked {
        let mut seen = BTreeSet::new();
        for l in &turns {
            for e in l["executed"].as_array().into_iter().flatten() {
                for u in e["unlocked"].as_array().into_iter().flatten() {
                    if let Some(name) = u.as_str() {
                        seen.insert(name.to_string());
                    }
                }
            }
            out.push(seen.len());
        }
    } else {
        for (i, _) in turns.iter().enumerate() {
            let end = turns
                .get(i + 1)
                .and_then(|n| n["step"].as_u64())
                .unwrap_or(ep.num_steps as u64);
            out.push(
                ep.unlock_step
                    .values()
                    .filter(|&&s| s as u64 <= end)
                    .count(),
            );
        }
    }
    out
}

/// Mean over episodes of the unique-achievement share (percent of 22) after each turn; an
/// episode that ended earlier keeps its final count.
pub(super) fn mean_progress(progress: &[Vec<usize>]) -> Vec<f64> {
    let len = progress.iter().map(Vec::len).max().unwrap_or(1);
    if progress.is_empty() {
        return vec![0.0; len];
    }
    (0..len)
        .map(|i| {
            let sum: f64 = progress.iter().map(|p| p[i.min(p.len() - 1)] as f64).sum();
            100.0 * sum / 22.0 / progress.len() as f64
        })
        .collect()
}

/// Frames of one episode (files, else replayed: [`FrameReader`]), read and (when larger than
/// the limit) scaled down; failures are remembered per file for one warning.
struct Frames<'a> {
    reader: FrameReader<'a>,
    seed: i64,
    dir: PathBuf,
    size: u32,
    failed: BTreeMap<String, String>,
}

fn frame_rel(step: u64) -> String {
    format!("frames/step_{step:04}.png")
}

impl Frames<'_> {
    fn read(&mut self, rel: &str) -> Option<RgbaImage> {
        let path = self.dir.join(rel);
        let bytes = match step_of_rel(rel) {
            Some(step) => self
                .reader
                .load(self.seed, step)
                .map(|(png, _)| png)
                .map_err(|e| e.reason()),
            None => std::fs::read(&path).map_err(|e| e.to_string()),
        };
        let result = bytes.and_then(|bytes| {
            image::load_from_memory(&bytes)
                .map(|img| img.to_rgba8())
                .map_err(|e| e.to_string())
        });
        match result {
            Ok(v) => Some(v),
            Err(e) => {
                self.failed.insert(path.display().to_string(), e);
                None
            }
        }
    }

    fn scaled(&self, img: RgbaImage) -> RgbaImage {
        let (w, h) = img.dimensions();
        let max = w.max(h);
        if max <= self.size {
            return img;
        }
        let scale = self.size as f64 / max as f64;
        let (nw, nh) = (
            ((w as f64 * scale).round() as u32).max(1),
            ((h as f64 * scale).round() as u32).max(1),
        );
        image::imageops::resize(&img, nw, nh, image::imageops::FilterType::Triangle)
    }

    /// A `data:` URL of the frame, scaled down when larger than the limit and re-encoded as a
    /// compressed PNG (frames are stored with fast compression; the pixels stay exact).
    fn data_url(&mut self, rel: &str) -> Option<String> {
        let img = self.read(rel)?;
        let rgb = image::DynamicImage::ImageRgba8(self.scaled(img)).to_rgb8();
        let mut png = Vec::new();
        let encoder =
            PngEncoder::new_with_quality(&mut png, CompressionType::Best, PngFilter::Adaptive);
        if let Err(e) = rgb.write_with_encoder(encoder) {
            self.failed.insert(
                self.dir.join(rel).display().to_string(),
                format!("cannot re-encode: {e}"),
            );
            return None;
        }
        Some(data_url("image/png", &png))
    }
}

fn data_url(mime: &str, bytes: &[u8]) -> String {
    format!(
        "data:{mime};base64,{}",
        base64::engine::general_purpose::STANDARD.encode(bytes)
    )
}

/// An animated GIF of the episode's frames (sampled to at most `max_frames`), with how many
/// steps one GIF frame advances.
fn episode_gif(
    frames: &mut Frames<'_>,
    num_steps: u32,
    max_frames: usize,
) -> Option<(String, usize)> {
    let n = num_steps as usize + 1;
    let every = n.div_ceil(max_frames.max(1));
    let mut steps: Vec<usize> = (0..n).step_by(every).collect();
    if steps.last() != Some(&(n - 1)) {
        steps.push(n - 1);
    }
    let mut buf = Vec::new();
    let mut count = 0;
    {
        let mut enc = GifEncoder::new_with_speed(&mut buf, 10);
        enc.set_repeat(Repeat::Infinite).ok()?;
        let mut dims = None;
        for (j, &step) in steps.iter().enumerate() {
            let Some(img) = frames.read(&frame_rel(step as u64)) else {
                continue;
            };
            let mut img = frames.scaled(img);
            let (w, h) = *dims.get_or_insert(img.dimensions());
            if img.dimensions() != (w, h) {
                img = image::imageops::resize(&img, w, h, image::imageops::FilterType::Nearest);
            }
            let ms = if j + 1 == steps.len() { 1500 } else { 150 };
            let frame = Frame::from_parts(img, 0, 0, Delay::from_numer_denom_ms(ms, 1));
            if let Err(e) = enc.encode_frame(frame) {
                frames
                    .failed
                    .insert("(animated GIF)".into(), format!("cannot encode: {e}"));
                return None;
            }
            count += 1;
        }
    }
    (count > 0).then(|| (data_url("image/gif", &buf), every))
}

/// Cut text to `limit` characters, saying how much was left out.
fn clip(text: &str, limit: usize) -> String {
    match text.char_indices().nth(limit) {
        None => text.to_string(),
        Some((at, _)) => format!(
            "{}… ({} more characters)",
            &text[..at],
            text[at..].chars().count()
        ),
    }
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|x| {
                    x.as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| x.to_string())
                })
                .collect()
        })
        .unwrap_or_default()
}

fn non_empty(v: &Value) -> Option<&str> {
    v.as_str().filter(|s| !s.trim().is_empty())
}

fn inner_details(label: &str, text: &str, limit: usize) -> String {
    format!(
        r#"<details class="inner"><summary>{}</summary><pre>{}</pre></details>"#,
        escape(label),
        escape(&clip(text, limit))
    )
}

fn termination_name(ep: &EpisodeResult) -> String {
    ep.termination.to_string()
}

/// A safe frame path from a trajectory line: `frame.path` when it is a plain
/// `frames/<file>.png`, else the name derived from the line's step.
fn turn_frame(line: &Value) -> (Option<String>, Option<bool>) {
    let given = line["frame"]["path"]
        .as_str()
        .filter(|p| crate::results::run::is_frame_rel(p));
    let rel = given
        .map(str::to_string)
        .or_else(|| line["step"].as_u64().map(frame_rel));
    (rel, line["frame"]["sent"].as_bool())
}

fn turn_row(line: &Value, frames: &mut Frames<'_>, default_sent: bool, limit: usize) -> String {
    let num = |v: &Value| {
        v.as_u64()
            .map(|n| n.to_string())
            .unwrap_or_else(|| "?".into())
    };
    let (turn, step) = (num(&line["turn"]), num(&line["step"]));
    if let Some(err) = line["error"].as_str() {
        return format!(
            r#"<tr class="error-turn"><td class="num">{turn}</td><td class="num">{step}</td><td colspan="5" class="error">model call failed: {}</td></tr>"#,
            escape(&clip(err, limit))
        );
    }
    let (rel, sent) = turn_frame(line);
    let sent = sent.unwrap_or(default_sent);
    let img = rel.as_deref().and_then(|r| frames.data_url(r));
    let frame_cell = match img {
        Some(url) => format!(
            r#"<td class="thumb-cell{}"><img class="thumb" src="{url}" alt="frame at step {step}">{}</td>"#,
            if sent { "" } else { " not-sent" },
            if sent {
                ""
            } else {
                r#"<span class="small">not sent</span>"#
            }
        ),
        None => {
            r#"<td class="thumb-cell"><div class="placeholder">frame missing</div></td>"#.into()
        }
    };
    let parsed = &line["parsed"];
    let actions = strings(&parsed["actions"]);
    let played: Vec<String> = line["executed"]
        .as_array()
        .map(|ex| {
            ex.iter()
                .map(|e| e["action"].as_str().unwrap_or("?").to_string())
                .collect()
        })
        .unwrap_or_default();
    let mut action_cell = if actions.is_empty() {
        r#"<span class="small">none</span>"#.to_string()
    } else {
        format!("<code>{}</code>", escape(&actions.join(", ")))
    };
    if !played.is_empty() && played != actions {
        let _ = write!(
            action_cell,
            r#"<div class="small">played: {}</div>"#,
            escape(&played.join(", "))
        );
    }
    let unknown = strings(&parsed["unknown"]);
    if !unknown.is_empty() {
        let _ = write!(
            action_cell,
            r#"<div><span class="badge bad">unknown: {}</span></div>"#,
            escape(&unknown.join(", "))
        );
    }
    if let Some(n) = parsed["truncated"].as_u64().filter(|&n| n > 0) {
        let _ = write!(
            action_cell,
            r#"<div class="small">{n} cut (over the per-turn limit)</div>"#
        );
    }
    if let Some(source) = non_empty(&parsed["source"]) {
        let _ = write!(
            action_cell,
            r#"<div class="small">via {}</div>"#,
            escape(source)
        );
    }
    let reply = &line["reply"];
    let shown = non_empty(&parsed["reasoning"])
        .or_else(|| non_empty(&reply["reasoning"]))
        .or_else(|| non_empty(&reply["text"]));
    let mut text_cell = format!(
        r#"<div class="text">{}</div>"#,
        shown.map(|t| escape(&clip(t, limit))).unwrap_or_default()
    );
    for (label, v) in [
        ("reply text", &reply["text"]),
        ("model reasoning", &reply["reasoning"]),
    ] {
        if let Some(t) = non_empty(v).filter(|t| Some(*t) != shown) {
            text_cell += &inner_details(label, t, limit);
        }
    }
    if let Some(prompt) = non_empty(&line["user_text"]).or_else(|| non_empty(&line["observation"]))
    {
        text_cell += &inner_details("prompt text", prompt, limit);
    }
    let invalid = line["invalid"].as_bool() == Some(true);
    let executed = line["executed"].as_array().cloned().unwrap_or_default();
    let reward: f64 = executed.iter().filter_map(|e| e["reward"].as_f64()).sum();
    let mut unlock_cell = format!(r#"<span class="num">{reward:+.1}</span>"#);
    for e in &executed {
        for u in e["unlocked"].as_array().into_iter().flatten() {
            let _ = write!(
                unlock_cell,
                r#" <span class="badge">{} @{}</span>"#,
                escape(u.as_str().unwrap_or("?")),
                num(&e["step"])
            );
        }
    }
    format!(
        r#"<tr class="turn{}" data-turn="{turn}"><td class="num">{turn}</td><td class="num">{step}</td>{frame_cell}<td>{action_cell}</td><td>{text_cell}</td><td>{}</td><td>{unlock_cell}</td></tr>"#,
        if invalid { " invalid" } else { "" },
        if invalid {
            r#"<span class="badge bad">invalid</span>"#
        } else {
            ""
        },
    )
}

/// What an episode's section shows and how large it may get (the page's `ReportOptions`
/// less the episode count).
#[derive(Clone, Copy, Debug)]
pub(super) struct SectionOptions {
    /// Embed an animated GIF of the episode.
    pub gif: bool,
    /// Frames larger than this many pixels on a side are scaled down before embedding.
    pub frame_size: u32,
    /// Most frames in the GIF (longer episodes are sampled evenly, the last frame kept).
    pub gif_frames: usize,
    /// Most characters of one text cell before it is cut.
    pub text_limit: usize,
}

/// The `<details>` section of one episode. `lines` is the trajectory or why it could not be
/// read; missing frames become placeholders and one warning naming the files.
pub(super) fn episode_section(
    run: &RunData,
    ep: &EpisodeResult,
    lines: Result<&[Value], &str>,
    opts: &SectionOptions,
    open: bool,
    warnings: &mut Vec<String>,
    replayer: Option<&dyn Replayer>,
) -> String {
    let mut frames = Frames {
        reader: FrameReader::new(&run.dir, replayer),
        seed: ep.seed,
        dir: run.episode_dir(ep.seed),
        size: opts.frame_size,
        failed: BTreeMap::new(),
    };
    let termination = termination_name(ep);
    let mut out = format!(
        r#"<details class="episode" data-seed="{seed}"{open}><summary>Seed {seed} <span class="facts">· progression {prog:.1}% ({score}/22) · {steps} steps · {turns} turns · ended: {term} · return {ret:.1}</span></summary><div class="episode-body"><div class="episode-head">"#,
        seed = ep.seed,
        open = if open { " open" } else { "" },
        prog = 100.0 * ep.progression,
        score = ep.score,
        steps = ep.num_steps,
        turns = ep.turns,
        term = escape(&termination),
        ret = ep.episode_return,
    );
    if opts.gif {
        match episode_gif(&mut frames, ep.num_steps, opts.gif_frames) {
            Some((url, every)) => {
                let _ = write!(
                    out,
                    r#"<figure class="gif"><img class="anim" src="{url}" alt="seed {} frames"><figcaption class="small">{}</figcaption></figure>"#,
                    ep.seed,
                    if every == 1 {
                        "every step".to_string()
                    } else {
                        format!("every {every}th step")
                    }
                );
            }
            None => out += r#"<div class="placeholder big">no frames</div>"#,
        }
    }
    let mut unlocks: Vec<(&String, &u32)> = ep.unlock_step.iter().collect();
    unlocks.sort_by_key(|(name, step)| (**step, (*name).clone()));
    out += r#"<div class="ep-facts"><div>"#;
    if unlocks.is_empty() {
        out += r#"<span class="small">no achievements</span>"#;
    }
    for (name, step) in unlocks {
        let _ = write!(
            out,
            r#"<span class="badge">{} @{step}</span>"#,
            escape(name)
        );
    }
    let tokens = match (ep.input_tokens, ep.output_tokens) {
        (Some(i), Some(o)) => format!("{i} in / {o} out tokens"),
        _ => "tokens not reported".into(),
    };
    let _ = write!(
        out,
        r#"</div><p class="small">world seed {} · {} · latency p50 {:.0} ms · {} invalid, {} unknown actions · {} retries · {:.1} s</p>"#,
        ep.world_seed,
        escape(&tokens),
        ep.latency_ms.p50,
        ep.invalid_actions,
        ep.unknown_actions,
        ep.retries,
        ep.wall_s
    );
    if let Some(err) = &ep.error {
        let _ = write!(
            out,
            r#"<p class="error episode-error">Episode error: {}</p>"#,
            escape(&clip(err, opts.text_limit))
        );
    }
    out += "</div></div>";
    match lines {
        Err(e) => {
            let _ = write!(
                out,
                r#"<p class="error">Trajectory unavailable: {}</p>"#,
                escape(e)
            );
        }
        Ok(lines) => {
            let default_sent = run.info["config"]["modality"].as_str() != Some("text");
            out += r#"<table class="turns"><thead><tr><th>turn</th><th>step</th><th>frame sent</th><th>actions</th><th>reasoning / reply</th><th>invalid</th><th>reward, unlocks</th></tr></thead><tbody>"#;
            for line in lines {
                out += &turn_row(line, &mut frames, default_sent, opts.text_limit);
            }
            out += "</tbody></table>";
        }
    }
    out += "</div></details>";
    if let Some((first, why)) = frames.failed.iter().next() {
        warnings.push(format!(
            "seed {}: {} frame file(s) missing or unreadable (first: {first}: {why}); shown as placeholders",
            ep.seed,
            frames.failed.len()
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn episode(unlock_step: &[(&str, u32)], num_steps: u32) -> EpisodeResult {
        let text = json!({
            "seed": 0, "world_seed": 1, "model": "m", "progression": 0.0, "score": 0,
            "achievements": {}, "unlock_step": unlock_step.iter().cloned().collect::<BTreeMap<_, _>>(),
            "num_steps": num_steps, "episode_return": 0.0, "turns": 3, "termination": "turn_budget",
            "invalid_actions": 0, "unknown_actions": 0, "truncated_actions": 0,
            "input_tokens": null, "output_tokens": null, "retries": 0,
            "latency_ms": {"mean": 0.0, "p50": 0.0, "p95": 0.0, "calls": []},
            "cost_usd": null, "error": null, "wall_s": 0.0
        });
        serde_json::from_value(text).unwrap()
    }

    #[test]
    fn progress_counts_unique_unlocks_per_turn() {
        // Turn 0 unlocks a, turn 1 nothing, turn 2 unlocks b and a again (not unique).
        let lines = vec![
            json!({"turn": 0, "step": 0, "executed": [{"step": 1, "unlocked": ["a"]}, {"step": 2, "unlocked": []}]}),
            json!({"turn": 1, "step": 2, "executed": [{"step": 3, "unlocked": []}]}),
            json!({"turn": 2, "step": 3, "executed": [{"step": 4, "unlocked": ["b", "a"]}]}),
            json!({"turn": 3, "step": 4, "observation": "", "error": "boom"}),
        ];
        let ep = episode(&[("a", 1), ("b", 4)], 4);
        assert_eq!(episode_progress(&lines, &ep), vec![0, 1, 1, 2]);
        // Without `executed`, the same counts come from unlock_step and each turn's step.
        let old: Vec<Value> = lines
            .iter()
            .map(|l| {
                let mut l = l.clone();
                l.as_object_mut().unwrap().remove("executed");
                l
            })
            .collect();
        assert_eq!(episode_progress(&old, &ep), vec![0, 1, 1, 2]);
    }

    #[test]
    fn mean_progress_holds_final_counts() {
        // Episode A: 0, 1, 2; episode B: 0, 3 (ended after one turn).
        let mean = mean_progress(&[vec![0, 1, 2], vec![0, 3]]);
        let want = [0.0, 2.0 / 22.0 * 100.0, 2.5 / 22.0 * 100.0];
        assert_eq!(mean.len(), 3);
        for (m, w) in mean.iter().zip(want) {
            assert!((m - w).abs() < 1e-9, "{mean:?}");
        }
        assert_eq!(mean_progress(&[]), vec![0.0]);
    }

    #[test]
    fn clip_counts_characters_not_bytes() {
        assert_eq!(clip("héllo", 10), "héllo");
        assert_eq!(clip("héllo", 2), "hé… (3 more characters)");
    }

    #[test]
    fn frame_paths_from_the_trajectory_stay_inside_frames() {
        let ok = json!({"step": 3, "frame": {"path": "frames/step_0003.png", "sent": false}});
        assert_eq!(
            turn_frame(&ok),
            (Some("frames/step_0003.png".into()), Some(false))
        );
        for bad in [
            "../../etc/passwd",
            "frames/../../x.png",
            "frames/a/b.png",
            "/abs.png",
        ] {
            let line = json!({"step": 7, "frame": {"path": bad}});
            assert_eq!(
                turn_frame(&line).0.as_deref(),
                Some("frames/step_0007.png"),
                "{bad}"
            );
        }
        assert_eq!(turn_frame(&json!({})), (None, None));
    }
}
