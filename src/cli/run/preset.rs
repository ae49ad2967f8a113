//! `run`'s preset resolution: the named preset (`--preset`, `preset = "…"` in `--config`,
//! default `vlm-eval`) gives every protocol setting; flags and config keys override it. Also
//! the checks a preset's protocol needs (the balrog layout's fixed shape, its BALROG checkout
//! and textures) and what run.json records about it.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{json, Value};

use super::args::RunArgs;
use crate::agent::balrog::{BalrogTexts, BALROG_REPO, PINNED_COMMIT};
use crate::agent::conversation::Modality;
use crate::agent::dialog::PlayOptions;
use crate::agent::observe::ObsFormat;
use crate::agent::parse::{ParserMode, Protocol};
use crate::agent::preset::{Feedback, Layout, Preset, DEFAULT_PRESET};
use crate::cli::error::CliError;

/// Every protocol setting of a run, after the preset and the overrides.
pub(super) struct Resolved {
    /// The preset.
    pub preset: Preset,
    /// Settings whose value differs from the preset's (flag or config names).
    pub overrides: Vec<&'static str>,
    pub seeds: u32,
    pub steps: u32,
    pub episode_length: u32,
    pub image_size: usize,
    pub modality: Modality,
    pub obs_format: ObsFormat,
    pub history: usize,
    pub image_history: usize,
    pub protocol: Protocol,
    pub max_actions: usize,
    pub tool_choice: bool,
    pub content_parts: bool,
    pub temperature: Option<f32>,
    pub max_tokens: Option<u32>,
    pub max_tokens_field: String,
    /// Layout, parser, feedback, reset and render, BALROG's texts.
    pub play: PlayOptions,
}

fn over<T: PartialEq + Clone>(
    flag: &Option<T>,
    preset: T,
    name: &'static str,
    overrides: &mut Vec<&'static str>,
) -> T {
    match flag {
        Some(v) if *v != preset => {
            overrides.push(name);
            v.clone()
        }
        Some(v) => v.clone(),
        None => preset,
    }
}

/// Resolve the preset and the overrides; checks what the preset's layout requires.
pub(super) fn resolve(a: &RunArgs) -> Result<Resolved, CliError> {
    let name = a.preset.as_deref().unwrap_or(DEFAULT_PRESET);
    let preset = Preset::builtin(name).map_err(|e| CliError::usage(format!("--preset: {e}")))?;
    let mut o = Vec::new();
    let p = &preset;
    let seeds = match (&a.seed_list, a.seeds) {
        (Some(_), _) => {
            o.push("seed-list");
            p.episode.seeds
        }
        (_, n) => over(&n, p.episode.seeds, "seeds", &mut o),
    };
    let steps = over(&a.steps, p.episode.steps, "steps", &mut o);
    let episode_length = over(
        &a.episode_length,
        p.episode.episode_length,
        "episode-length",
        &mut o,
    );
    let image_size = over(
        &a.image_size,
        p.observation.image_size,
        "image-size",
        &mut o,
    );
    let modality = over(&a.modality, p.observation.modality, "modality", &mut o);
    let obs_format = over(
        &a.obs_format,
        p.observation.obs_format,
        "obs-format",
        &mut o,
    );
    let history = over(&a.history, p.prompt.history, "history", &mut o);
    let image_history = over(
        &a.image_history,
        p.prompt.image_history,
        "image-history",
        &mut o,
    );
    let protocol = over(&a.protocol, p.prompt.protocol, "protocol", &mut o);
    let max_actions = over(
        &a.max_actions_per_turn,
        p.prompt.max_actions_per_turn,
        "max-actions-per-turn",
        &mut o,
    );
    let parser = over(&a.parser, p.parser.parser, "parser", &mut o);
    let tool_choice = p.prompt.tool_choice && !a.no_tool_choice;
    if a.no_tool_choice && p.prompt.tool_choice {
        o.push("no-tool-choice");
    }
    let temperature = match a.temperature {
        Some(t) if Some(t) != p.sampling.temperature => {
            o.push("temperature");
            Some(t)
        }
        Some(t) => Some(t),
        None => p.sampling.temperature,
    };
    let max_tokens = match a.max_tokens {
        Some(t) if Some(t) != p.sampling.max_tokens => {
            o.push("max-tokens");
            Some(t)
        }
        Some(t) => Some(t),
        None => p.sampling.max_tokens,
    };
    let max_tokens_field = over(
        &a.max_tokens_field,
        p.sampling.max_tokens_field.clone(),
        "max-tokens-field",
        &mut o,
    );
    if a.prompts.is_some() {
        o.push("prompts");
    }
    let layout = p.prompt.layout;
    if layout == Layout::Balrog {
        let bad = |flag: &str, why: &str| {
            CliError::usage(format!(
                "{flag} does not fit --preset {name}: {why}; drop {}",
                flag.split(' ').next().unwrap_or(flag)
            ))
        };
        if protocol != Protocol::Text {
            return Err(bad(
                "--protocol tool",
                "BALROG's naive agent answers in text",
            ));
        }
        if max_actions != 1 {
            return Err(bad(
                "--max-actions-per-turn",
                "BALROG plays one action per model call",
            ));
        }
        if modality == Modality::Image {
            return Err(bad(
                "--modality image",
                "BALROG sends the observation text with the frame (use --modality text for its LLM protocol)",
            ));
        }
        if a.prompts.is_some() {
            return Err(bad(
                "--prompts",
                "BALROG's prompts come from the BALROG checkout (--balrog-src)",
            ));
        }
    }
    if parser == ParserMode::Balrog && protocol == Protocol::Tool {
        return Err(CliError::usage(
            "--parser balrog does not fit --protocol tool: BALROG's rule reads a text reply (one action name), so every tool call would count as invalid; use --protocol text, or --parser lenient or strict",
        ));
    }
    let needs_texts = layout == Layout::Balrog || p.parser.feedback == Feedback::Balrog;
    let balrog = if needs_texts {
        Some(Arc::new(load_texts(a, name)?))
    } else {
        None
    };
    let play = PlayOptions {
        layout,
        parser,
        feedback: p.parser.feedback,
        reset_noop: p.observation.reset_noop,
        render_twice: p.observation.render_twice,
        balrog,
    };
    Ok(Resolved {
        overrides: o,
        seeds,
        steps,
        episode_length,
        image_size,
        modality,
        obs_format,
        history,
        image_history,
        protocol,
        max_actions,
        tool_choice,
        content_parts: p.prompt.content_parts,
        temperature,
        max_tokens,
        max_tokens_field,
        play,
        preset,
    })
}

/// BALROG's texts from `--balrog-src` or `$BALROG_SRC`, checked against the pinned hashes.
fn load_texts(a: &RunArgs, preset: &str) -> Result<BalrogTexts, CliError> {
    let dir = a
        .balrog_src
        .clone()
        .or_else(|| {
            std::env::var_os("BALROG_SRC")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        })
        .ok_or_else(|| {
            CliError::usage(format!(
                "--preset {preset} reads BALROG's instruction prompt, naive instruction and feedback sentence from a BALROG checkout: pass --balrog-src DIR or set BALROG_SRC (git clone {BALROG_REPO}, then git checkout {PINNED_COMMIT})"
            ))
        })?;
    let texts = BalrogTexts::load(&dir).map_err(|e| CliError::usage(e.to_string()))?;
    let drift = texts.drift();
    if !drift.is_empty() && !a.allow_balrog_drift {
        return Err(CliError::usage(format!(
            "the BALROG checkout {} is not at commit {PINNED_COMMIT}: the sha256 of {} differs from the pinned value; check out {PINNED_COMMIT}, or pass --allow-balrog-drift to run anyway (recorded in run.json)",
            dir.display(),
            drift.join(", ")
        )));
    }
    if !drift.is_empty() {
        tracing::warn!(
            "running with BALROG texts that differ from commit {PINNED_COMMIT} ({}): this run does not reproduce BALROG's protocol",
            drift.join(", ")
        );
    } else if !texts.file_drift().is_empty() {
        tracing::warn!(
            "the BALROG checkout {} differs from commit {PINNED_COMMIT} in {} (its prompt texts match; its behaviour may not)",
            dir.display(),
            texts.file_drift().join(", ")
        );
    }
    Ok(texts)
}

impl Resolved {
    /// The protocol keys of run.json's `config` that a preset decides.
    pub(super) fn config_keys(&self, parser: ParserMode) -> Value {
        json!({
            "preset": self.preset.name,
            "preset_overrides": self.overrides,
            "parser": parser.as_str(),
            "layout": self.play.layout.as_str(),
            "feedback": self.play.feedback.as_str(),
            "reset_noop": self.play.reset_noop,
            "render_twice": self.play.render_twice,
            "content_parts": self.content_parts,
        })
    }
}
