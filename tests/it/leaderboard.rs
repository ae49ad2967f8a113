//! `vlm-eval leaderboard`: real offline runs ranked per protocol, the CSV checked against the
//! episode.json files read independently, unfinished episodes counted and not averaged, and
//! bad input.

use crate::support;
use crate::view_support;

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;
use support::{fresh_dir, text, vlm_eval};
use view_support::model_run;

fn progression_by_seed(run: &Path) -> BTreeMap<i64, f64> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(run.join("episodes")).unwrap().flatten() {
        let p = e.path().join("episode.json");
        if let Ok(t) = std::fs::read_to_string(&p) {
            let v: Value = serde_json::from_str(&t).unwrap();
            if v["termination"] != "error" {
                out.insert(
                    v["seed"].as_i64().unwrap(),
                    100.0 * v["progression"].as_f64().unwrap(),
                );
            }
        }
    }
    out
}

fn mean(xs: impl Iterator<Item = f64>) -> f64 {
    let v: Vec<f64> = xs.collect();
    v.iter().sum::<f64>() / v.len() as f64
}

fn read_csv(path: &Path) -> Vec<BTreeMap<String, String>> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header: Vec<String> = lines
        .next()
        .unwrap()
        .split(',')
        .map(str::to_string)
        .collect();
    lines
        .map(|l| {
            // No field of these runs contains a comma or a quote.
            header
                .iter()
                .cloned()
                .zip(l.split(',').map(str::to_string))
                .collect()
        })
        .collect()
}

#[test]
fn ranks_per_protocol_with_paired_deltas_and_counts_unfinished() {
    let dir = fresh_dir("lb");
    let a = model_run(&dir, "mock", "mock-a", "5", "40", &[]);
    let b = model_run(&dir, "random", "random-b", "5", "40", &[]);
    let _c = model_run(
        &dir,
        "mock",
        "mock-small",
        "3",
        "20",
        &["--image-size", "32"],
    );
    // An episode in flight: a folder with a trajectory and no episode.json.
    std::fs::create_dir_all(a.join("episodes/seed_99")).unwrap();
    std::fs::write(
        a.join("episodes/seed_99/trajectory.jsonl"),
        "{\"turn\":0}\n",
    )
    .unwrap();
    // One run has a report page; the leaderboard links it and names how to make the others.
    let o = vlm_eval(&["report", a.to_str().unwrap(), "--no-gif"]);
    assert!(o.status.success(), "{}", text(&o).1);
    let page = dir.join("out/lb.html");
    let o = vlm_eval(&[
        "leaderboard",
        dir.to_str().unwrap(),
        "--out",
        page.to_str().unwrap(),
    ]);
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stderr}");
    assert!(
        stdout.contains("3 run(s) ranked in 2 protocol group(s)"),
        "{stdout}"
    );
    let rows = read_csv(&dir.join("out/lb.csv"));
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[0].len(), 31 + 22);
    let row = |name: &str| rows.iter().find(|r| r["run"] == name).unwrap();
    // mock-small plays 32 px frames: its own group, where it leads alone.
    assert_ne!(row("mock-small")["group"], row("mock-a")["group"]);
    assert_eq!(row("mock-small")["rank"], "1");
    assert_eq!(row("mock-small")["delta_vs_leader"], "");
    // The unfinished seed is counted, not averaged in.
    let ra = row("mock-a");
    assert_eq!(ra["episodes_unfinished"], "1");
    assert_eq!(ra["episodes_planned"], "6");
    assert_eq!(ra["episodes_complete"], "5");
    let (pa, pb) = (progression_by_seed(&a), progression_by_seed(&b));
    let (ma, mb) = (mean(pa.values().copied()), mean(pb.values().copied()));
    let close = |cell: &str, want: f64| {
        let got: f64 = cell.parse().unwrap();
        assert!((got - want).abs() < 1e-3, "{got} vs {want}");
    };
    close(&ra["progression_mean"], ma);
    close(&row("random-b")["progression_mean"], mb);
    // Ranked by mean progression; the other is paired to the leader on its shared seeds.
    let (leader, other, delta) = if ma >= mb {
        ("mock-a", "random-b", mean(pa.keys().map(|s| pb[s] - pa[s])))
    } else {
        ("random-b", "mock-a", mean(pa.keys().map(|s| pa[s] - pb[s])))
    };
    assert_eq!(row(leader)["rank"], "1");
    assert_eq!(row(other)["rank"], "2");
    assert_eq!(row(other)["leader"], leader);
    assert_eq!(row(other)["shared_seeds"], "5");
    close(&row(other)["delta_vs_leader"], delta);
    let lo: f64 = row(other)["delta_ci_low"].parse().unwrap();
    let hi: f64 = row(other)["delta_ci_high"].parse().unwrap();
    assert!(
        lo <= delta + 1e-9 && delta <= hi + 1e-9,
        "{lo} {delta} {hi}"
    );
    let p: f64 = row(other)["p_value"].parse().unwrap();
    assert!((0.0..=1.0).contains(&p));
    // Unlock rates agree with the episodes: collect_wood share over the counted episodes.
    let html = std::fs::read_to_string(&page).unwrap();
    assert_eq!(html.matches(r#"class="ach""#).count(), 2 * 22);
    assert!(html.contains("1 unfinished"));
    assert!(
        html.contains(r#"href="../mock-a/report.html""#),
        "relative link to the run page"
    );
    assert!(
        !html.contains("random-b/report.html\""),
        "a link to a page that does not exist"
    );
    let hint = format!(
        "no report yet: <code>vlm-eval report {}</code>",
        b.display()
    );
    assert!(html.contains(&hint), "no hint for the run without a page");
    assert!(
        stdout.contains("2 ranked run(s) have no report page yet"),
        "{stdout}"
    );
    assert!(!html.to_lowercase().contains("<script"));
    assert!(!html.contains("http://") && !html.contains("https://"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let dir = fresh_dir("lb-bad");
    for args in [
        vec!["leaderboard", dir.to_str().unwrap()],
        vec!["leaderboard", "/no/such/folder"],
    ] {
        let o = vlm_eval(&args);
        let (_, stderr) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    }
    // A run with no complete episode is not ranked; with nothing else, that is the error.
    std::fs::create_dir_all(dir.join("r/episodes/seed_0")).unwrap();
    std::fs::write(dir.join("r/run.json"), "{}").unwrap();
    let o = vlm_eval(&["leaderboard", dir.to_str().unwrap()]);
    let (_, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr.contains("has no finished episode yet (1 unfinished, interrupted"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The rows of a leaderboard CSV: (group, run) pairs, and the group's protocol line.
fn groups(csv: &Path) -> Vec<(String, String, String)> {
    read_csv(csv)
        .into_iter()
        .map(|r| (r["group"].clone(), r["run"].clone(), r["protocol"].clone()))
        .collect()
}

#[test]
fn turn_budgets_are_never_ranked_together() {
    let dir = fresh_dir("lb-budget");
    model_run(&dir, "mock", "five", "3", "5", &[]);
    model_run(&dir, "mock", "twenty", "3", "20", &[]);
    model_run(&dir, "random", "twenty-random", "3", "20", &[]);
    model_run(
        &dir,
        "mock",
        "short-game",
        "3",
        "20",
        &["--episode-length", "30"],
    );
    let o = vlm_eval(&["leaderboard", dir.to_str().unwrap()]);
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stderr}");
    assert!(
        stdout.contains("4 run(s) ranked in 3 protocol group(s)"),
        "{stdout}"
    );
    // Written beside the runs (the folder given), not into the working folder.
    let rows = groups(&dir.join("leaderboard.csv"));
    assert!(dir.join("leaderboard.html").is_file());
    let group_of = |run: &str| rows.iter().find(|r| r.1 == run).unwrap().0.clone();
    assert_ne!(group_of("five"), group_of("twenty"));
    assert_eq!(group_of("twenty"), group_of("twenty-random"));
    assert_ne!(group_of("twenty"), group_of("short-game"));
    let line = |run: &str| rows.iter().find(|r| r.1 == run).unwrap().2.clone();
    assert!(
        line("five").contains("steps 5 · episode_length 10000"),
        "{}",
        line("five")
    );
    assert!(line("short-game").contains("steps 20 · episode_length 30"));
    // The groups are named by what sets them apart, the budget included.
    let html = std::fs::read_to_string(dir.join("leaderboard.html")).unwrap();
    for name in [
        "Protocol: turns 5, episode-length 10000",
        "Protocol: turns 20, episode-length 10000",
        "Protocol: turns 20, episode-length 30",
    ] {
        assert!(html.contains(name), "{name}");
    }
    assert!(stdout.contains("turns 5, episode-length 10000"), "{stdout}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn shards_of_a_merged_run_and_folders_that_are_not_runs_are_skipped() {
    let dir = fresh_dir("lb-skip");
    let s0 = model_run(&dir, "mock", "s_shard0of2", "4", "5", &["--shard", "0/2"]);
    let s1 = model_run(&dir, "mock", "s_shard1of2", "4", "5", &["--shard", "1/2"]);
    let lone = model_run(&dir, "mock", "t_shard0of2", "4", "5", &["--shard", "0/2"]);
    let merged = dir.join("s");
    let o = vlm_eval(&[
        "merge",
        s0.to_str().unwrap(),
        s1.to_str().unwrap(),
        "--out",
        merged.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o).1);
    model_run(&dir, "random", "whole", "4", "5", &[]);
    let frames = dir.join("frames");
    let o = vlm_eval(&["frames", "--out", frames.to_str().unwrap(), "--steps", "2"]);
    assert!(o.status.success(), "{}", text(&o).1);
    std::fs::create_dir_all(dir.join("notes")).unwrap();

    let o = vlm_eval(&["leaderboard", dir.to_str().unwrap()]);
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stderr}");
    let mut ranked: Vec<String> = groups(&dir.join("leaderboard.csv"))
        .into_iter()
        .map(|r| r.1)
        .collect();
    ranked.sort();
    assert_eq!(ranked, ["s", "whole"], "{stdout}");
    assert!(
        stdout.contains("2 run(s) ranked in 1 protocol group(s), 5 skipped"),
        "{stdout}"
    );
    for (folder, why) in [
        (
            &s0,
            "shard 0/2 of the merged run s, which is ranked in its place",
        ),
        (
            &s1,
            "shard 1/2 of the merged run s, which is ranked in its place",
        ),
        (
            &lone,
            "shard 0/2: a part of a run's seeds; merge the shards",
        ),
        (&frames, "a `vlm-eval frames` folder"),
        (&dir.join("notes"), "not a run folder (no run.json)"),
    ] {
        let line = format!("skipped {}: {why}", folder.display());
        assert!(stdout.contains(&line), "{line}\n{stdout}");
    }
    let html = std::fs::read_to_string(dir.join("leaderboard.html")).unwrap();
    assert!(html.contains(r#"<section id="skipped"><h2>Skipped</h2>"#));
    assert!(html.contains("not a run folder (no run.json)"));
    let _ = std::fs::remove_dir_all(&dir);
}
