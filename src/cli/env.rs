//! `vlm-eval env trace`: seeded JSONL reset/step records, without a model.

use std::io::Write;

use clap::Args;

use super::common::{env_config, load_textures, parse_action, EnvArgs};
use super::error::CliError;
use crate::crafter::{trace, Env};

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

/// Run `vlm-eval env trace`.
pub fn cmd_trace(a: TraceArgs) -> Result<i32, CliError> {
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
    Ok(0)
}
