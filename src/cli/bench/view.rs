//! `vlm-eval bench view`: the view server over a synthetic results folder (`crate::view::bench`).

use std::path::PathBuf;

use clap::Args;

use super::super::error::CliError;

use crate::view::bench::{default_root, run_bench, BenchShape};

/// `vlm-eval bench view` flags.
#[derive(Args, Debug)]
pub struct BenchViewArgs {
    /// Finished runs in the synthetic folder.
    #[arg(long, default_value_t = 100)]
    pub runs: usize,
    /// Episodes per run.
    #[arg(long, default_value_t = 20)]
    pub episodes: usize,
    /// Steps (turns) per episode.
    #[arg(long, default_value_t = 500)]
    pub steps: u32,
    /// Where to write the synthetic folder (reused when it has this shape)
    /// [default: a folder under the system's temporary folder].
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Run `vlm-eval bench view`.
pub fn cmd_bench_view(a: BenchViewArgs) -> Result<i32, CliError> {
    if a.runs == 0 || a.episodes == 0 || a.steps == 0 {
        return Err(CliError::usage(
            "--runs, --episodes and --steps must be at least 1",
        ));
    }
    let exe = std::env::current_exe().map_err(|e| CliError {
        code: 1,
        message: format!("cannot find this program's path: {e}"),
    })?;
    let root = a.dir.unwrap_or_else(default_root);
    let shape = BenchShape {
        runs: a.runs,
        episodes: a.episodes,
        steps: a.steps,
    };
    let f = run_bench(&exe, &root, &shape).map_err(|e| CliError {
        code: 1,
        message: format!("bench view failed: {e}"),
    })?;
    if a.json {
        println!("{}", serde_json::to_string(&f).unwrap_or_default());
        return Ok(0);
    }
    println!(
        "folder: {} runs × {} episodes × {} steps + 1 live run, {:.0} MiB at {} ({:.1} s to write or check)",
        a.runs,
        a.episodes,
        a.steps,
        f.folder_bytes as f64 / 1048576.0,
        root.display(),
        f.generate_s
    );
    println!(
        "index: first {:.0} ms, cached p50 {:.1} ms (max {:.1}), after one run changed {:.0} ms, {} KiB",
        f.index_cold_ms,
        f.index_warm_p50_ms,
        f.index_warm_max_ms,
        f.index_after_change_ms,
        f.index_bytes / 1024
    );
    println!("run page: {:.0} ms", f.run_page_ms);
    println!(
        "live: a written turn shows in live.json after p50 {:.0} ms (max {:.0}); the page polls every {} ms",
        f.live_p50_ms, f.live_max_ms, f.poll_ms
    );
    println!(
        "server memory: {:.1} MiB resident ({:.1} MiB peak)",
        f.rss_kib as f64 / 1024.0,
        f.peak_rss_kib as f64 / 1024.0
    );
    Ok(0)
}
