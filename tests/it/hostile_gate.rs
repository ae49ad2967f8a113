//! Hostile input for the readers of run folders: the gate (`check`, `baseline save`) refuses
//! impossible values, repeated seeds and episodes that contradict their summary (exit 2, one line
//! naming the file and the field); the table and the note agree on the shared seeds; `compare`,
//! `report`, `export-sft`, `leaderboard` and `replay` tell a missing folder, a run with no
//! finished episode yet (playing or interrupted) and a corrupt one apart, say when a run is still
//! playing, and warn about and count unreadable trajectories; `compare --by model` counts a seed
//! once.

use crate::report_support;
use crate::support;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;

use serde_json::{json, Value};

use report_support::{copy_dir, read_csv, s, verdict_row};
use support::{all_text, fresh_dir, stderr, stdout, vlm_eval};

/// Two small scripted runs: `base` on seeds 0..4, `other` on seeds 2..6 (2 shared).
struct Runs {
    root: PathBuf,
    base: PathBuf,
    other: PathBuf,
}

fn runs() -> &'static Runs {
    static R: OnceLock<Runs> = OnceLock::new();
    R.get_or_init(|| {
        let root = fresh_dir("runs");
        for (name, seeds) in [("base", "0,1,2,3"), ("other", "2,3,4,5")] {
            let o = vlm_eval(&[
                "--model",
                "scripted",
                "--seed-list",
                seeds,
                "--steps",
                "3",
                "--quiet",
                "--out",
                s(&root),
                "--run-name",
                name,
            ]);
            assert!(o.status.success(), "{}", all_text(&o));
        }
        Runs {
            base: root.join("base"),
            other: root.join("other"),
            root,
        }
    })
}

/// A copy of a run folder, to damage.
fn copy_of(run: &Path, name: &str) -> PathBuf {
    let d = fresh_dir(name).join(run.file_name().unwrap());
    copy_dir(run, &d);
    d
}

/// Exit 2 with exactly one line on stderr; returns it.
fn refused(o: &Output) -> String {
    assert_eq!(o.status.code(), Some(2), "{}", all_text(o));
    let e = stderr(o);
    assert_eq!(e.trim().lines().count(), 1, "not one line: {e}");
    e
}

fn read_json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn write_json(p: &Path, v: &Value) {
    std::fs::write(p, serde_json::to_string_pretty(v).unwrap()).unwrap();
}

/// Set a field given as a JSON pointer.
fn edited(v: &Value, pointer: &str, value: Value) -> Value {
    let mut v = v.clone();
    *v.pointer_mut(pointer)
        .unwrap_or_else(|| panic!("{pointer}")) = value;
    v
}

fn check(baseline: &Path, run: &Path) -> Output {
    vlm_eval(&["check", "--baseline", s(baseline), "--run", s(run)])
}

#[test]
fn the_gate_refuses_impossible_baselines() {
    let r = runs();
    let d = fresh_dir("baselines");
    let file = d.join("baseline.json");
    let o = vlm_eval(&["baseline", "save", s(&r.base), s(&file)]);
    assert!(o.status.success(), "{}", all_text(&o));
    assert_eq!(check(&file, &r.base).status.code(), Some(0));
    let saved = read_json(&file);
    let seed0 = saved.pointer("/episodes/0/seed").unwrap().clone();
    for (pointer, value, field, why) in [
        (
            "/episodes/0/progression",
            json!(1e308),
            "episodes[0].progression",
            "is 1e+308, outside its range 0–100",
        ),
        (
            "/episodes/0/progression",
            json!(-50.0),
            "episodes[0].progression",
            "is -50.0, outside its range 0–100",
        ),
        (
            "/episodes/2/score",
            json!(-1),
            "episodes[2].score",
            "outside its range 0–22",
        ),
        (
            "/episodes/1/steps",
            json!(-4),
            "episodes[1].steps",
            "is -4, negative",
        ),
        (
            "/episodes/1/seed",
            seed0,
            "episodes[1].seed",
            "repeats seed",
        ),
        (
            "/summary/progression_mean",
            json!(1e308),
            "summary.progression_mean",
            "is 1e+308",
        ),
        (
            "/summary/death_rate",
            json!(1.5),
            "summary.death_rate",
            "is 1.5, outside its range 0–1",
        ),
        (
            "/summary/invalid_action_rate",
            json!(-0.5),
            "summary.invalid_action_rate",
            "outside its range 0–1",
        ),
        ("/summary/errors", json!(-1), "summary.errors", "negative"),
        (
            "/summary/seeds/1",
            json!(0),
            "summary.seeds[1]",
            "repeats seed 0",
        ),
    ] {
        let bad = d.join("bad.json");
        write_json(&bad, &edited(&saved, pointer, value));
        let e = refused(&check(&bad, &r.base));
        assert!(
            e.contains(&format!("bad.json: {field} ")) && e.contains(why),
            "{pointer}: {e}"
        );
        assert!(
            e.contains("vlm-eval baseline save"),
            "says how to fix it: {e}"
        );
    }
    // A summary.json used as the baseline is checked the same way.
    let summary = read_json(&r.base.join("summary.json"));
    let bad = d.join("summary.json");
    write_json(&bad, &edited(&summary, "/progression_mean", json!(-50.0)));
    let e = refused(&check(&bad, &r.base));
    assert!(
        e.contains("summary.json: progression_mean is -50.0, outside its range 0–100"),
        "{e}"
    );
}

#[test]
fn a_run_whose_episodes_contradict_it_is_refused() {
    let r = runs();
    let d = fresh_dir("contradict");
    // summary.json says another mean than its episodes.
    let run = copy_of(&r.base, "contradict-summary");
    let summary = read_json(&run.join("summary.json"));
    write_json(
        &run.join("summary.json"),
        &edited(&summary, "/progression_mean", json!(80.0)),
    );
    let file = d.join("b.json");
    for o in [
        check(&r.base, &run),
        check(&run, &r.base),
        vlm_eval(&["baseline", "save", s(&run), s(&file)]),
    ] {
        let e = refused(&o);
        assert!(
            e.contains("base/summary.json: progression_mean is 80, but the run's 4 episode.json files give"),
            "{e}"
        );
    }
    assert!(!file.exists(), "nothing saved");
    // An episode.json whose progression is not its score / 22, or out of range.
    let run = copy_of(&r.base, "contradict-episode");
    let ep = run.join("episodes/seed_1/episode.json");
    let good = read_json(&ep);
    for (value, why) in [
        (json!(5.0), "progression is 5, outside its range 0–1"),
        (json!(0.5), "progression is 0.5, but its score"),
    ] {
        write_json(&ep, &edited(&good, "/progression", value));
        let e = refused(&vlm_eval(&["baseline", "save", s(&run), s(&file)]));
        assert!(
            e.contains("seed_1/episode.json: ") && e.contains(why),
            "{e}"
        );
        let e = refused(&check(&r.base, &run));
        assert!(e.contains(why), "{e}");
    }
    // An episode.json of another seed in a seed's folder (a repeated seed in the run).
    write_json(&ep, &edited(&good, "/seed", json!(0)));
    let e = refused(&check(&r.base, &run));
    assert!(
        e.contains("seed_1/episode.json") && e.contains("records seed 0, but its folder is seed_1"),
        "{e}"
    );
}

#[test]
fn the_table_and_the_note_count_the_same_shared_seeds() {
    let r = runs();
    let o = check(&r.base, &r.other);
    assert_eq!(o.status.code(), Some(0), "{}", all_text(&o));
    let out = stdout(&o);
    let row = verdict_row(&out, "progression");
    assert_eq!(row[7], "2", "n shared: {out}");
    assert!(
        out.contains("seed sets differ: 2 shared, 2 only in the baseline, 2 only in the run"),
        "{out}"
    );
}

/// Every reader, on a path: what it says on stderr (and its exit code).
fn readers(run: &Path, scratch: &Path) -> Vec<(&'static str, Output)> {
    let sft = scratch.join("x.jsonl");
    let page = scratch.join("lb.html");
    let base = runs().base.clone();
    vec![
        ("compare", vlm_eval(&["compare", s(run)])),
        (
            "report",
            vlm_eval(&["report", s(run), "--out", s(&scratch.join("r.html"))]),
        ),
        (
            "export-sft",
            vlm_eval(&["export-sft", s(run), "--out", s(&sft)]),
        ),
        ("replay", vlm_eval(&["replay", s(run)])),
        ("check --run", check(&base, run)),
        ("check --baseline", check(run, &base)),
        (
            "baseline save",
            vlm_eval(&["baseline", "save", s(run), s(&scratch.join("b.json"))]),
        ),
        (
            "leaderboard",
            vlm_eval(&["leaderboard", s(run), "--out", s(&page)]),
        ),
    ]
}

#[test]
fn missing_playing_and_interrupted_runs_are_told_apart() {
    let r = runs();
    let d = fresh_dir("messages");
    // A missing folder: "no such folder", never "corrupt".
    for (cmd, o) in readers(&d.join("nope"), &d) {
        let e = refused(&o);
        assert!(e.contains("nope: no such"), "{cmd}: {e}");
        assert!(!e.contains("corrupt"), "{cmd}: {e}");
    }
    // Every episode still playing: a `run` holds the folder (this test holds its lock) and no
    // episode has finished.
    let run = copy_of(&r.base, "playing");
    for seed in 0..4 {
        std::fs::remove_file(run.join(format!("episodes/seed_{seed}/episode.json"))).unwrap();
    }
    std::fs::remove_file(run.join("summary.json")).unwrap();
    {
        let _lock = vlm_eval::results::lock::acquire(&run).unwrap();
        for (cmd, o) in readers(&run, &d) {
            let e = refused(&o);
            assert!(
                e.contains(
                    "has no finished episode yet (4 playing: `vlm-eval run` is still writing it"
                ),
                "{cmd}: {e}"
            );
            assert!(!e.contains("corrupt"), "{cmd}: {e}");
        }
    }
    // The same folder, nobody writing it: interrupted.
    for (cmd, o) in readers(&run, &d) {
        let e = refused(&o);
        assert!(
            e.contains("has no finished episode yet (4 unfinished, interrupted: rerun the same `vlm-eval run` command"),
            "{cmd}: {e}"
        );
    }
    // A corrupt run.json is still called corrupt.
    let bad = copy_of(&r.base, "corrupt");
    std::fs::write(bad.join("run.json"), "{").unwrap();
    for (cmd, o) in readers(&bad, &d) {
        let e = refused(&o);
        assert!(e.contains("run.json is corrupt"), "{cmd}: {e}");
    }
}

#[test]
fn leaderboard_and_replay_say_when_a_run_is_still_playing() {
    let r = runs();
    let d = fresh_dir("in-progress");
    let run = copy_of(&r.base, "in-progress");
    std::fs::remove_file(run.join("episodes/seed_3/episode.json")).unwrap();
    let _lock = vlm_eval::results::lock::acquire(&run).unwrap();
    let page = d.join("lb.html");
    for (cmd, o) in [
        (
            "leaderboard",
            vlm_eval(&["leaderboard", s(&run), "--out", s(&page)]),
        ),
        ("replay", vlm_eval(&["replay", s(&run)])),
    ] {
        assert!(o.status.success(), "{cmd}: {}", all_text(&o));
        let e = stderr(&o);
        assert!(
            e.contains("in progress: ") && e.contains("is still being written by `vlm-eval run`"),
            "{cmd}: {e}"
        );
    }
}

#[test]
fn unreadable_trajectories_are_warned_about_and_counted() {
    let r = runs();
    let d = fresh_dir("unreadable");
    let full = d.join("full.jsonl");
    let o = vlm_eval(&["export-sft", s(&r.base), "--out", s(&full)]);
    assert!(o.status.success(), "{}", all_text(&o));
    let all_rows = std::fs::read_to_string(&full).unwrap().lines().count();
    let run = copy_of(&r.base, "cut");
    let traj = run.join("episodes/seed_2/trajectory.jsonl");
    let text = std::fs::read_to_string(&traj).unwrap();
    let seed2_rows = text.lines().count();
    std::fs::write(&traj, format!("{}\n", text.lines().next().unwrap())).unwrap();
    let gone = run.join("episodes/seed_0/trajectory.jsonl");
    let seed0_rows = std::fs::read_to_string(&gone).unwrap().lines().count();
    std::fs::remove_file(&gone).unwrap();

    // export-sft: both episodes left out, counted and named.
    let out = d.join("cut.jsonl");
    let o = vlm_eval(&["export-sft", s(&run), "--out", s(&out)]);
    assert!(o.status.success(), "{}", all_text(&o));
    let rows = std::fs::read_to_string(&out).unwrap().lines().count();
    assert_eq!(rows, all_rows - seed2_rows - seed0_rows);
    assert!(
        stdout(&o).contains("2 episode(s) with an unreadable trajectory"),
        "{}",
        stdout(&o)
    );
    let e = stderr(&o);
    assert!(
        e.contains(
            "seed_2/trajectory.jsonl: has 1 complete line(s), but episode.json records 3 turn(s)"
        ) && e.contains("seed_0/trajectory.jsonl: missing"),
        "{e}"
    );
    // report: the page is written, and says so.
    let page = d.join("r.html");
    let o = vlm_eval(&["report", s(&run), "--out", s(&page)]);
    assert!(o.status.success(), "{}", all_text(&o));
    assert!(
        stdout(&o).contains("(2 unreadable or damaged trajectories, listed in the page)"),
        "{}",
        stdout(&o)
    );
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("seed_2/trajectory.jsonl: has 1 complete line(s)"));
    assert!(
        stderr(&o).contains("seed_0/trajectory.jsonl"),
        "{}",
        stderr(&o)
    );
    // leaderboard: ranked as before (episode.json holds the numbers), warned and counted.
    let lb = d.join("lb.html");
    let o = vlm_eval(&["leaderboard", s(&run), "--out", s(&lb)]);
    assert!(o.status.success(), "{}", all_text(&o));
    assert!(
        stdout(&o).contains("2 episode(s) with an unreadable trajectory"),
        "{}",
        stdout(&o)
    );
    let e = stderr(&o);
    assert!(
        e.contains("unreadable trajectory: ")
            && e.contains("seed_2/trajectory.jsonl")
            && e.contains("seed_0/trajectory.jsonl"),
        "{e}"
    );
}

#[test]
fn compare_counts_a_seed_once_per_model_row() {
    let r = runs();
    let d = fresh_dir("by-model");
    let copy = copy_of(&r.base, "by-model-copy");
    // The same folder twice: refused, named once.
    let e = refused(&vlm_eval(&["compare", s(&r.base), s(&r.base)]));
    assert_eq!(e.matches(s(&r.base)).count(), 1, "{e}");
    assert!(e.contains("is given twice"), "{e}");
    // A copy pooled --by model: the row is the run's own numbers (not a smaller SE), with a note.
    let one = d.join("one.csv");
    let o = vlm_eval(&["compare", s(&r.base), "--csv", s(&one)]);
    assert!(o.status.success(), "{}", all_text(&o));
    let pooled = d.join("pooled.csv");
    let o = vlm_eval(&[
        "compare",
        s(&r.base),
        s(&copy),
        "--by",
        "model",
        "--csv",
        s(&pooled),
    ]);
    assert!(o.status.success(), "{}", all_text(&o));
    assert!(
        stdout(&o).contains("repeats seed(s) 0, 1, 2, 3 that an earlier run of the row finished; each seed counts once"),
        "{}",
        stdout(&o)
    );
    let (a, b) = (&read_csv(&one)[0], &read_csv(&pooled)[0]);
    for key in ["progression_mean", "progression_se", "episodes_completed"] {
        assert_eq!(a[key], b[key], "{key}");
    }
    assert_eq!(b["runs"], "2");
    // base and other share seeds 2, 3: the row has 6 seeds, each once.
    let o = vlm_eval(&[
        "compare",
        s(&r.base),
        s(&r.other),
        "--by",
        "model",
        "--csv",
        s(&pooled),
    ]);
    assert!(o.status.success(), "{}", all_text(&o));
    assert_eq!(read_csv(&pooled)[0]["episodes_completed"], "6");
    assert!(
        stdout(&o).contains("repeats seed(s) 2, 3"),
        "{}",
        stdout(&o)
    );
    let _ = &r.root;
}
