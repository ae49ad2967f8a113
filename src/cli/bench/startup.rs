//! `vlm-eval bench startup`: time from process start to the first model request.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::Args;

use crate::cli::common::{load_textures, runtime};
use crate::cli::error::CliError;
use crate::crafter::textures::{TextureSource, CACHE_SUBDIR};
use crate::eval::startup::{bench_startup, StartupCase};

/// `vlm-eval bench startup` flags.
#[derive(Args, Debug)]
pub struct BenchStartupArgs {
    /// Measured runs per case (after one warm-up run each).
    #[arg(long, default_value_t = 20)]
    pub repeats: usize,
    /// Directory with crafter's textures (else found as every command finds them).
    #[arg(long)]
    pub assets: Option<PathBuf>,
    /// Where scratch caches and run folders go (removed afterwards).
    #[arg(long)]
    pub work: Option<PathBuf>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Run `vlm-eval bench startup`.
pub fn cmd_bench_startup(a: BenchStartupArgs) -> Result<i32, CliError> {
    if a.repeats == 0 {
        return Err(CliError::usage("--repeats must be at least 1"));
    }
    let textures = load_textures(a.assets.as_deref())?;
    let TextureSource::Official { dir } = textures.source() else {
        return Err(CliError::usage(
            "bench startup needs crafter's official textures: pass --assets DIR or run `vlm-eval assets fetch`",
        ));
    };
    let exe = std::env::current_exe().map_err(|e| CliError {
        code: 1,
        message: format!("cannot find the vlm-eval binary: {e}"),
    })?;
    let work = a.work.clone().unwrap_or_else(std::env::temp_dir);
    let io = |e: std::io::Error| CliError {
        code: 1,
        message: format!(
            "cannot prepare a scratch cache under {}: {e}",
            work.display()
        ),
    };
    // A filled cache, as `assets fetch` (or the first run) leaves it.
    let cache = work.join(format!("vlm-eval-startup-cache-{}", std::process::id()));
    let filled = cache.join(CACHE_SUBDIR);
    std::fs::create_dir_all(&filled).map_err(io)?;
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let path = entry.map_err(io)?.path();
        if path.extension().is_some_and(|e| e == "png") {
            if let Some(name) = path.file_name() {
                std::fs::copy(&path, filled.join(name)).map_err(io)?;
            }
        }
    }
    let set = |k: &str, v: OsString| (k.to_string(), Some(v));
    let unset = |k: &str| (k.to_string(), None);
    let cases = vec![
        StartupCase {
            name: "cache".into(),
            about: "textures in the per-user cache (every run after the first)".into(),
            env: vec![
                unset("CRAFTER_ASSETS"),
                set("VLM_EVAL_CACHE", cache.clone().into_os_string()),
            ],
            fresh_cache: false,
        },
        StartupCase {
            name: "crafter_assets".into(),
            about: "$CRAFTER_ASSETS names the folder".into(),
            env: vec![set("CRAFTER_ASSETS", dir.clone().into_os_string())],
            fresh_cache: false,
        },
        StartupCase {
            name: "python_probe".into(),
            about: "reference: empty cache, so discovery asks python3 for an installed crafter \
                    (what every run did before textures were cached)"
                .into(),
            env: vec![
                unset("CRAFTER_ASSETS"),
                set("VLM_EVAL_NO_FETCH", "1".into()),
            ],
            fresh_cache: true,
        },
    ];
    let result = runtime()?.block_on(bench_startup(&exe, &cases, a.repeats, &work));
    let _ = std::fs::remove_dir_all(&cache);
    let report = result.map_err(|message| CliError { code: 1, message })?;
    if a.json {
        println!("{}", serde_json::to_string(&report).unwrap_or_default());
        return Ok(0);
    }
    let reference = report
        .cases
        .iter()
        .find(|c| c.case == "python_probe")
        .map(|c| c.median_ms);
    println!(
        "time from starting `vlm-eval run` to its first model request ({} runs per case):",
        a.repeats
    );
    for c in &report.cases {
        let ratio = reference
            .filter(|_| c.case != "python_probe")
            .map(|r| format!("  ({:.1}x faster than the reference)", r / c.median_ms))
            .unwrap_or_default();
        println!(
            "  {:<15} median {:6.1} ms  min {:6.1} ms  max {:6.1} ms{ratio}  {}",
            c.case, c.median_ms, c.min_ms, c.max_ms, c.about
        );
    }
    Ok(0)
}
