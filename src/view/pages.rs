//! The view server's pages: the index (the leaderboard page with a list of runs in progress)
//! and a run's page (the `report` page without GIFs, with the live panel when it is playing).

use std::fmt::Write;
use std::path::{Path, PathBuf};

use crate::report::escape::escape;
use crate::report::html::{build_report, ReportOptions, ICON, REPORT_CSP, STYLE};
use crate::report::leaderboard::Leaderboard;
use crate::report::leaderboard_html::leaderboard_html;

use super::live::{live_section, run_url, ERROR_HOOK, LIVE_STYLE};
use super::state::{in_progress, open_fresh, run_name, ViewState};

/// The Content-Security-Policy of pages with the live panel: inline script and style, images
/// from this server or `data:`, requests to this server only; nothing from elsewhere.
pub const VIEW_CSP: &str = r#"<meta http-equiv="Content-Security-Policy" content="default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'; connect-src 'self'">"#;

/// The index: the leaderboard (links to `/run/NAME/`) and the runs in progress.
pub fn index_page(lb: &Leaderboard, live: &[PathBuf], empty: bool) -> String {
    let mut html = leaderboard_html(lb, "vlm-eval view", &|d: &Path| Some(run_url(d)));
    let mut extra = String::new();
    if empty {
        extra += r#"<div class="notice" id="no-runs">No run folder here yet: start one with <code>vlm-eval run --out THIS_FOLDER …</code>; this page shows it on reload.</div>"#;
    }
    if !live.is_empty() {
        extra += r#"<section id="in-progress"><h2>In progress</h2><ul>"#;
        for d in live {
            let _ = write!(
                extra,
                r#"<li><a href="{}">{}</a> (live panel)</li>"#,
                escape(&run_url(d)),
                escape(&run_name(d))
            );
        }
        extra += "</ul></section>";
    }
    if let Some(i) = html.rfind("</main>") {
        html.insert_str(i, &extra);
    }
    html
}

/// A run's page: the report (no GIFs, the first `max_episodes` episodes in detail) when it has
/// a complete episode, with the live panel on top while it plays.
pub fn run_page(state: &ViewState, dir: &Path) -> String {
    let playing = in_progress(dir);
    let live = if playing {
        live_section()
    } else {
        String::new()
    };
    match open_fresh(dir) {
        Ok(run) => {
            let opts = ReportOptions {
                max_episodes: state.max_episodes,
                gif: false,
                ..ReportOptions::default()
            };
            let mut html = build_report(&run, &opts).html;
            let nav =
                format!(r#"<p class="meta"><a href="/">← all runs</a></p>{ERROR_HOOK}{live}"#);
            html = html.replacen(REPORT_CSP, VIEW_CSP, 1);
            html = html.replacen("</style>", &format!("{LIVE_STYLE}</style>"), 1);
            if let Some(i) = html.find("<main>") {
                html.insert_str(i + "<main>".len(), &nav);
            }
            html
        }
        Err(why) => {
            let mut html = String::new();
            let _ = write!(
                html,
                r#"<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">{VIEW_CSP}{ICON}<meta name="viewport" content="width=device-width, initial-scale=1"><title>vlm-eval view: {name}</title><style>{STYLE}{LIVE_STYLE}</style>{ERROR_HOOK}</head><body><main><p class="meta"><a href="/">← all runs</a></p><header><h1>{name}</h1><p class="meta">No report yet: {why}.</p></header>{live}</main></body></html>"#,
                name = escape(&run_name(dir)),
                why = escape(&why),
            );
            html
        }
    }
}
