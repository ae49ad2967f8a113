//! Hostile input to `run` and the model matrix, as a new user types it (issue 43 §3–§6, 44
//! §3, §5, §7): every count, size and name flag swept with empty, blank, zero, negative, huge
//! and non-numeric values, and just past its stated bound. Each refused case ends with exit 2,
//! exactly one line on stderr naming the flag, an empty working folder (no `results/`, no
//! run folder, no file) and no request at a local endpoint that counts connections
//! (`support::hostile`). Beside the sweep: model names trimmed one way, a bad
//! `OPENAI_BASE_URL` named as the environment's, storage modes and resumes that differ,
//! matrix CSVs that never overwrite another matrix's, `--quiet`, one-line usage errors with
//! their facts, and the exit codes of failed writes.

use crate::support;

use std::path::{Path, PathBuf};

use support::hostile::{check_case, expect_all, listing, Case};
use support::{stderr, stdout, vlm_eval};

fn tmp(name: &str) -> PathBuf {
    support::fresh_dir(&format!("hostile-run-{name}"))
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The values every flag is tried with.
const VALUES: [(&str, &str); 7] = [
    ("empty", ""),
    ("blank", " "),
    ("zero", "0"),
    ("negative", "-1"),
    ("huge", "99999999999999999999"),
    ("infinite", "1e309"),
    ("text", "abc"),
];

/// Each swept flag: the values (by name) it accepts, which are not refusals and so not run
/// here, and a value just past its stated bound (`None` where it has no bound of its own).
/// The base command names a model at the counting endpoint, so that a value let through
/// would show as a request and a run folder.
const FLAGS: &[(&str, &[&str], Option<&str>)] = &[
    // Counts and sizes (docs/GUIDE.md "Limits").
    ("--seeds", &[], Some("100000000")),
    ("--seed-list", &["zero", "negative"], None),
    ("--steps", &[], Some("100001")),
    ("--episode-length", &["zero"], None),
    ("--concurrency", &[], Some("1025")),
    ("--image-size", &[], Some("1025")),
    ("--history", &["zero"], Some("1001")),
    ("--image-history", &["zero"], Some("1001")),
    ("--max-actions-per-turn", &[], Some("65")),
    ("--max-tokens", &[], Some("1000001")),
    ("--max-retries", &["zero"], Some("101")),
    ("--max-tokens-total", &[], None),
    ("--shard", &[], Some("1/1")),
    ("--view", &["zero"], Some("65536")),
    // Amounts.
    ("--temperature", &["zero"], Some("2.5")),
    ("--request-timeout", &[], Some("86401")),
    ("--max-retry-wait", &["zero"], Some("86401")),
    ("--turn-deadline", &[], Some("86401")),
    ("--max-cost", &[], Some("1000001")),
    ("--price-in", &["zero"], Some("1000001")),
    ("--price-out", &["zero"], Some("1000001")),
    // Names and paths.
    (
        "--model",
        &["zero", "negative", "huge", "infinite", "text"],
        None,
    ),
    (
        "--run-name",
        &["zero", "negative", "huge", "infinite", "text"],
        None,
    ),
    (
        "--out",
        &["zero", "negative", "huge", "infinite", "text"],
        None,
    ),
    ("--api-key-env", &["text"], None),
    ("--base-url", &[], None),
    ("--preset", &[], None),
    ("--header", &[], None),
    ("--prompts", &[], None),
    ("--config", &[], None),
    ("--api-key-file", &[], None),
    (
        "--cache",
        &["zero", "negative", "huge", "infinite", "text"],
        None,
    ),
    // Choices.
    ("--frames", &[], None),
    ("--modality", &[], None),
    ("--protocol", &[], None),
    ("--parser", &[], None),
    ("--obs-format", &[], None),
    ("--image-detail", &[], None),
    ("--max-tokens-field", &[], None),
];

/// The run command around one swept flag: a model at the counting endpoint, one seed, one
/// turn, without the flag's own base setting.
fn base_args(flag: &str, value: &str) -> Vec<String> {
    let mut args = vec!["run".to_string()];
    if flag != "--model" {
        args.extend(["--model".into(), "counted-model".into()]);
    }
    if !["--seeds", "--seed-list", "--shard"].contains(&flag) {
        args.extend(["--seeds".into(), "1".into()]);
    }
    if flag == "--shard" {
        args.extend(["--seed-list".into(), "0".into()]);
    }
    if flag != "--steps" {
        args.extend(["--steps".into(), "1".into()]);
    }
    match flag {
        "--price-in" => args.extend(["--price-out".into(), "0".into()]),
        "--price-out" => args.extend(["--price-in".into(), "0".into()]),
        _ => {}
    }
    args.push(format!("{flag}={value}"));
    args
}

#[test]
fn every_bad_flag_value_is_one_line_before_any_folder_or_request() {
    let mut cases = Vec::new();
    for &(flag, accepted, over) in FLAGS {
        for (name, value) in VALUES {
            if accepted.contains(&name) {
                continue;
            }
            let args = base_args(flag, value);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            cases.push(Case::refused(format!("{flag} {name}"), &args, flag));
        }
        if let Some(v) = over {
            let args = base_args(flag, v);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            cases.push(Case::refused(format!("{flag} past its bound"), &args, flag));
        }
    }
    // Floats that parse but are no amount.
    for flag in [
        "--temperature",
        "--request-timeout",
        "--max-cost",
        "--price-in",
    ] {
        for v in ["NaN", "inf", "-inf"] {
            let args = base_args(flag, v);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            cases.push(Case::refused(format!("{flag} {v}"), &args, flag));
        }
    }
    // The same values from a --config file are checked alike.
    let root = tmp("sweep");
    let cfg = root.join("huge.toml");
    std::fs::write(
        &cfg,
        "seeds = 100000000\nsteps = 1\nmodel = \"counted-model\"\n",
    )
    .unwrap();
    cases.push(Case::refused(
        "seeds in --config",
        &["run", "--config", s(&cfg)],
        "--seeds 100000000",
    ));
    let work = root.join("work");
    expect_all(&cases, &work, 6);
}

#[test]
fn a_hundred_million_seeds_are_refused_in_one_line() {
    // Refused rather than played: a run of more than MAX_SEEDS (1,000,000) seeds is beyond any
    // evaluation budget, and its folder beyond what a filesystem lists quickly.
    let case = Case::refused(
        "1e8 seeds",
        &["--model", "mock", "--seeds", "100000000", "--steps", "1"],
        "--seeds 100000000 is out of range: use 1..=1000000",
    );
    let failed = check_case(&case, &tmp("1e8").join("work"));
    assert!(failed.is_none(), "{}", failed.unwrap_or_default());
}

#[test]
fn model_names_are_trimmed_one_way_and_empty_ones_refused() {
    let root = tmp("names");
    // Refused before any folder or request, whatever the path (one name, a list, an entry).
    let cfg = root.join("entry.toml");
    std::fs::write(&cfg, "seeds = 1\nsteps = 1\n[[models]]\nmodel = \"  \"\n").unwrap();
    let cases = [
        Case::refused(
            "empty",
            &["--model", "", "--seeds", "1"],
            "--model is empty",
        ),
        Case::refused(
            "blank",
            &["--model", "   ", "--seeds", "1"],
            "--model is empty",
        ),
        Case::refused("list", &["--model", "mock, ,scripted"], "empty name"),
        Case::refused(
            "entry",
            &["--config", s(&cfg)],
            "[[models]] entry's model is empty",
        ),
    ];
    expect_all(&cases, &root.join("work"), 4);

    // ' mock' is mock: the offline model, its folder named as mock's, no request sent (the
    // counting endpoint and a key are in the environment, as a real model would use them).
    let server = support::hostile::CountingServer::start();
    let out = root.join("out");
    let o = support::run(
        &[
            "--model",
            " mock ",
            "--seeds",
            "1",
            "--steps",
            "1",
            "--quiet",
            "--out",
            s(&out),
        ],
        &[],
        &[("OPENAI_BASE_URL", &server.url), ("OPENAI_API_KEY", "sk-x")],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        out.join("mock_tool_both_64px_1t/run.json").is_file(),
        "{:?}",
        listing(&out)
    );
    let info: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("mock_tool_both_64px_1t/run.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(info["config"]["model"], "mock");
    // A list and a [[models]] entry trim alike: the same folders, no request.
    let cfg = root.join("models.toml");
    std::fs::write(
        &cfg,
        "[[models]]\nmodel = \" random \"\n[[models]]\nmodel = \"scripted \"\n",
    )
    .unwrap();
    for args in [
        vec![
            "--model",
            " scripted , random",
            "--seeds",
            "1",
            "--steps",
            "1",
        ],
        vec![
            "--config",
            s(&cfg),
            "--seeds",
            "1",
            "--steps",
            "1",
            "--model",
            "random , scripted",
        ],
    ] {
        let mut args = args.clone();
        args.extend(["--quiet", "--out", s(&out)]);
        let o = support::run(
            &args,
            &[],
            &[("OPENAI_BASE_URL", &server.url), ("OPENAI_API_KEY", "sk-x")],
        );
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        for m in ["random", "scripted"] {
            assert!(
                out.join(format!("{m}_tool_both_64px_1t")).is_dir(),
                "{:?}",
                listing(&out)
            );
        }
    }
    assert_eq!(server.requests(), 0);
}

#[test]
fn a_bad_endpoint_url_names_where_it_came_from() {
    let root = tmp("url");
    let cases = [
        Case::refused(
            "env",
            &["--model", "gpt-4o-mini", "--seeds", "1"],
            "OPENAI_BASE_URL (from the environment) \"not-a-url\" is not an endpoint URL",
        )
        .with_env("OPENAI_BASE_URL", "not-a-url"),
        Case::refused(
            "flag",
            &["--model", "gpt-4o-mini", "--base-url", "localhost:8000/v1"],
            "--base-url \"localhost:8000/v1\" is not an endpoint URL",
        ),
    ];
    expect_all(&cases, &root.join("work"), 2);
    // The built-in models use no endpoint: a bad variable does not stop them.
    let out = root.join("out");
    let o = support::run(
        &[
            "--model",
            "scripted",
            "--seeds",
            "1",
            "--steps",
            "1",
            "--quiet",
            "--out",
            s(&out),
        ],
        &[],
        &[("OPENAI_BASE_URL", "not-a-url")],
    );
    assert!(o.status.success(), "{}", stderr(&o));
}

fn play(out: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "--model",
        "scripted",
        "--seeds",
        "2",
        "--steps",
        "2",
        "--out",
        s(out),
    ];
    args.extend(extra);
    vlm_eval(&args)
}

#[test]
fn storage_modes_get_their_own_folder_and_a_differing_resume_is_refused() {
    let root = tmp("frames");
    let out = root.join("out");
    let o = play(&out, &["--quiet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    // --frames none is another folder, not a resume of the --frames all run.
    let o = play(&out, &["--quiet", "--frames", "none"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stderr(&o).contains("resuming"), "{}", stderr(&o));
    let none = out.join("scripted_tool_both_64px_2t_frames-none");
    assert!(none.join("run.json").is_file(), "{:?}", listing(&out));
    assert!(!none
        .join("episodes/seed_0/frames")
        .join("step_0000.png")
        .exists());
    let all = out.join("scripted_tool_both_64px_2t");
    assert!(all.join("episodes/seed_0/frames/step_0000.png").is_file());
    // The same folder by name with another storage mode, or another setting: exit 2 naming
    // each setting that differs, before the folder is touched.
    let before = std::fs::read(all.join("run.json")).unwrap();
    for (extra, needle) in [
        (
            vec!["--frames", "sent"],
            "frames: \"all\" there, \"sent\" now",
        ),
        (vec!["--history", "1"], "history: 3 there, 1 now"),
    ] {
        let mut args = vec!["--run-name", "scripted_tool_both_64px_2t"];
        args.extend(extra);
        let o = play(&out, &args);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        let e = stderr(&o);
        // (A machine without crafter's textures adds its one warning about the sprites.)
        let lines = e.lines().filter(|l| !l.contains("textures were not found"));
        assert_eq!(lines.count(), 1, "{e}");
        assert!(
            e.contains("holds a run with different settings") && e.contains(needle),
            "{e}"
        );
    }
    assert_eq!(std::fs::read(all.join("run.json")).unwrap(), before);
    // The same settings resume.
    let o = play(&out, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("resuming: 2 finished episode(s) kept"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn two_matrices_never_overwrite_each_others_csv() {
    let root = tmp("matrix");
    let out = root.join("out");
    let m = |models: &str| {
        vlm_eval(&[
            "--model",
            models,
            "--seeds",
            "1",
            "--steps",
            "2",
            "--quiet",
            "--out",
            s(&out),
        ])
    };
    let o = m("scripted,random");
    assert!(o.status.success(), "{}", stderr(&o));
    let first = out.join("matrix_scripted+random_tool_both_64px_2t.csv");
    let text =
        std::fs::read_to_string(&first).unwrap_or_else(|e| panic!("{e}: {:?}", listing(&out)));
    assert_eq!(text.lines().count(), 3, "{text}");
    let o = m("random");
    assert!(o.status.success(), "{}", stderr(&o));
    let o = m("scripted, mock");
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(out
        .join("matrix_scripted+mock_tool_both_64px_2t.csv")
        .is_file());
    assert_eq!(std::fs::read_to_string(&first).unwrap(), text);
    // --quiet: no table, only where things went.
    let lines: Vec<String> = stdout(&o).lines().map(str::to_string).collect();
    assert!(
        lines
            .iter()
            .all(|l| l.starts_with("comparison: ") || l.starts_with("results: ")),
        "{lines:?}"
    );
}

#[test]
fn quiet_prints_no_table_and_notes_fit_120_columns() {
    let root = tmp("quiet");
    let out = root.join("out");
    let o = play(&out, &["--quiet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&o).trim(),
        format!(
            "results: {}",
            out.join("scripted_tool_both_64px_2t").display()
        )
    );
    let o = support::run(
        &[
            "--model",
            "scripted",
            "--seeds",
            "2",
            "--steps",
            "2",
            "--out",
            s(&out),
        ],
        &[],
        &[("COLUMNS", "120")],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains('╭') && text.contains("progression"), "{text}");
    for line in text.lines().filter(|l| !l.starts_with("results: ")) {
        assert!(
            line.chars().count() <= 120,
            "{} columns: {line}",
            line.chars().count()
        );
    }
}

#[test]
fn usage_errors_keep_their_facts_on_one_line() {
    let root = tmp("usage");
    let x = root.join("x");
    let cases = [
        Case::refused(
            "merge without runs",
            &["merge", "--out", s(&x)],
            "not provided: <RUNS>... (usage: vlm-eval merge",
        ),
        Case::refused(
            "compare without runs",
            &["compare"],
            "not provided: <RUNS>...",
        ),
        Case::refused(
            "a value not among the choices",
            &["--model", "mock", "--frames", "some"],
            "[possible values: all, sent, none]",
        ),
        Case::refused(
            "a misspelt flag",
            &["--model", "mock", "--seedz", "3"],
            "(a similar argument exists: '--seeds')",
        ),
    ];
    expect_all(&cases, &root.join("work"), 4);
}

#[test]
fn failed_writes_exit_1_in_every_command() {
    let root = tmp("writes");
    let out = root.join("out");
    let o = play(&out, &["--quiet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let run = out.join("scripted_tool_both_64px_2t");
    // A path under a plain file can never be written.
    let file = root.join("plain-file");
    std::fs::write(&file, "x").unwrap();
    let under = file.join("sub");
    for args in [
        vec!["baseline", "save", s(&run), s(&under)],
        vec![
            "--model",
            "scripted",
            "--seeds",
            "1",
            "--steps",
            "1",
            "--out",
            s(&under),
        ],
        vec!["report", s(&run), "--out", s(&under)],
    ] {
        let o = vlm_eval(&args);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {e}");
        assert_eq!(e.trim().lines().count(), 1, "{args:?}: {e}");
    }
}
