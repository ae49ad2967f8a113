//! The `vlm-eval report` command: flags, reading the run, writing the page atomically.

use std::path::PathBuf;

use clap::Args;

use super::error::CliError;

use crate::eval::replay::RunReplayer;
use crate::report::html::{build_report_with, ReportOptions};
use crate::results::run::open_run;

/// `vlm-eval report` flags.
#[derive(Args, Debug)]
pub struct ReportArgs {
    /// Run folder (results/<run>).
    pub run: PathBuf,
    /// Where to write the page (default: RUN/report.html).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Episodes shown in detail (the first ones by seed); the statistics use all of them.
    #[arg(long, default_value_t = 20)]
    pub max_episodes: usize,
    /// Leave out the animated GIFs (smaller file); each turn's frame is still shown.
    #[arg(long)]
    pub no_gif: bool,
    /// Scale frames larger than this many pixels on a side down before embedding them.
    #[arg(long, default_value_t = 128)]
    pub frame_size: u32,
    /// Most frames per GIF (longer episodes are sampled evenly).
    #[arg(long, default_value_t = 300)]
    pub gif_frames: usize,
    /// Most characters shown of one reasoning, reply or prompt text.
    #[arg(long, default_value_t = 2000)]
    pub text_limit: usize,
    /// Directory with crafter's textures, to replay frames a run did not save (`--frames`).
    #[arg(long)]
    pub assets: Option<PathBuf>,
    /// Replace a file at the page's path that is not this run's report (another run's report,
    /// or any other file); this run's own report is always regenerated.
    #[arg(long)]
    pub force: bool,
}

fn human(bytes: usize) -> String {
    let b = bytes as f64;
    if b >= 1024.0 * 1024.0 {
        format!("{:.1} MiB", b / 1024.0 / 1024.0)
    } else {
        format!("{:.1} KiB", b / 1024.0)
    }
}

/// Run `vlm-eval report`; prints one line with the path and the file size.
pub fn cmd_report(a: ReportArgs) -> Result<i32, CliError> {
    if !(8..=4096).contains(&a.frame_size) {
        return Err(CliError::usage("--frame-size must be 8..=4096 pixels"));
    }
    if a.gif_frames == 0 || a.text_limit == 0 {
        return Err(CliError::usage(
            "--gif-frames and --text-limit must be at least 1 (use --no-gif to leave GIFs out)",
        ));
    }
    let run = open_run(&a.run).map_err(|e| CliError::usage(e.to_string()))?;
    let out = a.out.clone().unwrap_or_else(|| a.run.join("report.html"));
    crate::report::overwrite::check_report(&out, &run.name(), a.force)
        .map_err(|e| CliError::usage(e.message))?;
    super::common::note_in_progress(&a.run);
    let opts = ReportOptions {
        max_episodes: a.max_episodes,
        gif: !a.no_gif,
        frame_size: a.frame_size,
        gif_frames: a.gif_frames,
        text_limit: a.text_limit,
    };
    let replayer = RunReplayer::new(a.assets.clone());
    let report = build_report_with(&run, &opts, Some(&replayer));
    for w in &report.warnings {
        tracing::warn!("{w}");
    }
    crate::results::store::write_atomic(&out, report.html.as_bytes()).map_err(|e| CliError {
        code: 1,
        message: format!("{e} (pass --out to write the report elsewhere)"),
    })?;
    let n = report.html.len();
    let mut warnings = match report.warnings.len() {
        0 => String::new(),
        1 => ", 1 warning".into(),
        k => format!(", {k} warnings"),
    };
    if report.unreadable > 0 {
        warnings += &format!(
            " ({} unreadable or damaged trajector{}, listed in the page)",
            report.unreadable,
            if report.unreadable == 1 { "y" } else { "ies" }
        );
    }
    println!(
        "wrote {}: {} ({n} bytes), {} of {} episodes shown{warnings}",
        out.display(),
        human(n),
        report.shown,
        report.episodes
    );
    if n > 20 * 1024 * 1024 {
        println!(
            "the page is large: --no-gif, a smaller --max-episodes, --gif-frames or --frame-size make it smaller"
        );
    }
    Ok(0)
}
