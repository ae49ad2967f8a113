//! The reply parser for Python: `vlmcrafter._native.judge_reply`, the evaluator's (and
//! serve-env's) judgement of a model's raw text, and `INVALID_NOTE`, the sentence that follows a
//! reply with no usable action. `python/vlmcrafter/session.py` plays sessions on them.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use vlm_eval_parse::{ParserMode, Protocol, Reply, INVALID_NOTE};

/// Most actions one reply may give (serve-env's `max_actions` range).
const MAX_ACTIONS: usize = 64;

/// Judge a model's raw text exactly as `vlm-eval serve-env` judges a step's `text` (and the
/// evaluator a reply without tool calls): parse it under `protocol` (`"tool"`: up to
/// `max_actions` actions; `"text"`: one) and `mode` (`"lenient"`, `"strict"` or `"balrog"`).
///
/// Returns `(actions, outcome, parsed_json)`: the action ids to play (empty when nothing is
/// usable: serve-env then plays one `noop`), the outcome (`"exact"`, `"repaired"` or
/// `"invalid"`) and the parse as JSON text, the object serve-env sends as a step's `parsed`.
#[pyfunction]
#[pyo3(signature = (text, *, protocol = "tool", max_actions = 8, mode = "lenient"))]
fn judge_reply(
    text: &str,
    protocol: &str,
    max_actions: usize,
    mode: &str,
) -> PyResult<(Vec<u32>, &'static str, String)> {
    let protocol = match protocol {
        "tool" => Protocol::Tool,
        "text" => Protocol::Text,
        other => {
            return Err(PyValueError::new_err(format!(
                "protocol must be \"tool\" or \"text\", not {other:?}"
            )))
        }
    };
    let mode = match mode {
        "lenient" => ParserMode::Lenient,
        "strict" => ParserMode::Strict,
        "balrog" => ParserMode::Balrog,
        other => {
            return Err(PyValueError::new_err(format!(
                "mode must be \"lenient\", \"strict\" or \"balrog\", not {other:?}"
            )))
        }
    };
    if !(1..=MAX_ACTIONS).contains(&max_actions) {
        return Err(PyValueError::new_err(format!(
            "max_actions {max_actions} is out of range: use 1..={MAX_ACTIONS}"
        )));
    }
    // serve-env takes one action per text-protocol reply whatever the cap.
    let cap = if protocol == Protocol::Text {
        1
    } else {
        max_actions
    };
    let judged = vlm_eval_parse::judge_reply(Reply::text(text), protocol, cap, mode);
    let outcome = match judged.outcome {
        vlm_eval_parse::Outcome::Exact => "exact",
        vlm_eval_parse::Outcome::Repaired => "repaired",
        vlm_eval_parse::Outcome::Invalid => "invalid",
    };
    let ids = judged
        .parsed
        .actions
        .iter()
        .map(|a| u32::from(a.id()))
        .collect();
    let json = serde_json::to_string(&judged)
        .map_err(|e| PyValueError::new_err(format!("judge_reply: {e}")))?;
    Ok((ids, outcome, json))
}

/// Add `judge_reply` and `INVALID_NOTE` to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("INVALID_NOTE", INVALID_NOTE)?;
    m.add_function(wrap_pyfunction!(judge_reply, m)?)
}
