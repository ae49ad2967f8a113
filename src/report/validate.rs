//! What `check` and `baseline save` verify before they trust a number (docs/GUIDE.md, "The
//! gate"): every value of a baseline file or a `summary.json` is finite and inside its metric's
//! range (progression and Crafter score 0–100 percent, rates 0–1, counts ≥ 0), no seed appears
//! twice, and a run folder's episodes agree with themselves (progression = score / 22, score =
//! the achievements unlocked, format counts = turns) and with its `summary.json`. A value that
//! fails is one line naming the file and the field ([`ReadError::Invalid`]).

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::crafter::ACHIEVEMENT_NAMES;
use crate::results::run::{open_run, RunData};
use crate::results::summary::{summarize, ReadError};

/// A metric's range as the files store it.
#[derive(Clone, Copy, Debug)]
enum Range {
    /// Percent, 0–100.
    Percent,
    /// A fraction, 0–1.
    Rate,
    /// A count or a duration, ≥ 0.
    NonNegative,
    /// Unique achievements, 0–22.
    Achievements,
    /// Any finite number (a return).
    Finite,
}

impl Range {
    fn holds(self, x: f64) -> bool {
        x.is_finite()
            && match self {
                Range::Percent => (0.0..=100.0).contains(&x),
                Range::Rate => (0.0..=1.0).contains(&x),
                Range::NonNegative => x >= 0.0,
                Range::Achievements => (0.0..=ACHIEVEMENT_NAMES.len() as f64).contains(&x),
                Range::Finite => true,
            }
    }

    fn describe(self) -> &'static str {
        match self {
            Range::Percent => "outside its range 0–100 (percent)",
            Range::Rate => "outside its range 0–1 (a rate)",
            Range::NonNegative => "negative (a count)",
            Range::Achievements => "outside its range 0–22 (unique achievements)",
            Range::Finite => "not a finite number",
        }
    }
}

fn invalid(path: &Path, field: impl Into<String>, message: impl Into<String>) -> ReadError {
    ReadError::Invalid {
        path: path.display().to_string(),
        field: field.into(),
        message: message.into(),
    }
}

/// Check one numeric field (`optional`: null or absent is fine).
fn number(
    path: &Path,
    obj: &Value,
    prefix: &str,
    key: &str,
    range: Range,
    optional: bool,
    fix: &str,
) -> Result<Option<f64>, ReadError> {
    let field = format!("{prefix}{key}");
    match obj.get(key) {
        None | Some(Value::Null) if optional => Ok(None),
        None | Some(Value::Null) => Err(invalid(path, field, format!("is missing; {fix}"))),
        Some(v) => match v.as_f64() {
            Some(x) if range.holds(x) => Ok(Some(x)),
            // The number as the file writes it (1e308, not 309 digits).
            Some(_) => Err(invalid(
                path,
                field,
                format!("is {v}, {}; {fix}", range.describe()),
            )),
            None => Err(invalid(path, field, format!("is {v}, not a number; {fix}"))),
        },
    }
}

/// A list of seeds, each once: `Err` names the first repeated one and both places.
fn unique_seeds(
    path: &Path,
    seeds: impl IntoIterator<Item = (String, i64)>,
    fix: &str,
) -> Result<(), ReadError> {
    let mut seen: BTreeMap<i64, String> = BTreeMap::new();
    for (field, seed) in seeds {
        if let Some(first) = seen.insert(seed, field.clone()) {
            return Err(invalid(
                path,
                field,
                format!("repeats seed {seed} (also {first}): each seed may appear once; {fix}"),
            ));
        }
    }
    Ok(())
}

const BASELINE_FIX: &str =
    "the file was edited or damaged: save it again with `vlm-eval baseline save RUN FILE`";
const SUMMARY_FIX: &str = "the file was edited or damaged: rerun the run's command to rewrite it";

/// Check a summary (`summary.json`, or a baseline file's `summary`) given as JSON: every value
/// finite and in range, counts consistent, seeds once each. `prefix` names where it sits.
pub fn check_summary_json(
    path: &Path,
    s: &Value,
    prefix: &str,
    fix: &str,
) -> Result<(), ReadError> {
    if !s.is_object() {
        return Err(invalid(
            path,
            prefix.trim_end_matches('.'),
            format!("is not an object; {fix}"),
        ));
    }
    let n = |key: &str, range: Range, optional: bool| {
        number(path, s, prefix, key, range, optional, fix)
    };
    let episodes = n("episodes", Range::NonNegative, false)?.unwrap_or(0.0);
    for key in ["completed", "errors"] {
        let k = n(key, Range::NonNegative, false)?.unwrap_or(0.0);
        if k > episodes {
            return Err(invalid(
                path,
                format!("{prefix}{key}"),
                format!("is {k}, more than the {episodes} episodes it summarises; {fix}"),
            ));
        }
    }
    n("budget_stopped", Range::NonNegative, true)?;
    n("progression_mean", Range::Percent, false)?;
    n("progression_se", Range::Percent, false)?;
    n("crafter_score", Range::Percent, false)?;
    n("score_mean", Range::Achievements, false)?;
    n("return_mean", Range::Finite, false)?;
    for key in [
        "steps_mean",
        "turns_mean",
        "latency_p50_ms",
        "latency_p95_ms",
        "retries",
        "episode_wall_s",
    ] {
        n(key, Range::NonNegative, false)?;
    }
    for key in ["retry_wait_s", "input_tokens", "output_tokens", "cost_usd"] {
        n(key, Range::NonNegative, true)?;
    }
    for key in ["death_rate", "invalid_action_rate"] {
        n(key, Range::Rate, false)?;
    }
    for key in ["format_exact_rate", "format_repaired_rate"] {
        n(key, Range::Rate, true)?;
    }
    if let Some(rates) = s.get("achievement_rates").and_then(Value::as_object) {
        for name in rates.keys() {
            number(
                path,
                &s["achievement_rates"],
                &format!("{prefix}achievement_rates."),
                name,
                Range::Percent,
                false,
                fix,
            )?;
        }
    }
    if let Some(seeds) = s.get("seeds").and_then(Value::as_array) {
        let mut list = Vec::new();
        for (i, v) in seeds.iter().enumerate() {
            let field = format!("{prefix}seeds[{i}]");
            let seed = v.as_i64().ok_or_else(|| {
                invalid(path, field.clone(), format!("is {v}, not a seed; {fix}"))
            })?;
            list.push((field, seed));
        }
        unique_seeds(path, list, fix)?;
    }
    Ok(())
}

/// Check a baseline file given as JSON (before it is read into its types, so that a bad value
/// is named by its field): its episodes' values finite and in range, each seed once, progression
/// = score / 22 (as `baseline save` writes it), and its summary.
pub fn check_baseline_json(path: &Path, v: &Value) -> Result<(), ReadError> {
    let fix = BASELINE_FIX;
    let Some(episodes) = v.get("episodes").and_then(Value::as_array) else {
        return Err(invalid(
            path,
            "episodes",
            format!("is missing or not a list; {fix}"),
        ));
    };
    let mut seeds = Vec::new();
    for (i, e) in episodes.iter().enumerate() {
        let prefix = format!("episodes[{i}].");
        let n = |key: &str, range: Range, optional: bool| {
            number(path, e, &prefix, key, range, optional, fix)
        };
        let seed = e.get("seed").and_then(Value::as_i64).ok_or_else(|| {
            invalid(
                path,
                format!("{prefix}seed"),
                format!("is missing or not an integer; {fix}"),
            )
        })?;
        seeds.push((format!("{prefix}seed"), seed));
        let progression = n("progression", Range::Percent, false)?.unwrap_or(0.0);
        let score = n("score", Range::Achievements, false)?.unwrap_or(0.0);
        n("return", Range::Finite, false)?;
        n("steps", Range::NonNegative, false)?;
        let want = 100.0 * (score / ACHIEVEMENT_NAMES.len() as f64);
        if (progression - want).abs() > 1e-6 {
            return Err(invalid(
                path,
                format!("{prefix}progression"),
                format!("is {progression}, but its score {score} gives {want:.4} (score / 22 × 100); {fix}"),
            ));
        }
        if let Some(unlocked) = e.get("unlocked").and_then(Value::as_array) {
            if unlocked.len() as f64 != score {
                return Err(invalid(
                    path,
                    format!("{prefix}unlocked"),
                    format!(
                        "lists {} achievement(s), but its score is {score}; {fix}",
                        unlocked.len()
                    ),
                ));
            }
        }
        if let Some(f) = e.get("format").filter(|f| !f.is_null()) {
            let fp = format!("{prefix}format.");
            for key in ["exact", "repaired", "invalid"] {
                number(path, f, &fp, key, Range::NonNegative, false, fix)?;
            }
        }
    }
    unique_seeds(path, seeds, fix)?;
    match v.get("summary") {
        Some(s) => check_summary_json(path, s, "summary.", fix),
        None => Err(invalid(path, "summary", format!("is missing; {fix}"))),
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// Check an opened run folder: each episode agrees with itself (progression in 0–1 and equal to
/// score / 22, score = the achievements unlocked, format counts = turns, finite values), and
/// `summary.json`, when it is there and covers the same seeds, says what the episodes say.
pub fn check_run(run: &RunData) -> Result<(), ReadError> {
    const EP_FIX: &str =
        "the file was edited or damaged: delete the episode's folder and rerun the run's command to play it again";
    for e in &run.episodes {
        let path = run.episode_dir(e.seed).join("episode.json");
        let bad =
            |field: &str, message: String| invalid(&path, field, format!("{message}; {EP_FIX}"));
        if !Range::Rate.holds(e.progression) {
            return Err(bad(
                "progression",
                format!("is {}, outside its range 0–1 (a fraction)", e.progression),
            ));
        }
        let unlocked = ACHIEVEMENT_NAMES
            .iter()
            .filter(|n| e.achievements.get(**n).copied().unwrap_or(0) > 0)
            .count() as u32;
        if e.score != unlocked {
            return Err(bad(
                "score",
                format!("is {}, but {unlocked} achievement(s) are unlocked", e.score),
            ));
        }
        let want = e.score as f64 / ACHIEVEMENT_NAMES.len() as f64;
        if (e.progression - want).abs() > 1e-9 {
            return Err(bad(
                "progression",
                format!(
                    "is {}, but its score {} gives {want:.6} (score / 22)",
                    e.progression, e.score
                ),
            ));
        }
        if !e.episode_return.is_finite() {
            return Err(bad(
                "episode_return",
                format!("is {}, not a finite number", e.episode_return),
            ));
        }
        if let Some(f) = e.format {
            if f.turns() != e.turns {
                return Err(bad(
                    "format",
                    format!("counts {} turn(s), but turns is {}", f.turns(), e.turns),
                ));
            }
        }
    }
    check_run_summary(run)
}

/// Open a run folder and [`check_run`] it: what `check` and `baseline save` read.
pub fn open_checked_run(dir: &Path) -> Result<RunData, ReadError> {
    let run = open_run(dir)?;
    check_run(&run)?;
    Ok(run)
}

/// `summary.json` against the episodes it summarises. A summary of other seeds is left alone: a
/// run cut short after it played more seeds than its last summary knew of writes a new one when
/// it is resumed.
fn check_run_summary(run: &RunData) -> Result<(), ReadError> {
    let path = run.dir.join("summary.json");
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Ok(());
    };
    let v: Value = serde_json::from_str(&text).map_err(|e| ReadError::Corrupt {
        path: path.display().to_string(),
        message: format!("not valid JSON ({e})"),
    })?;
    check_summary_json(&path, &v, "", SUMMARY_FIX)?;
    let seeds: Vec<i64> = run.episodes.iter().map(|e| e.seed).collect();
    let recorded: Vec<i64> = v["seeds"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_i64).collect())
        .unwrap_or_default();
    let mut sorted = recorded.clone();
    sorted.sort_unstable();
    if sorted != seeds {
        return Ok(());
    }
    let fresh = summarize(&run.model(), &run.episodes);
    let ours = serde_json::to_value(&fresh).unwrap_or(Value::Null);
    for key in [
        "episodes",
        "completed",
        "errors",
        "progression_mean",
        "progression_se",
        "crafter_score",
        "score_mean",
        "return_mean",
        "steps_mean",
        "turns_mean",
        "death_rate",
        "invalid_action_rate",
    ] {
        let (Some(a), Some(b)) = (v[key].as_f64(), ours[key].as_f64()) else {
            continue;
        };
        if !close(a, b) {
            return Err(invalid(
                &path,
                key,
                format!(
                    "is {a}, but the run's {} episode.json files give {b}: the episodes contradict the summary (a file was edited, or the run was cut short before it rewrote the summary); rerun the run's command to rewrite it",
                    run.episodes.len()
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn summary() -> Value {
        json!({"model": "m", "episodes": 2, "completed": 2, "errors": 0, "budget_stopped": 0,
            "progression_mean": 50.0, "progression_se": 4.5, "crafter_score": 12.0,
            "score_mean": 11.0, "return_mean": -0.5, "steps_mean": 10.0, "turns_mean": 5.0,
            "death_rate": 0.5, "invalid_action_rate": 0.0, "format_exact_rate": null,
            "format_repaired_rate": null, "input_tokens": null, "output_tokens": null,
            "cost_usd": null, "latency_p50_ms": 1.0, "latency_p95_ms": 2.0, "retries": 0,
            "retry_wait_s": 0.0, "episode_wall_s": 1.0,
            "achievement_rates": {"collect_wood": 100.0}, "seeds": [0, 1]})
    }

    fn baseline() -> Value {
        json!({"episodes": [
            {"seed": 0, "progression": 100.0 * 11.0 / 22.0, "score": 11, "return": 3.0, "steps": 10,
             "termination": "death", "unlocked": ["a","b","c","d","e","f","g","h","i","j","k"]},
            {"seed": 1, "progression": 0.0, "score": 0, "return": -1.0, "steps": 10,
             "termination": "death", "unlocked": []}],
            "summary": summary()})
    }

    fn err(v: &Value) -> String {
        check_baseline_json(Path::new("b.json"), v)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn a_saved_baseline_passes() {
        check_baseline_json(Path::new("b.json"), &baseline()).unwrap();
    }

    #[test]
    fn values_out_of_range_name_the_field() {
        for (field, value, words) in [
            (
                "progression",
                json!(1e308),
                "episodes[0].progression is 1e+308, outside its range 0–100",
            ),
            (
                "progression",
                json!(-50.0),
                "episodes[0].progression is -50.0, outside its range 0–100",
            ),
            (
                "score",
                json!(-1),
                "episodes[0].score is -1, outside its range 0–22",
            ),
            ("steps", json!(-3), "episodes[0].steps is -3, negative"),
            (
                "return",
                json!("x"),
                "episodes[0].return is \"x\", not a number",
            ),
        ] {
            let mut v = baseline();
            v["episodes"][0][field] = value;
            let e = err(&v);
            assert!(e.starts_with("b.json: "), "{e}");
            assert!(e.contains(words), "{e}");
            assert_eq!(e.lines().count(), 1);
        }
        for (field, value, words) in [
            (
                "progression_mean",
                json!(1e308),
                "summary.progression_mean is 1e+308",
            ),
            (
                "death_rate",
                json!(1.5),
                "summary.death_rate is 1.5, outside its range 0–1",
            ),
            ("errors", json!(-2), "summary.errors is -2, negative"),
            (
                "completed",
                json!(9),
                "summary.completed is 9, more than the 2 episodes",
            ),
            (
                "format_exact_rate",
                json!(-0.1),
                "summary.format_exact_rate is -0.1",
            ),
        ] {
            let mut v = baseline();
            v["summary"][field] = value;
            let e = err(&v);
            assert!(e.contains(words), "{e}");
        }
        let mut v = baseline();
        v["summary"]["achievement_rates"]["collect_wood"] = json!(250.0);
        assert!(err(&v).contains("summary.achievement_rates.collect_wood is 250.0"));
    }

    #[test]
    fn repeated_seeds_and_contradictions_are_refused() {
        let mut v = baseline();
        v["episodes"][1]["seed"] = json!(0);
        let e = err(&v);
        assert!(
            e.contains("episodes[1].seed repeats seed 0 (also episodes[0].seed)"),
            "{e}"
        );
        let mut v = baseline();
        v["summary"]["seeds"] = json!([0, 1, 1]);
        assert!(err(&v).contains("summary.seeds[2] repeats seed 1"));
        let mut v = baseline();
        v["episodes"][0]["progression"] = json!(90.0);
        assert!(err(&v).contains("episodes[0].progression is 90, but its score 11 gives 50.0000"));
    }
}
