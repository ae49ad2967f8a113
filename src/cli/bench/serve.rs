//! `vlm-eval bench serve`: the env server's throughput and reset latency.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;

use crate::cli::common::{load_textures, runtime};
use crate::cli::error::CliError;
use crate::serve::bench::{bench_serve, ServeBenchOptions};

/// `vlm-eval bench serve` flags.
#[derive(Args, Debug)]
pub struct BenchServeArgs {
    /// Sessions stepped concurrently.
    #[arg(long, default_value_t = 64)]
    pub sessions: usize,
    /// Step requests per session in each throughput phase.
    #[arg(long, default_value_t = 200)]
    pub requests: usize,
    /// Sessions created one after another to time a reset.
    #[arg(long, default_value_t = 30)]
    pub resets: usize,
    /// Frame size in pixels.
    #[arg(long, default_value_t = 64)]
    pub image_size: usize,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// Directory with crafter's textures.
    #[arg(long)]
    pub assets: Option<PathBuf>,
}

/// `vlm-eval bench serve`.
pub fn cmd_bench_serve(a: BenchServeArgs) -> Result<i32, CliError> {
    if a.sessions == 0 || a.requests == 0 || a.resets == 0 {
        return Err(CliError::usage(
            "--sessions, --requests and --resets must be at least 1",
        ));
    }
    if !(9..=1024).contains(&a.image_size) {
        return Err(CliError::usage("--image-size must be 9..=1024"));
    }
    let opts = ServeBenchOptions {
        sessions: a.sessions,
        requests: a.requests,
        resets: a.resets,
        image_size: a.image_size,
    };
    let textures = Arc::new(load_textures(a.assets.as_deref())?);
    let r = runtime()?
        .block_on(bench_serve(&opts, textures))
        .map_err(|message| CliError { code: 1, message })?;
    if a.json {
        println!("{}", serde_json::to_string(&r).unwrap_or_default());
    } else {
        println!(
            "{} sessions, {}x{} frames, HTTP on loopback (server and client in this process)",
            r.sessions, r.image_size, r.image_size
        );
        println!(
            "one action per request: {:.0} env steps/s ({:.0} requests/s)",
            r.steps_per_sec_actions, r.requests_per_sec_actions
        );
        println!(
            "model text with 4 actions per request: {:.0} env steps/s ({:.0} requests/s)",
            r.steps_per_sec_text, r.requests_per_sec_text
        );
        println!(
            "reset (POST /v1/sessions, one at a time): median {:.2} ms, mean {:.2} ms; {} at once: {:.1} ms",
            r.reset_ms_median, r.reset_ms_mean, r.sessions, r.create_all_ms
        );
    }
    Ok(0)
}
