//! crafter's `stats.jsonl` line, written in Rust exactly as Python writes it: crafter's
//! `Recorder` does `json.dumps({"length": ..., "reward": round(reward, 1), "achievement_<name>":
//! ..., ...})`. The vector recorder's hot path appends these lines without a Python call per
//! episode; `_native.stats_line` exposes one for the test against `json.dumps`.

use std::fmt::Write;

use pyo3::prelude::*;
use vlm_eval_crafter::rules::N_ACHIEVEMENTS;
use vlm_eval_crafter::ACHIEVEMENT_NAMES;

/// Below this, `repr(round(x, 1))` of Python and the text written here are the same: the
/// rounded value is the double nearest a one-decimal number, doubles there are at most 1/64
/// apart, so that number is the shortest text reading back as it, with no tie for Python's and
/// Rust's shortest-digit searches to break differently (they do break ties differently, from
/// about 1e15 on).
const EXACT_BELOW: f64 = 1e14;

/// Python's `repr(round(x, 1))`, for `|round(x, 1)| < 1e14`; None otherwise (and for NaN and
/// infinities), where the caller formats in Python.
///
/// `round(x, 1)` is the double nearest the exact value of `x` correctly rounded to one decimal,
/// ties to even; Rust's `{:.1}` rounds the exact value the same way, and parsing is correctly
/// rounded. `repr` is then the shortest text that reads back as that double, which is Rust's
/// `{:?}` in this range (no exponent form below 1e16).
fn python_round1(x: f64, out: &mut String) -> Option<()> {
    if !x.is_finite() {
        return None;
    }
    let rounded: f64 = format!("{x:.1}").parse().ok()?;
    if rounded.abs() >= EXACT_BELOW {
        return None;
    }
    let _ = write!(out, "{rounded:?}");
    Some(())
}

/// Append one `stats.jsonl` line (with its newline) to `out`; None (and `out` as it was) where
/// the reward is out of `python_round1`'s range.
pub fn push_line(
    out: &mut String,
    length: u32,
    reward: f64,
    achievements: &[i32; N_ACHIEVEMENTS],
) -> Option<()> {
    let start = out.len();
    let _ = write!(out, "{{\"length\": {length}, \"reward\": ");
    if python_round1(reward, out).is_none() {
        out.truncate(start);
        return None;
    }
    for (name, count) in ACHIEVEMENT_NAMES.iter().zip(achievements) {
        let _ = write!(out, ", \"achievement_{name}\": {count}");
    }
    out.push_str("}\n");
    Some(())
}

/// One stats line as the vector recorder writes it, None where it leaves the line to Python
/// (for the test against `json.dumps`).
#[pyfunction]
pub fn stats_line(length: u32, reward: f64, achievements: [i32; N_ACHIEVEMENTS]) -> Option<String> {
    let mut out = String::new();
    push_line(&mut out, length, reward, &achievements)?;
    Some(out)
}
