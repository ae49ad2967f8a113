//! `vlm-eval bench …`: environment and harness throughput here; the env server's and the
//! local model's benchmarks in `serve.rs` and `local.rs`.

use std::path::PathBuf;

use clap::Args;

use super::common::{env_config, load_textures, parse_pair, runtime, EnvArgs};
use super::error::CliError;

pub mod http;
pub mod local;
pub mod parse;
pub mod serve;
pub mod startup;
pub mod view;

/// `vlm-eval bench env` flags.
#[derive(Args, Debug)]
pub struct BenchEnvArgs {
    /// Steps of the random policy to time.
    #[arg(long, default_value_t = 200_000)]
    pub steps: u64,
    /// Frame size in pixels: W or W,H.
    #[arg(long, default_value = "64", value_parser = parse_pair)]
    pub size: [usize; 2],
    /// Skip rendering (the RNG still advances exactly as a render would).
    #[arg(long)]
    pub no_render: bool,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Directory with crafter's textures.
    #[arg(long)]
    pub assets: Option<PathBuf>,
}

/// `vlm-eval bench harness` flags.
#[derive(Args, Debug)]
pub struct BenchHarnessArgs {
    /// Episodes.
    #[arg(long, default_value_t = 64)]
    pub episodes: usize,
    /// Model turns per episode.
    #[arg(long, default_value_t = 10)]
    pub turns: u32,
    /// Server latency per request, ms.
    #[arg(long, default_value_t = 200)]
    pub latency_ms: u64,
    /// Episodes in flight.
    #[arg(long, default_value_t = 64)]
    pub concurrency: usize,
    /// Frame size in pixels.
    #[arg(long, default_value_t = 64)]
    pub image_size: usize,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// Directory with crafter's textures.
    #[arg(long)]
    pub assets: Option<PathBuf>,
    /// Where the scratch run folders go (removed afterwards); use the disk your runs use.
    #[arg(long, default_value = "results")]
    pub out: PathBuf,
    /// Skip timing the same episodes as a `vlm-eval run` process.
    #[arg(long, conflicts_with = "process_exe")]
    pub no_process: bool,
    /// The `vlm-eval` binary timed as a process, e.g. an older build to compare with in the
    /// same session [default: this one].
    #[arg(long)]
    pub process_exe: Option<PathBuf>,
}

/// Run `vlm-eval bench env`.
pub fn cmd_bench_env(a: BenchEnvArgs) -> Result<i32, CliError> {
    let env_args = EnvArgs {
        size: Some(a.size),
        area: [64, 64],
        view: [9, 9],
        length: None,
        assets: a.assets.clone(),
    };
    let cfg = env_config(&env_args, 0, !a.no_render)?;
    let textures = load_textures(a.assets.as_deref())?;
    let report = crate::crafter::bench::bench_env(&cfg, &textures, a.steps)
        .map_err(|e| CliError::usage(e.to_string()))?;
    if a.json {
        println!("{}", serde_json::to_string(&report).unwrap_or_default());
    } else {
        println!("{report}");
    }
    Ok(0)
}

/// Run `vlm-eval bench harness`.
pub fn cmd_bench_harness(a: BenchHarnessArgs) -> Result<i32, CliError> {
    if a.episodes == 0 || a.turns == 0 || a.concurrency == 0 {
        return Err(CliError::usage(
            "--episodes, --turns and --concurrency must be at least 1",
        ));
    }
    if !(9..=1024).contains(&a.image_size) {
        return Err(CliError::usage("--image-size must be 9..=1024"));
    }
    let textures = std::sync::Arc::new(load_textures(a.assets.as_deref())?);
    let assets = match textures.source() {
        crate::crafter::textures::TextureSource::Official { dir } => Some(dir.clone()),
        _ => None,
    };
    let exe = match (&a.process_exe, a.no_process) {
        (_, true) => None,
        (Some(exe), false) if !exe.is_file() => {
            return Err(CliError::usage(format!(
                "--process-exe {}: no such file; give the path of a vlm-eval binary",
                exe.display()
            )))
        }
        (Some(exe), false) => Some(exe.clone()),
        (None, false) => Some(std::env::current_exe().map_err(|e| CliError {
            code: 1,
            message: format!("cannot find the vlm-eval binary: {e}"),
        })?),
    };
    let runtime = runtime()?;
    let r = runtime
        .block_on(crate::eval::bench::bench_harness(
            &a.out,
            a.episodes,
            a.turns,
            a.latency_ms,
            a.concurrency,
            a.image_size,
            textures,
            exe.as_deref(),
            assets.as_deref(),
        ))
        .map_err(|message| CliError { code: 1, message })?;
    if a.json {
        println!("{}", serde_json::to_string(&r).unwrap_or_default());
    } else {
        println!(
            "{} episodes x {} turns at concurrency {} against a {} ms server: {:.3} s (ideal {:.3} s, {:.3}x)",
            r.episodes, r.turns, r.concurrency, r.latency_ms, r.wall_s, r.ideal_s, r.ratio
        );
        if let Some(p) = &r.process {
            println!(
                "the same as a `vlm-eval run` process: {:.3} s ({:.3}x): {:.3} s to the first request, {:.3} s of requests, {:.3} s after the last answer",
                p.wall_s, p.ratio, p.to_first_request_s, p.requests_s, p.after_last_answer_s
            );
        }
        println!(
            "harness work per turn at {}x{}: {:.3} ms (model time excluded)",
            r.image_size, r.image_size, r.harness_ms_per_turn
        );
        for ((mode, ms), (_, files, bytes)) in r
            .harness_ms_per_turn_by_frames
            .iter()
            .zip(&r.frame_files_per_turn_by_frames)
        {
            println!(
                "  --frames {mode}: {ms:.3} ms per turn, {files:.2} frame files and {:.1} KB per turn",
                bytes / 1000.0
            );
        }
    }
    Ok(0)
}
