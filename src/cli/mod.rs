//! Command-line interface: the clap tree and the dispatch to each command. Each command
//! lives in its own file (or folder) beside this one; `error.rs` holds `CliError` and
//! `common.rs` the plumbing several commands share. A command calls into the library, never
//! into another command.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

mod assets;
mod baseline;
pub mod bench;
mod check;
pub mod cli_docs;
pub mod common;
mod compare;
mod env;
pub mod error;
mod export_sft;
mod frames;
mod leaderboard;
mod merge;
mod presets;
mod prices;
mod replay;
mod report;
pub mod run;
mod score;
mod serve_env;
pub mod table;
pub mod usage;
pub mod view;

pub use error::{CliError, EXIT_USAGE};

/// vlm-eval: evaluate vision-language models on Crafter, fast and reproducibly.
#[derive(Parser, Debug)]
#[command(name = "vlm-eval", version, about, propagate_version = true)]
pub struct Cli {
    /// Subcommand.
    #[command(subcommand)]
    pub command: Command,
    /// Print every column of terminal tables in full. Without it, tables of `run`, `compare`,
    /// `presets` and `leaderboard` fit $COLUMNS (else the terminal's width, else 120): columns
    /// go in a stated order (docs/GUIDE.md#tables-that-fit), then the widest cells are
    /// abbreviated, and a line under the table says what was hidden. CSV files never change.
    #[arg(long, global = true)]
    pub wide: bool,
}

/// Top-level commands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Evaluate a model: concurrent seeded episodes, every frame and turn saved, a summary
    /// (the default command: `vlm-eval --model mock --seeds 10 --steps 10`).
    Run(Box<run::RunArgs>),
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
    ExportSft(export_sft::ExportSftArgs),
    /// Play a fixed action cycle without a model; save the frames and an image-message preview.
    Frames(frames::FramesArgs),
    /// Join shard run folders (`run --shard i/n`) into one run folder with a fresh summary.
    Merge(merge::MergeArgs),
    /// Compare runs: metrics table, achievement matrix, paired per-seed deltas; CSV export.
    Compare(compare::CompareArgs),
    /// Regression gate: exit 1 when a run is worse than a baseline beyond a tolerance.
    Check(check::CheckArgs),
    /// Baseline files for `check`.
    #[command(subcommand)]
    Baseline(BaselineCommand),
    /// Write one self-contained HTML page for a run: summary cards, charts, per-episode GIF
    /// and turn table (`vlm-eval report results/<run>`).
    Report(report::ReportArgs),
    /// Serve Crafter episodes over an HTTP JSON API for RL trainers (docs/RL.md).
    ServeEnv(serve_env::ServeArgs),
    /// List the protocol presets (`run --preset NAME`) and what each sets.
    Presets(presets::PresetsArgs),
    /// List the price table (USD per 1M tokens: input, cached input, cache write, output),
    /// each row with the date it was read and its source.
    Prices(prices::PricesArgs),
    /// Play a run's recorded actions again and check every frame against its recorded sha256;
    /// write the frames to `--out DIR`, or back into the run folder with `--restore`.
    Replay(replay::ReplayArgs),
    /// Rank runs per protocol into one CSV and one self-contained HTML page
    /// (`vlm-eval leaderboard results/`).
    Leaderboard(leaderboard::LeaderboardArgs),
    /// A local web server over a results folder: the leaderboard, each run's page, and live
    /// panels for runs still playing (`vlm-eval view results/`).
    View(view::ViewArgs),
    /// The Crafter paper's metrics of crafter `stats.jsonl` files: per-achievement success
    /// rates, the score, reward and length (`vlm-eval score logdir/`).
    Score(score::ScoreArgs),
    /// Documentation generated from the program itself.
    #[command(subcommand, hide = true)]
    Docs(DocsCommand),
}

/// `vlm-eval docs …` (hidden: for the project's own docs).
#[derive(Subcommand, Debug)]
pub enum DocsCommand {
    /// Print docs/CLI.md, the reference of every command and flag, generated from this clap
    /// tree (`vlm-eval docs cli > docs/CLI.md`).
    Cli,
}

/// `vlm-eval env …`
#[derive(Subcommand, Debug)]
pub enum EnvCommand {
    /// Play seeded random (or given) actions and print JSONL reset/step records.
    Trace(env::TraceArgs),
}

/// `vlm-eval bench …`
#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Environment throughput: random policy with resets, reset time, render time.
    Env(bench::BenchEnvArgs),
    /// Harness overhead: concurrent episodes against a local server with a fixed latency.
    Harness(bench::BenchHarnessArgs),
    /// Env server throughput: steps/s over HTTP with many sessions, and reset latency.
    Serve(bench::serve::BenchServeArgs),
    /// Local model speed (Qwen2-VL or Qwen3.5): TTFT for one frame, decode tokens/s at batch
    /// sizes, achieved GB/s and % of the memory-bandwidth roofline (`--model-dir DIR
    /// [--device cuda]`).
    Local(bench::local::BenchLocalArgs),
    /// Local model correctness (Qwen2-VL or Qwen3.5): a device's logits and greedy tokens
    /// against the CPU f32 reference (exit 1 when f32 max |Δ| or bf16 top-1 agreement misses
    /// its threshold).
    Parity(bench::local::BenchParityArgs),
    /// Start-up time: from starting `vlm-eval run` to its first model request, with textures in
    /// the cache, in $CRAFTER_ASSETS, and the old empty-cache path for reference.
    Startup(bench::startup::BenchStartupArgs),
    /// Reply parser cost on adversarial shapes (repeated markers, deep brackets, escapes, many
    /// tool calls), in ms per 100 KB, with and without the reply bound.
    Parse(bench::parse::BenchParseArgs),
    /// OpenAI client overhead per call on loopback against a server writing its answer once
    /// and one writing headers and body separately without TCP_NODELAY, quick ACKs on and off.
    Http(bench::http::BenchHttpArgs),
    /// `vlm-eval view` over a synthetic results folder (100 runs × 20 episodes × 500 steps by
    /// default): index latency, live update latency and server memory.
    View(bench::view::BenchViewArgs),
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

/// `vlm-eval baseline …`
#[derive(Subcommand, Debug)]
pub enum BaselineCommand {
    /// Save a run's per-seed metric values and summary as a small baseline file for `check`.
    Save(baseline::BaselineSaveArgs),
}

/// Subcommand names; anything else first on the command line means `run`.
pub const SUBCOMMANDS: [&str; 20] = [
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
    "presets",
    "prices",
    "replay",
    "leaderboard",
    "view",
    "score",
    "docs",
];

/// Insert the default `run` subcommand when the first argument is not a subcommand.
pub fn with_default_command(mut args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    // `--wide` (global) may come before the subcommand: look past it.
    let at = 1 + args
        .iter()
        .skip(1)
        .take_while(|a| a.to_str() == Some("--wide"))
        .count();
    let first = args.get(at).and_then(|a| a.to_str()).unwrap_or("");
    let top_level_flag = matches!(first, "-h" | "--help" | "-V" | "--version");
    if args.len() > at && !SUBCOMMANDS.contains(&first) && !top_level_flag {
        args.insert(at, "run".into());
    }
    args
}

/// Run a parsed command; returns the process exit code.
pub fn run(cli: Cli) -> Result<i32, CliError> {
    // Commands that print terminal tables resolve their width first: a bad $COLUMNS is exit 2
    // before anything runs.
    if matches!(
        cli.command,
        Command::Run(_)
            | Command::Compare(_)
            | Command::Presets(_)
            | Command::Prices(_)
            | Command::Leaderboard(_)
    ) {
        table::init(cli.wide)?;
    }
    match cli.command {
        Command::Run(a) => run::cmd_run(*a),
        Command::Env(EnvCommand::Trace(a)) => env::cmd_trace(a),
        Command::Bench(BenchCommand::Env(a)) => bench::cmd_bench_env(a),
        Command::Bench(BenchCommand::Harness(a)) => bench::cmd_bench_harness(a),
        Command::Bench(BenchCommand::Serve(a)) => bench::serve::cmd_bench_serve(a),
        Command::Bench(BenchCommand::Local(a)) => bench::local::cmd_bench_local(a),
        Command::Bench(BenchCommand::Parity(a)) => bench::local::cmd_bench_parity(a),
        Command::Bench(BenchCommand::Startup(a)) => bench::startup::cmd_bench_startup(a),
        Command::Bench(BenchCommand::Parse(a)) => bench::parse::cmd_bench_parse(a),
        Command::Bench(BenchCommand::Http(a)) => bench::http::cmd_bench_http(a),
        Command::Bench(BenchCommand::View(a)) => bench::view::cmd_bench_view(a),
        Command::Assets(AssetsCommand::Fetch { dest }) => assets::cmd_fetch(dest.as_deref()),
        Command::Assets(AssetsCommand::Which { assets }) => assets::cmd_which(assets.as_deref()),
        Command::ExportSft(a) => export_sft::cmd_export_sft(a),
        Command::Frames(a) => frames::cmd_frames(a),
        Command::Merge(a) => merge::cmd_merge(a),
        Command::Compare(a) => compare::cmd_compare(a),
        Command::Check(a) => check::cmd_check(a),
        Command::Baseline(BaselineCommand::Save(a)) => baseline::cmd_baseline_save(a),
        Command::Report(a) => report::cmd_report(a),
        Command::ServeEnv(a) => serve_env::cmd_serve_env(a),
        Command::Presets(a) => presets::cmd_presets(a),
        Command::Prices(a) => prices::cmd_prices(a),
        Command::Replay(a) => replay::cmd_replay(a),
        Command::Leaderboard(a) => leaderboard::cmd_leaderboard(a),
        Command::View(a) => view::cmd_view(a),
        Command::Score(a) => score::cmd_score(a),
        Command::Docs(DocsCommand::Cli) => {
            print!(
                "{}",
                cli_docs::markdown(<Cli as clap::CommandFactory>::command())
            );
            Ok(0)
        }
    }
}
