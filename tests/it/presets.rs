//! Presets end to end: `run --preset balrog` runs offline with the mock model (BALROG's answer
//! format, exact replies, the run contract with the reset Noop's frame), `frames --preset
//! balrog` renders what such a run saves, flags and --config override a preset and run.json
//! records every resolved setting, `--preset vlm-eval` is today's default, and bad input
//! (unknown preset, no or a drifted BALROG checkout, a layout-breaking flag) exits 2 with one
//! line naming the fix.

use crate::support;
use support::stderr;

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;
use vlm_eval::crafter::TextureSet;

fn vlm_eval(args: &[&str]) -> Output {
    support::run(args, &["BALROG_SRC"], &[])
}

fn tmp(name: &str) -> PathBuf {
    support::fresh_dir(&format!("presets-{name}"))
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn reference() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/balrog/reference");
    dir.join("balrog/evaluator.py").is_file().then_some(dir)
}

fn official() -> bool {
    TextureSet::discover(None).map(|(t, _)| t.kind()).ok() == Some("official")
}

#[test]
fn balrog_preset_runs_offline_with_the_mock_and_frames_match() {
    let Some(src) = reference() else {
        println!("SKIP: ../shared/balrog/reference not present");
        return;
    };
    if !official() {
        println!("SKIP: crafter's official textures not found (set CRAFTER_ASSETS)");
        return;
    }
    let d = tmp("mock");
    let out = d.to_str().unwrap();
    let o = vlm_eval(&[
        "--preset",
        "balrog",
        "--model",
        "mock",
        "--seed-list",
        "4",
        "--steps",
        "230",
        "--balrog-src",
        src.to_str().unwrap(),
        "--out",
        out,
        "--run-name",
        "r",
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let run = json(&d.join("r/run.json"));
    let c = &run["config"];
    for (key, want) in [
        ("preset", "balrog"),
        ("parser", "balrog"),
        ("layout", "balrog"),
        ("feedback", "balrog"),
        ("obs_format", "balrog"),
        ("protocol", "text"),
        ("max_tokens_field", "max_tokens"),
    ] {
        assert_eq!(c[key], want, "{key}");
    }
    assert_eq!(c["image_size"], 256);
    assert_eq!(
        (c["history"].as_u64(), c["image_history"].as_u64()),
        (Some(16), Some(1))
    );
    assert_eq!(
        (c["temperature"].as_f64(), c["max_tokens"].as_u64()),
        (Some(1.0), Some(8192))
    );
    assert_eq!(c["episode_length"], 10_000);
    assert_eq!(c["reset_noop"], true);
    assert_eq!(c["render_twice"], true);
    assert_eq!(
        c["preset_overrides"],
        serde_json::json!(["seed-list", "steps"])
    );
    let texts = run["balrog"]["texts"].as_array().unwrap();
    assert_eq!(texts.len(), 3);
    for t in texts {
        assert_eq!(t["sha256"], t["pinned_sha256"], "{}", t["name"]);
    }
    assert!(
        run["system_prompt"].is_null(),
        "BALROG sends no system message"
    );

    let ep_dir = d.join("r/episodes/seed_4");
    let ep = json(&ep_dir.join("episode.json"));
    let turns = ep["turns"].as_u64().unwrap();
    assert_eq!(
        ep["format"]["exact"], turns,
        "the mock answers in BALROG's format"
    );
    assert_eq!(ep["invalid_actions"], 0);
    // The run contract: one frame per env step, the reset Noop's included.
    let frames: Vec<String> = {
        let mut v: Vec<String> = std::fs::read_dir(ep_dir.join("frames"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    assert_eq!(frames.len() as u64, ep["num_steps"].as_u64().unwrap() + 1);
    assert_eq!(
        ep["num_steps"].as_u64().unwrap(),
        turns + 1,
        "turns + the reset Noop"
    );
    let traj = lines(&ep_dir.join("trajectory.jsonl"));
    assert_eq!(
        traj[0]["step"], 1,
        "the first observation follows the reset Noop"
    );
    let mut actions = Vec::new();
    for t in &traj {
        let reply = t["reply"]["text"].as_str().unwrap();
        let a = t["parsed"]["actions"][0].as_str().unwrap();
        assert_eq!(
            vlm_eval::crafter::Action::from_name(a)
                .unwrap()
                .display_name(),
            reply
        );
        assert_eq!(t["parsed"]["outcome"], "exact");
        assert!(t["balrog"]["long_term_context"].is_string());
        actions.push(a.to_string());
    }
    assert!(
        turns > 200,
        "into the night (from step 149), where the double render matters"
    );

    // `frames --preset balrog` saves what the run saved, byte for byte.
    let fdir = d.join("frames");
    let o = vlm_eval(&[
        "frames",
        "--preset",
        "balrog",
        "--seed",
        "4",
        "--steps",
        &actions.len().to_string(),
        "--actions",
        &actions.join(","),
        "--out",
        fdir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    for name in &frames {
        let a = std::fs::read(ep_dir.join("frames").join(name)).unwrap();
        let b = std::fs::read(fdir.join(name)).unwrap_or_default();
        assert!(a == b, "{name} differs from the run's frame");
    }
}

#[test]
fn flags_and_config_override_a_preset_and_vlm_eval_is_the_default() {
    let d = tmp("override");
    let out = d.to_str().unwrap();
    let run = |name: &str, extra: &[&str]| {
        let mut args = vec!["--model", "scripted", "--seed-list", "2", "--out", out];
        args.extend(["--run-name", name, "--quiet"]);
        args.extend(extra);
        let o = vlm_eval(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        d.join(name)
    };
    let plain = run("plain", &["--steps", "3"]);
    let named = run("named", &["--steps", "3", "--preset", "vlm-eval"]);
    let (a, b) = (json(&plain.join("run.json")), json(&named.join("run.json")));
    for key in [
        "preset",
        "parser",
        "layout",
        "obs_format",
        "image_size",
        "history",
        "protocol",
    ] {
        assert_eq!(a["config"][key], b["config"][key], "{key}");
    }
    assert_eq!(a["config"]["preset"], "vlm-eval");
    assert_eq!(a["config"]["parser"], "lenient");
    assert_eq!(a["prompt_sha256"], b["prompt_sha256"]);
    let (ta, tb) = (
        lines(&plain.join("episodes/seed_2/trajectory.jsonl")),
        lines(&named.join("episodes/seed_2/trajectory.jsonl")),
    );
    for (x, y) in ta.iter().zip(&tb) {
        assert_eq!(x["user_text"], y["user_text"]);
        assert_eq!(x["parsed"], y["parsed"]);
    }
    // Flags override; run.json records the resolved values and which ones were overridden.
    let o = run(
        "over",
        &[
            "--steps",
            "2",
            "--history",
            "5",
            "--parser",
            "strict",
            "--temperature",
            "0.5",
        ],
    );
    let c = &json(&o.join("run.json"))["config"];
    assert_eq!(
        (c["history"].as_u64(), c["parser"].as_str()),
        (Some(5), Some("strict"))
    );
    assert_eq!(c["temperature"].as_f64(), Some(0.5));
    assert_eq!(
        c["preset_overrides"],
        serde_json::json!(["seed-list", "steps", "history", "parser", "temperature"])
    );
    // A --config file names a preset like the flag does.
    let cfg = d.join("c.toml");
    std::fs::write(
        &cfg,
        "preset = \"vlm-eval\"\nsteps = 2\nparser = \"strict\"\n",
    )
    .unwrap();
    let o = run("cfg", &["--config", cfg.to_str().unwrap()]);
    let c = &json(&o.join("run.json"))["config"];
    assert_eq!(
        (c["preset"].as_str(), c["parser"].as_str()),
        (Some("vlm-eval"), Some("strict"))
    );
    assert_eq!(c["steps"], 2);
}

#[test]
fn bad_presets_and_checkouts_exit_2_naming_the_fix() {
    let d = tmp("bad");
    let out = d.to_str().unwrap();
    let o = vlm_eval(&["--preset", "balrg", "--model", "mock", "--out", out]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains("unknown preset 'balrg'") && e.contains("vlm-eval, balrog"),
        "{e}"
    );
    assert_eq!(e.trim().lines().count(), 1, "{e}");

    // The same for every command that takes a preset.
    let fdir = d.join("frames");
    for args in [
        vec![
            "frames",
            "--preset",
            "balrg",
            "--out",
            fdir.to_str().unwrap(),
        ],
        vec!["env", "trace", "--preset", "balrg", "--steps", "1"],
    ] {
        let o = vlm_eval(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let e = stderr(&o);
        assert!(
            e.contains("unknown preset 'balrg'") && e.contains("vlm-eval, balrog"),
            "{e}"
        );
        assert_eq!(e.trim().lines().count(), 1, "{e}");
    }
    assert!(!fdir.exists(), "nothing written for a bad preset");

    let o = vlm_eval(&["--preset", "balrog", "--model", "mock", "--out", out]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains("--balrog-src") && e.contains("github.com/balrog-ai/BALROG"),
        "{e}"
    );

    // BALROG's reply rule reads text: with tool calls every turn would be invalid.
    let o = vlm_eval(&[
        "--model",
        "mock",
        "--parser",
        "balrog",
        "--protocol",
        "tool",
        "--out",
        out,
    ]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains("--parser balrog does not fit --protocol tool"),
        "{e}"
    );
    assert_eq!(e.trim().lines().count(), 1, "{e}");

    let o = vlm_eval(&["presets", "nope"]);
    assert_eq!(o.status.code(), Some(2));
    let o = vlm_eval(&["presets"]);
    assert!(o.status.success());
    let listing = String::from_utf8_lossy(&o.stdout);
    assert!(
        listing.contains("balrog") && listing.contains("max-tokens-field"),
        "{listing}"
    );

    let Some(src) = reference() else {
        println!("SKIP (drift part): ../shared/balrog/reference not present");
        return;
    };
    let o = vlm_eval(&[
        "--preset",
        "balrog",
        "--protocol",
        "tool",
        "--model",
        "mock",
        "--balrog-src",
        src.to_str().unwrap(),
        "--out",
        out,
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--protocol"), "{}", stderr(&o));
    // A checkout at another commit: its naive instruction changed.
    let copy = d.join("balrog");
    for rel in [
        "balrog/environments/crafter/__init__.py",
        "balrog/environments/crafter/env.py",
        "balrog/agents/naive.py",
        "balrog/evaluator.py",
    ] {
        let to = copy.join(rel);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        let text = std::fs::read_to_string(src.join(rel)).unwrap();
        let text = if rel.ends_with("naive.py") {
            text.replacen("one of the above actions", "one of the listed actions", 1)
        } else {
            text
        };
        std::fs::write(to, text).unwrap();
    }
    let args = [
        "--preset",
        "balrog",
        "--model",
        "mock",
        "--seed-list",
        "0",
        "--steps",
        "2",
        "--balrog-src",
        copy.to_str().unwrap(),
        "--out",
        out,
        "--run-name",
        "drift",
        "--quiet",
    ];
    let o = vlm_eval(&args);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains("naive_instruction")
            && e.contains("--allow-balrog-drift")
            && !e.contains("instruction_prompt"),
        "{e}"
    );
    if !official() {
        println!("SKIP (drift run): crafter's official textures not found");
        return;
    }
    let mut with = args.to_vec();
    with.push("--allow-balrog-drift");
    let o = vlm_eval(&with);
    assert!(o.status.success(), "{}", stderr(&o));
    let run = json(&d.join("drift/run.json"));
    assert_eq!(
        run["balrog"]["drift"],
        serde_json::json!(["naive_instruction"])
    );
    assert_eq!(run["balrog"]["allow_drift"], true);
}
