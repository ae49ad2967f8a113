//! `run`'s second step: the flags and the `--config` file merged (then checked by `limits`),
//! then resolved into a [`ResolvedRun`] (seeds, protocol, endpoint and key, run name, textures,
//! prices), with every input check that must fail before anything slow happens.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::args::RunArgs;
use super::model::is_local;
use super::preset::{self, Resolved};
use crate::agent::conversation::{ConversationConfig, HistoryLayout, Modality};
use crate::agent::parse::Protocol;
use crate::agent::preset::Layout;
use crate::agent::prompt::Prompts;
use crate::cli::common::load_textures;
use crate::cli::error::CliError;
use crate::crafter::TextureSet;
use crate::model::prices::{Price, PriceTable};
use crate::results::frames::FramesMode;
use crate::results::store::check_path_component;

macro_rules! merge {
    ($cli:ident, $file:ident, $($f:ident),*) => { $( if $cli.$f.is_none() { $cli.$f = $file.$f.clone(); } )* };
}

fn read_config(path: &Path) -> Result<RunArgs, CliError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::usage(format!("cannot read --config {}: {e}", path.display())))?;
    let mut file: RunArgs = toml::from_str(&text).map_err(|e| {
        let msg = e.message().replace('\n', " ");
        CliError::usage(format!(
            "--config {}: {msg} (keys are the flag names, e.g. seeds = 10)",
            path.display()
        ))
    })?;
    // Entries' names trimmed as `--model`'s are (`limits::model_name`), so that `--model`
    // picks them by the same name; an empty one is refused there.
    for e in &mut file.models {
        e.model = e.model.trim().to_string();
    }
    Ok(file)
}

/// The flags with `--config`'s keys filling what the command line left unset.
pub(super) fn merge_config(mut a: RunArgs) -> Result<RunArgs, CliError> {
    let Some(path) = a.config.clone() else {
        return Ok(a);
    };
    let file = read_config(&path)?;
    super::args::check_entries(&a, &file, &path)?;
    a.models = file.models.clone();
    merge!(
        a,
        file,
        preset,
        parser,
        thinking,
        balrog_src,
        model,
        seeds,
        seed_list,
        steps,
        episode_length,
        concurrency,
        temperature,
        max_tokens,
        base_url,
        api_key_env,
        out,
        run_name,
        image_size,
        modality,
        obs_format,
        history,
        image_history,
        protocol,
        max_actions_per_turn,
        prompts,
        price_in,
        price_cached_in,
        price_out,
        prices,
        assets,
        request_timeout,
        max_retries,
        api_key_file,
        max_cost,
        max_tokens_total,
        cache,
        max_tokens_field,
        image_detail,
        max_retry_wait,
        turn_deadline,
        shard,
        device,
        dtype,
        frames,
        reasoning_effort,
        prompt_cache_key,
        history_layout
    );
    a.force |= file.force;
    a.quiet |= file.quiet;
    a.allow_errors |= file.allow_errors;
    a.no_tool_choice |= file.no_tool_choice;
    a.seed_param |= file.seed_param;
    a.allow_balrog_drift |= file.allow_balrog_drift;
    if a.headers.is_empty() {
        a.headers = file.headers.clone();
    }
    Ok(a)
}

/// One run, every setting decided: what the run record and the start need.
pub(super) struct ResolvedRun {
    /// The merged flags (for the settings used as given).
    pub args: RunArgs,
    /// The preset and the protocol settings over it.
    pub r: Resolved,
    /// The model's name as given (`mock`, `local:DIR`, a provider's name).
    pub model_name: String,
    /// `--model local:DIR`'s folder.
    pub local_dir: Option<PathBuf>,
    /// A model of our own (mock, scripted, random, local): no endpoint, no key, no price.
    pub builtin: bool,
    /// The seeds this run plays (its shard's slice).
    pub seeds: Vec<i64>,
    /// Every seed of the run, before `--shard`.
    pub all_seeds: Vec<i64>,
    /// Model turns per episode.
    pub turns: u32,
    /// Frame size in pixels.
    pub image_size: usize,
    /// Episodes in flight at once.
    pub concurrency: usize,
    /// The system prompt (before BALROG's layout replaces it).
    pub system: String,
    /// Request building.
    pub conversation: ConversationConfig,
    /// BALROG's message layout.
    pub balrog_layout: bool,
    /// The OpenAI-compatible base URL.
    pub base_url: String,
    /// The environment variable the key is read from.
    pub key_env: String,
    /// The API key, if any.
    pub api_key: Option<String>,
    /// Extra HTTP headers.
    pub headers: Vec<(String, String)>,
    /// The run folder's name under `out`.
    pub run_name: String,
    /// The output folder.
    pub out: PathBuf,
    /// Textures.
    pub textures: Arc<TextureSet>,
    /// The model's price (None: unknown).
    pub prices: Option<Price>,
    /// The `prompt_cache_key` of this run's episodes, before `-s<seed>` (`--prompt-cache-key`;
    /// `None`: not sent).
    pub prompt_cache_key: Option<String>,
}

/// Resolve the merged flags (checked by `limits::check`) into one run. `textures` reuses a
/// set already loaded (the model matrix loads them once); `None` loads them here. Nothing here
/// makes a folder, writes a file or sends a request.
pub(super) fn resolve_run(
    a: &RunArgs,
    textures: Option<Arc<TextureSet>>,
) -> Result<ResolvedRun, CliError> {
    let model_name = a.model.clone().ok_or_else(|| {
        CliError::usage("--model is required: e.g. --model mock (offline), --model gpt-4o-mini, or --model random")
    })?;
    let r = preset::resolve(a)?;
    let (seeds, all_seeds) = seed_plan(a, &r)?;
    let prompts = match &a.prompts {
        Some(dir) => Prompts::load(dir).map_err(|e| CliError::usage(format!("--prompts: {e}")))?,
        None => Prompts::builtin(),
    };
    let balrog_layout = r.play.layout == Layout::Balrog;
    let system = prompts.system(r.protocol, r.max_actions);
    let conversation = ConversationConfig {
        system: system.clone(),
        protocol: r.protocol,
        modality: r.modality,
        history: r.history,
        image_history: r.image_history,
        max_actions: if r.protocol == Protocol::Text {
            1
        } else {
            r.max_actions
        },
        temperature: r.temperature,
        max_tokens: r.max_tokens,
        seed: None,
        tool_choice: r.tool_choice,
        layout: a.history_layout.unwrap_or_default(),
    };
    if balrog_layout && conversation.layout == HistoryLayout::Append {
        return Err(CliError::usage(
            "--history-layout append works with the vlm-eval layout only (BALROG's layout keeps its own history); drop it or choose --preset vlm-eval",
        ));
    }
    let local_dir = model_name.strip_prefix("local:").map(PathBuf::from);
    let builtin =
        matches!(model_name.as_str(), "mock" | "scripted" | "random") || local_dir.is_some();
    let ep = endpoint(a, builtin)?;
    let run_name = a.run_name.clone().unwrap_or_else(|| {
        default_run_name(
            &model_name,
            &r,
            balrog_layout,
            a.frames.unwrap_or_default(),
            a.shard.map(|s| s.name_suffix()),
        )
    });
    check_path_component(&run_name).map_err(|why| {
        CliError::usage(format!(
            "--run-name {:?}: {why}; the run folder is --out/<run name>",
            run_name
        ))
    })?;
    // Prices before textures: a bad --prices file or a --max-cost without a price is the
    // only line printed (a texture warning would come first).
    let prices = resolve_price(a, &model_name, builtin)?;
    let textures = match textures {
        Some(t) => t,
        None => Arc::new(load_textures(a.assets.as_deref())?),
    };
    if balrog_layout && textures.kind() != "official" && !a.estimate {
        return Err(CliError::usage(format!(
            "--preset {} sends crafter's official textures, but only the built-in sprites were found: run `vlm-eval assets fetch`, or pass --assets DIR (or set CRAFTER_ASSETS)",
            r.preset.name
        )));
    }
    let out = a.out.clone().unwrap_or_else(|| PathBuf::from("results"));
    let prompt_cache_key = cache_key_prefix(
        a.prompt_cache_key.unwrap_or_default(),
        &ep.base_url,
        &run_name,
        builtin,
    );
    Ok(ResolvedRun {
        args: a.clone(),
        model_name,
        local_dir,
        builtin,
        seeds,
        all_seeds,
        turns: r.steps,
        image_size: r.image_size,
        concurrency: a.concurrency.unwrap_or(8),
        system,
        conversation,
        balrog_layout,
        base_url: ep.base_url,
        key_env: ep.key_env,
        api_key: ep.api_key,
        headers: ep.headers,
        run_name,
        out,
        textures,
        prices,
        prompt_cache_key,
        r,
    })
}

/// The prefix of every episode's `prompt_cache_key`, when one is sent: `vlm-eval-` and 16 hex
/// digits of the run name's sha256 (no secret, the same on resume). `auto` sends it to OpenAI's
/// own endpoint only (other servers may refuse an unknown field).
fn cache_key_prefix(
    mode: super::args::CacheKeyMode,
    base_url: &str,
    run_name: &str,
    builtin: bool,
) -> Option<String> {
    use super::args::CacheKeyMode;
    let openai = !builtin
        && base_url
            .split("://")
            .nth(1)
            .is_some_and(|rest| rest.split(['/', ':']).next() == Some("api.openai.com"));
    match mode {
        CacheKeyMode::Off => None,
        CacheKeyMode::Auto if !openai => None,
        CacheKeyMode::Auto | CacheKeyMode::On => {
            let hash = crate::crafter::trace::sha256_hex(run_name.as_bytes());
            Some(format!("vlm-eval-{}", &hash[..16]))
        }
    }
}

/// The price table: the built-in one, with `--prices FILE`'s rows over it.
pub(super) fn price_table(a: &RunArgs) -> Result<PriceTable, CliError> {
    let table = PriceTable::builtin();
    let Some(path) = &a.prices else {
        return Ok(table);
    };
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::usage(format!("cannot read --prices {}: {e}", path.display())))?;
    let extra = PriceTable::parse(&text).map_err(|e| {
        CliError::usage(format!(
            "--prices {}: {e} (the format of the built-in table: `vlm-eval prices --toml`)",
            path.display()
        ))
    })?;
    Ok(table.extended(extra))
}

/// The price checks of `resolve_run` alone (no textures loaded), so that a matrix refuses a
/// model without a price before another model's textures print anything.
pub(super) fn check_price(a: &RunArgs) -> Result<(), CliError> {
    let Some(model) = a.model.as_deref() else {
        return Ok(());
    };
    let builtin = matches!(model, "mock" | "scripted" | "random") || model.starts_with("local:");
    resolve_price(a, model, builtin).map(|_| ())
}

/// The model's price: the flags (`--price-in`, `--price-cached-in`, `--price-out`), free for
/// a model of our own, else the price table's row. A `--max-cost` without a price is refused.
fn resolve_price(a: &RunArgs, model: &str, builtin: bool) -> Result<Option<Price>, CliError> {
    let table = price_table(a)?;
    let price = match (a.price_in, a.price_out) {
        (Some(i), Some(o)) => Some(Price::flat(model, i, a.price_cached_in.unwrap_or(i), o)),
        (None, None) if a.price_cached_in.is_some() => {
            return Err(CliError::usage(
                "--price-cached-in needs --price-in and --price-out beside it",
            ))
        }
        (None, None) if builtin => Some(Price::free(model)),
        (None, None) => table.find(model).cloned(),
        _ => {
            return Err(CliError::usage(
                "give both --price-in and --price-out, or neither",
            ))
        }
    };
    if let (None, Some(c)) = (&price, a.max_cost) {
        return Err(CliError::usage(format!(
            "--max-cost {c} needs a price, but model {model:?} has none in the price table: give --price-in and --price-out (and --price-cached-in), or a --prices FILE with a row for it (`vlm-eval prices` lists the table)"
        )));
    }
    Ok(price)
}

/// The seeds this run plays (its shard's slice) and every seed of the run: `--seed-list` as
/// given (each seed once), else `0..N` (`--seeds`, else the preset's). Their count is bounded
/// by `limits::MAX_SEEDS`.
fn seed_plan(a: &RunArgs, r: &Resolved) -> Result<(Vec<i64>, Vec<i64>), CliError> {
    let all: Vec<i64> = match (&a.seed_list, a.seeds) {
        (Some(list), _) if !list.is_empty() => list.clone(),
        (_, Some(n)) => (0..i64::from(n)).collect(),
        _ => (0..i64::from(r.seeds)).collect(),
    };
    let mut uniq = all.clone();
    uniq.sort_unstable();
    uniq.dedup();
    if uniq.len() != all.len() {
        return Err(CliError::usage(
            "--seed-list has duplicate seeds; list each seed once",
        ));
    }
    let seeds = match a.shard {
        Some(shard) => shard.seeds_of(&all).map_err(CliError::usage)?,
        None => all.clone(),
    };
    Ok((seeds, all))
}

/// Where a model is called: base URL, key and headers, checked before anything slow happens.
struct Endpoint {
    base_url: String,
    key_env: String,
    api_key: Option<String>,
    headers: Vec<(String, String)>,
}

fn endpoint(a: &RunArgs, builtin: bool) -> Result<Endpoint, CliError> {
    let from_env = std::env::var("OPENAI_BASE_URL")
        .ok()
        .filter(|s| !s.trim().is_empty());
    let (base_url, from) = match (&a.base_url, from_env) {
        (Some(url), _) if a.config.is_some() => {
            (url.clone(), "--base-url (or base-url in --config)")
        }
        (Some(url), _) => (url.clone(), "--base-url"),
        (None, Some(url)) => (url, "OPENAI_BASE_URL (from the environment)"),
        (None, None) => ("https://api.openai.com/v1".to_string(), "the default URL"),
    };
    if !builtin {
        super::limits::check_base_url(&base_url, from)?;
    }
    let key_env = a
        .api_key_env
        .clone()
        .unwrap_or_else(|| "OPENAI_API_KEY".to_string());
    let api_key = match &a.api_key_file {
        Some(path) => Some(
            std::fs::read_to_string(path)
                .map_err(|e| {
                    CliError::usage(format!(
                        "cannot read --api-key-file {}: {e}",
                        path.display()
                    ))
                })?
                .trim()
                .to_string(),
        )
        .filter(|k| !k.is_empty()),
        None => std::env::var(&key_env)
            .ok()
            .map(|k| k.trim().to_string())
            .filter(|k| !k.is_empty()),
    };
    let mut headers = Vec::new();
    for h in &a.headers {
        match h.split_once(':') {
            Some((k, v)) if !k.trim().is_empty() => {
                headers.push((k.trim().to_string(), v.trim().to_string()))
            }
            _ => {
                return Err(CliError::usage(format!(
                    "--header '{h}' is not 'Name: value'"
                )))
            }
        }
    }
    // An estimate sends nothing: it needs no key.
    if !builtin && !a.estimate && api_key.is_none() && !is_local(base_url.trim()) {
        let source = match &a.api_key_file {
            Some(p) => format!("--api-key-file {} is empty", p.display()),
            None => format!("{key_env} is not set: export {key_env}=<your key> (or pick another variable with --api-key-env)"),
        };
        return Err(CliError::usage(format!(
            "{source}, or try --model mock to run offline"
        )));
    }
    Ok(Endpoint {
        base_url,
        key_env,
        api_key,
        headers,
    })
}

/// The settings part of a default run name:
/// `<protocol>_<modality>_<px>px_<turns>t[_frames-<mode>][shard]`, the frames part only when
/// the run stores other frame files than `--frames all` (so runs that store different things
/// get different folders).
pub(super) fn settings_name(
    r: &Resolved,
    balrog_layout: bool,
    frames: FramesMode,
    shard: Option<String>,
) -> String {
    let frames = match frames {
        FramesMode::All => String::new(),
        other => format!("_frames-{}", other.as_str()),
    };
    format!(
        "{}_{}_{}px_{}t{frames}{}",
        if balrog_layout {
            "balrog"
        } else {
            protocol_name(r.protocol)
        },
        modality_name(r.modality),
        r.image_size,
        r.steps,
        shard.unwrap_or_default()
    )
}

/// The default run name: the model's name made folder-safe, then the settings.
fn default_run_name(
    model_name: &str,
    r: &Resolved,
    balrog_layout: bool,
    frames: FramesMode,
    shard: Option<String>,
) -> String {
    format!(
        "{}_{}",
        folder_safe(model_name),
        settings_name(r, balrog_layout, frames, shard)
    )
}

/// A model's name made folder-safe: letters, digits, `-` and `.` kept, anything else `_`.
pub(super) fn folder_safe(model_name: &str) -> String {
    model_name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn protocol_name(p: Protocol) -> &'static str {
    match p {
        Protocol::Tool => "tool",
        Protocol::Text => "text",
    }
}

fn modality_name(m: Modality) -> &'static str {
    match m {
        Modality::Image => "image",
        Modality::Text => "text",
        Modality::Both => "both",
    }
}
