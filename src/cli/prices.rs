//! `vlm-eval prices`: the price table (`data/prices.toml`, built in), with a `--prices FILE`'s
//! rows over it; `--toml` prints the built-in file, the format a `--prices` file uses.

use std::path::PathBuf;

use clap::Args;

use super::error::CliError;
use super::table::{render, NO_DROP};
use crate::model::prices::{PriceTable, BUILTIN};
use crate::report::compare::Table;

/// `vlm-eval prices` flags.
#[derive(Args, Debug)]
pub struct PricesArgs {
    /// A price table whose rows override or extend the built-in one (as `run --prices`).
    #[arg(long, value_name = "FILE")]
    pub prices: Option<PathBuf>,
    /// Print the built-in table's file (TOML, with its comments) instead of the table.
    #[arg(long)]
    pub toml: bool,
}

fn usd(p: f64) -> String {
    format!("{p}")
}

/// Run `vlm-eval prices`.
pub fn cmd_prices(a: PricesArgs) -> Result<i32, CliError> {
    if a.toml {
        print!("{BUILTIN}");
        return Ok(0);
    }
    let table = PriceTable::with_file(a.prices.as_deref()).map_err(CliError::usage)?;
    let mut shown = Table {
        header: [
            "model",
            "input",
            "cached input",
            "cache write",
            "output",
            "above",
            "read",
            "source",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
        rows: Vec::new(),
    };
    let mut notes = Vec::new();
    for p in &table.rows {
        let r = &p.rates;
        let above = p.above.as_ref().map_or(String::new(), |(n, t)| {
            format!(
                ">{n}: {} / {} / {}",
                usd(t.input),
                usd(t.cached_input),
                usd(t.output)
            )
        });
        shown.rows.push(vec![
            p.model.clone(),
            usd(r.input),
            usd(r.cached_input),
            r.cache_write.map(usd).unwrap_or_else(|| "-".into()),
            usd(r.output),
            above,
            p.read.clone(),
            p.source.clone(),
        ]);
        if let Some(n) = &p.note {
            notes.push(format!("{}: {n}", p.model));
        }
    }
    println!("{}", render(&shown, NO_DROP));
    println!("USD per 1M tokens. Input includes cached input; a cached token is billed at the cached rate instead. \"above\": the rates (input / cached / output) of a request whose prompt exceeds that many tokens.");
    for n in notes {
        println!("note: {n}");
    }
    println!("Override: vlm-eval run --prices FILE (same format: `vlm-eval prices --toml`), or --price-in / --price-cached-in / --price-out.");
    Ok(0)
}
