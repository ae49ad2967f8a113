//! Terminal tables that fit `$COLUMNS` (`cli::table`): every table of `run`, `compare`, the
//! model matrix, `presets` and `leaderboard` at 80 and 120 columns, `--wide` with every
//! column, CSV files byte-identical whatever the width, a bad `$COLUMNS` as exit 2, the
//! leaderboard's groups named by what sets them apart, and `run --view` printing the run's page.

use crate::report_support;
use crate::support;
use crate::view_support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use report_support::*;
use support::{all_text, fresh_dir, run, stdout, vlm_eval};

/// Every line of every table in `out`, and of the note under it naming what was hidden, is at
/// most `width` characters (lines of prose are printed whole, as before).
fn assert_fits(out: &str, width: usize, what: &str) {
    let mut in_note = false;
    let mut tables = 0;
    for line in out.lines() {
        let table = line.starts_with(['╭', '│', '├', '╰']);
        tables += usize::from(line.starts_with('╭'));
        in_note |= line.starts_with("hidden to fit") || line.starts_with("cells abbreviated");
        if table || in_note {
            assert!(
                line.chars().count() <= width,
                "{what} at COLUMNS={width}: a line of {} characters:\n{line}\n---\n{out}",
                line.chars().count()
            );
        }
        if line.contains("--wide") {
            in_note = false;
        }
    }
    assert!(tables > 0, "{what}: no table in\n{out}");
}

#[test]
fn run_summary_fits_and_wide_shows_every_column() {
    let d = fresh_dir("run");
    let base = ["--model", "scripted", "--seeds", "2", "--steps", "3"];
    let header = [
        "model",
        "episodes",
        "progression",
        "crafter score",
        "achievements",
        "steps",
        "deaths",
        "replies exact/repaired",
        "tokens",
        "cost",
        "latency p50/p95",
    ];
    for width in [80usize, 120] {
        let name = format!("w{width}");
        let mut args = base.to_vec();
        args.extend(["--out", s(&d), "--run-name", &name]);
        let o = run(&args, &[], &[("COLUMNS", &width.to_string())]);
        assert!(o.status.success(), "{}", all_text(&o));
        let out = stdout(&o);
        assert_fits(&out, width, "run");
        assert!(
            out.contains("scripted") && out.contains("progression"),
            "{out}"
        );
        if width == 80 {
            assert!(
                out.contains("hidden to fit 80 columns: tokens") && out.contains("--wide"),
                "{out}"
            );
        }
    }
    let mut args = base.to_vec();
    args.extend(["--out", s(&d), "--run-name", "wide", "--wide"]);
    let o = run(&args, &[], &[("COLUMNS", "80")]);
    assert!(o.status.success(), "{}", all_text(&o));
    let out = stdout(&o);
    for h in header {
        assert!(out.contains(h), "--wide lacks {h:?}:\n{out}");
    }
    assert!(!out.contains("hidden") && !out.contains('…'), "{out}");
    // `--wide` before the default command's flags works too.
    let mut args = vec!["--wide"];
    args.extend(base);
    args.extend(["--out", s(&d), "--run-name", "wide2"]);
    let o = vlm_eval(&args);
    assert!(o.status.success(), "{}", all_text(&o));
    assert!(stdout(&o).contains("latency p50/p95"));
}

#[test]
fn compare_tables_fit_and_csv_is_byte_identical() {
    let f = fixture();
    let d = fresh_dir("compare");
    let runs = [s(&f.scripted), s(&f.random), s(&f.shifted), s(&f.mock)];
    let files = [
        "cmp.csv",
        "cmp.spend.csv",
        "cmp.achievements.csv",
        "cmp.paired.csv",
    ];
    let mut csvs: Vec<(String, Vec<Vec<u8>>)> = Vec::new();
    for (tag, env, wide) in [
        ("80", Some("80"), false),
        ("120", Some("120"), false),
        ("wide", Some("80"), true),
        ("unset", None, false),
    ] {
        let out_dir = d.join(tag);
        std::fs::create_dir_all(&out_dir).unwrap();
        let csv = out_dir.join("cmp.csv");
        let mut args = vec!["compare"];
        args.extend(runs);
        args.extend(["--paired", "--achievements", "--csv", s(&csv)]);
        if wide {
            args.push("--wide");
        }
        let mut cmd = support::command();
        cmd.args(&args).env_remove("COLUMNS");
        if let Some(w) = env {
            cmd.env("COLUMNS", w);
        }
        let o = cmd.output().unwrap();
        assert!(o.status.success(), "{}", all_text(&o));
        let out = stdout(&o);
        match tag {
            "80" | "120" => {
                assert_fits(&out, tag.parse().unwrap(), "compare");
                assert!(out.contains("progression % ± SE"), "{out}");
            }
            "wide" => {
                for h in [
                    "tokens",
                    "cost",
                    "latency p50",
                    "repaired replies",
                    "invalid actions",
                    "vs mean %",
                    "only in vs",
                    "input tokens",
                ] {
                    assert!(out.contains(h), "--wide lacks {h:?}:\n{out}");
                }
                assert!(!out.contains("hidden to fit"), "{out}");
            }
            _ => assert_fits(&out, 120, "compare (COLUMNS unset, not a terminal)"),
        }
        let bytes = files
            .iter()
            .map(|f| std::fs::read(out_dir.join(f)).unwrap())
            .collect();
        csvs.push((tag.to_string(), bytes));
    }
    for (tag, bytes) in &csvs[1..] {
        for (i, f) in files.iter().enumerate() {
            assert!(
                bytes[i] == csvs[0].1[i],
                "{f} differs between COLUMNS=80 and {tag}"
            );
        }
    }
    // The main CSV's columns are those of before tables fitted the terminal.
    let main = String::from_utf8(csvs[0].1[0].clone()).unwrap();
    assert_eq!(
        main.lines().next().unwrap(),
        "run,model,episodes_completed,episodes_errors,episodes_unfinished,episodes_planned,\
progression_mean,progression_se,crafter_score,return_mean,score_mean,steps_mean,death_rate,\
invalid_action_rate,format_exact_rate,format_repaired_rate,input_tokens,output_tokens,cost_usd,\
latency_p50_ms,protocol_differs"
    );
}

#[test]
fn matrix_presets_and_leaderboard_fit() {
    let f = fixture();
    let d = fresh_dir("others");
    for width in [80usize, 120] {
        let w = width.to_string();
        let env = [("COLUMNS", w.as_str())];
        let out_dir = d.join(format!("m{width}"));
        let o = run(
            &[
                "--model",
                "scripted,random",
                "--seeds",
                "2",
                "--steps",
                "3",
                "--out",
                s(&out_dir),
            ],
            &[],
            &env,
        );
        assert!(o.status.success(), "{}", all_text(&o));
        assert_fits(&stdout(&o), width, "the model matrix");

        let o = run(&["presets"], &[], &env);
        assert!(o.status.success(), "{}", all_text(&o));
        let out = stdout(&o);
        assert_fits(&out, width, "presets");
        assert!(out.contains("setting") && out.contains("balrog"), "{out}");

        let page = d.join(format!("lb{width}.html"));
        let o = run(&["leaderboard", s(&f.root), "--out", s(&page)], &[], &env);
        assert!(o.status.success(), "{}", all_text(&o));
        assert_fits(&stdout(&o), width, "leaderboard");
    }
}

#[test]
fn bad_columns_is_one_line_and_exit_2() {
    let f = fixture();
    let d = fresh_dir("bad");
    let cases: [Vec<&str>; 4] = [
        vec!["compare", s(&f.scripted)],
        vec!["presets"],
        vec![
            "leaderboard",
            s(&f.root),
            "--out",
            "/nonexistent/never.html",
        ],
        vec![
            "--model",
            "scripted",
            "--seeds",
            "1",
            "--steps",
            "1",
            "--out",
            s(&d),
        ],
    ];
    for args in cases {
        for bad in ["abc", "0", "12.5"] {
            let o = run(&args, &[], &[("COLUMNS", bad)]);
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(2), "{args:?} COLUMNS={bad}: {err}");
            assert_eq!(err.lines().count(), 1, "{err}");
            assert!(
                err.starts_with(&format!(
                    "error: COLUMNS must be a whole number of columns (got '{bad}')"
                )),
                "{err}"
            );
            assert!(o.stdout.is_empty(), "{}", stdout(&o));
        }
    }
    // Nothing was played: the run refused before its folder was made.
    assert!(std::fs::read_dir(&d).unwrap().next().is_none());
    // With --wide the width is not read, as the message says.
    let o = run(&["presets", "--wide"], &[], &[("COLUMNS", "abc")]);
    assert!(o.status.success(), "{}", all_text(&o));
}

#[test]
fn leaderboard_groups_are_named_by_what_sets_them_apart() {
    let d = fresh_dir("groups");
    for (name, size) in [("small", "64"), ("large", "128")] {
        let o = vlm_eval(&[
            "--model",
            "scripted",
            "--seeds",
            "2",
            "--steps",
            "3",
            "--image-size",
            size,
            "--quiet",
            "--out",
            s(&d.join("runs")),
            "--run-name",
            name,
        ]);
        assert!(o.status.success(), "{}", all_text(&o));
    }
    let page = d.join("lb.html");
    let o = vlm_eval(&["leaderboard", s(&d.join("runs")), "--out", s(&page)]);
    assert!(o.status.success(), "{}", all_text(&o));
    let out = stdout(&o);
    assert!(
        out.contains("image-size 64") && out.contains("image-size 128"),
        "{out}"
    );
    assert!(!out.contains("group 1"), "{out}");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("<h2>Protocol: image-size 64</h2>")
            && html.contains("<h2>Protocol: image-size 128</h2>"),
        "{html}"
    );
    assert!(html.contains(r#"<link rel="icon" href="data:image/png;base64,"#));
}

/// `run --view` prints this run's page, which answers while the run plays (its model is an
/// endpoint that refuses connections, so the run sits in its retries until killed).
#[test]
fn run_view_prints_the_runs_own_page() {
    let d = fresh_dir("view");
    let mut child = support::command()
        .args(["--model", "nowhere", "--base-url", "http://127.0.0.1:9/v1"])
        .args(["--seeds", "1", "--steps", "2", "--max-retries", "50"])
        .args(["--out", s(&d), "--run-name", "playing", "--quiet", "--view"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut url = String::new();
    let mut line = String::new();
    while url.is_empty() && stderr.read_line(&mut line).unwrap_or(0) > 0 {
        if let Some(u) = line.trim().strip_prefix("live view: ") {
            url = u.to_string();
        }
        line.clear();
    }
    std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut rest);
    });
    let addr = url
        .strip_prefix("http://")
        .and_then(|r| r.split('/').next())
        .unwrap_or_default()
        .to_string();
    let path = url
        .strip_prefix(&format!("http://{addr}"))
        .unwrap_or_default()
        .to_string();
    let result = std::panic::catch_unwind(|| {
        assert_eq!(path, "/run/playing/", "--view printed {url:?}");
        // The page answers once run.json is there (a bounded wait, not a timing assertion).
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let (status, body) = view_support::get(&addr, &path);
            if status == 200 {
                assert!(body.contains("playing"), "{body}");
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the run's page never answered: {body}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let (status, body) = view_support::get(&addr, "/favicon.ico");
        assert_eq!(status, 200, "{body}");
        assert!(
            body.to_ascii_lowercase()
                .contains("content-type: image/png"),
            "{body}"
        );
    });
    let _ = child.kill();
    let _ = child.wait();
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
    assert!(Path::new(&d).join("playing").is_dir());
}
