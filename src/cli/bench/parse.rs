//! `vlm-eval bench parse`: the reply parser on adversarial shapes, in ms per 100 KB.

use clap::Args;

use crate::agent::parse::bench::{bench_parse, ParseBenchRow};
use crate::cli::error::CliError;

/// `vlm-eval bench parse` flags.
#[derive(Args, Debug)]
pub struct BenchParseArgs {
    /// Reply sizes in bytes, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [10_000usize, 100_000, 1_000_000])]
    pub sizes: Vec<usize>,
    /// Parses per measurement (the median is reported).
    #[arg(long, default_value_t = 5)]
    pub repeats: usize,
    /// Only the shapes whose name contains this.
    #[arg(long)]
    pub shape: Option<String>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// `vlm-eval bench parse`.
pub fn cmd_bench_parse(a: BenchParseArgs) -> Result<i32, CliError> {
    if a.sizes.is_empty() || a.sizes.contains(&0) || a.repeats == 0 {
        return Err(CliError::usage(
            "--sizes must list positive byte counts and --repeats must be at least 1",
        ));
    }
    let rows = bench_parse(&a.sizes, a.repeats, a.shape.as_deref());
    let worst = |bounded: bool| {
        rows.iter()
            .filter(|r| r.bounded == bounded)
            .max_by(|x, y| x.ms_per_100kb.total_cmp(&y.ms_per_100kb))
    };
    if a.json {
        let out = serde_json::json!({
            "rows": rows,
            "worst_ms_per_100kb": worst(true).map(|r| r.ms_per_100kb),
            "worst_ms_per_100kb_unbounded": worst(false).map(|r| r.ms_per_100kb),
        });
        println!("{out}");
        return Ok(0);
    }
    println!("CPU time per parse, median (min) of --repeats; \"whole\": without the reply bound");
    println!(
        "{:<34} {:>5} {:>9} {:>17} {:>9} {:>17} {:>9}",
        "shape", "proto", "bytes", "ms", "/100KB", "ms whole", "/100KB"
    );
    for pair in rows.chunks(2) {
        let [b, u]: &[ParseBenchRow; 2] = pair.try_into().map_err(|_| CliError {
            code: 1,
            message: "bench parse: rows come in bounded/whole pairs".into(),
        })?;
        println!(
            "{:<34} {:>5} {:>9} {:>17} {:>9.3} {:>17} {:>9.3}",
            b.shape,
            b.protocol,
            b.bytes,
            format!("{:.3} ({:.3})", b.ms, b.min_ms),
            b.ms_per_100kb,
            format!("{:.3} ({:.3})", u.ms, u.min_ms),
            u.ms_per_100kb
        );
    }
    for (label, bounded) in [("with the reply bound", true), ("whole replies", false)] {
        if let Some(r) = worst(bounded) {
            println!(
                "worst {label}: {:.3} ms per 100 KB ({}, {}, {} bytes)",
                r.ms_per_100kb, r.shape, r.protocol, r.bytes
            );
        }
    }
    Ok(0)
}
