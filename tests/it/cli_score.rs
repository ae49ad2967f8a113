//! `vlm-eval score`: the Crafter paper's metrics of stats.jsonl files, checked against the
//! formula evaluated here on lines whose success counts are known by construction; folders
//! searched recursively; `--json`/`--csv`; a bad line is one error naming the file and line.
//! (tests/python_pkg/test_score.py checks the CLI and Python against numpy on the output of
//! crafter 1.8.3's own Recorder.)

use crate::support;

use serde_json::{json, Map, Value};
use vlm_eval::crafter::ACHIEVEMENT_NAMES;

/// Episode `k` of file `f` unlocks achievement `j` (count 1 + k % 3) iff (k + 3 f + j) % (j + 2) == 0.
fn unlocked(f: usize, k: usize, j: usize) -> bool {
    (k + 3 * f + j).is_multiple_of(j + 2)
}

fn write_run(dir: &std::path::Path, f: usize, episodes: usize) {
    std::fs::create_dir_all(dir).unwrap();
    let mut text = String::new();
    for k in 0..episodes {
        let mut obj = Map::new();
        obj.insert("length".into(), json!(100 + 10 * k + f));
        obj.insert(
            "reward".into(),
            json!(((k % 7) as f64 - 1.0) / 10.0 + k as f64 * 0.5),
        );
        for (j, name) in ACHIEVEMENT_NAMES.iter().enumerate() {
            let v = if unlocked(f, k, j) { 1 + k % 3 } else { 0 };
            obj.insert(format!("achievement_{name}"), json!(v));
        }
        text.push_str(&Value::Object(obj).to_string());
        text.push('\n');
    }
    std::fs::write(dir.join("stats.jsonl"), text).unwrap();
}

fn score_of(rates: &[f64]) -> f64 {
    let n = rates.len() as f64;
    rates.iter().map(|p| (1.0 + p).ln() / n).sum::<f64>().exp() - 1.0
}

#[test]
fn score_matches_the_formula_on_known_counts() {
    let root = support::fresh_dir("runs");
    let sizes = [40usize, 25, 33];
    for (f, n) in sizes.iter().enumerate() {
        write_run(&root.join(format!("seed{f}")), f, *n);
    }
    let out = support::vlm_eval(&["score", "--json", root.to_str().unwrap()]);
    assert!(out.status.success(), "{}", support::stderr(&out));
    let got: Value = serde_json::from_str(&support::stdout(&out)).expect("JSON");
    let total: usize = sizes.iter().sum();
    assert_eq!(got["episodes"], json!(total));
    assert_eq!(got["files"].as_array().unwrap().len(), 3);
    // The rates by counting the construction's rule directly.
    let rate = |files: &[usize], j: usize| -> f64 {
        let (mut hit, mut all) = (0, 0);
        for &f in files {
            for k in 0..sizes[f] {
                all += 1;
                hit += unlocked(f, k, j) as usize;
            }
        }
        100.0 * hit as f64 / all as f64
    };
    let pooled: Vec<f64> = (0..ACHIEVEMENT_NAMES.len())
        .map(|j| rate(&[0, 1, 2], j))
        .collect();
    for (j, name) in ACHIEVEMENT_NAMES.iter().enumerate() {
        let p = got["success_rates"][*name].as_f64().unwrap();
        assert!((p - pooled[j]).abs() < 1e-9, "{name}: {p} vs {}", pooled[j]);
    }
    let score = got["score"].as_f64().unwrap();
    assert!((score - score_of(&pooled)).abs() < 1e-9);
    assert!(score > 0.0 && score < 100.0);
    let runs: Vec<f64> = (0..3)
        .map(|f| score_of(&(0..22).map(|j| rate(&[f], j)).collect::<Vec<_>>()))
        .collect();
    for (a, b) in got["run_scores"].as_array().unwrap().iter().zip(&runs) {
        assert!((a.as_f64().unwrap() - b).abs() < 1e-9);
    }
    let mean = runs.iter().sum::<f64>() / 3.0;
    let std = (runs.iter().map(|s| (s - mean) * (s - mean)).sum::<f64>() / 3.0).sqrt();
    assert!((got["score_std"].as_f64().unwrap() - std).abs() < 1e-9);
    let lengths: Vec<f64> = (0..3)
        .flat_map(|f| (0..sizes[f]).map(move |k| (100 + 10 * k + f) as f64))
        .collect();
    let lmean = lengths.iter().sum::<f64>() / total as f64;
    assert!((got["length_mean"].as_f64().unwrap() - lmean).abs() < 1e-9);

    // One file: no spread over runs; the text and CSV forms carry the same score.
    let one = root.join("seed1").join("stats.jsonl");
    let out = support::vlm_eval(&["score", "--json", one.to_str().unwrap()]);
    let got: Value = serde_json::from_str(&support::stdout(&out)).unwrap();
    assert_eq!(got["score_std"], Value::Null);
    assert!((got["score"].as_f64().unwrap() - runs[1]).abs() < 1e-9);
    let text = support::stdout(&support::vlm_eval(&["score", one.to_str().unwrap()]));
    assert!(
        text.contains(&format!("score    {:.2} %", runs[1])),
        "{text}"
    );
    let csv = support::stdout(&support::vlm_eval(&[
        "score",
        "--csv",
        one.to_str().unwrap(),
    ]));
    assert!(csv.starts_with("metric,value\nepisodes,25\n"), "{csv}");
    assert!(csv.contains(&format!("\nscore,{}\n", got["score"].as_f64().unwrap())));
}

#[test]
fn bad_input_is_one_line_naming_file_and_line() {
    let root = support::fresh_dir("bad");
    write_run(&root, 0, 3);
    let file = root.join("stats.jsonl");
    let mut text = std::fs::read_to_string(&file).unwrap();
    text.push_str("{\"length\": 5, \"reward\": 1.0}\n");
    std::fs::write(&file, text).unwrap();
    let out = support::vlm_eval(&["score", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = support::stderr(&out);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!("{}:4:", file.display())) && err.contains("achievement_collect_coal"),
        "{err}"
    );
    let empty = support::fresh_dir("empty");
    let out = support::vlm_eval(&["score", empty.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(support::stderr(&out).contains("no stats.jsonl"));
    let out = support::vlm_eval(&["score", empty.join("nope.jsonl").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(support::stderr(&out).contains("nope.jsonl"));
}

/// Output into a closed pipe (`vlm-eval score runs | head -1` once head has quit) ends the
/// process as it ends `cat`: killed by SIGPIPE, with no panic message or backtrace on stderr.
/// The pipe's read end is closed before the process starts, so its first line hits it.
#[cfg(unix)]
#[test]
fn output_into_a_closed_pipe_ends_quietly_by_sigpipe() {
    use std::os::unix::process::ExitStatusExt;
    let root = support::fresh_dir("pipe");
    write_run(&root, 0, 20);
    for args in [
        vec!["score", root.to_str().unwrap()],
        vec!["score", "--csv", root.to_str().unwrap()],
    ] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_vlm-eval"))
            .args(&args)
            .env("RUST_BACKTRACE", "1")
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !stderr.contains("panicked") && !stderr.contains("backtrace"),
            "{args:?}: {stderr}"
        );
        assert_eq!(
            out.status.signal(),
            Some(libc::SIGPIPE),
            "{args:?}: {:?} {stderr}",
            out.status
        );
    }
}

/// Output that cannot be written (`> /dev/full`: no space left) is one error line naming the
/// reason, exit code 1, no panic.
#[cfg(target_os = "linux")]
#[test]
fn output_that_cannot_be_written_is_one_error_line() {
    let root = support::fresh_dir("full");
    write_run(&root, 0, 20);
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_vlm-eval"))
        .args(["score", root.to_str().unwrap()])
        .env("RUST_BACKTRACE", "1")
        .stdout(full)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("error: cannot write the output to stdout: No space left on device"),
        "{stderr}"
    );
}
