//! `run`'s first check, on the merged flags before anything exists (no folder, no file, no
//! request, no server): every model name trimmed the same way and an empty one refused, and
//! every count, size and amount inside its stated bounds (docs/GUIDE.md "Limits"). A value out
//! of bounds is one usage line (exit 2) naming the flag, the value and the range.

use std::path::Path;

use super::args::RunArgs;
use crate::cli::error::CliError;

/// Most seeds one run plays (`--seeds N`, the length of `--seed-list`): a million episodes is
/// beyond any model evaluation's budget, and a run folder of more seed folders is beyond what
/// a filesystem lists quickly. `--seeds 100000000` is refused, not started.
pub const MAX_SEEDS: u64 = crate::results::run::MAX_SEEDS;
/// Most model turns per episode (`--steps`).
pub const MAX_STEPS: u32 = 100_000;
/// Most episodes in flight at once (`--concurrency`); serve-env caps its sessions alike.
pub const MAX_CONCURRENCY: usize = 1024;
/// Most previous turns, and most frames, kept in the prompt (`--history`, `--image-history`).
pub const MAX_HISTORY: usize = 1000;
/// Most models in one matrix (`--model a,b,…`, `[[models]]`).
pub const MAX_MODELS: usize = 64;
/// Most output tokens per turn (`--max-tokens`).
pub const MAX_OUTPUT_TOKENS: u32 = 1_000_000;
/// Most retries per request (`--max-retries`).
pub const MAX_RETRIES: u32 = 100;
/// Longest time flag (`--request-timeout`, `--max-retry-wait`, `--turn-deadline`): a day.
pub const MAX_SECONDS: f64 = 86_400.0;
/// Most extra headers (`--header`).
pub const MAX_HEADERS: usize = 64;
/// Frame sizes (`--image-size`), pixels.
pub const IMAGE_SIZES: std::ops::RangeInclusive<usize> = 9..=1024;
/// Actions per turn (`--max-actions-per-turn`).
pub const ACTIONS_PER_TURN: std::ops::RangeInclusive<usize> = 1..=64;
/// Sampling temperatures (`--temperature`), as the OpenAI API takes them.
pub const TEMPERATURES: std::ops::RangeInclusive<f32> = 0.0..=2.0;
/// Prices (`--price-in`, `--price-out`, USD per 1M tokens) and the budget (`--max-cost`, USD).
pub const MAX_PRICE: f64 = crate::model::prices::MAX_PRICE;

/// Trim every model name (`--model`, each name of `a,b,c`, each `[[models]]` entry) the one
/// way, refuse an empty one, then check every bound. Runs right after `--config` is merged.
pub(super) fn check(a: &mut RunArgs) -> Result<(), CliError> {
    normalise_models(a)?;
    check_counts(a)?;
    check_amounts(a)?;
    check_names(a)
}

/// One model name as every path reads it: trimmed; empty is an error naming where it came from.
pub(super) fn model_name(raw: &str, from: &str) -> Result<String, CliError> {
    let name = raw.trim();
    if name.is_empty() {
        return Err(CliError::usage(format!(
            "{from} is empty: name a model, e.g. --model mock (offline), --model gpt-4o-mini, or --model random"
        )));
    }
    if name.chars().any(char::is_control) {
        return Err(CliError::usage(format!(
            "{from} {name:?} holds a control character: name the model as the endpoint lists it"
        )));
    }
    Ok(name.to_string())
}

fn normalise_models(a: &mut RunArgs) -> Result<(), CliError> {
    if let Some(flag) = &a.model {
        let names = if flag.contains(',') {
            super::args::split_models(flag)?
        } else {
            vec![model_name(flag, "--model")?]
        };
        for n in &names {
            model_name(n, "a name in --model")?;
        }
        a.model = Some(names.join(","));
    }
    for e in &mut a.models {
        e.model = model_name(&e.model, "a [[models]] entry's model")?;
    }
    let count = match (&a.model, a.models.len()) {
        (_, n) if n > 0 => n,
        (Some(m), _) => m.split(',').count(),
        (None, _) => 0,
    };
    if count > MAX_MODELS {
        return Err(CliError::usage(format!(
            "{count} models listed: a matrix runs at most {MAX_MODELS}; split it into several commands"
        )));
    }
    Ok(())
}

fn out_of(flag: &str, value: impl std::fmt::Display, range: &str) -> CliError {
    CliError::usage(format!("{flag} {value} is out of range: use {range}"))
}

fn check_counts(a: &RunArgs) -> Result<(), CliError> {
    if let Some(n) = a.seeds {
        if n == 0 || u64::from(n) > MAX_SEEDS {
            return Err(out_of(
                "--seeds",
                n,
                &format!("1..={MAX_SEEDS} (a run plays at most {MAX_SEEDS} seeds; shard or split a larger set)"),
            ));
        }
    }
    if let Some(list) = &a.seed_list {
        if list.is_empty() {
            return Err(CliError::usage(
                "--seed-list is empty: list the seeds to play, e.g. --seed-list 0,3,7",
            ));
        }
        if list.len() as u64 > MAX_SEEDS {
            return Err(CliError::usage(format!(
                "--seed-list has {} seeds: a run plays at most {MAX_SEEDS}",
                list.len()
            )));
        }
    }
    if let Some(n) = a.steps {
        if !(1..=MAX_STEPS).contains(&n) {
            return Err(out_of(
                "--steps",
                n,
                &format!("1..={MAX_STEPS} model turns per episode"),
            ));
        }
    }
    if let Some(n) = a.concurrency {
        if !(1..=MAX_CONCURRENCY).contains(&n) {
            return Err(out_of(
                "--concurrency",
                n,
                &format!("1..={MAX_CONCURRENCY} episodes in flight"),
            ));
        }
    }
    if let Some(n) = a.image_size {
        if !IMAGE_SIZES.contains(&n) {
            return Err(out_of(
                "--image-size",
                n,
                "9..=1024 pixels (64 is crafter's default)",
            ));
        }
    }
    for (flag, v) in [
        ("--history", a.history),
        ("--image-history", a.image_history),
    ] {
        if let Some(n) = v.filter(|n| *n > MAX_HISTORY) {
            return Err(out_of(flag, n, &format!("0..={MAX_HISTORY}")));
        }
    }
    if let Some(n) = a.max_actions_per_turn {
        if !ACTIONS_PER_TURN.contains(&n) {
            return Err(out_of("--max-actions-per-turn", n, "1..=64"));
        }
    }
    if let Some(n) = a.max_tokens {
        if !(1..=MAX_OUTPUT_TOKENS).contains(&n) {
            return Err(out_of(
                "--max-tokens",
                n,
                &format!("1..={MAX_OUTPUT_TOKENS} output tokens per turn"),
            ));
        }
    }
    if let Some(n) = a.max_retries.filter(|n| *n > MAX_RETRIES) {
        return Err(out_of("--max-retries", n, &format!("0..={MAX_RETRIES}")));
    }
    if a.max_tokens_total == Some(0) {
        return Err(out_of(
            "--max-tokens-total",
            0,
            "a positive number of tokens",
        ));
    }
    if a.headers.len() > MAX_HEADERS {
        return Err(CliError::usage(format!(
            "{} --header flags: give at most {MAX_HEADERS}",
            a.headers.len()
        )));
    }
    Ok(())
}

fn check_amounts(a: &RunArgs) -> Result<(), CliError> {
    let seconds = [
        ("--request-timeout", a.request_timeout, false),
        ("--max-retry-wait", a.max_retry_wait, true),
        ("--turn-deadline", a.turn_deadline, false),
    ];
    for (flag, v, zero_ok) in seconds {
        if let Some(s) = v {
            let low_ok = if zero_ok { s >= 0.0 } else { s > 0.0 };
            if !(s.is_finite() && low_ok && s <= MAX_SECONDS) {
                let low = if zero_ok { "0" } else { "more than 0" };
                return Err(out_of(
                    flag,
                    s,
                    &format!("{low} up to {MAX_SECONDS} seconds (a day)"),
                ));
            }
        }
    }
    if let Some(t) = a.temperature {
        if !(t.is_finite() && TEMPERATURES.contains(&t)) {
            return Err(out_of(
                "--temperature",
                t,
                "0 to 2, as the OpenAI API takes it",
            ));
        }
    }
    for (flag, v) in [
        ("--price-in", a.price_in),
        ("--price-cached-in", a.price_cached_in),
        ("--price-out", a.price_out),
    ] {
        if let Some(p) = v {
            if !(p.is_finite() && (0.0..=MAX_PRICE).contains(&p)) {
                return Err(out_of(
                    flag,
                    p,
                    &format!("0 to {MAX_PRICE} USD per 1M tokens"),
                ));
            }
        }
    }
    if let Some(c) = a.max_cost {
        if !(c.is_finite() && c > 0.0 && c <= MAX_PRICE) {
            return Err(out_of(
                "--max-cost",
                c,
                &format!("more than 0 up to {MAX_PRICE} USD"),
            ));
        }
    }
    Ok(())
}

/// A path flag given as an empty or blank string.
fn blank_path(flag: &str, p: Option<&Path>) -> Result<(), CliError> {
    match p.map(|p| p.as_os_str().to_string_lossy()) {
        Some(s) if s.trim().is_empty() => Err(CliError::usage(format!(
            "{flag} {s:?} is empty: give a folder or file path"
        ))),
        _ => Ok(()),
    }
}

fn check_names(a: &RunArgs) -> Result<(), CliError> {
    blank_path("--out", a.out.as_deref())?;
    blank_path("--cache", a.cache.as_deref())?;
    blank_path("--prompts", a.prompts.as_deref())?;
    blank_path("--assets", a.assets.as_deref())?;
    blank_path("--api-key-file", a.api_key_file.as_deref())?;
    blank_path("--prices", a.prices.as_deref())?;
    blank_path("--balrog-src", a.balrog_src.as_deref())?;
    if let Some(name) = &a.run_name {
        if name.trim() != name || name.is_empty() {
            return Err(CliError::usage(format!(
                "--run-name {name:?} is empty or has spaces at its ends: give one folder name"
            )));
        }
    }
    if let Some(var) = &a.api_key_env {
        let ok = !var.is_empty()
            && !var.starts_with(|c: char| c.is_ascii_digit())
            && var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !ok {
            return Err(CliError::usage(format!(
                "--api-key-env {var:?} is not a variable name: give a name such as OPENROUTER_API_KEY"
            )));
        }
    }
    if let Some(p) = &a.preset {
        if p.trim().is_empty() {
            return Err(CliError::usage(
                "--preset is empty: name one (`vlm-eval presets` lists them)",
            ));
        }
    }
    Ok(())
}

/// The endpoint's base URL, checked where it came from (`from`: the flag, the environment or
/// a `[[models]]` entry) before any folder exists: http:// or https:// and a host.
pub(super) fn check_base_url(url: &str, from: &str) -> Result<(), CliError> {
    let t = url.trim();
    let rest = t
        .strip_prefix("https://")
        .or_else(|| t.strip_prefix("http://"))
        .or_else(|| t.strip_prefix("HTTPS://"))
        .or_else(|| t.strip_prefix("HTTP://"));
    let host_ok = rest.is_some_and(|r| {
        let host = r.split('/').next().unwrap_or("");
        !host.is_empty() && !host.contains(char::is_whitespace)
    });
    if !host_ok || t.contains(char::is_whitespace) {
        return Err(CliError::usage(format!(
            "{from} {url:?} is not an endpoint URL: give http(s)://HOST[:PORT]/PATH, e.g. https://api.openai.com/v1"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_names_are_trimmed_one_way_and_empty_ones_refused() {
        let mut a = RunArgs {
            model: Some(" mock ".into()),
            ..RunArgs::default()
        };
        check(&mut a).unwrap();
        assert_eq!(a.model.as_deref(), Some("mock"));
        a.model = Some(" mock ,  scripted".into());
        check(&mut a).unwrap();
        assert_eq!(a.model.as_deref(), Some("mock,scripted"));
        for bad in ["", "   ", "mock,", " , mock", "a\u{7}"] {
            a.model = Some(bad.into());
            let e = check(&mut a).unwrap_err();
            assert_eq!(e.code, 2, "{bad:?}");
            assert!(!e.message.contains('\n'), "{}", e.message);
        }
    }

    #[test]
    fn counts_past_their_bounds_are_refused() {
        let cases: Vec<(RunArgs, &str)> = vec![
            (
                RunArgs {
                    seeds: Some(0),
                    ..Default::default()
                },
                "--seeds 0",
            ),
            (
                RunArgs {
                    seeds: Some(100_000_000),
                    ..Default::default()
                },
                "--seeds 100000000",
            ),
            (
                RunArgs {
                    steps: Some(MAX_STEPS + 1),
                    ..Default::default()
                },
                "--steps",
            ),
            (
                RunArgs {
                    concurrency: Some(MAX_CONCURRENCY + 1),
                    ..Default::default()
                },
                "--concurrency",
            ),
            (
                RunArgs {
                    history: Some(MAX_HISTORY + 1),
                    ..Default::default()
                },
                "--history",
            ),
            (
                RunArgs {
                    request_timeout: Some(f64::INFINITY),
                    ..Default::default()
                },
                "--request-timeout",
            ),
            (
                RunArgs {
                    max_retry_wait: Some(1e300),
                    ..Default::default()
                },
                "--max-retry-wait",
            ),
            (
                RunArgs {
                    turn_deadline: Some(f64::NAN),
                    ..Default::default()
                },
                "--turn-deadline",
            ),
            (
                RunArgs {
                    temperature: Some(-1.0),
                    ..Default::default()
                },
                "--temperature",
            ),
            (
                RunArgs {
                    max_cost: Some(0.0),
                    ..Default::default()
                },
                "--max-cost",
            ),
        ];
        for (mut a, needle) in cases {
            let e = check(&mut a).unwrap_err();
            assert!(e.message.starts_with(needle), "{needle}: {}", e.message);
        }
        let mut at_bounds = RunArgs {
            seeds: Some(MAX_SEEDS as u32),
            steps: Some(MAX_STEPS),
            concurrency: Some(MAX_CONCURRENCY),
            max_retry_wait: Some(0.0),
            ..Default::default()
        };
        check(&mut at_bounds).unwrap();
    }

    #[test]
    fn base_urls_need_a_scheme_and_a_host() {
        for ok in [
            "https://api.openai.com/v1",
            "http://127.0.0.1:8000/v1",
            " http://x/ ",
        ] {
            check_base_url(ok, "--base-url").unwrap();
        }
        for bad in [
            "",
            "api.openai.com",
            "http://",
            "https:///v1",
            "http://a b/v1",
            "ftp://x",
        ] {
            let e = check_base_url(bad, "OPENAI_BASE_URL (from the environment)").unwrap_err();
            assert!(
                e.message
                    .starts_with("OPENAI_BASE_URL (from the environment)"),
                "{}",
                e.message
            );
        }
    }
}
