//! The example gate is current: the committed `.ci/baseline-mock.json` (the baseline of the
//! mock-model workflow in docs/GUIDE.md, "Compare and gate") passes `check` against a fresh run
//! of the workflow's own command, with no warning and no note. It fails when the program
//! changes what the mock run plays or records; the fix is the one-liner below, which is what
//! GUIDE.md says made the file.
//!
//! The baseline records crafter's official textures, which a GitHub runner downloads on its
//! first run. This test needs them found without a download (`$CRAFTER_ASSETS`, as .ci/run
//! sets, or the per-user cache): else it skips with the reason, except under `$CI`, where
//! that is a failure.

use crate::support;

use std::path::PathBuf;

const RESAVE: &str = "vlm-eval --model mock --seeds 10 --steps 20 --out results --run-name ci && vlm-eval baseline save results/ci .ci/baseline-mock.json (with crafter's official textures: CRAFTER_ASSETS=.venv-crafter/lib/python3*/site-packages/crafter/assets)";

fn baseline() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".ci/baseline-mock.json")
}

#[test]
fn the_committed_mock_baseline_passes_check_without_a_warning() {
    let committed: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(baseline()).unwrap()).unwrap();
    let want = committed["config"]["textures"]["kind"]
        .as_str()
        .unwrap_or("none")
        .to_string();
    let out = support::scratch("ci-baseline");
    // The workflow's own commands (docs/GUIDE.md, "A deterministic gate on every push").
    let o = support::vlm_eval(&[
        "--model",
        "mock",
        "--seeds",
        "10",
        "--steps",
        "20",
        "--out",
        out.to_str().unwrap(),
        "--run-name",
        "ci",
        "--quiet",
    ]);
    assert!(
        o.status.success(),
        "the gate's run failed: {}",
        support::all_text(&o)
    );
    let run = out.join("ci");
    let run_json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("run.json")).unwrap()).unwrap();
    let got = run_json["textures"]["kind"].as_str().unwrap_or("none");
    if got != want {
        let why = format!(
            "the baseline records {want} textures but this machine's run found {got} (set CRAFTER_ASSETS to crafter 1.8.3's assets folder)"
        );
        if std::env::var_os("CI").is_some() {
            panic!("{why}; CI must check the committed baseline");
        }
        eprintln!("SKIP: {why}");
        return;
    }
    let o = support::vlm_eval(&[
        "check",
        "--baseline",
        baseline().to_str().unwrap(),
        "--run",
        run.to_str().unwrap(),
        "--metric",
        "progression,crafter_score",
        "--max-drop",
        "0",
    ]);
    let text = support::all_text(&o);
    assert_eq!(
        o.status.code(),
        Some(0),
        ".ci/baseline-mock.json no longer passes its own gate; save it again: {RESAVE}\n{text}"
    );
    let noted: Vec<&str> = text
        .lines()
        .filter(|l| {
            let l = l.to_lowercase();
            l.contains("warning") || l.contains("differ") || l.contains("save the baseline again")
        })
        .collect();
    assert!(
        noted.is_empty(),
        ".ci/baseline-mock.json passes but `check` warns; save it again: {RESAVE}\n{}",
        noted.join("\n")
    );
}
