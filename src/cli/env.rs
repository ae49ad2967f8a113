//! `vlm-eval env trace`: seeded JSONL reset/step records, without a model.

use std::io::Write;

use clap::{Args, ValueEnum};
use serde_json::{json, Value};

use super::common::{env_config, load_textures, parse_action, EnvArgs};
use super::error::CliError;
use crate::agent::balrog::balrog_observation;
use crate::agent::observe::{observe, ObsFormat};
use crate::agent::preset::Preset;
use crate::crafter::{trace, Env};

/// An observation text added to every trace record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Observe {
    /// `"balrog": {"long_term_context", "short_term_context"}`: BALROG's wrapper texts.
    Balrog,
    /// `"state": "<text>"`: the `state` observation.
    State,
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
    /// Add observation texts to every record (comma-separated: balrog, state).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub observe: Vec<Observe>,
    /// Apply a preset's observation settings (`vlm-eval presets`), as `frames --preset` does:
    /// its frame size and episode length (`--size` and `--length` override them), and for
    /// `balrog` `--observe balrog`, BALROG's reset Noop after every reset and every frame
    /// rendered twice as its wrapper does (at night each render draws from the game's RNG, so
    /// another `--size` plays another game).
    #[arg(long)]
    pub preset: Option<String>,
    /// Geometry and textures.
    #[command(flatten)]
    pub env: EnvArgs,
}

/// Add the requested observation texts to a record.
fn with_observations(env: &Env, mut record: Value, observe_as: &[Observe]) -> Value {
    for o in observe_as {
        match o {
            Observe::Balrog => record["balrog"] = json!(balrog_observation(env)),
            Observe::State => record["state"] = json!(observe(env, ObsFormat::State)),
        }
    }
    record
}

/// Run `vlm-eval env trace`.
pub fn cmd_trace(a: TraceArgs) -> Result<i32, CliError> {
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
    let mut observe_as = a.observe.clone();
    let (mut reset_noop, mut render_twice) = (false, false);
    let mut geometry = a.env.clone();
    if let Some(name) = &a.preset {
        let preset = Preset::builtin(name).map_err(|e| CliError::usage(e.to_string()))?;
        if preset.observation.obs_format == ObsFormat::Balrog
            && !observe_as.contains(&Observe::Balrog)
        {
            observe_as.push(Observe::Balrog);
        }
        reset_noop = preset.observation.reset_noop;
        render_twice = preset.observation.render_twice;
        let size = preset.observation.image_size;
        geometry.size.get_or_insert([size, size]);
        geometry.length.get_or_insert(preset.episode.episode_length);
    }
    let cfg = env_config(&geometry, a.seed, true)?;
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
        reset_noop,
        render_twice,
    };
    trace::run_trace_with(&mut env, &options, |env, record| {
        let record = with_observations(env, record, &observe_as);
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
