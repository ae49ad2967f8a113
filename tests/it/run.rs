//! End-to-end runs of the main command with built-in models: result files, determinism across
//! concurrency levels, resume, and fast, clear failures for missing keys and bad input.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Instant;

fn vlm_eval(args: &[&str], envs: &[(&str, &str)]) -> Output {
    support::run(args, &[], envs)
}

fn tmp(name: &str) -> PathBuf {
    support::scratch(&format!("run-{name}"))
}

fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_str(
        &std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    )
    .unwrap()
}

/// The parts of an episode that must not depend on scheduling.
fn outcome(ep: &serde_json::Value) -> serde_json::Value {
    let mut v = ep.clone();
    let o = v.as_object_mut().unwrap();
    for volatile in ["latency_ms", "wall_s"] {
        o.remove(volatile);
    }
    v
}

#[test]
fn mock_run_writes_every_result_file() {
    let out = tmp("files");
    let o = vlm_eval(
        &[
            "--model",
            "mock",
            "--seeds",
            "3",
            "--steps",
            "4",
            "--out",
            out.to_str().unwrap(),
            "--run-name",
            "r",
            "--quiet",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let run = out.join("r");
    for f in [
        "run.json",
        "summary.json",
        "summary.csv",
        "achievements.csv",
    ] {
        assert!(run.join(f).is_file(), "missing {f}");
    }
    let info = read_json(&run.join("run.json"));
    assert_eq!(info["config"]["model"], "mock");
    assert!(info["finished_at"].is_string());
    for seed in 0..3 {
        let ep_dir = run.join(format!("episodes/seed_{seed}"));
        let ep = read_json(&ep_dir.join("episode.json"));
        let steps = ep["num_steps"].as_u64().unwrap();
        assert!(ep["turns"].as_u64().unwrap() <= 4);
        for s in 0..=steps {
            assert!(
                ep_dir.join(format!("frames/step_{s:04}.png")).is_file(),
                "frame {s}"
            );
        }
        let traj = std::fs::read_to_string(ep_dir.join("trajectory.jsonl")).unwrap();
        assert_eq!(traj.lines().count() as u64, ep["turns"].as_u64().unwrap());
        assert!(!traj.contains("base64"), "trajectory must not embed images");
        let first: serde_json::Value = serde_json::from_str(traj.lines().next().unwrap()).unwrap();
        assert_eq!(first["frame"]["path"], "frames/step_0000.png");
        assert!(first["request"]["tools"][0] == "interact_many");
        assert!(!first["executed"].as_array().unwrap().is_empty());
    }
    let summary = read_json(&run.join("summary.json"));
    assert_eq!(summary["episodes"], 3);
    assert!(
        summary["input_tokens"].as_u64().unwrap() > 0,
        "mock reports usage"
    );
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn same_results_at_concurrency_1_and_32_and_resume_skips() {
    let out = tmp("determinism");
    let dir = out.to_str().unwrap();
    for (name, c) in [("c1", "1"), ("c32", "32")] {
        let o = vlm_eval(
            &[
                "--model",
                "mock",
                "--seeds",
                "6",
                "--steps",
                "6",
                "--concurrency",
                c,
                "--out",
                dir,
                "--run-name",
                name,
                "--quiet",
            ],
            &[],
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    for seed in 0..6 {
        let a = read_json(&out.join(format!("c1/episodes/seed_{seed}/episode.json")));
        let b = read_json(&out.join(format!("c32/episodes/seed_{seed}/episode.json")));
        assert_eq!(outcome(&a), outcome(&b), "seed {seed}");
        let ta =
            std::fs::read_to_string(out.join(format!("c1/episodes/seed_{seed}/trajectory.jsonl")))
                .unwrap();
        let tb =
            std::fs::read_to_string(out.join(format!("c32/episodes/seed_{seed}/trajectory.jsonl")))
                .unwrap();
        let actions = |t: &str| -> Vec<serde_json::Value> {
            t.lines()
                .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["executed"].clone())
                .collect()
        };
        assert_eq!(actions(&ta), actions(&tb), "seed {seed}");
    }
    // Rerun: every episode is kept; an unfinished one (no episode.json) is redone.
    std::fs::remove_file(out.join("c1/episodes/seed_2/episode.json")).unwrap();
    let before = read_json(&out.join("c1/episodes/seed_0/episode.json"));
    let o = vlm_eval(
        &[
            "--model",
            "mock",
            "--seeds",
            "6",
            "--steps",
            "6",
            "--concurrency",
            "1",
            "--out",
            dir,
            "--run-name",
            "c1",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("resuming: 5 finished"));
    assert_eq!(
        read_json(&out.join("c1/episodes/seed_0/episode.json")),
        before,
        "finished episode untouched"
    );
    assert!(out.join("c1/episodes/seed_2/episode.json").is_file());
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn missing_key_fails_fast_and_names_the_fix() {
    let t = Instant::now();
    let o = vlm_eval(
        &["--model", "gpt-4o-mini", "--seeds", "10", "--steps", "10"],
        &[],
    );
    assert!(t.elapsed().as_secs_f64() < 1.0, "took {:?}", t.elapsed());
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("OPENAI_API_KEY") && err.contains("--model mock"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

#[test]
fn bad_flags_config_and_prompts_are_one_line_errors() {
    let check = |args: &[&str], needle: &str| {
        let o = vlm_eval(args, &[]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {needle} not in {err}");
        assert!(!err.contains("panicked"));
    };
    check(&["--model", "mock", "--seeds", "0"], "--seeds");
    check(&["--model", "mock", "--image-size", "4"], "--image-size");
    check(&["--model", "mock", "--concurrency", "0"], "--concurrency");
    check(
        &["--model", "mock", "--config", "/nonexistent/cfg.toml"],
        "/nonexistent/cfg.toml",
    );
    check(
        &["--model", "mock", "--prompts", "/nonexistent/prompts"],
        "/nonexistent/prompts",
    );
    check(&["--model", "mock", "--modality", "smell"], "smell");
    let dir = tmp("cfg");
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("bad.toml");
    std::fs::write(&cfg, "seeds = 3\nsteeps = 4\n").unwrap();
    check(
        &["--model", "mock", "--config", cfg.to_str().unwrap()],
        "steeps",
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn config_file_supplies_flags_and_flags_override() {
    let out = tmp("config");
    std::fs::create_dir_all(&out).unwrap();
    let cfg = out.join("run.toml");
    std::fs::write(
        &cfg,
        format!(
            "model = \"scripted\"\nseeds = 2\nsteps = 3\nrun-name = \"fromfile\"\nout = \"{}\"\n",
            out.display()
        ),
    )
    .unwrap();
    let o = vlm_eval(
        &["--config", cfg.to_str().unwrap(), "--steps", "2", "--quiet"],
        &[],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let info = read_json(&out.join("fromfile/run.json"));
    assert_eq!(info["config"]["model"], "scripted");
    assert_eq!(info["config"]["steps"], 2, "flag overrides file");
    assert_eq!(
        info["config"]["seeds"],
        serde_json::json!({"start": 0, "end": 2})
    );
    let _ = std::fs::remove_dir_all(&out);
}
