//! The comparability guard, through the real binary on mock runs: `compare` marks rows whose
//! protocol (preset, parser, observation, image size, textures, history, prompt) differs from
//! the first row's and names the settings under the table and in the CSV; `check` exits 2 when
//! the run's protocol differs from the baseline's (run folder or baseline file) unless
//! `--allow-protocol-change`; old run.json files (no preset or parser) count as the `vlm-eval`
//! preset with the lenient parser, and old baseline files (no protocol) warn and proceed.
//! Also `check --metric format_exact_rate,format_repaired_rate` on mock runs.

use crate::support;
use support::text;

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

fn vlm_eval(args: &[&str]) -> Output {
    support::run(args, &["BALROG_SRC"], &[])
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

struct Runs {
    plain: PathBuf,
    strict: PathBuf,
    big: PathBuf,
    old: PathBuf,
    dir: PathBuf,
}

fn runs() -> Runs {
    let dir = support::scratch("guard-runs");
    let run = |name: &str, extra: &[&str]| {
        let mut args = vec!["--model", "mock", "--seed-list", "0,1,2", "--steps", "3"];
        args.extend(["--out", s(&dir), "--run-name", name, "--quiet"]);
        args.extend(extra);
        let o = vlm_eval(&args);
        assert!(o.status.success(), "{}", text(&o).1);
        dir.join(name)
    };
    let plain = run("plain", &[]);
    let strict = run("strict", &["--parser", "strict"]);
    let big = run("big", &["--image-size", "32", "--history", "2"]);
    // A run written before presets: the same as `plain` without preset, parser and layout.
    let old = run("old", &[]);
    let mut info = json(&old.join("run.json"));
    let config = info["config"].as_object_mut().unwrap();
    for key in ["preset", "preset_overrides", "parser", "layout", "feedback"] {
        config.remove(key);
    }
    std::fs::write(old.join("run.json"), info.to_string()).unwrap();
    Runs {
        plain,
        strict,
        big,
        old,
        dir,
    }
}

fn read_csv(path: &Path) -> Vec<std::collections::BTreeMap<String, String>> {
    let mut r = csv::Reader::from_path(path).unwrap();
    let header: Vec<String> = r.headers().unwrap().iter().map(str::to_string).collect();
    r.records()
        .map(|rec| {
            header
                .iter()
                .cloned()
                .zip(rec.unwrap().iter().map(str::to_string))
                .collect()
        })
        .collect()
}

#[test]
fn compare_marks_rows_and_check_refuses_a_protocol_change() {
    let r = runs();

    // compare: the first row is the reference; old run.json files count as vlm-eval/lenient.
    let cmp = r.dir.join("cmp.csv");
    let o = vlm_eval(&[
        "compare",
        s(&r.plain),
        s(&r.old),
        s(&r.strict),
        s(&r.big),
        "--csv",
        s(&cmp),
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(out.contains("│ protocol"), "{out}");
    assert!(out.contains("≠ parser"), "{out}");
    assert!(out.contains("≠ image_size, history"), "{out}");
    assert!(
        out.contains("protocol: strict differs from plain (parser: strict vs lenient)"),
        "{out}"
    );
    assert!(
        out.contains("protocol: big differs from plain (image_size: 32 vs 64; history: 2 vs 3)"),
        "{out}"
    );
    assert!(
        !out.contains("protocol: old"),
        "an old run.json is the vlm-eval preset: {out}"
    );
    let rows = read_csv(&cmp);
    let marks: Vec<&str> = rows
        .iter()
        .map(|r| r["protocol_differs"].as_str())
        .collect();
    assert_eq!(marks, ["", "", "parser", "image_size;history"]);
    for row in &rows {
        assert_eq!(
            row["format_exact_rate"], "1.0000",
            "the mock answers exactly"
        );
        assert_eq!(row["format_repaired_rate"], "0.0000");
    }
    // Same protocols: no marker column, no protocol line; the CSV column stays (empty).
    let o = vlm_eval(&["compare", s(&r.plain), s(&r.old), "--csv", s(&cmp)]);
    let (out, _) = text(&o);
    assert!(o.status.success());
    assert!(
        !out.contains("│ protocol") && !out.contains("protocol:"),
        "{out}"
    );
    assert_eq!(read_csv(&cmp)[1]["protocol_differs"], "");

    // --by model: a row pooling runs of different protocols says so.
    let o = vlm_eval(&["compare", s(&r.plain), s(&r.strict), "--by", "model"]);
    let (out, _) = text(&o);
    assert!(o.status.success());
    assert!(
        out.contains(
            "protocol: mock pools runs whose protocols differ (parser: strict vs lenient)"
        ),
        "{out}"
    );

    // check: a run folder baseline with another parser → exit 2, one line naming it.
    let o = vlm_eval(&["check", "--baseline", s(&r.plain), "--run", s(&r.strict)]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("parser: lenient vs strict") && err.contains("--allow-protocol-change"),
        "{err}"
    );
    let o = vlm_eval(&[
        "check",
        "--baseline",
        s(&r.plain),
        "--run",
        s(&r.strict),
        "--allow-protocol-change",
    ]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    assert!(
        out.contains("checked anyway (--allow-protocol-change)"),
        "{out}"
    );
    assert!(err.contains("parser: lenient vs strict"), "{err}");
    // Same protocol, old run.json on one side: no complaint.
    let o = vlm_eval(&["check", "--baseline", s(&r.old), "--run", s(&r.plain)]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    assert!(
        !out.contains("protocol differs") && err.is_empty(),
        "{out}{err}"
    );

    // A baseline file stores the protocol.
    let file = r.dir.join("baseline.json");
    let o = vlm_eval(&["baseline", "save", s(&r.plain), s(&file)]);
    assert!(o.status.success(), "{}", text(&o).1);
    let saved = json(&file);
    assert_eq!(saved["protocol"]["preset"], "vlm-eval");
    assert_eq!(saved["protocol"]["parser"], "lenient");
    assert_eq!(saved["protocol"]["image_size"], 64);
    let o = vlm_eval(&["check", "--baseline", s(&file), "--run", s(&r.big)]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        err.contains("image_size: 64 vs 32") && err.contains("history: 3 vs 2"),
        "{err}"
    );
    // An old baseline file (no protocol): a warning, then the check.
    let mut old = saved.clone();
    old.as_object_mut().unwrap().remove("protocol");
    let old_file = r.dir.join("old-baseline.json");
    std::fs::write(&old_file, old.to_string()).unwrap();
    let o = vlm_eval(&["check", "--baseline", s(&old_file), "--run", s(&r.big)]);
    let (out, err) = text(&o);
    assert_ne!(o.status.code(), Some(2), "{out}{err}");
    assert!(err.contains("records no protocol"), "{err}");
    assert!(out.contains("records no protocol"), "{out}");
    assert!(
        out.contains("configs differ (image_size: 64 vs 32; history: 3 vs 2)"),
        "without a stored protocol the config note still names them: {out}"
    );

    // Reply-format metrics: exact is higher-better, repaired lower-better.
    let o = vlm_eval(&[
        "check",
        "--baseline",
        s(&file),
        "--run",
        s(&r.plain),
        "--metric",
        "format_exact_rate,format_repaired_rate",
    ]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    assert!(
        out.contains("| format_exact_rate (percentage points of turns) | 100.00 | 100.00"),
        "{out}"
    );
    assert!(
        out.contains("upper bound of Δ < 0") && out.contains("lower bound of Δ > 0"),
        "{out}"
    );
    let o = vlm_eval(&[
        "check",
        "--baseline",
        s(&file),
        "--run",
        s(&r.plain),
        "--metric",
        "format",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o).1.contains("format_repaired_rate"),
        "{}",
        text(&o).1
    );
}
