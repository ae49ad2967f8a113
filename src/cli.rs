//! Command-line interface: flags parsed into typed options, and the dispatch to each command.

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::bench;
use crate::crafter::{textures, trace, Action, Env, EnvConfig, TextureSet};
use crate::runcmd::RunArgs;

/// Exit code for bad usage or input.
pub const EXIT_USAGE: i32 = 2;

/// An error that ends the program with a specific exit code and a one-line message.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct CliError {
    /// Process exit code.
    pub code: i32,
    /// One-line message.
    pub message: String,
}

impl CliError {
    /// A usage/input error (exit 2).
    pub fn usage(message: impl Into<String>) -> CliError {
        CliError {
            code: EXIT_USAGE,
            message: message.into(),
        }
    }
}

/// vlm-eval: evaluate vision-language models on Crafter, fast and reproducibly.
#[derive(Parser, Debug)]
#[command(name = "vlm-eval", version, about, propagate_version = true)]
pub struct Cli {
    /// Subcommand.
    #[command(subcommand)]
    pub command: Command,
}

/// Top-level commands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Evaluate a model: concurrent seeded episodes, every frame and turn saved, a summary
    /// (the default command: `vlm-eval --model mock --seeds 10 --steps 10`).
    Run(Box<RunArgs>),
    /// The Crafter environment on its own (no model).
    #[command(subcommand)]
    Env(EnvCommand),
    /// Benchmarks.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Crafter's texture files.
    #[command(subcommand)]
    Assets(AssetsCommand),
    /// Write runs' turns as OpenAI fine-tuning chat rows (JSONL), images as data URLs.
    ExportSft(crate::sftcmd::ExportSftArgs),
    /// Play a fixed action cycle without a model; save the frames and an image-message preview.
    Frames(crate::framescmd::FramesArgs),
    /// Join shard run folders (`run --shard i/n`) into one run folder with a fresh summary.
    Merge(crate::mergecmd::MergeArgs),
    /// Compare runs: metrics table, achievement matrix, paired per-seed deltas; CSV export.
    Compare(crate::comparecmd::CompareArgs),
    /// Regression gate: exit 1 when a run is worse than a baseline beyond a tolerance.
    Check(crate::checkcmd::CheckArgs),
    /// Baseline files for `check`.
    #[command(subcommand)]
    Baseline(crate::checkcmd::BaselineCommand),
    /// Write one self-contained HTML page for a run: summary cards, charts, per-episode GIF
    /// and turn table (`vlm-eval report results/<run>`).
    Report(crate::reportcmd::ReportArgs),
    /// Serve Crafter episodes over an HTTP JSON API for RL trainers (docs/RL.md).
    ServeEnv(crate::serve::ServeArgs),
}

/// `vlm-eval env …`
#[derive(Subcommand, Debug)]
pub enum EnvCommand {
    /// Play seeded random (or given) actions and print JSONL reset/step records.
    Trace(TraceArgs),
}

/// `vlm-eval bench …`
#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Environment throughput: random policy with resets, reset time, render time.
    Env(BenchEnvArgs),
    /// Harness overhead: concurrent episodes against a local server with a fixed latency.
    Harness(BenchHarnessArgs),
    /// Env server throughput: steps/s over HTTP with many sessions, and reset latency.
    Serve(crate::serve::bench::BenchServeArgs),
    /// Local Qwen2-VL speed: TTFT for one frame, decode tokens/s at batch sizes, achieved GB/s
    /// and % of the memory-bandwidth roofline (`--model-dir DIR [--device cuda]`).
    Local(crate::localbenchcmd::BenchLocalArgs),
    /// Local Qwen2-VL correctness: a device's logits and greedy tokens against the CPU f32
    /// reference (exit 1 when f32 max |Δ| or bf16 top-1 agreement misses its threshold).
    Parity(crate::localbenchcmd::BenchParityArgs),
}

/// `vlm-eval assets …`
#[derive(Subcommand, Debug)]
pub enum AssetsCommand {
    /// Download crafter 1.8.3's sdist with pip, verify its textures and cache them.
    Fetch {
        /// Directory to write the textures to (default: the per-user cache).
        #[arg(long)]
        dest: Option<PathBuf>,
    },
    /// Say which texture set would be used and where it comes from.
    Which {
        /// Directory with crafter's textures.
        #[arg(long, env = "CRAFTER_ASSETS")]
        assets: Option<PathBuf>,
    },
}

/// Geometry and texture flags shared by env commands.
#[derive(Args, Debug, Clone)]
pub struct EnvArgs {
    /// Frame size in pixels: W or W,H.
    #[arg(long, default_value = "64", value_parser = parse_pair)]
    pub size: [usize; 2],
    /// World area in tiles: W,H (or W).
    #[arg(long, default_value = "64,64", value_parser = parse_pair)]
    pub area: [usize; 2],
    /// View in tiles: W,H (or W), including the two inventory rows.
    #[arg(long, default_value = "9,9", value_parser = parse_pair)]
    pub view: [usize; 2],
    /// Episode length in steps (0: unlimited).
    #[arg(long, default_value_t = 10_000)]
    pub length: u32,
    /// Directory with crafter's official textures (else $CRAFTER_ASSETS, the cache, or an
    /// installed crafter package; else built-in sprites).
    #[arg(long)]
    pub assets: Option<PathBuf>,
}

/// `vlm-eval env trace` flags.
#[derive(Args, Debug)]
pub struct TraceArgs {
    /// Env seed.
    #[arg(long, default_value_t = 0, allow_hyphen_values = true)]
    pub seed: i64,
    /// Number of steps.
    #[arg(long, default_value_t = 100)]
    pub steps: u64,
    /// Seed of the action stream `RandomState(A).randint(0, 17)`.
    #[arg(long, default_value_t = 0)]
    pub action_seed: u32,
    /// Play these actions (ids or names, comma-separated, cycled) instead of random ones.
    #[arg(long, value_delimiter = ',')]
    pub actions: Option<Vec<String>>,
    /// Refill health to 9 before each step (both tracers implement it), for long episodes.
    #[arg(long)]
    pub immortal: bool,
    /// Geometry and textures.
    #[command(flatten)]
    pub env: EnvArgs,
}

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
}

/// A multi-threaded tokio runtime for the async commands.
pub fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError {
            code: 1,
            message: format!("cannot start the async runtime: {e}"),
        })
}

/// Parse `W` or `W,H` (also `WxH`) into a pair of positive integers.
pub fn parse_pair(s: &str) -> Result<[usize; 2], String> {
    let parts: Vec<&str> = s.split([',', 'x']).map(str::trim).collect();
    let num = |p: &str| {
        p.parse::<usize>()
            .map_err(|_| format!("'{s}' is not W or W,H with positive whole numbers"))
    };
    let pair = match parts.as_slice() {
        [w] => [num(w)?; 2],
        [w, h] => [num(w)?, num(h)?],
        _ => return Err(format!("'{s}' is not W or W,H")),
    };
    if pair.contains(&0) {
        return Err(format!("'{s}' has a zero side; sizes must be positive"));
    }
    Ok(pair)
}

/// Load textures as the env commands do, logging the built-in fallback warning.
pub fn load_textures(assets: Option<&std::path::Path>) -> Result<TextureSet, CliError> {
    let (set, warning) =
        TextureSet::discover(assets).map_err(|e| CliError::usage(e.to_string()))?;
    if let Some(w) = warning {
        tracing::warn!("{w}");
    }
    Ok(set)
}

fn env_config(a: &EnvArgs, seed: i64, render: bool) -> Result<EnvConfig, CliError> {
    let area = [
        i32::try_from(a.area[0]).unwrap_or(i32::MAX),
        i32::try_from(a.area[1]).unwrap_or(i32::MAX),
    ];
    let cfg = EnvConfig {
        area,
        view: a.view,
        size: a.size,
        length: Some(a.length),
        seed,
        render,
    };
    cfg.validate().map_err(|e| CliError::usage(e.to_string()))?;
    Ok(cfg)
}

/// Parse an action given as an id (0..=16) or a canonical name.
pub fn parse_action(s: &str) -> Result<Action, CliError> {
    let s = s.trim();
    let found = match s.parse::<i64>() {
        Ok(id) => Action::from_id(id),
        Err(_) => Action::from_name(s),
    };
    found.ok_or_else(|| {
        CliError::usage(format!(
            "unknown action '{s}': use an id 0..=16 or a name such as noop, move_left, do, place_table"
        ))
    })
}

/// Subcommand names; anything else first on the command line means `run`.
pub const SUBCOMMANDS: [&str; 13] = [
    "run",
    "env",
    "bench",
    "assets",
    "help",
    "export-sft",
    "frames",
    "merge",
    "compare",
    "check",
    "baseline",
    "report",
    "serve-env",
];

/// Insert the default `run` subcommand when the first argument is not a subcommand.
pub fn with_default_command(mut args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    let first = args.get(1).and_then(|a| a.to_str()).unwrap_or("");
    let top_level_flag = matches!(first, "-h" | "--help" | "-V" | "--version");
    if args.len() > 1 && !SUBCOMMANDS.contains(&first) && !top_level_flag {
        args.insert(1, "run".into());
    }
    args
}

/// Run a parsed command; returns the process exit code.
pub fn run(cli: Cli) -> Result<i32, CliError> {
    match cli.command {
        Command::Run(a) => crate::runcmd::cmd_run(*a),
        Command::ExportSft(a) => crate::sftcmd::cmd_export_sft(a),
        Command::Frames(a) => crate::framescmd::cmd_frames(a),
        Command::Merge(a) => crate::mergecmd::cmd_merge(a),
        Command::Compare(a) => crate::comparecmd::cmd_compare(a),
        Command::Check(a) => crate::checkcmd::cmd_check(a),
        Command::Baseline(c) => crate::checkcmd::cmd_baseline(c),
        Command::Env(EnvCommand::Trace(a)) => cmd_trace(a).map(|_| 0),
        Command::Bench(BenchCommand::Env(a)) => cmd_bench_env(a).map(|_| 0),
        Command::Bench(BenchCommand::Harness(a)) => cmd_bench_harness(a).map(|_| 0),
        Command::Report(a) => crate::reportcmd::cmd_report(a),
        Command::Bench(BenchCommand::Serve(a)) => crate::serve::bench::cmd_bench_serve(a),
        Command::Bench(BenchCommand::Local(a)) => crate::localbenchcmd::cmd_bench_local(a),
        Command::Bench(BenchCommand::Parity(a)) => crate::localbenchcmd::cmd_bench_parity(a),
        Command::ServeEnv(a) => crate::serve::cmd_serve_env(a),
        Command::Assets(AssetsCommand::Fetch { dest }) => {
            let dir = textures::fetch_official(dest.as_deref()).map_err(|e| CliError {
                code: 1,
                message: e.to_string(),
            })?;
            println!(
                "crafter 1.8.3 textures verified and saved to {}",
                dir.display()
            );
            Ok(0)
        }
        Command::Assets(AssetsCommand::Which { assets }) => {
            let set = load_textures(assets.as_deref())?;
            match set.source() {
                textures::TextureSource::Official { dir } => {
                    println!(
                        "official {} (fingerprint {})",
                        dir.display(),
                        set.fingerprint()
                    )
                }
                textures::TextureSource::Builtin => {
                    println!("builtin (fingerprint {})", set.fingerprint())
                }
            }
            Ok(0)
        }
    }
}

fn cmd_trace(a: TraceArgs) -> Result<(), CliError> {
    let cfg = env_config(&a.env, a.seed, true)?;
    let actions = match &a.actions {
        Some(list) => Some(
            list.iter()
                .map(|s| parse_action(s))
                .collect::<Result<Vec<_>, _>>()?,
        ),
        None => None,
    };
    if matches!(&actions, Some(v) if v.is_empty()) {
        return Err(CliError::usage(
            "--actions is empty: give at least one action",
        ));
    }
    let textures = load_textures(a.env.assets.as_deref())?;
    let mut env = Env::new(cfg, &textures).map_err(|e| CliError::usage(e.to_string()))?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut failed = None;
    let options = trace::TraceOptions {
        steps: a.steps,
        action_seed: a.action_seed,
        actions,
        immortal: a.immortal,
    };
    trace::run_trace(&mut env, &options, |record| {
        if failed.is_none() {
            if let Err(e) = writeln!(out, "{record}") {
                failed = Some(e);
            }
        }
    });
    if let Some(e) = failed.or_else(|| out.flush().err()) {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            return Err(CliError {
                code: 1,
                message: format!("cannot write the trace: {e}"),
            });
        }
    }
    Ok(())
}

fn cmd_bench_env(a: BenchEnvArgs) -> Result<(), CliError> {
    let env_args = EnvArgs {
        size: a.size,
        area: [64, 64],
        view: [9, 9],
        length: 10_000,
        assets: a.assets.clone(),
    };
    let cfg = env_config(&env_args, 0, !a.no_render)?;
    let textures = load_textures(a.assets.as_deref())?;
    let report =
        bench::bench_env(&cfg, &textures, a.steps).map_err(|e| CliError::usage(e.to_string()))?;
    if a.json {
        println!("{}", serde_json::to_string(&report).unwrap_or_default());
    } else {
        println!("{report}");
    }
    Ok(())
}

fn cmd_bench_harness(a: BenchHarnessArgs) -> Result<(), CliError> {
    if a.episodes == 0 || a.turns == 0 || a.concurrency == 0 {
        return Err(CliError::usage(
            "--episodes, --turns and --concurrency must be at least 1",
        ));
    }
    if !(9..=1024).contains(&a.image_size) {
        return Err(CliError::usage("--image-size must be 9..=1024"));
    }
    let textures = std::sync::Arc::new(load_textures(a.assets.as_deref())?);
    let runtime = crate::cli::runtime()?;
    let r = runtime
        .block_on(crate::eval::bench::bench_harness(
            &a.out,
            a.episodes,
            a.turns,
            a.latency_ms,
            a.concurrency,
            a.image_size,
            textures,
        ))
        .map_err(|message| CliError { code: 1, message })?;
    if a.json {
        println!("{}", serde_json::to_string(&r).unwrap_or_default());
    } else {
        println!(
            "{} episodes x {} turns at concurrency {} against a {} ms server: {:.3} s (ideal {:.3} s, {:.3}x)",
            r.episodes, r.turns, r.concurrency, r.latency_ms, r.wall_s, r.ideal_s, r.ratio
        );
        println!(
            "harness work per turn at {}x{}: {:.3} ms (model time excluded)",
            r.image_size, r.image_size, r.harness_ms_per_turn
        );
    }
    Ok(())
}
