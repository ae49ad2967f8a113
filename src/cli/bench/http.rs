//! `vlm-eval bench http`: the OpenAI client's per-call overhead on loopback against servers
//! that write their answer once or in two writes without TCP_NODELAY, quick ACKs on and off.

use clap::Args;

use crate::cli::error::CliError;
use crate::model::http_bench::{bench_http, ServerWrites};

/// `vlm-eval bench http` flags.
#[derive(Args, Debug)]
pub struct BenchHttpArgs {
    /// Calls timed per server kind and setting.
    #[arg(long, default_value_t = 100)]
    pub calls: usize,
    /// Untimed calls first (connection set-up).
    #[arg(long, default_value_t = 5)]
    pub warmup: usize,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// `vlm-eval bench http`.
pub fn cmd_bench_http(a: BenchHttpArgs) -> Result<i32, CliError> {
    if a.calls == 0 {
        return Err(CliError::usage("--calls must be at least 1"));
    }
    let rows = crate::cli::common::runtime()?
        .block_on(bench_http(a.calls, a.warmup))
        .map_err(|e| CliError {
            code: 1,
            message: format!("bench http: {e}"),
        })?;
    if a.json {
        println!("{}", serde_json::json!({ "rows": rows }));
        return Ok(0);
    }
    println!(
        "{:<44} {:>9} {:>6} {:>9} {:>9} {:>9}",
        "server", "quickack", "calls", "mean ms", "p50 ms", "p95 ms"
    );
    for r in &rows {
        let server = match r.server {
            ServerWrites::Once => "headers+body in one write",
            ServerWrites::Twice => "headers, then body (two writes, Nagle on)",
        };
        println!(
            "{:<44} {:>9} {:>6} {:>9.3} {:>9.3} {:>9.3}",
            server,
            if r.quickack { "on" } else { "off" },
            r.calls,
            r.mean_ms,
            r.p50_ms,
            r.p95_ms
        );
    }
    Ok(0)
}
