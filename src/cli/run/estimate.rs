//! `run --estimate`: what each model of the run (or matrix) would be sent and cost, printed
//! before anything is created or sent: requests; input tokens, text and images apart; output
//! tokens up to `--max-tokens`; a cost range. The counting is `eval::estimate`'s.

use super::args::RunArgs;
use super::resolve::ResolvedRun;
use crate::cli::error::CliError;
use crate::eval::estimate::{estimate, EstimateSetup, MAX_SAMPLED_SEEDS};
use crate::model::image_tokens::{rule_for, ImageRule};
use crate::model::request_tokens::o200k_is_exact;
use crate::model::Usage;

/// OpenAI's prompt cache: prompts of this many tokens or more are cached…
const CACHE_MIN: u64 = 1024;
/// …in steps of this many tokens.
const CACHE_STEP: u64 = 128;

/// `--estimate` with a flag it cannot honour: one usage line.
pub(super) fn check_flags(a: &RunArgs) -> Result<(), CliError> {
    let clash = |flag: &str, why: &str| {
        Err(CliError::usage(format!(
            "--estimate cannot be combined with {flag}: {why}; drop one of them"
        )))
    };
    if a.view.is_some() {
        return clash(
            "--view",
            "it serves the live view, and an estimate starts nothing",
        );
    }
    if a.force {
        return clash("--force", "an estimate redoes nothing");
    }
    if a.cache.is_some() {
        return clash(
            "--cache",
            "which replies the cache holds is not known before the run",
        );
    }
    let models: Vec<String> = match &a.model {
        Some(m) => m.split(',').map(|s| s.trim().to_string()).collect(),
        None => a.models.iter().map(|e| e.model.clone()).collect(),
    };
    if let Some(m) = models.iter().find(|m| m.starts_with("local:")) {
        return clash(
            &format!("--model {m}"),
            "a local checkpoint's tokenizer is in its folder, which an estimate does not load",
        );
    }
    Ok(())
}

fn thousands(n: f64) -> String {
    crate::report::html::thousands(n.round().max(0.0) as u64)
}

fn rule_text(rule: Option<ImageRule>, low: bool) -> String {
    match rule {
        Some(ImageRule::Tiles { base, .. }) if low => {
            format!("OpenAI's tile rule, detail low: {base} per image")
        }
        Some(ImageRule::Tiles { base, per_tile }) => {
            format!("OpenAI's tile rule: {base} + {per_tile} per 512 px tile")
        }
        Some(ImageRule::Patches { multiplier }) => {
            format!("OpenAI's patch rule: 32 px patches × {multiplier}")
        }
        Some(ImageRule::Claude) => "Anthropic's w·h/750".into(),
        Some(ImageRule::Gemini) => {
            "Gemini's 258 per image up to 384 px, else per 768 px tile".into()
        }
        None => "no known rule for this model: images counted as 0 tokens".into(),
    }
}

/// Print the estimate of one resolved run.
pub(super) fn print_estimate(rr: &ResolvedRun) {
    let r = &rr.r;
    let low_detail = rr.args.image_detail.as_deref() == Some("low");
    let rule = rule_for(&rr.model_name);
    let setup = EstimateSetup {
        conversation: rr.conversation.clone(),
        play: r.play.clone(),
        obs_format: r.obs_format,
        image_size: rr.image_size,
        episode_length: r.episode_length,
        textures: &rr.textures,
        turns: rr.turns,
        seeds: &rr.seeds,
    };
    let e = estimate(&setup, rule, low_detail);
    let text = e.total(|t| t.text);
    let image = e.total(|t| t.image);
    let images = e.total(|t| t.images);
    let max_out = r.max_tokens.map(u64::from);
    let requests = e.requests as f64;
    println!(
        "estimate for {} ({} seeds × {} turns; nothing sent, nothing created):",
        rr.model_name,
        rr.seeds.len(),
        rr.turns
    );
    println!("  requests:      {}", thousands(requests));
    println!(
        "  input tokens:  {} text + {} image ({} images of {} px) = {}",
        thousands(text),
        thousands(image),
        thousands(images),
        rr.image_size,
        thousands(text + image)
    );
    match max_out {
        Some(m) => println!(
            "  output tokens: up to {} (--max-tokens {m} × {} requests); at least {} (a one-action reply, {} tokens, each)",
            thousands(requests * m as f64),
            thousands(requests),
            thousands(requests * e.reply_tokens as f64),
            e.reply_tokens
        ),
        None => println!(
            "  output tokens: no --max-tokens, so no upper bound; at least {} (a one-action reply, {} tokens, each)",
            thousands(requests * e.reply_tokens as f64),
            e.reply_tokens
        ),
    }
    let cost = |cached: bool, out: u64| {
        rr.prices.as_ref().map(|p| {
            e.shapes
                .iter()
                .map(|s| {
                    let input = s.tokens.input();
                    let hit = if cached && s.tokens.shared_prefix >= CACHE_MIN {
                        s.tokens.shared_prefix / CACHE_STEP * CACHE_STEP
                    } else {
                        0
                    };
                    let u = Usage {
                        input_tokens: Some(input),
                        output_tokens: Some(out),
                        cached_input_tokens: Some(hit),
                        ..Usage::default()
                    };
                    s.count * p.cost(&u)
                })
                .sum::<f64>()
        })
    };
    match (cost(true, e.reply_tokens), max_out.and_then(|m| cost(false, m))) {
        (Some(low), Some(high)) => println!(
            "  cost:          ${low:.4} to ${high:.4} (low: every cacheable prefix read from the cache, one-action replies; high: no cache hit, every reply at --max-tokens)"
        ),
        (Some(low), None) => println!(
            "  cost:          at least ${low:.4} (no --max-tokens: no upper bound)"
        ),
        _ => println!(
            "  cost:          unknown: no price for {} (give --price-in and --price-out, or --prices FILE; `vlm-eval prices` lists the table)",
            rr.model_name
        ),
    }
    let tokenizer = if o200k_is_exact(&rr.model_name) {
        "o200k, the model's own tokenizer (tool schema approximate)".to_string()
    } else {
        "o200k as an approximation (the model's tokenizer is not public)".to_string()
    };
    let sampled = if e.sampled_seeds < rr.seeds.len() {
        format!(
            "the first turn of {} of the {} seeds (at most {MAX_SAMPLED_SEEDS}, evenly spaced)",
            e.sampled_seeds,
            rr.seeds.len()
        )
    } else {
        format!("the first turn of each of the {} seeds", e.sampled_seeds)
    };
    println!("  how: text tokens by {tokenizer}; images by {}; each turn's game text taken from {sampled}, played offline (no model), its history filled with one-action replies; cache hits by OpenAI's rule (prompts of {CACHE_MIN}+ tokens, {CACHE_STEP}-token steps of the prefix shared with the previous request); every episode plays all its turns.",
        rule_text(rule, low_detail));
}
