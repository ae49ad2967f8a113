//! The evaluation protocol of a run: the settings that decide what a score means (preset,
//! parser, observation, image size, textures, history, prompt), read from run.json, and the
//! differences between two protocols (`compare` marks rows, `check` refuses a baseline); and
//! the leaderboard's group key, the protocol plus the episode's budget (turns and env steps).

use serde_json::{Map, Value};

/// Protocol settings in display order: `run.json` config keys, plus `textures` and
/// `prompt_sha256` from the top level. `thinking` (the local model's `--thinking`) is recorded
/// only for `--model local:DIR` runs. `history_layout` and `reasoning_effort` are recorded
/// since `--history-layout` and `--reasoning-effort` exist; runs from before played `window`
/// with no effort sent (`default`), and are read so.
pub const PROTOCOL_KEYS: [&str; 14] = [
    "preset",
    "parser",
    "layout",
    "obs_format",
    "protocol",
    "modality",
    "image_size",
    "textures",
    "history",
    "image_history",
    "history_layout",
    "prompt_sha256",
    "thinking",
    "reasoning_effort",
];

/// The budget settings the leaderboard groups by besides the protocol: `run.json`'s
/// `config.steps` (model turns per episode) and `config.episode_length` (env steps). Progression
/// after 5 turns and after 20 turns are different quantities, so runs that differ in either are
/// never ranked together. (`compare` and `check` report them among the config differences.)
pub const BUDGET_KEYS: [&str; 2] = ["steps", "episode_length"];

/// The leaderboard's group keys in display order: the protocol, then the budget.
pub fn group_keys() -> impl Iterator<Item = &'static str> {
    PROTOCOL_KEYS.into_iter().chain(BUDGET_KEYS)
}

/// The leaderboard's group key of a run: its protocol (`protocol_of`) plus the budget keys its
/// `run.json` records (a key it lacks is left out).
pub fn group_key_of(info: &Value) -> Value {
    let mut key = protocol_of(info);
    if let Value::Object(out) = &mut key {
        for k in BUDGET_KEYS {
            if let Some(v) = info["config"].get(k).filter(|v| !v.is_null()) {
                out.insert(k.into(), v.clone());
            }
        }
    }
    key
}

/// A group key's setting as the leaderboard shows it: `steps` as `turns`, `_sha256` dropped,
/// `_` as `-` (`image-size`, `episode-length`).
pub fn shown_key(key: &str) -> String {
    match key {
        "steps" => "turns".into(),
        k => k.trim_end_matches("_sha256").replace('_', "-"),
    }
}

/// The protocol of a run from its `run.json` (an object keyed by `PROTOCOL_KEYS`). Runs written
/// before presets existed have no `preset`, `parser` or `layout`: they played what the
/// `vlm-eval` preset with the lenient parser plays, so that is what they are recorded as. Any
/// other missing key is left out (and so never counts as a difference).
pub fn protocol_of(info: &Value) -> Value {
    let c = &info["config"];
    let mut out = Map::new();
    let before_presets = c.get("preset").is_none();
    for key in PROTOCOL_KEYS {
        let v = match key {
            "textures" => match &info["textures"] {
                Value::Object(t) => {
                    let kind = t.get("kind").and_then(Value::as_str).unwrap_or("unknown");
                    let fp = t.get("fingerprint").and_then(Value::as_str).unwrap_or("");
                    Value::String(format!("{kind} {}", &fp[..fp.len().min(12)]))
                }
                _ => Value::Null,
            },
            "prompt_sha256" => info["prompt_sha256"].clone(),
            _ => c.get(key).cloned().unwrap_or(Value::Null),
        };
        let v = match (key, v) {
            ("preset" | "layout", Value::Null) if before_presets => "vlm-eval".into(),
            ("parser", Value::Null) if before_presets => "lenient".into(),
            ("history_layout", Value::Null) => "window".into(),
            ("reasoning_effort", Value::Null) => "default".into(),
            (_, v) => v,
        };
        if !v.is_null() {
            out.insert(key.into(), v);
        }
    }
    Value::Object(out)
}

fn show(key: &str, v: &Value) -> String {
    match v {
        Value::String(s) if key == "prompt_sha256" => s.chars().take(12).collect(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The settings whose values differ between two protocols (keys present in both), in
/// `PROTOCOL_KEYS` order, each as `(key, "key: a vs b")`.
pub fn protocol_differences(a: &Value, b: &Value) -> Vec<(&'static str, String)> {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return Vec::new();
    };
    PROTOCOL_KEYS
        .iter()
        .filter_map(|&k| match (a.get(k), b.get(k)) {
            (Some(x), Some(y)) if x != y => {
                Some((k, format!("{k}: {} vs {}", show(k, x), show(k, y))))
            }
            _ => None,
        })
        .collect()
}

/// A short name for each of several group keys (`group_key_of`), by what sets it apart from
/// the others: the fewest settings (taken in `group_keys()` order, each kept only when it tells apart two
/// protocols the earlier ones did not) as `key value`, e.g. `preset balrog` or
/// `obs-format state, image-size 256`; a setting one protocol lacks shows as `key unset`. A
/// single protocol is named by its preset (`preset vlm-eval`), else `all runs`.
pub fn protocol_names(protocols: &[Value]) -> Vec<String> {
    let shown = |p: &Value, k: &str| -> String {
        let name = shown_key(k);
        match p.get(k) {
            Some(v) => format!("{name} {}", show(k, v)),
            None => format!("{name} unset"),
        }
    };
    if protocols.len() == 1 {
        return vec![match protocols[0].get("preset") {
            Some(_) => shown(&protocols[0], "preset"),
            None => "all runs".into(),
        }];
    }
    let mut chosen: Vec<&str> = Vec::new();
    let alike = |i: usize, j: usize, keys: &[&str]| {
        keys.iter()
            .all(|k| protocols[i].get(*k) == protocols[j].get(*k))
    };
    for key in group_keys() {
        // Pairs the settings chosen so far do not tell apart.
        let pairs: Vec<(usize, usize)> = (0..protocols.len())
            .flat_map(|i| (i + 1..protocols.len()).map(move |j| (i, j)))
            .filter(|&(i, j)| alike(i, j, &chosen))
            .collect();
        if pairs.is_empty() {
            break;
        }
        if pairs
            .iter()
            .any(|&(i, j)| protocols[i].get(key) != protocols[j].get(key))
        {
            chosen.push(key);
        }
    }
    protocols
        .iter()
        .map(|p| {
            let parts: Vec<String> = chosen.iter().map(|k| shown(p, k)).collect();
            if parts.is_empty() {
                "all runs".into()
            } else {
                parts.join(", ")
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn old_runs_are_the_vlm_eval_preset_and_differences_name_the_settings() {
        let old = json!({"config": {"obs_format": "state", "image_size": 64, "history": 3},
                         "textures": {"kind": "official", "fingerprint": "abcdef0123456789"},
                         "prompt_sha256": "0123456789abcdef"});
        let p = protocol_of(&old);
        assert_eq!(p["preset"], "vlm-eval");
        assert_eq!(p["parser"], "lenient");
        assert_eq!(p["textures"], "official abcdef012345");
        let new = json!({"config": {"preset": "balrog", "parser": "balrog", "layout": "balrog",
                         "obs_format": "balrog", "image_size": 256, "history": 16},
                         "textures": {"kind": "official", "fingerprint": "abcdef0123456789"}});
        let d: Vec<&str> = protocol_differences(&p, &protocol_of(&new))
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        // prompt_sha256 is absent on one side: not a difference.
        assert_eq!(
            d,
            [
                "preset",
                "parser",
                "layout",
                "obs_format",
                "image_size",
                "history"
            ]
        );
        assert_eq!(
            protocol_differences(&p, &protocol_of(&new))[0].1,
            "preset: vlm-eval vs balrog"
        );
        assert!(protocol_differences(&p, &p).is_empty());
        assert!(protocol_differences(&Value::Null, &p).is_empty());
    }

    #[test]
    fn groups_are_named_by_what_sets_them_apart() {
        let base = json!({"preset": "vlm-eval", "parser": "lenient", "obs_format": "state",
                          "image_size": 64, "history": 3});
        let mut balrog = base.clone();
        balrog["preset"] = json!("balrog");
        balrog["image_size"] = json!(256);
        assert_eq!(
            protocol_names(&[base.clone(), balrog.clone()]),
            ["preset vlm-eval", "preset balrog"]
        );
        // Same preset: the settings that differ, fewest first in PROTOCOL_KEYS order.
        let mut big = base.clone();
        big["image_size"] = json!(256);
        let mut text = base.clone();
        text["obs_format"] = json!("balrog");
        text["image_size"] = json!(256);
        assert_eq!(
            protocol_names(&[base.clone(), big, text]),
            [
                "obs-format state, image-size 64",
                "obs-format state, image-size 256",
                "obs-format balrog, image-size 256"
            ]
        );
        let mut thinking = base.clone();
        thinking["thinking"] = json!("on");
        thinking["prompt_sha256"] = json!("0123456789abcdef");
        let mut other = base.clone();
        other["prompt_sha256"] = json!("fedcba9876543210");
        assert_eq!(
            protocol_names(&[thinking, other]),
            ["prompt 0123456789ab", "prompt fedcba987654"]
        );
        assert_eq!(
            protocol_names(std::slice::from_ref(&base)),
            ["preset vlm-eval"]
        );
        assert_eq!(protocol_names(&[json!({})]), ["all runs"]);
    }

    #[test]
    fn the_group_key_is_the_protocol_and_the_budget() {
        let keys: Vec<&str> = group_keys().collect();
        assert_eq!(keys.len(), PROTOCOL_KEYS.len() + BUDGET_KEYS.len());
        assert_eq!(keys[keys.len() - 2..], BUDGET_KEYS);
        let info = |steps: u32, length: u32| {
            json!({"config": {"preset": "vlm-eval", "parser": "lenient", "layout": "vlm-eval",
                              "image_size": 64, "steps": steps, "episode_length": length,
                              "seeds": [0, 1], "temperature": 0.0}})
        };
        let short = group_key_of(&info(5, 10_000));
        assert_eq!(short["steps"], 5);
        assert_eq!(short["episode_length"], 10_000);
        // The protocol alone (what `compare` and `check` guard) has no budget.
        assert_eq!(
            protocol_of(&info(5, 10_000)),
            protocol_of(&info(20, 10_000))
        );
        assert_ne!(short, group_key_of(&info(20, 10_000)));
        assert!(group_key_of(&info(5, 10_000)).get("seeds").is_none());
        assert_eq!(
            protocol_names(&[short.clone(), group_key_of(&info(20, 10_000))]),
            ["turns 5", "turns 20"]
        );
        assert_eq!(
            protocol_names(&[short, group_key_of(&info(5, 500))]),
            ["episode-length 10000", "episode-length 500"]
        );
        // A run.json without them groups by its protocol alone.
        assert_eq!(
            group_key_of(&json!({"config": {}})),
            protocol_of(&json!({"config": {}}))
        );
    }

    #[test]
    fn history_layout_and_reasoning_effort_are_protocol() {
        let old = json!({"config": {"preset": "vlm-eval", "history": 3}});
        let p = protocol_of(&old);
        assert_eq!(
            p["history_layout"], "window",
            "runs from before played window"
        );
        assert_eq!(p["reasoning_effort"], "default");
        let mut append = old.clone();
        append["config"]["history_layout"] = json!("append");
        append["config"]["reasoning_effort"] = json!("low");
        let d = protocol_differences(&p, &protocol_of(&append));
        assert_eq!(
            d.iter().map(|(_, t)| t.as_str()).collect::<Vec<_>>(),
            [
                "history_layout: window vs append",
                "reasoning_effort: default vs low"
            ]
        );
    }

    #[test]
    fn frame_files_are_not_protocol() {
        // `--frames` changes which PNG files exist, never a score.
        let all = json!({"config": {"image_size": 64, "frames": "all"}, "engine_parity": 1});
        let mut none = all.clone();
        none["config"]["frames"] = json!("none");
        assert_eq!(protocol_of(&all), protocol_of(&none));
        assert!(protocol_of(&all).get("frames").is_none());
    }
}
