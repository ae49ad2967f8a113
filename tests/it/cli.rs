//! The binary's env commands: bad input gives one-line errors with exit code 2 (never a
//! panic), and traces are identical across processes.

use crate::support;

use std::process::Output;

/// The binary with an empty texture cache, no `$CRAFTER_ASSETS` and no download: bad-input
/// tests never fetch textures (tests/it/textures.rs covers fetching).
fn vlm_eval(args: &[&str]) -> Output {
    // Never created: an absent cache is an empty one (cleared once per test binary, so that
    // concurrent tests never remove it under each other).
    static CACHE: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    let cache = CACHE.get_or_init(|| support::scratch("empty-cache"));
    let cache = cache.to_str().unwrap();
    support::run(
        args,
        &["CRAFTER_ASSETS"],
        &[("VLM_EVAL_CACHE", cache), ("VLM_EVAL_NO_FETCH", "1")],
    )
}

fn assert_usage_error(args: &[&str], needle: &str) {
    let out = vlm_eval(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: stderr {err}");
    assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("error")).collect();
    assert_eq!(
        lines.len(),
        1,
        "{args:?}: expected one error line, got {err}"
    );
    assert!(err.contains(needle), "{args:?}: '{needle}' not in {err}");
}

#[test]
fn bad_input_is_a_one_line_error() {
    assert_usage_error(&["env", "trace", "--actions", "17"], "unknown action '17'");
    assert_usage_error(
        &["env", "trace", "--actions", "fly"],
        "unknown action 'fly'",
    );
    assert_usage_error(&["env", "trace", "--size", "0"], "zero");
    assert_usage_error(&["env", "trace", "--size", "5"], "--size");
    assert_usage_error(&["env", "trace", "--size", "64,abc"], "--size");
    assert_usage_error(&["env", "trace", "--view", "9,2"], "--view");
    assert_usage_error(
        &["env", "trace", "--assets", "/nonexistent/assets"],
        "/nonexistent/assets",
    );
    assert_usage_error(&["bench", "env", "--size", "0"], "zero");
}

/// clap's own usage errors (unknown flag, bad value, missing value): one line in all, exit 2,
/// naming the flag, with clap's tip kept and the command's `--help` pointed to.
#[test]
fn flag_errors_from_clap_are_one_line() {
    let cases: [(&[&str], &[&str]); 5] = [
        (
            &["--model", "mock", "--seedz", "3"],
            &["'--seedz'", "'--seeds'", "see 'vlm-eval run --help'"],
        ),
        (
            &["run", "--wide=abc"],
            &["'abc'", "'--wide'", "see 'vlm-eval run --help'"],
        ),
        (
            &["--model", "mock", "--seeds", "ten"],
            &["'ten'", "--seeds", "see 'vlm-eval run --help'"],
        ),
        (
            &["bench", "env", "--steps"],
            &["--steps", "see 'vlm-eval bench env --help'"],
        ),
        (
            &["env", "trace", "--steps", "-3"],
            &["-3", "see 'vlm-eval env trace --help'"],
        ),
    ];
    for (args, needles) in cases {
        let out = vlm_eval(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("error: "), "{args:?}: {err}");
        for n in needles {
            assert!(err.contains(n), "{args:?}: '{n}' not in {err}");
        }
    }
    // Help still prints in full, and exits 0.
    let out = vlm_eval(&["run", "--help"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).lines().count() > 10);
}

#[test]
fn wrong_or_unreadable_asset_files_are_rejected() {
    let dir = support::fresh_dir("cli-bad-assets");
    std::fs::write(dir.join("cow.png"), b"not a png").unwrap();
    let out = vlm_eval(&[
        "env",
        "trace",
        "--steps",
        "1",
        "--assets",
        dir.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(!err.contains("panicked"));
    assert_eq!(err.lines().count(), 1, "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn traces_are_identical_across_processes() {
    let args = [
        "env",
        "trace",
        "--seed",
        "3",
        "--steps",
        "300",
        "--action-seed",
        "9",
    ];
    let a = vlm_eval(&args);
    let b = vlm_eval(&args);
    assert!(a.status.success(), "{}", String::from_utf8_lossy(&a.stderr));
    assert!(!a.stdout.is_empty());
    assert_eq!(a.stdout, b.stdout);
    let first: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&a.stdout).lines().next().unwrap()).unwrap();
    assert_eq!(first["type"], "reset");
    assert_eq!(
        first["world_seed"], 1427922768u64,
        "§4.2 vector: env seed 3, episode 1"
    );
}

#[test]
fn bench_env_json_has_the_documented_fields() {
    let out = vlm_eval(&["bench", "env", "--steps", "2000", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for key in ["steps_per_sec", "reset_ms", "render_us"] {
        assert!(v[key].as_f64().is_some_and(|x| x > 0.0), "{key} in {v}");
    }
}
