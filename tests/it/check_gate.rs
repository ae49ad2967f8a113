//! `check` and `baseline save` on real run folders: the gate's verdicts, its rule, bad input,
//! JUnit XML, $GITHUB_STEP_SUMMARY and the README's workflows.

use crate::report_support;
use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use report_support::*;
use support::{all_text, fresh_dir, run, vlm_eval};

#[test]
fn check_passes_on_itself_and_fails_random_against_scripted() {
    let fx = fixture();
    let o = check(
        &fx.scripted,
        &fx.scripted,
        &["--metric", "progression,crafter_score,return"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", all_text(&o));
    let out = all_text(&o);
    assert!(out.contains("### vlm-eval check: PASS"), "{out}");
    let row = verdict_row(&out, "progression");
    assert_eq!(row[3], "0.00");
    assert_eq!(row[7], "6", "n shared");

    let o = check(&fx.scripted, &fx.random, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", all_text(&o));
    let out = all_text(&o);
    assert!(out.contains("REGRESSED"), "{out}");
    let row = verdict_row(&out, "progression");
    let (b, r) = (mean(&prog_of(&fx.scripted)), mean(&prog_of(&fx.random)));
    close(row[1].parse().unwrap(), b, 0.005, "baseline");
    close(row[2].parse().unwrap(), r, 0.005, "run");
    close(row[3].parse().unwrap(), r - b, 0.005, "delta");
    // The rule: regressed iff the upper bound < −max_drop. Probe both sides of the bound.
    let upper: f64 = row[5].parse().unwrap();
    assert!(upper < 0.0);
    let just_below = format!("{:.2}", -upper - 0.02);
    let just_above = format!("{:.2}", -upper + 0.02);
    assert_eq!(
        check(&fx.scripted, &fx.random, &["--max-drop", &just_below])
            .status
            .code(),
        Some(1)
    );
    assert_eq!(
        check(&fx.scripted, &fx.random, &["--max-drop", &just_above])
            .status
            .code(),
        Some(0)
    );

    // Through a baseline file as well.
    let d = fresh_dir("gate");
    let file = d.join("baseline.json");
    let o = vlm_eval(&["baseline", "save", s(&fx.scripted), s(&file)]);
    assert!(o.status.success(), "{}", all_text(&o));
    assert_eq!(check(&file, &fx.scripted, &[]).status.code(), Some(0));
    let o = check(&file, &fx.random, &["--metric", "crafter_score"]);
    assert_eq!(o.status.code(), Some(1), "{}", all_text(&o));
    // The mock model plays the scripted policy through the HTTP client: same seeds, same play.
    let o = check(&file, &fx.mock, &["--metric", "progression,crafter_score"]);
    assert_eq!(o.status.code(), Some(0), "{}", all_text(&o));
    assert_eq!(verdict_row(&all_text(&o), "progression")[3], "0.00");
}

#[test]
fn summary_json_baseline_uses_the_normal_approximation() {
    let fx = fixture();
    let summary = fx.scripted.join("summary.json");
    let o = check(&summary, &fx.random, &["--confidence", "0.9"]);
    assert_eq!(o.status.code(), Some(1), "{}", all_text(&o));
    let out = all_text(&o);
    assert!(out.contains("normal approximation"), "{out}");
    let row = verdict_row(&out, "progression");
    let (b, r) = (prog_of(&fx.scripted), prog_of(&fx.random));
    let delta = mean(&r) - mean(&b);
    let sd = (se(&b).powi(2) + se(&r).powi(2)).sqrt();
    // z at 0.90 one-sided = 1.281552; two-sided 90% = 1.644854.
    close(
        row[5].parse().unwrap(),
        delta + 1.281_552 * sd,
        0.006,
        "upper",
    );
    let ci: Vec<f64> = row[4]
        .trim_matches(['[', ']'])
        .split(", ")
        .map(|x| x.parse().unwrap())
        .collect();
    close(ci[0], delta - 1.644_854 * sd, 0.006, "ci low");
    close(ci[1], delta + 1.644_854 * sd, 0.006, "ci high");
    let o = check(&summary, &fx.scripted, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", all_text(&o));
    // No SE for the return in summary.json → bad input, with the fix named.
    let o = check(&summary, &fx.random, &["--metric", "return"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(all_text(&o).contains("baseline save"), "{}", all_text(&o));
}

#[test]
fn baseline_file_holds_per_seed_values() {
    let fx = fixture();
    let d = fresh_dir("baseline_file");
    let file = d.join("b.json");
    let o = vlm_eval(&["baseline", "save", s(&fx.random), s(&file)]);
    assert!(o.status.success(), "{}", all_text(&o));
    let b: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(b["format"], "vlm-eval-baseline");
    assert_eq!(b["version"], 1);
    assert_eq!(b["model"], "random");
    assert_eq!(b["run"], "random");
    assert_eq!(b["config"]["steps"], 25);
    let eps = episodes(&fx.random);
    let stored = b["episodes"].as_array().unwrap();
    assert_eq!(stored.len(), eps.len());
    for (p, e) in stored.iter().zip(&eps) {
        assert_eq!(p["seed"], e["seed"]);
        close(
            f(&p["progression"]),
            100.0 * f(&e["progression"]),
            1e-9,
            "prog",
        );
        assert_eq!(p["score"], e["score"]);
        assert_eq!(p["return"], e["episode_return"]);
        let unlocked = p["unlocked"].as_array().unwrap().len() as u64;
        assert_eq!(unlocked, e["score"].as_u64().unwrap());
    }
    close(
        f(&b["summary"]["progression_mean"]),
        mean(&prog_of(&fx.random)),
        1e-9,
        "mean",
    );
    close(
        f(&b["summary"]["crafter_score"]),
        crafter_score(&eps),
        1e-9,
        "cs",
    );
    // Saving twice gives the same bytes (no clock in the file).
    let again = d.join("b2.json");
    assert!(vlm_eval(&["baseline", "save", s(&fx.random), s(&again)])
        .status
        .success());
    assert_eq!(
        std::fs::read(&file).unwrap(),
        std::fs::read(&again).unwrap()
    );
}

#[test]
fn check_bad_inputs_exit_2_naming_the_file() {
    let fx = fixture();
    let d = fresh_dir("bad_check");
    let cases: Vec<(PathBuf, &str)> = vec![
        (d.join("missing.json"), "no such file"),
        (d.join("corrupt.json"), "not valid JSON"),
        (d.join("other.json"), "neither a run folder"),
        (d.join("future.json"), "version 99"),
        (d.join("not_a_run"), "run.json"),
    ];
    std::fs::write(&cases[1].0, "{\"format\": \"vlm-eval-baseline\", ").unwrap();
    std::fs::write(&cases[2].0, "{\"hello\": 1}").unwrap();
    std::fs::write(
        &cases[3].0,
        "{\"format\": \"vlm-eval-baseline\", \"version\": 99}",
    )
    .unwrap();
    std::fs::create_dir_all(&cases[4].0).unwrap();
    for (path, why) in &cases {
        let o = check(path, &fx.scripted, &[]);
        assert_eq!(o.status.code(), Some(2), "{}", all_text(&o));
        let msg = all_text(&o);
        assert!(msg.contains(s(path)) && msg.contains(why), "{why}: {msg}");
    }
    // --run must be a complete run folder.
    let partial = d.join("partial");
    copy_dir(&fx.random, &partial);
    std::fs::remove_file(partial.join("episodes/seed_0/episode.json")).unwrap();
    let o = check(&fx.scripted, &partial, &[]);
    assert_eq!(o.status.code(), Some(2), "{}", all_text(&o));
    assert!(
        all_text(&o).contains("partial run") && all_text(&o).contains(s(&partial)),
        "{}",
        all_text(&o)
    );
    let o = check(&fx.scripted, &partial, &["--allow-partial"]);
    assert_eq!(o.status.code(), Some(1), "{}", all_text(&o));
    let o = check(&partial, &fx.random, &[]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "partial baseline: {}",
        all_text(&o)
    );
    let o = vlm_eval(&["baseline", "save", s(&partial), s(&d.join("x.json"))]);
    assert_eq!(o.status.code(), Some(2), "{}", all_text(&o));
    let o = check(&fx.scripted, &fx.scripted.join("summary.json"), &[]);
    assert_eq!(o.status.code(), Some(2), "{}", all_text(&o));
    assert!(all_text(&o).contains("not a folder"), "{}", all_text(&o));
    // Bad flags.
    for extra in [
        &["--metric", "speed"][..],
        &["--confidence", "1.5"],
        &["--max-drop=-1"],
        &["--metric", "progression,score", "--max-drop", "1,2,3"],
    ] {
        let o = check(&fx.scripted, &fx.scripted, extra);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {}", all_text(&o));
    }
}

#[test]
fn junit_and_step_summary() {
    let fx = fixture();
    let d = fresh_dir("junit");
    let xml = d.join("out/check.xml");
    let summary = d.join("step_summary.md");
    std::fs::write(&summary, "earlier step\n").unwrap();
    let o = run(
        &[
            "check",
            "--baseline",
            s(&fx.scripted),
            "--run",
            s(&fx.random),
            "--metric",
            "progression,return",
            "--max-drop",
            "5,100",
            "--junit",
            s(&xml),
        ],
        &[],
        &[("GITHUB_STEP_SUMMARY", s(&summary))],
    );
    assert_eq!(o.status.code(), Some(1), "{}", all_text(&o));
    let md = std::fs::read_to_string(&summary).unwrap();
    assert!(md.starts_with("earlier step\n"), "appended, not replaced");
    assert!(
        md.contains("### vlm-eval check: REGRESSED") && md.contains("| progression ("),
        "{md}"
    );
    let x = std::fs::read_to_string(&xml).unwrap();
    assert_eq!(x.matches("<testsuite ").count(), 1);
    assert_eq!(x.matches("<testcase ").count(), 2);
    assert_eq!(x.matches("<failure ").count(), 1);
    assert!(
        x.contains("tests=\"2\"") && x.contains("failures=\"1\""),
        "{x}"
    );
    // An independent XML parser, when present, must accept it and see the same structure.
    let script = "import sys, xml.etree.ElementTree as E\n\
        r = E.parse(sys.argv[1]).getroot()\n\
        assert r.tag == 'testsuite', r.tag\n\
        cases = r.findall('testcase')\n\
        print(r.get('tests'), r.get('failures'), ' '.join(c.get('name') + ':' + str(c.find('failure') is not None) for c in cases))\n";
    match Command::new("python3")
        .args(["-c", script, s(&xml)])
        .output()
    {
        Ok(p) if p.status.success() => {
            assert_eq!(
                String::from_utf8_lossy(&p.stdout).trim(),
                "2 1 progression:True return:False"
            );
        }
        Ok(p) => panic!(
            "python3 rejected the JUnit XML: {}",
            String::from_utf8_lossy(&p.stderr)
        ),
        Err(e) => eprintln!("skipping the python3 XML parse: {e}"),
    }
}

/// docs/GUIDE.md's workflows: valid YAML, and the mock gate passes against the committed baseline
/// with the same commands.
#[test]
fn readme_gate_workflows() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("docs/GUIDE.md")).unwrap();
    let section = &readme[readme.find("## Compare and gate").expect("section")..];
    let blocks: Vec<&str> = section
        .split("```yaml\n")
        .skip(1)
        .map(|b| &b[..b.find("```").unwrap()])
        .collect();
    assert_eq!(blocks.len(), 2, "two workflows");
    let eval = "vlm-eval --model mock --seeds 10 --steps 20 --out results --run-name ci";
    let gate = "check --baseline .ci/baseline-mock.json --run results/ci";
    let mock = blocks[0].replace('\n', " ").replace("  ", " ");
    assert!(blocks[0].contains(eval), "{}", blocks[0]);
    assert!(mock.contains(gate), "{mock}");
    let d = fresh_dir("readme");
    for (i, yaml) in blocks.iter().enumerate() {
        let file = d.join(format!("w{i}.yml"));
        std::fs::write(&file, yaml).unwrap();
        let script = "import sys, yaml\n\
            w = yaml.safe_load(open(sys.argv[1]))\n\
            steps = w['jobs']['gate']['steps']\n\
            runs = [s['run'] for s in steps if 'run' in s]\n\
            assert any('vlm-eval check' in r for r in runs), runs\n\
            assert all(('uses' in s) != ('run' in s) for s in steps), steps\n\
            print(len(steps))\n";
        match Command::new("python3")
            .args(["-c", script, s(&file)])
            .output()
        {
            Ok(p) if p.status.success() => {}
            Ok(p) if String::from_utf8_lossy(&p.stderr).contains("No module named 'yaml'") => {
                eprintln!("skipping the YAML parse: PyYAML is not installed")
            }
            Ok(p) => panic!(
                "workflow {i} is not valid: {}",
                String::from_utf8_lossy(&p.stderr)
            ),
            Err(e) => eprintln!("skipping the YAML parse: {e}"),
        }
    }
    let o = vlm_eval(&[
        "--model",
        "mock",
        "--seeds",
        "10",
        "--steps",
        "20",
        "--out",
        s(&d),
        "--run-name",
        "ci",
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", all_text(&o));
    let o = check(
        &root.join(".ci/baseline-mock.json"),
        &d.join("ci"),
        &["--metric", "progression,crafter_score", "--max-drop", "0"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", all_text(&o));
    assert_eq!(verdict_row(&all_text(&o), "progression")[3], "0.00");
}
