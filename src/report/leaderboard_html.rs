//! The leaderboard page: one self-contained HTML document (inline style, no script, no external
//! URL), one section per protocol group with its ranked table and its achievement heatmap
//! (runs × 22 achievements). Every piece of run text goes through `escape::escape`.

use std::fmt::Write;
use std::path::Path;

use crate::crafter::ACHIEVEMENT_NAMES;

use super::escape::escape;
use super::html::{thousands, ICON, REPORT_CSP, STYLE};
use super::leaderboard::{protocol_line, Leaderboard, Row};

const EXTRA_STYLE: &str = r#"
table.lb{border-collapse:collapse;width:100%;background:var(--card);border:1px solid var(--line);border-radius:8px}
table.lb th,table.lb td{border-top:1px solid var(--line);padding:5px 7px;text-align:left;vertical-align:top}
table.lb th{font-size:12px;color:var(--muted);font-weight:600}
table.lb td.num{text-align:right}
table.heat{border-collapse:collapse;margin-top:10px;background:var(--card)}
table.heat th{font-size:11px;color:var(--muted);font-weight:500;padding:2px}
table.heat th.ach{writing-mode:vertical-rl;transform:rotate(180deg);height:120px;text-align:left}
table.heat td{width:30px;height:24px;text-align:center;font-size:10px;border:1px solid #fff;font-variant-numeric:tabular-nums}
table.heat td.name{width:auto;text-align:left;font-size:12px;padding-right:8px;white-space:nowrap}
.group{margin:22px 0 30px}
.scroll{overflow-x:auto}
.protocol{color:var(--muted);font-size:12px;overflow-wrap:anywhere}
"#;

/// The name of the meta tag that holds `Leaderboard::identity`.
pub const IDENTITY_META: &str = "vlm-eval-leaderboard";

/// How the page links a run: the run folder → the URL of its page (`None`: it has no page yet,
/// and a ranked run's cell says how to make one).
pub type RunLink<'a> = &'a dyn Fn(&Path) -> Option<String>;

fn run_cell(r: &Row, link: RunLink) -> String {
    match link(&r.dir) {
        Some(url) => format!(r#"<a href="{}">{}</a>"#, escape(&url), escape(&r.label)),
        None => format!(
            r#"{} <span class="protocol no-report">no report yet: <code>vlm-eval report {}</code></span>"#,
            escape(&r.label),
            escape(&r.dir.display().to_string())
        ),
    }
}

/// A list of left-out folders (`Not ranked`, `Skipped`), each with its reason.
fn left_out(
    html: &mut String,
    id: &str,
    title: &str,
    list: &[super::leaderboard_runs::Unranked],
    link: RunLink,
) {
    if list.is_empty() {
        return;
    }
    let _ = write!(html, r#"<section id="{id}"><h2>{title}</h2><ul>"#);
    for u in list {
        let name = u
            .dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| u.dir.display().to_string());
        let shown = match link(&u.dir) {
            Some(url) => format!(r#"<a href="{}">{}</a>"#, escape(&url), escape(&name)),
            None => escape(&name),
        };
        let _ = write!(html, "<li>{shown}: {}</li>", escape(&u.why));
    }
    *html += "</ul></section>";
}

fn episodes_cell(r: &Row) -> String {
    let s = &r.summary;
    let mut out = format!("{}/{} counted", s.completed, r.planned());
    if s.errors > 0 {
        let _ = write!(
            out,
            r#" <span class="badge bad">{} errored</span>"#,
            s.errors
        );
    }
    if r.unfinished > 0 {
        let _ = write!(
            out,
            r#" <span class="badge bad">{} unfinished</span>"#,
            r.unfinished
        );
    }
    out
}

fn row_html(r: &Row, link: RunLink) -> String {
    let s = &r.summary;
    let ci =
        r.ci.map(|c| format!("[{:.1}, {:.1}]", c.lo, c.hi))
            .unwrap_or_else(|| "n/a".into());
    let vs = match &r.vs_leader {
        None if r.rank == 1 => "leader".to_string(),
        None => "no shared seed".to_string(),
        Some(p) => format!(
            "{:+.1} [{:+.1}, {:+.1}] p={:.3}{} · {} seeds",
            p.delta,
            p.ci.lo,
            p.ci.hi,
            p.p.p,
            if p.p.exact { "" } else { " (MC)" },
            p.shared
        ),
    };
    let format = match (s.format_exact_rate, s.format_repaired_rate) {
        (Some(e), Some(rp)) => format!(
            "{:.0}% / {:.0}% / {:.0}%",
            100.0 * e,
            100.0 * rp,
            100.0 * (1.0 - e - rp).max(0.0)
        ),
        _ => "not recorded".into(),
    };
    let cost = s
        .spent
        .cost_usd
        .map(|c| format!("${c:.4}"))
        .unwrap_or_else(|| "no price".into());
    let spend = format!(
        "{} req · {} in / {} out · {cost}",
        thousands(s.spent.requests),
        thousands(s.spent.input_tokens),
        thousands(s.spent.output_tokens)
    );
    let per_point = r
        .cost_per_point
        .map(|c| format!("${c:.5}"))
        .unwrap_or_else(|| "n/a".into());
    format!(
        r#"<tr data-run="{}"><td class="num">{}</td><td>{}</td><td>{}</td><td>{}</td><td class="num">{:.1} ± {:.1}</td><td class="num">{}</td><td class="num">{:.2}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td></tr>"#,
        escape(&r.label),
        r.rank,
        run_cell(r, link),
        escape(&r.model),
        episodes_cell(r),
        s.progression_mean,
        s.progression_se,
        escape(&ci),
        s.crafter_score,
        escape(&vs),
        escape(&format),
        escape(&spend),
        escape(&per_point),
    )
}

fn heatmap(rows: &[Row]) -> String {
    let mut out = String::from(r#"<table class="heat"><tr><th></th>"#);
    for a in ACHIEVEMENT_NAMES {
        let _ = write!(out, r#"<th class="ach">{}</th>"#, escape(a));
    }
    out += "</tr>";
    for r in rows {
        let _ = write!(out, r#"<tr><td class="name">{}</td>"#, escape(&r.label));
        for a in ACHIEVEMENT_NAMES {
            let v = r.summary.achievement_rates.get(a).copied().unwrap_or(0.0);
            let alpha = (v / 100.0).clamp(0.0, 1.0);
            let fg = if alpha > 0.55 { "#fff" } else { "#1d2330" };
            let _ = write!(
                out,
                r#"<td style="background:rgba(47,111,223,{alpha:.2});color:{fg}" title="{}: {v:.1}%">{v:.0}</td>"#,
                escape(a)
            );
        }
        out += "</tr>";
    }
    out += "</table>";
    out
}

/// The leaderboard page. `link` gives each run's page URL (the `report.html` beside it, or
/// the view server's route).
pub fn leaderboard_html(lb: &Leaderboard, title: &str, link: RunLink) -> String {
    let level_pct = format!("{:.0}", 100.0 * lb.options.level);
    let mut html = String::with_capacity(32 * 1024);
    let _ = write!(
        html,
        r#"<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">{REPORT_CSP}{ICON}<meta name="viewport" content="width=device-width, initial-scale=1">{}<title>{}</title><style>{STYLE}{EXTRA_STYLE}</style></head><body><main><header><h1>{}</h1>"#,
        lb.identity
            .as_ref()
            .map(|i| format!(r#"<meta name="{IDENTITY_META}" content="{}">"#, escape(i)))
            .unwrap_or_default(),
        escape(title),
        escape(title)
    );
    let runs: usize = lb.groups.iter().map(|g| g.rows.len()).sum();
    let _ = write!(
        html,
        r#"<p class="meta">{runs} ranked run(s) in {} protocol group(s). Runs are ranked only against runs of the same protocol and budget (turns, episode length). Progression is the mean over episodes that ended without an error; errored and unfinished episodes are counted beside it, never averaged in. Intervals are {level_pct}% percentile bootstrap; the difference to the leader is paired on shared seeds with a sign-flip p-value.</p></header>"#,
        lb.groups.len()
    );
    for (gi, g) in lb.groups.iter().enumerate() {
        let _ = write!(
            html,
            r#"<section class="group" id="group-{}"><h2>Protocol: {}</h2><p class="protocol">{}</p><div class="scroll"><table class="lb"><tr><th>#</th><th>run</th><th>model</th><th>episodes</th><th>progression % ± SE</th><th>{level_pct}% CI</th><th>Crafter score %</th><th>vs leader (pp, {level_pct}% CI, p)</th><th>replies exact / repaired / invalid</th><th>spend</th><th>$ per point</th></tr>"#,
            gi + 1,
            escape(&g.name),
            escape(&protocol_line(&g.protocol))
        );
        for r in &g.rows {
            html += &row_html(r, link);
        }
        html += "</table></div>";
        html += r#"<h3 class="small">Achievement unlock rate (% of counted episodes)</h3>"#;
        html += &heatmap(&g.rows);
        html += "</section>";
    }
    left_out(&mut html, "unranked", "Not ranked", &lb.unranked, link);
    left_out(&mut html, "skipped", "Skipped", &lb.skipped, link);
    html += "</main></body></html>\n";
    html
}
