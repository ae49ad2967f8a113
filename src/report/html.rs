//! `vlm-eval report`: one self-contained HTML page for a run folder (summary cards, SVG
//! charts, per-episode GIF and turn table). No external URLs: CSS and SVG are inline, images
//! are `data:` URLs, and there is no script. Every piece of run or model text goes through
//! [`escape`].

use std::fmt::Write;

use serde_json::Value;

use crate::crafter::ACHIEVEMENT_NAMES;
use crate::results::formats::Termination;

use super::escape::escape;
use super::html_episode::{episode_progress, episode_section, mean_progress, SectionOptions};
use super::svg::{bar_chart, line_chart, Bar, Series};
use crate::results::run::RunData;
use crate::results::summary::{summarize, Summary};
use crate::results::verify::checked_trajectory;

/// The pages' icon, a 16×16 PNG (a green tile with a yellow square): what `view` serves at
/// `/favicon.ico`, and inline in `ICON`.
pub const ICON_PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x10, 0x08, 0x02, 0x00, 0x00, 0x00, 0x90, 0x91, 0x68,
    0x36, 0x00, 0x00, 0x00, 0x1e, 0x49, 0x44, 0x41, 0x54, 0x78, 0xda, 0x63, 0xd0, 0xcf, 0xb7, 0x23,
    0x09, 0x31, 0x0c, 0x72, 0x0d, 0x2f, 0x2e, 0x55, 0x61, 0x45, 0xa3, 0x1a, 0xe8, 0xab, 0x61, 0x88,
    0xa6, 0x25, 0x00, 0xbe, 0xbc, 0x32, 0x10, 0x8c, 0x4a, 0x47, 0xcd, 0x00, 0x00, 0x00, 0x00, 0x49,
    0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

/// The pages' icon declared inline (`ICON_PNG` as a data URL, which both CSPs allow), so that
/// no browser asks for `/favicon.ico`.
pub const ICON: &str = r#"<link rel="icon" href="data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAABAAAAAQCAIAAACQkWg2AAAAHklEQVR42mPQz7cjCTEMcg0vLlVhRaMa6KthiKYlAL68MhCMSkfNAAAAAElFTkSuQmCC">"#;

/// The report page's Content-Security-Policy tag: no script, no request, images from `data:`
/// only (`view` swaps it for its own when it adds the live panel).
pub const REPORT_CSP: &str = r#"<meta http-equiv="Content-Security-Policy" content="default-src 'none'; img-src data:; style-src 'unsafe-inline'">"#;

/// What goes into the page and how large it may get.
#[derive(Clone, Debug, PartialEq)]
pub struct ReportOptions {
    /// Episodes shown in detail (the first ones by seed); statistics always use all of them.
    pub max_episodes: usize,
    /// Embed an animated GIF per shown episode.
    pub gif: bool,
    /// Frames larger than this many pixels on a side are scaled down before embedding.
    pub frame_size: u32,
    /// Most frames per GIF (longer episodes are sampled evenly, the last frame always kept).
    pub gif_frames: usize,
    /// Most characters of one text cell (reasoning, reply, observation) before it is cut.
    pub text_limit: usize,
}

impl Default for ReportOptions {
    fn default() -> Self {
        ReportOptions {
            max_episodes: 20,
            gif: true,
            frame_size: 128,
            gif_frames: 300,
            text_limit: 2000,
        }
    }
}

/// A built page.
#[derive(Clone, Debug)]
pub struct Report {
    /// The HTML document.
    pub html: String,
    /// Problems met while building (missing frames, unreadable trajectories), each naming
    /// the file; they are also listed in the page.
    pub warnings: Vec<String>,
    /// Episodes shown in detail.
    pub shown: usize,
    /// Complete episodes in the run.
    pub episodes: usize,
    /// Complete episodes whose trajectory is missing, unreadable or does not have the lines
    /// their `episode.json` counts (each also a warning; left out of the progression chart).
    pub unreadable: usize,
}

/// The report page's style sheet (the leaderboard and the live view reuse it).
pub const STYLE: &str = r#"
:root{--fg:#1d2330;--muted:#5c6677;--line:#dfe3ea;--bg:#f6f7f9;--card:#fff;--bad:#b42318;--good:#067647}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
main{max-width:1180px;margin:0 auto;padding:20px 24px 60px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 10px}
.meta{color:var(--muted);margin:0 0 12px}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(170px,1fr));gap:10px}
.card{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:10px 12px}
.card .key{color:var(--muted);font-size:12px;text-transform:uppercase;letter-spacing:.04em}
.card .value{font-size:19px;font-weight:600;display:block;margin-top:2px;overflow-wrap:anywhere}
.card .sub{color:var(--muted);font-size:12px}
.charts{display:flex;flex-wrap:wrap;gap:16px;align-items:flex-start}
.charts figure{max-width:540px}
figure{background:var(--card);border:1px solid var(--line);border-radius:8px;margin:0;padding:12px}
figcaption{font-weight:600;margin-bottom:6px}figcaption small{font-weight:400;color:var(--muted);display:block}
svg text{font:11px system-ui,sans-serif;fill:#3b4352}svg text.axis{font-size:12px;fill:var(--muted)}
.notice{background:#fffaeb;border:1px solid #fedf89;border-radius:8px;padding:8px 12px;margin:12px 0}
.notice ul{margin:4px 0;padding-left:20px}
.error{color:var(--bad)}
details.episode{background:var(--card);border:1px solid var(--line);border-radius:8px;margin:10px 0}
details.episode>summary{cursor:pointer;padding:10px 12px;font-weight:600}
details.episode>summary .facts{font-weight:400;color:var(--muted)}
.episode-body{padding:0 12px 12px}
.episode-head{display:flex;gap:18px;align-items:flex-start;margin-bottom:10px}
img.anim{width:256px;height:auto;image-rendering:pixelated;border:1px solid var(--line)}
img.thumb{width:96px;height:auto;image-rendering:pixelated;display:block}
.thumb-cell.not-sent img{opacity:.45}
.placeholder{width:96px;height:96px;display:flex;align-items:center;justify-content:center;text-align:center;background:repeating-linear-gradient(45deg,#f1f2f4,#f1f2f4 6px,#e4e6ea 6px,#e4e6ea 12px);color:var(--muted);font-size:11px}
.placeholder.big{width:256px;height:256px}
table.turns{border-collapse:collapse;width:100%}
table.turns th,table.turns td{border-top:1px solid var(--line);padding:6px;vertical-align:top;text-align:left}
table.turns th{font-size:12px;color:var(--muted);font-weight:600}
td.num{font-variant-numeric:tabular-nums;white-space:nowrap}
.text{white-space:pre-wrap;overflow-wrap:anywhere;max-width:560px}
.small{font-size:12px;color:var(--muted)}
.badge{display:inline-block;border-radius:10px;padding:0 7px;font-size:12px;margin:1px 2px 1px 0;background:#e6f4ea;color:var(--good)}
.badge.bad{background:#fdecea;color:var(--bad)}
tr.invalid td{background:#fff6f5}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12px}
details.inner summary{cursor:pointer;color:var(--muted);font-size:12px}
pre{white-space:pre-wrap;overflow-wrap:anywhere;background:#f3f4f6;padding:8px;border-radius:6px;font-size:12px}
"#;

/// One summary card (key, label, value, sub-line), every text escaped.
pub fn card(key: &str, label: &str, value: &str, sub: &str) -> String {
    format!(
        r#"<div class="card" data-key="{}"><span class="key">{}</span><span class="value">{}</span><span class="sub">{}</span></div>"#,
        escape(key),
        escape(label),
        escape(value),
        escape(sub)
    )
}

/// `12647` → `12,647`.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn cards(run: &RunData, s: &Summary) -> String {
    let mut out = String::from(r#"<section class="cards">"#);
    let error_note = if s.errors > 0 {
        format!(" · {} ended in an error", s.errors)
    } else {
        String::new()
    };
    out += &card("model", "Model", &run.model(), &run.name());
    out += &card(
        "episodes",
        "Episodes",
        &format!("{} complete", s.episodes),
        &format!("{} incomplete{error_note}", run.incomplete.len()),
    );
    out += &card(
        "progression",
        "Progression",
        &format!("{:.1}% ± {:.1}", s.progression_mean, s.progression_se),
        &format!("mean ± SE over {} episodes", s.completed),
    );
    out += &card(
        "crafter_score",
        "Crafter score",
        &format!("{:.2}%", s.crafter_score),
        &format!("{:.2} achievements / episode", s.score_mean),
    );
    out += &card(
        "return",
        "Return",
        &format!("{:.2}", s.return_mean),
        "mean episode return",
    );
    out += &card(
        "steps",
        "Steps",
        &format!("{:.1}", s.steps_mean),
        &format!("{:.1} turns / episode", s.turns_mean),
    );
    out += &card(
        "deaths",
        "Deaths",
        &format!("{:.0}%", 100.0 * s.death_rate),
        "of completed episodes",
    );
    out += &card(
        "invalid",
        "Invalid actions",
        &format!("{:.1}%", 100.0 * s.invalid_action_rate),
        "turns with no usable action",
    );
    let (format_value, format_sub) = match (s.format_exact_rate, s.format_repaired_rate) {
        (Some(e), Some(r)) => (
            format!("{:.1}% exact", 100.0 * e),
            format!(
                "{:.1}% repaired · {:.1}% invalid",
                100.0 * r,
                100.0 * (1.0 - e - r).max(0.0)
            ),
        ),
        _ => ("not recorded".into(), "run predates format counts".into()),
    };
    out += &card("format", "Reply format", &format_value, &format_sub);
    let tokens = match (s.input_tokens, s.output_tokens) {
        (Some(i), Some(o)) => format!("{} in / {} out", thousands(i), thousands(o)),
        _ => "not reported".into(),
    };
    let tokens_sub = format!(
        "prompt / billed output · {} of all input sent cached",
        crate::report::spend::cached_share(s.spent.cached_input_tokens, s.spent.input_tokens)
    );
    out += &card("tokens", "Tokens", &tokens, &tokens_sub);
    let cost = s
        .cost_usd
        .map(|c| format!("${c:.4}"))
        .unwrap_or_else(|| "no price set".into());
    out += &card("cost", "Cost", &cost, "USD");
    out += &card(
        "latency",
        "Latency p50 / p95",
        &format!("{:.0} / {:.0} ms", s.latency_p50_ms, s.latency_p95_ms),
        &format!("{} retries", s.retries),
    );
    out += "</section>";
    out
}

fn header(run: &RunData) -> String {
    let c = &run.info["config"];
    let text = |v: &Value| -> Option<String> {
        match v {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        }
    };
    let mut facts = vec![format!("model {}", run.model())];
    for (key, label) in [
        ("preset", "preset"),
        ("parser", "parser"),
        ("modality", "modality"),
        ("obs_format", "observation"),
        ("protocol", "protocol"),
        ("image_size", "image px"),
        ("steps", "turns/episode"),
    ] {
        if let Some(v) = text(&c[key]) {
            facts.push(format!("{label} {v}"));
        }
    }
    if let Some(seeds) = run.planned_seeds() {
        facts.push(format!("{} seeds planned", seeds.len()));
    }
    if let Some(v) = text(&run.info["started_at"]) {
        facts.push(format!("started {v}"));
    }
    if let Some(v) = text(&run.info["vlm_eval_version"]) {
        let commit = text(&run.info["git_commit"])
            .map(|c| format!(" ({})", c.chars().take(10).collect::<String>()))
            .unwrap_or_default();
        facts.push(format!("vlm-eval {v}{commit}"));
    }
    let mut out = format!(
        r#"<header><h1>{}</h1><p class="meta">{}</p>"#,
        escape(&run.name()),
        escape(&facts.join(" · "))
    );
    if c["modality"].as_str() == Some("text") {
        out += r#"<p class="meta">Text-only run: the frames below were saved but not sent to the model.</p>"#;
    }
    if let Some(prompt) = run.info["system_prompt"].as_str() {
        let _ = write!(
            out,
            r#"<details class="inner"><summary>System prompt</summary><pre>{}</pre></details>"#,
            escape(prompt)
        );
    }
    out += "</header>";
    out
}

fn achievement_chart(run: &RunData, s: &Summary) -> String {
    let done: Vec<_> = run
        .episodes
        .iter()
        .filter(|e| e.termination != Termination::Error)
        .collect();
    let bars: Vec<Bar> = ACHIEVEMENT_NAMES
        .iter()
        .map(|name| {
            let k = done
                .iter()
                .filter(|e| e.achievements.get(*name).copied().unwrap_or(0) > 0)
                .count();
            Bar {
                label: name.to_string(),
                percent: s.achievement_rates.get(*name).copied().unwrap_or(0.0),
                detail: format!("{k} of {} episodes", done.len()),
            }
        })
        .collect();
    format!(
        r#"<figure id="achievement-chart"><figcaption>Achievement unlock rate<small>share of {} completed episodes that unlocked each achievement at least once</small></figcaption>{}</figure>"#,
        done.len(),
        bar_chart(&bars)
    )
}

/// Build the page for an opened run. Never fails: unreadable parts become warnings (each
/// naming its file) shown in the page and returned.
pub fn build_report(run: &RunData, opts: &ReportOptions) -> Report {
    build_report_with(run, opts, None)
}

/// [`build_report`] with a way to replay frames the run folder lacks (runs made with
/// `--frames sent` or `none`); without one they are placeholders and a warning.
pub fn build_report_with(
    run: &RunData,
    opts: &ReportOptions,
    replayer: Option<&dyn crate::results::frame_reader::Replayer>,
) -> Report {
    let summary = summarize(&run.model(), &run.episodes);
    let mut warnings = Vec::new();
    let mut progress = Vec::new();
    let mut sections = String::new();
    let shown = run.episodes.len().min(opts.max_episodes);
    let section = SectionOptions {
        gif: opts.gif,
        frame_size: opts.frame_size,
        gif_frames: opts.gif_frames,
        text_limit: opts.text_limit,
    };
    let mut unreadable = 0;
    for (i, ep) in run.episodes.iter().enumerate() {
        // A damaged trajectory is warned about and counted; what can be read of it is shown.
        let (lines, whole) = match checked_trajectory(&run.dir, ep) {
            Ok(lines) => (Ok(lines), true),
            Err(damage) => {
                warnings.push(format!("seed {}: {damage}", ep.seed));
                unreadable += 1;
                (run.trajectory(ep.seed).map_err(|e| e.to_string()), false)
            }
        };
        if ep.termination != Termination::Error && whole {
            if let Ok(lines) = &lines {
                progress.push(episode_progress(lines, ep));
            }
        }
        if i < shown {
            sections += &episode_section(
                run,
                ep,
                lines.as_deref().map_err(String::as_str),
                &section,
                i == 0,
                &mut warnings,
                replayer,
            );
        }
    }
    let mean = mean_progress(&progress);
    let others: Vec<Series> = progress
        .iter()
        .map(|p| Series {
            values: p.iter().map(|&c| 100.0 * c as f64 / 22.0).collect(),
        })
        .collect();
    let mut html = String::with_capacity(64 * 1024 + sections.len());
    let _ = write!(
        html,
        r#"<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">{REPORT_CSP}{ICON}<meta name="viewport" content="width=device-width, initial-scale=1"><title>vlm-eval report: {}</title><style>{STYLE}</style></head><body><main>"#,
        escape(&run.name())
    );
    html += &header(run);
    html += &cards(run, &summary);
    if let Some(h) = crate::results::lock::holder(&run.dir) {
        let _ = write!(
            html,
            r#"<div class="notice" id="in-progress">In progress: this run was still being written when the page was built ({}); it shows the episodes finished by then.</div>"#,
            escape(&h.to_string())
        );
    }
    if !run.incomplete.is_empty() {
        let seeds: Vec<String> = run.incomplete.iter().map(|s| s.to_string()).collect();
        let _ = write!(
            html,
            r#"<div class="notice" id="incomplete">Incomplete: seed(s) {} have no <code>episode.json</code> (interrupted or still running) and are left out; rerun the same command to resume them.</div>"#,
            escape(&seeds.join(", "))
        );
    }
    if !warnings.is_empty() {
        html += r#"<div class="notice" id="warnings"><strong>Warnings while building this report</strong><ul>"#;
        for w in &warnings {
            let _ = write!(html, "<li>{}</li>", escape(w));
        }
        html += "</ul></div>";
    }
    html += r#"<h2>Charts</h2><section class="charts">"#;
    html += &achievement_chart(run, &summary);
    let _ = write!(
        html,
        r#"<figure id="progression-chart"><figcaption>Progression over turns<small>mean unique achievements (% of 22) after each turn over {} episodes (bold); episodes that ended earlier keep their final count; faint lines are single episodes</small></figcaption>{}</figure>"#,
        progress.len(),
        line_chart(
            &Series { values: mean },
            &others,
            "turn",
            "unique achievements (%)"
        )
    );
    html += "</section>";
    let _ = write!(
        html,
        r#"<h2>Episodes</h2><p class="meta">Showing {shown} of {} complete episodes{}.</p>"#,
        run.episodes.len(),
        if shown < run.episodes.len() {
            " (pass --max-episodes to show more)"
        } else {
            ""
        }
    );
    html += &sections;
    html += "</main></body></html>\n";
    Report {
        html,
        warnings,
        shown,
        episodes: run.episodes.len(),
        unreadable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_inline_icon_is_the_served_one() {
        use base64::Engine as _;
        let encoded = base64::engine::general_purpose::STANDARD.encode(ICON_PNG);
        assert_eq!(
            ICON,
            format!(r#"<link rel="icon" href="data:image/png;base64,{encoded}">"#)
        );
        let png = image::load_from_memory(ICON_PNG).expect("a valid PNG");
        assert_eq!((png.width(), png.height()), (16, 16));
    }

    const SCRIPT: &str = "<script>document.title='pwned'</script>";
    const IMG: &str = "<img src=x onerror=\"document.body.setAttribute('data-pwned','1')\">";

    /// A run folder written by hand: hostile text in the run name, model name, reply,
    /// reasoning, observation, error messages; no frame files.
    fn hostile_run() -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("vlm-eval-html-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let ep_dir = dir.join("episodes/seed_0");
        std::fs::create_dir_all(&ep_dir).unwrap();
        let info = serde_json::json!({"config": {"run_name": format!("run {SCRIPT}"), "model": format!("m{IMG}"), "modality": "text"}, "system_prompt": SCRIPT});
        std::fs::write(dir.join("run.json"), info.to_string()).unwrap();
        let mut achievements = serde_json::Map::new();
        for name in ACHIEVEMENT_NAMES {
            achievements.insert(name.into(), 0.into());
        }
        let ep = serde_json::json!({
            "seed": 0, "world_seed": 1, "model": format!("m{IMG}"), "progression": 0.0, "score": 0,
            "achievements": achievements, "unlock_step": {}, "num_steps": 1, "episode_return": 0.0,
            "turns": 1, "termination": "error", "invalid_actions": 0, "unknown_actions": 0,
            "truncated_actions": 0, "input_tokens": null, "output_tokens": null, "retries": 0,
            "latency_ms": {"mean": 0.0, "p50": 0.0, "p95": 0.0, "calls": []},
            "cost_usd": null, "error": format!("turn 1: {IMG}"), "wall_s": 0.0
        });
        std::fs::write(ep_dir.join("episode.json"), ep.to_string()).unwrap();
        let lines = [
            serde_json::json!({"turn": 0, "step": 0, "observation": SCRIPT, "user_text": IMG,
                "frame": {"path": "frames/step_0000.png", "sent": false},
                "reply": {"text": format!("{SCRIPT} {IMG}"), "reasoning": IMG},
                "parsed": {"actions": ["noop"], "reasoning": SCRIPT, "source": "text", "unknown": [IMG], "truncated": 0},
                "invalid": false,
                "executed": [{"action": "noop", "step": 1, "reward": 0.0, "unlocked": [SCRIPT], "done": false}]}),
            serde_json::json!({"turn": 1, "step": 1, "observation": "", "error": SCRIPT}),
        ];
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        std::fs::write(ep_dir.join("trajectory.jsonl"), text).unwrap();
        dir
    }

    #[test]
    fn hostile_run_text_is_escaped_everywhere() {
        let dir = hostile_run();
        let run = crate::results::run::open_run(&dir).unwrap();
        let report = build_report(&run, &ReportOptions::default());
        let html = &report.html;
        let lower = html.to_lowercase();
        assert!(!lower.contains("<script"), "a script tag got through");
        assert!(!lower.contains("<img src=x"), "an img tag got through");
        assert!(!lower.contains("onerror=\""));
        assert!(html.contains("&lt;script&gt;document.title=&#39;pwned&#39;&lt;/script&gt;"));
        assert!(html.contains("&lt;img src=x onerror=&quot;document.body.setAttribute("));
        // The page loads nothing from elsewhere: every image is a data: URL, no http(s).
        assert!(!lower.contains("http://") && !lower.contains("https://"));
        assert!(html.match_indices("<img ").all(|(i, _)| html[i..]
            .starts_with("<img class=\"thumb\" src=\"data:")
            || html[i..].starts_with("<img class=\"anim\" src=\"data:")));
        // The missing frames are placeholders plus one warning naming the file.
        assert!(html.contains("frame missing"));
        assert_eq!(report.warnings.len(), 1, "{:?}", report.warnings);
        assert!(
            report.warnings[0].contains("step_0000.png"),
            "{:?}",
            report.warnings
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(12647), "12,647");
        assert_eq!(thousands(1234567), "1,234,567");
    }
}
