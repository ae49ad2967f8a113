//! `compare` on real run folders (scripted, random and mock models), every number checked
//! against values computed here from the episode.json files.

use crate::report_support;
use crate::support;

use std::collections::BTreeMap;

use serde_json::Value;

use report_support::*;
use support::{all_text, fresh_dir, vlm_eval};

#[test]
fn compare_table_matches_hand_computed_values() {
    let fx = fixture();
    let d = fresh_dir("main");
    let csv_path = d.join("cmp.csv");
    let o = vlm_eval(&[
        "compare",
        s(&fx.scripted),
        s(&fx.random),
        s(&fx.mock),
        "--csv",
        s(&csv_path),
        "--achievements",
    ]);
    assert!(o.status.success(), "{}", all_text(&o));
    let out = all_text(&o);
    assert!(
        out.contains("progression % ± SE") && out.contains("scripted"),
        "{out}"
    );
    assert!(
        out.contains("gaps below ~8 points are mostly noise"),
        "{out}"
    );
    let rows = read_csv(&csv_path);
    assert_eq!(rows.len(), 3);
    for (row, run) in rows.iter().zip([&fx.scripted, &fx.random, &fx.mock]) {
        let eps = episodes(run);
        let n = eps.len() as f64;
        let prog: Vec<f64> = eps.iter().map(|e| 100.0 * f(&e["progression"])).collect();
        let what = |k: &str| format!("{} {k}", row["run"]);
        assert_eq!(row["run"], run.file_name().unwrap().to_str().unwrap());
        assert_eq!(num(row, "episodes_completed"), n);
        assert_eq!(num(row, "episodes_planned"), n);
        assert_eq!(num(row, "episodes_unfinished"), 0.0);
        close(
            num(row, "progression_mean"),
            mean(&prog),
            1e-4,
            &what("prog"),
        );
        close(num(row, "progression_se"), se(&prog), 1e-4, &what("se"));
        close(
            num(row, "crafter_score"),
            crafter_score(&eps),
            1e-4,
            &what("cs"),
        );
        let ret: Vec<f64> = eps.iter().map(|e| f(&e["episode_return"])).collect();
        close(num(row, "return_mean"), mean(&ret), 1e-4, &what("return"));
        let score: Vec<f64> = eps.iter().map(|e| f(&e["score"])).collect();
        close(num(row, "score_mean"), mean(&score), 1e-4, &what("score"));
        let steps: Vec<f64> = eps.iter().map(|e| f(&e["num_steps"])).collect();
        close(num(row, "steps_mean"), mean(&steps), 1e-2, &what("steps"));
        let deaths = eps.iter().filter(|e| e["termination"] == "death").count() as f64;
        close(num(row, "death_rate"), deaths / n, 1e-4, &what("deaths"));
        let invalid: f64 = eps.iter().map(|e| f(&e["invalid_actions"])).sum();
        let turns: f64 = eps.iter().map(|e| f(&e["turns"])).sum();
        close(
            num(row, "invalid_action_rate"),
            invalid / turns,
            1e-4,
            &what("invalid"),
        );
        let tokens: Option<f64> = eps.iter().map(|e| e["input_tokens"].as_f64()).sum();
        match tokens {
            Some(t) => close(num(row, "input_tokens"), t, 0.0, &what("tokens")),
            None => assert_eq!(row["input_tokens"], "", "{}", what("tokens")),
        }
        let mut calls: Vec<f64> = eps
            .iter()
            .flat_map(|e| e["latency_ms"]["calls"].as_array().unwrap().clone())
            .map(|v| f(&v))
            .collect();
        calls.sort_by(f64::total_cmp);
        let p50 = if calls.is_empty() {
            0.0
        } else if calls.len() % 2 == 1 {
            calls[calls.len() / 2]
        } else {
            (calls[calls.len() / 2 - 1] + calls[calls.len() / 2]) / 2.0
        };
        close(num(row, "latency_p50_ms"), p50, 0.05, &what("latency"));
    }
    // The mock model reports usage, so the tokens column is filled there.
    assert!(num(&rows[2], "input_tokens") > 0.0);
    // Achievement matrix: runs as columns, one row per achievement, rates by hand.
    let ach = read_csv(&d.join("cmp.achievements.csv"));
    assert_eq!(ach.len(), ACHIEVEMENTS);
    let by_hand = rates(&episodes(&fx.random));
    for row in &ach {
        assert_eq!(row.len(), 4, "achievement + 3 runs: {row:?}");
        close(
            num(row, "random"),
            by_hand[&row["achievement"]],
            0.05,
            &row["achievement"],
        );
    }
}

#[test]
fn compare_metrics_selection_and_by_model() {
    let fx = fixture();
    let d = fresh_dir("select");
    let csv_path = d.join("m.csv");
    let o = vlm_eval(&[
        "compare",
        s(&fx.scripted),
        s(&fx.shifted),
        s(&fx.random),
        "--by",
        "model",
        "--metrics",
        "progression,episodes",
        "--csv",
        s(&csv_path),
    ]);
    assert!(o.status.success(), "{}", all_text(&o));
    let rows = read_csv(&csv_path);
    let header: Vec<&String> = rows[0].keys().collect();
    let mut want = vec![
        "model",
        "runs",
        "progression_mean",
        "progression_se",
        "episodes_completed",
        "episodes_errors",
        "episodes_unfinished",
        "episodes_planned",
        "protocol_differs",
    ];
    want.sort();
    assert_eq!(header, want);
    assert_eq!(rows.len(), 2, "scripted runs pooled into one row");
    assert_eq!(rows[0]["model"], "scripted");
    assert_eq!(rows[0]["runs"], "2");
    // Seeds 3, 4, 5 are in both scripted runs: each counts once, from the first run given.
    let first = episodes(&fx.scripted);
    let pooled: Vec<f64> = first
        .iter()
        .chain(
            episodes(&fx.shifted)
                .iter()
                .filter(|e| !first.iter().any(|b| b["seed"] == e["seed"])),
        )
        .map(|e| 100.0 * f(&e["progression"]))
        .collect();
    assert_eq!(pooled.len(), 9);
    assert_eq!(num(&rows[0], "episodes_completed"), 9.0);
    assert!(
        all_text(&o).contains("repeats seed(s) 3, 4, 5"),
        "{}",
        all_text(&o)
    );
    close(
        num(&rows[0], "progression_mean"),
        mean(&pooled),
        1e-4,
        "pooled",
    );
    close(
        num(&rows[0], "progression_se"),
        se(&pooled),
        1e-4,
        "pooled se",
    );

    let o = vlm_eval(&["compare", s(&fx.scripted), "--metrics", "progression,bogus"]);
    assert_eq!(o.status.code(), Some(2), "{}", all_text(&o));
    let msg = all_text(&o);
    assert!(
        msg.contains("bogus") && msg.contains("crafter_score") && msg.contains("latency_p50"),
        "{msg}"
    );
}

/// Two-sided sign-flip p-value by brute force on integer score differences (exact).
fn sign_flip_by_hand(k: &[i64]) -> f64 {
    let observed: i64 = k.iter().sum::<i64>().abs();
    let n = k.len();
    let hits = (0..1u32 << n)
        .filter(|mask| {
            let s: i64 = (0..n)
                .map(|i| if mask >> i & 1 == 1 { -k[i] } else { k[i] })
                .sum();
            s.abs() >= observed
        })
        .count();
    hits as f64 / (1u64 << n) as f64
}

#[test]
fn paired_compare_matches_hand_computed_deltas() {
    let fx = fixture();
    let d = fresh_dir("paired");
    let csv_path = d.join("p.csv");
    let o = vlm_eval(&[
        "compare",
        s(&fx.scripted),
        s(&fx.random),
        s(&fx.shifted),
        "--paired",
        "--csv",
        s(&csv_path),
    ]);
    assert!(o.status.success(), "{}", all_text(&o));
    let out = all_text(&o);
    assert!(
        out.contains("seed sets differ: shifted and scripted share 3 seeds (3 only in shifted, 3 only in scripted)"),
        "{out}"
    );
    assert!(out.contains("mostly noise"), "{out}");
    let rows = read_csv(&d.join("p.paired.csv"));
    assert_eq!(rows.len(), 2);
    let base: BTreeMap<i64, Value> = episodes(&fx.scripted)
        .into_iter()
        .map(|e| (e["seed"].as_i64().unwrap(), e))
        .collect();
    for (row, run, shared) in [(&rows[0], &fx.random, 6), (&rows[1], &fx.shifted, 3)] {
        let pairs: Vec<(Value, Value)> = episodes(run)
            .into_iter()
            .filter_map(|e| {
                base.get(&e["seed"].as_i64().unwrap())
                    .map(|b| (b.clone(), e))
            })
            .collect();
        assert_eq!(pairs.len(), shared);
        assert_eq!(num(row, "shared_seeds"), shared as f64);
        let k: Vec<i64> = pairs
            .iter()
            .map(|(b, r)| r["score"].as_i64().unwrap() - b["score"].as_i64().unwrap())
            .collect();
        let d: Vec<f64> = k.iter().map(|k| 100.0 * *k as f64 / 22.0).collect();
        let delta = mean(&d);
        close(num(row, "delta"), delta, 1e-4, "delta");
        close(num(row, "p_value"), sign_flip_by_hand(&k), 1e-6, "p");
        assert_eq!(row["p_exact"], "true");
        // A percentile bootstrap interval of a mean lies within the sample's range and, for
        // these samples, around the observed mean.
        let (lo, hi) = (num(row, "ci_low"), num(row, "ci_high"));
        let (min, max) = d
            .iter()
            .fold((f64::MAX, f64::MIN), |(a, b), x| (a.min(*x), b.max(*x)));
        assert!(
            min - 1e-9 <= lo && lo <= delta + 1e-9 && delta <= hi + 1e-9 && hi <= max + 1e-9,
            "{lo} {delta} {hi} in [{min}, {max}]"
        );
    }
    // random vs scripted: every seed is worse, so the exact p is 2 / 2^6.
    assert!(num(&rows[0], "delta") < -20.0);
    close(num(&rows[0], "p_value"), 2.0 / 64.0, 1e-9, "p random");
    // Same seeds and seed → same numbers.
    let before = std::fs::read_to_string(d.join("p.paired.csv")).unwrap();
    let o = vlm_eval(&[
        "compare",
        s(&fx.scripted),
        s(&fx.random),
        s(&fx.shifted),
        "--paired",
        "--csv",
        s(&csv_path),
    ]);
    assert!(o.status.success());
    assert_eq!(
        before,
        std::fs::read_to_string(d.join("p.paired.csv")).unwrap()
    );
}

#[test]
fn compare_reports_partial_missing_and_corrupt_runs() {
    let fx = fixture();
    let d = fresh_dir("bad_compare");
    let partial = d.join("partial");
    copy_dir(&fx.scripted, &partial);
    std::fs::remove_file(partial.join("episodes/seed_5/episode.json")).unwrap();
    let csv_path = d.join("c.csv");
    let o = vlm_eval(&["compare", s(&partial), "--csv", s(&csv_path)]);
    assert!(o.status.success(), "{}", all_text(&o));
    assert!(
        all_text(&o).contains("1 of 6 episodes unfinished (seeds 5)"),
        "{}",
        all_text(&o)
    );
    let row = &read_csv(&csv_path)[0];
    assert_eq!(num(row, "episodes_completed"), 5.0);
    assert_eq!(num(row, "episodes_unfinished"), 1.0);
    let prog: Vec<f64> = episodes(&partial)
        .iter()
        .map(|e| 100.0 * f(&e["progression"]))
        .collect();
    assert_eq!(prog.len(), 5);
    close(
        num(row, "progression_mean"),
        mean(&prog),
        1e-4,
        "partial mean",
    );

    let missing = d.join("nope");
    let o = vlm_eval(&["compare", s(&fx.scripted), s(&missing)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(all_text(&o).contains(s(&missing)), "{}", all_text(&o));

    let corrupt = d.join("corrupt");
    copy_dir(&fx.random, &corrupt);
    std::fs::write(
        corrupt.join("episodes/seed_2/episode.json"),
        "{\"seed\": 2,",
    )
    .unwrap();
    let o = vlm_eval(&["compare", s(&corrupt)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        all_text(&o).contains("seed_2/episode.json"),
        "{}",
        all_text(&o)
    );

    let not_run = d.join("empty_folder");
    std::fs::create_dir_all(&not_run).unwrap();
    let o = vlm_eval(&["compare", s(&not_run)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(all_text(&o).contains("run.json"), "{}", all_text(&o));
}
