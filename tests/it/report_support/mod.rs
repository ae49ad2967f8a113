//! Shared helpers of the report-command tests: real run folders made once per test binary and
//! hand computations from episode.json files. Built on `tests/support` (the binary, scratch
//! folders, output as text): a test binary using it also declares `mod support;`.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;

use serde_json::Value;

use crate::support::{all_text, fresh_dir, vlm_eval};

pub const ACHIEVEMENTS: usize = 22;

pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Run folders shared by the tests (made once per test binary).
pub struct Fixture {
    /// Folder holding the runs.
    pub root: PathBuf,
    /// scripted, seeds 0..5, 25 turns.
    pub scripted: PathBuf,
    /// random, seeds 0..5, 25 turns.
    pub random: PathBuf,
    /// scripted on seeds 3..9: shares 3, 4, 5 with `scripted`.
    pub shifted: PathBuf,
    /// mock (the scripted policy over HTTP), seeds 0..5, 25 turns.
    pub mock: PathBuf,
}

pub fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let root = fresh_dir("runs");
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
            let o = vlm_eval(&all);
            assert!(o.status.success(), "{name}: {}", all_text(&o));
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

pub fn episodes(run: &Path) -> Vec<Value> {
    let mut out: Vec<Value> = std::fs::read_dir(run.join("episodes"))
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.unwrap().path().join("episode.json")).ok())
        .map(|t| serde_json::from_str(&t).unwrap())
        .collect();
    out.sort_by_key(|e| e["seed"].as_i64().unwrap());
    out
}

pub fn f(v: &Value) -> f64 {
    v.as_f64().unwrap()
}

pub fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// SE with the sample standard deviation, from the textbook formula.
pub fn se(xs: &[f64]) -> f64 {
    let m = mean(xs);
    let ss: f64 = xs.iter().map(|x| (x - m).powi(2)).sum();
    (ss / (xs.len() - 1) as f64).sqrt() / (xs.len() as f64).sqrt()
}

/// Unlock rate (percent) per achievement name.
pub fn rates(eps: &[Value]) -> BTreeMap<String, f64> {
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
pub fn crafter_score(eps: &[Value]) -> f64 {
    let r = rates(eps);
    assert_eq!(r.len(), ACHIEVEMENTS);
    (r.values().map(|s| (1.0 + s).ln()).sum::<f64>() / ACHIEVEMENTS as f64).exp() - 1.0
}

pub fn read_csv(path: &Path) -> Vec<BTreeMap<String, String>> {
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

pub fn num(row: &BTreeMap<String, String>, key: &str) -> f64 {
    row[key]
        .parse()
        .unwrap_or_else(|_| panic!("{key}={:?}", row[key]))
}

pub fn close(a: f64, b: f64, tol: f64, what: &str) {
    assert!((a - b).abs() <= tol, "{what}: {a} vs {b}");
}

pub fn copy_dir(from: &Path, to: &Path) {
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

/// The cells of the Markdown table row of a metric.
pub fn verdict_row(out: &str, metric: &str) -> Vec<String> {
    let line = out
        .lines()
        .find(|l| l.starts_with(&format!("| {metric} (")))
        .unwrap_or_else(|| panic!("no row for {metric}:\n{out}"));
    line.trim_matches('|')
        .split('|')
        .map(|c| c.trim().to_string())
        .collect()
}

pub fn check(baseline: &Path, run: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["check", "--baseline", s(baseline), "--run", s(run)];
    args.extend(extra);
    vlm_eval(&args)
}

pub fn prog_of(run: &Path) -> Vec<f64> {
    episodes(run)
        .iter()
        .map(|e| 100.0 * f(&e["progression"]))
        .collect()
}
