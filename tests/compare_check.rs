//! `compare`, `check` and `baseline save` on real run folders (scripted, random and mock
//! models), with every number checked against values computed here from the episode.json files.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use serde_json::Value;

const ACHIEVEMENTS: usize = 22;

fn vlm_eval(args: &[&str], envs: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_vlm-eval"));
    cmd.args(args)
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("GITHUB_STEP_SUMMARY");
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd.output().expect("run vlm-eval")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Run folders shared by the tests (made once per test binary).
struct Fixture {
    root: PathBuf,
    scripted: PathBuf,
    random: PathBuf,
    /// scripted on seeds 3..9: shares 3, 4, 5 with `scripted`.
    shifted: PathBuf,
    mock: PathBuf,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("compare_check");
        let _ = std::fs::remove_dir_all(&root);
        let runs: [(&str, &[&str]); 4] = [
            (
                "scripted",
                &["--model", "scripted", "--seeds", "6", "--steps", "25"],
            ),
            (
                "random",
                &["--model", "random", "--seeds", "6", "--steps", "25"],
            ),
            (
                "shifted",
                &[
                    "--model",
                    "scripted",
                    "--seed-list",
                    "3,4,5,6,7,8",
                    "--steps",
                    "25",
                ],
            ),
            (
                "mock",
                &["--model", "mock", "--seeds", "6", "--steps", "25"],
            ),
        ];
        for (name, args) in runs {
            let mut all = args.to_vec();
            all.extend(["--out", s(&root), "--run-name", name, "--quiet"]);
            let o = vlm_eval(&all, &[]);
            assert!(o.status.success(), "{name}: {}", text(&o));
        }
        Fixture {
            scripted: root.join("scripted"),
            random: root.join("random"),
            shifted: root.join("shifted"),
            mock: root.join("mock"),
            root,
        }
    })
}

fn scratch(name: &str) -> PathBuf {
    let d = fixture().root.join("scratch").join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn episodes(run: &Path) -> Vec<Value> {
    let mut out: Vec<Value> = std::fs::read_dir(run.join("episodes"))
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.unwrap().path().join("episode.json")).ok())
        .map(|t| serde_json::from_str(&t).unwrap())
        .collect();
    out.sort_by_key(|e| e["seed"].as_i64().unwrap());
    out
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap()
}

fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// SE with the sample standard deviation, from the textbook formula.
fn se(xs: &[f64]) -> f64 {
    let m = mean(xs);
    let ss: f64 = xs.iter().map(|x| (x - m).powi(2)).sum();
    (ss / (xs.len() - 1) as f64).sqrt() / (xs.len() as f64).sqrt()
}

/// Unlock rate (percent) per achievement name.
fn rates(eps: &[Value]) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for (name, _) in eps[0]["achievements"].as_object().unwrap() {
        let k = eps
            .iter()
            .filter(|e| e["achievements"][name].as_u64().unwrap() > 0)
            .count();
        out.insert(name.clone(), 100.0 * k as f64 / eps.len() as f64);
    }
    out
}

/// Crafter score: exp(mean ln(1 + s_i)) − 1 over the 22 rates in percent.
fn crafter_score(eps: &[Value]) -> f64 {
    let r = rates(eps);
    assert_eq!(r.len(), ACHIEVEMENTS);
    (r.values().map(|s| (1.0 + s).ln()).sum::<f64>() / ACHIEVEMENTS as f64).exp() - 1.0
}

fn read_csv(path: &Path) -> Vec<BTreeMap<String, String>> {
    let mut r = csv::Reader::from_path(path).unwrap();
    let header: Vec<String> = r.headers().unwrap().iter().map(String::from).collect();
    r.records()
        .map(|rec| {
            header
                .iter()
                .cloned()
                .zip(rec.unwrap().iter().map(String::from))
                .collect()
        })
        .collect()
}

fn num(row: &BTreeMap<String, String>, key: &str) -> f64 {
    row[key]
        .parse()
        .unwrap_or_else(|_| panic!("{key}={:?}", row[key]))
}

fn close(a: f64, b: f64, tol: f64, what: &str) {
    assert!((a - b).abs() <= tol, "{what}: {a} vs {b}");
}

#[test]
fn compare_table_matches_hand_computed_values() {
    let fx = fixture();
    let d = scratch("main");
    let csv_path = d.join("cmp.csv");
    let o = vlm_eval(
        &[
            "compare",
            s(&fx.scripted),
            s(&fx.random),
            s(&fx.mock),
            "--csv",
            s(&csv_path),
            "--achievements",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));
    let out = text(&o);
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
    let d = scratch("select");
    let csv_path = d.join("m.csv");
    let o = vlm_eval(
        &[
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
        ],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));
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
    ];
    want.sort();
    assert_eq!(header, want);
    assert_eq!(rows.len(), 2, "scripted runs pooled into one row");
    assert_eq!(rows[0]["model"], "scripted");
    assert_eq!(rows[0]["runs"], "2");
    let pooled: Vec<f64> = episodes(&fx.scripted)
        .iter()
        .chain(episodes(&fx.shifted).iter())
        .map(|e| 100.0 * f(&e["progression"]))
        .collect();
    assert_eq!(num(&rows[0], "episodes_completed"), 12.0);
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

    let o = vlm_eval(
        &["compare", s(&fx.scripted), "--metrics", "progression,bogus"],
        &[],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let msg = text(&o);
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
    let d = scratch("paired");
    let csv_path = d.join("p.csv");
    let o = vlm_eval(
        &[
            "compare",
            s(&fx.scripted),
            s(&fx.random),
            s(&fx.shifted),
            "--paired",
            "--csv",
            s(&csv_path),
        ],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));
    let out = text(&o);
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
    let o = vlm_eval(
        &[
            "compare",
            s(&fx.scripted),
            s(&fx.random),
            s(&fx.shifted),
            "--paired",
            "--csv",
            s(&csv_path),
        ],
        &[],
    );
    assert!(o.status.success());
    assert_eq!(
        before,
        std::fs::read_to_string(d.join("p.paired.csv")).unwrap()
    );
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            if e.file_name() != "frames" {
                copy_dir(&e.path(), &target);
            }
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

#[test]
fn compare_reports_partial_missing_and_corrupt_runs() {
    let fx = fixture();
    let d = scratch("bad_compare");
    let partial = d.join("partial");
    copy_dir(&fx.scripted, &partial);
    std::fs::remove_file(partial.join("episodes/seed_5/episode.json")).unwrap();
    let csv_path = d.join("c.csv");
    let o = vlm_eval(&["compare", s(&partial), "--csv", s(&csv_path)], &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("1 of 6 episodes unfinished (seeds 5)"),
        "{}",
        text(&o)
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
    let o = vlm_eval(&["compare", s(&fx.scripted), s(&missing)], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains(s(&missing)), "{}", text(&o));

    let corrupt = d.join("corrupt");
    copy_dir(&fx.random, &corrupt);
    std::fs::write(
        corrupt.join("episodes/seed_2/episode.json"),
        "{\"seed\": 2,",
    )
    .unwrap();
    let o = vlm_eval(&["compare", s(&corrupt)], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("seed_2/episode.json"), "{}", text(&o));

    let not_run = d.join("empty_folder");
    std::fs::create_dir_all(&not_run).unwrap();
    let o = vlm_eval(&["compare", s(&not_run)], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("run.json"), "{}", text(&o));
}

/// The cells of the Markdown table row of a metric.
fn verdict_row(out: &str, metric: &str) -> Vec<String> {
    let line = out
        .lines()
        .find(|l| l.starts_with(&format!("| {metric} (")))
        .unwrap_or_else(|| panic!("no row for {metric}:\n{out}"));
    line.trim_matches('|')
        .split('|')
        .map(|c| c.trim().to_string())
        .collect()
}

fn check(baseline: &Path, run: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["check", "--baseline", s(baseline), "--run", s(run)];
    args.extend(extra);
    vlm_eval(&args, &[])
}

#[test]
fn check_passes_on_itself_and_fails_random_against_scripted() {
    let fx = fixture();
    let o = check(
        &fx.scripted,
        &fx.scripted,
        &["--metric", "progression,crafter_score,return"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = text(&o);
    assert!(out.contains("### vlm-eval check: PASS"), "{out}");
    let row = verdict_row(&out, "progression");
    assert_eq!(row[3], "0.00");
    assert_eq!(row[7], "6", "n shared");

    let o = check(&fx.scripted, &fx.random, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let out = text(&o);
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
    let d = scratch("gate");
    let file = d.join("baseline.json");
    let o = vlm_eval(&["baseline", "save", s(&fx.scripted), s(&file)], &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(check(&file, &fx.scripted, &[]).status.code(), Some(0));
    let o = check(&file, &fx.random, &["--metric", "crafter_score"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    // The mock model plays the scripted policy through the HTTP client: same seeds, same play.
    let o = check(&file, &fx.mock, &["--metric", "progression,crafter_score"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(verdict_row(&text(&o), "progression")[3], "0.00");
}

fn prog_of(run: &Path) -> Vec<f64> {
    episodes(run)
        .iter()
        .map(|e| 100.0 * f(&e["progression"]))
        .collect()
}

#[test]
fn summary_json_baseline_uses_the_normal_approximation() {
    let fx = fixture();
    let summary = fx.scripted.join("summary.json");
    let o = check(&summary, &fx.random, &["--confidence", "0.9"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let out = text(&o);
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
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // No SE for the return in summary.json → bad input, with the fix named.
    let o = check(&summary, &fx.random, &["--metric", "return"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("baseline save"), "{}", text(&o));
}

#[test]
fn baseline_file_holds_per_seed_values() {
    let fx = fixture();
    let d = scratch("baseline_file");
    let file = d.join("b.json");
    let o = vlm_eval(&["baseline", "save", s(&fx.random), s(&file)], &[]);
    assert!(o.status.success(), "{}", text(&o));
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
    assert!(
        vlm_eval(&["baseline", "save", s(&fx.random), s(&again)], &[])
            .status
            .success()
    );
    assert_eq!(
        std::fs::read(&file).unwrap(),
        std::fs::read(&again).unwrap()
    );
}

#[test]
fn check_bad_inputs_exit_2_naming_the_file() {
    let fx = fixture();
    let d = scratch("bad_check");
    let cases: Vec<(PathBuf, &str)> = vec![
        (d.join("missing.json"), "not found"),
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
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        let msg = text(&o);
        assert!(msg.contains(s(path)) && msg.contains(why), "{why}: {msg}");
    }
    // --run must be a complete run folder.
    let partial = d.join("partial");
    copy_dir(&fx.random, &partial);
    std::fs::remove_file(partial.join("episodes/seed_0/episode.json")).unwrap();
    let o = check(&fx.scripted, &partial, &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("partial run") && text(&o).contains(s(&partial)),
        "{}",
        text(&o)
    );
    let o = check(&fx.scripted, &partial, &["--allow-partial"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let o = check(&partial, &fx.random, &[]);
    assert_eq!(o.status.code(), Some(2), "partial baseline: {}", text(&o));
    let o = vlm_eval(
        &["baseline", "save", s(&partial), s(&d.join("x.json"))],
        &[],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let o = check(&fx.scripted, &fx.scripted.join("summary.json"), &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("not a folder"), "{}", text(&o));
    // Bad flags.
    for extra in [
        &["--metric", "speed"][..],
        &["--confidence", "1.5"],
        &["--max-drop=-1"],
        &["--metric", "progression,score", "--max-drop", "1,2,3"],
    ] {
        let o = check(&fx.scripted, &fx.scripted, extra);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {}", text(&o));
    }
}

#[test]
fn junit_and_step_summary() {
    let fx = fixture();
    let d = scratch("junit");
    let xml = d.join("out/check.xml");
    let summary = d.join("step_summary.md");
    std::fs::write(&summary, "earlier step\n").unwrap();
    let o = vlm_eval(
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
        &[("GITHUB_STEP_SUMMARY", s(&summary))],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
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

/// The README's workflows: valid YAML, and the mock gate passes against the committed baseline
/// with the same commands.
#[test]
fn readme_gate_workflows() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
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
    let d = scratch("readme");
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
    let o = vlm_eval(
        &[
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
        ],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));
    let o = check(
        &root.join(".ci/baseline-mock.json"),
        &d.join("ci"),
        &["--metric", "progression,crafter_score", "--max-drop", "0"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(verdict_row(&text(&o), "progression")[3], "0.00");
}
