//! `run --shard i/n` and `vlm-eval merge`: a 6-seed run split into 3 shards and merged gives the
//! same episodes, frames and summary as the unsharded run; resume works per shard; mismatched
//! configs, duplicate seeds, an existing --out, and missing, partial or corrupt inputs are
//! refused or reported with the file named.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

fn vlm_eval(args: &[&str]) -> Output {
    support::run(
        args,
        &[
            "VLM_EVAL_LOG",
            "SLURM_ARRAY_TASK_ID",
            "JOB_COMPLETION_INDEX",
            "VLM_EVAL_SHARD_COUNT",
        ],
        &[],
    )
}

fn vlm_eval_env(args: &[&str], vars: &[(&str, &str)]) -> Output {
    let remove = [
        "VLM_EVAL_LOG",
        "SLURM_ARRAY_TASK_ID",
        "SLURM_ARRAY_TASK_COUNT",
        "SLURM_ARRAY_TASK_MIN",
        "SLURM_ARRAY_TASK_MAX",
        "JOB_COMPLETION_INDEX",
        "VLM_EVAL_SHARD_COUNT",
    ];
    support::run(args, &remove, vars)
}

/// The error output is one line (`error: …`).
fn one_line(o: &Output) -> String {
    let e = err(o);
    assert_eq!(e.trim().lines().count(), 1, "not one line: {e}");
    e
}

fn tmp(name: &str) -> PathBuf {
    support::fresh_dir(&format!("shard-{name}"))
}

fn ok(o: &Output) {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    )
    .unwrap()
}

fn without(mut v: Value, keys: &[&str]) -> Value {
    for k in keys {
        v.as_object_mut().unwrap().remove(*k);
    }
    v
}

/// Trajectory lines minus the timing fields.
fn trajectory(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| without(serde_json::from_str(l).unwrap(), &["latency_ms"]))
        .collect()
}

const BASE: [&str; 7] = [
    "--model", "scripted", "--seeds", "6", "--steps", "5", "--quiet",
];

fn run(out: &Path, extra: &[&str]) -> Output {
    let mut args: Vec<&str> = BASE.to_vec();
    args.extend_from_slice(&["--out", out.to_str().unwrap()]);
    args.extend_from_slice(extra);
    vlm_eval(&args)
}

fn shard_dir(out: &Path, i: usize) -> PathBuf {
    out.join(format!("scripted_tool_both_64px_5t_shard{i}of3"))
}

fn merge(inputs: &[PathBuf], out: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["merge".to_string()];
    args.extend(inputs.iter().map(|p| p.display().to_string()));
    args.extend(["--out".into(), out.display().to_string()]);
    args.extend(extra.iter().map(|s| s.to_string()));
    vlm_eval(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

#[test]
fn three_shards_merged_equal_the_unsharded_run() {
    let d = tmp("equal");
    ok(&run(&d, &["--run-name", "full"]));
    for i in 0..3 {
        ok(&run(&d, &["--shard", &format!("{i}/3")]));
    }
    // Shard i holds seeds 2i, 2i+1 (contiguous slices), under the default name with the shard.
    for i in 0..3usize {
        let info = read_json(&shard_dir(&d, i).join("run.json"));
        assert_eq!(
            info["config"]["seeds"],
            serde_json::json!({"start": 2 * i, "end": 2 * i + 2})
        );
        assert_eq!(info["config"]["shard"]["index"], i);
        assert_eq!(info["config"]["shard"]["count"], 3);
    }
    let shards: Vec<PathBuf> = (0..3).map(|i| shard_dir(&d, i)).collect();
    let merged = d.join("merged");
    let o = merge(&shards, &merged, &[]);
    ok(&o);
    assert!(String::from_utf8_lossy(&o.stdout).contains("6 episode(s)"));
    let full = d.join("full");
    for seed in 0..6 {
        let (a, b) = (
            full.join(format!("episodes/seed_{seed}")),
            merged.join(format!("episodes/seed_{seed}")),
        );
        let strip = |p: &Path| {
            without(
                read_json(&p.join("episode.json")),
                &["wall_s", "latency_ms"],
            )
        };
        assert_eq!(strip(&a), strip(&b), "seed {seed}");
        assert_eq!(
            trajectory(&a.join("trajectory.jsonl")),
            trajectory(&b.join("trajectory.jsonl"))
        );
        let frames: Vec<_> = std::fs::read_dir(a.join("frames")).unwrap().collect();
        assert!(frames.len() > 1);
        for f in frames {
            let name = f.unwrap().file_name();
            assert!(
                std::fs::read(a.join("frames").join(&name)).unwrap()
                    == std::fs::read(b.join("frames").join(&name)).unwrap(),
                "seed {seed} {name:?}"
            );
        }
    }
    let timing = ["episode_wall_s", "latency_p50_ms", "latency_p95_ms"];
    assert_eq!(
        without(read_json(&full.join("summary.json")), &timing),
        without(read_json(&merged.join("summary.json")), &timing)
    );
    assert_eq!(
        std::fs::read(full.join("achievements.csv")).unwrap(),
        std::fs::read(merged.join("achievements.csv")).unwrap()
    );
    // run.json: the unsharded config (but for the name), and where each part came from.
    let (fi, mi) = (
        read_json(&full.join("run.json")),
        read_json(&merged.join("run.json")),
    );
    assert_eq!(
        without(fi["config"].clone(), &["run_name"]),
        without(mi["config"].clone(), &["run_name"])
    );
    assert_eq!(mi["config"]["run_name"], "merged");
    assert_eq!(mi["merged_from"].as_array().unwrap().len(), 3);
    assert_eq!(mi["episodes_complete"], 6);
    assert_eq!(fi["tools"], mi["tools"]);

    // --out exists: refused without --force, replaced with it (an earlier merge's folder).
    let o = merge(&shards, &merged, &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        err(&o).contains("already exists") && err(&o).contains("--force"),
        "{}",
        err(&o)
    );
    ok(&merge(&shards, &merged, &["--force"]));

    // The merged run is an ordinary run folder: rerunning the unsharded command there resumes
    // (nothing is replayed, so every episode.json stays as it was).
    let before = std::fs::read(merged.join("episodes/seed_3/episode.json")).unwrap();
    ok(&run(&d, &["--run-name", "merged"]));
    assert_eq!(
        std::fs::read(merged.join("episodes/seed_3/episode.json")).unwrap(),
        before
    );
    // A merge never overwrites a run it did not make: not the unsharded run, nor the merged
    // folder once `run` has rewritten it, even with --force.
    for target in [&full, &merged] {
        let o = merge(&shards, target, &["--force"]);
        assert_eq!(o.status.code(), Some(2), "{}", err(&o));
        assert!(one_line(&o).contains("did not make"), "{}", err(&o));
        assert!(target.join("episodes/seed_3/episode.json").is_file());
    }
    // --out may not be (or hold) an input, even with --force.
    let o = merge(&shards, &shards[0], &["--force"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(shards[0].join("run.json").is_file());
    // --force replaces only a run folder or an empty one: a folder of other files, or a file,
    // is refused (exit 2, one line) and left as it was.
    let other = d.join("not_a_run");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("notes.txt"), "keep me").unwrap();
    let file = d.join("a_file.txt");
    std::fs::write(&file, "keep me too").unwrap();
    for target in [&other, &file] {
        let o = merge(&shards, target, &["--force"]);
        assert_eq!(o.status.code(), Some(2), "{}", err(&o));
        assert!(
            err(&o).contains("not a run folder") && err(&o).trim().lines().count() == 1,
            "{}",
            err(&o)
        );
    }
    assert_eq!(
        std::fs::read_to_string(other.join("notes.txt")).unwrap(),
        "keep me"
    );
    assert!(file.is_file());
    let empty = d.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    ok(&merge(&shards, &empty, &["--force"]));
    assert!(empty.join("run.json").is_file());
}

#[test]
fn resume_per_shard_and_config_file_shard() {
    let d = tmp("resume");
    ok(&run(&d, &["--shard", "1/3"]));
    let dir = shard_dir(&d, 1);
    let kept = std::fs::read(dir.join("episodes/seed_2/episode.json")).unwrap();
    let redo = read_json(&dir.join("episodes/seed_3/episode.json"));
    std::fs::remove_file(dir.join("episodes/seed_3/episode.json")).unwrap();
    // The same shard from a config file resumes the same folder: seed 2 is kept byte for byte,
    // seed 3 is played again with the same outcome.
    let cfg = d.join("shard.toml");
    std::fs::write(&cfg, "shard = \"1/3\"\n").unwrap();
    ok(&run(&d, &["--config", cfg.to_str().unwrap()]));
    assert_eq!(
        std::fs::read(dir.join("episodes/seed_2/episode.json")).unwrap(),
        kept
    );
    let again = read_json(&dir.join("episodes/seed_3/episode.json"));
    assert_eq!(
        without(again, &["wall_s", "latency_ms"]),
        without(redo, &["wall_s", "latency_ms"])
    );
    assert_eq!(std::fs::read_dir(dir.join("episodes")).unwrap().count(), 2);

    for (shard, needle) in [
        ("3/3", "i/n"),
        ("1/0", "i/n"),
        ("x", "i/n"),
        ("6/7", "no seeds"),
    ] {
        let o = run(&d, &["--shard", shard]);
        assert_eq!(o.status.code(), Some(2), "{shard}");
        assert!(err(&o).contains(needle), "{shard}: {}", err(&o));
    }
    std::fs::write(&cfg, "shard = \"5/2\"\n").unwrap();
    let o = run(&d, &["--config", cfg.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(err(&o).contains("shard.toml"), "{}", err(&o));
}

#[test]
fn bad_inputs_are_refused_naming_the_files() {
    let d = tmp("bad");
    for i in 0..3 {
        ok(&run(&d, &["--shard", &format!("{i}/3")]));
    }
    let shards: Vec<PathBuf> = (0..3).map(|i| shard_dir(&d, i)).collect();
    let out = d.join("m");

    // A shard made with other settings.
    ok(&run(
        &d,
        &["--shard", "2/3", "--history", "2", "--run-name", "other"],
    ));
    let o = merge(&[shards[0].clone(), d.join("other")], &out, &[]);
    assert_eq!(o.status.code(), Some(2));
    let e = err(&o);
    assert!(
        e.contains("other/run.json")
            && e.contains("shard0of3/run.json")
            && e.contains("config.history 2 vs 3"),
        "{e}"
    );
    // The same seed in two inputs.
    ok(&run(&d, &["--shard", "2/3", "--run-name", "again"]));
    let o = merge(&[shards[2].clone(), d.join("again")], &out, &[]);
    assert_eq!(o.status.code(), Some(2));
    let e = err(&o);
    assert!(
        e.contains("seed 4")
            && e.contains("shard2of3/episodes/seed_4/episode.json")
            && e.contains("again/episodes/seed_4/episode.json"),
        "{e}"
    );
    // Missing and corrupt inputs.
    let o = merge(&[shards[0].clone(), d.join("missing")], &out, &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        err(&o).contains("missing") && err(&o).contains("no such folder"),
        "{}",
        err(&o)
    );
    std::fs::write(
        shards[1].join("episodes/seed_2/episode.json"),
        "{\"seed\": 2,",
    )
    .unwrap();
    let o = merge(&shards, &out, &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(err(&o).contains("seed_2/episode.json"), "{}", err(&o));
    assert!(!out.exists(), "nothing written when an input is bad");

    // A partial shard and a missing one: merge refuses, naming the seeds (one line, nothing
    // written); --check says which shards to resubmit; --allow-missing merges what is there.
    std::fs::remove_file(shards[1].join("episodes/seed_2/episode.json")).unwrap();
    let o = merge(&shards[..2], &out, &[]);
    assert_eq!(o.status.code(), Some(2));
    let e = one_line(&o);
    assert!(
        e.contains("[2, 4, 5]") && e.contains("1/3, 2/3") && e.contains("--allow-missing"),
        "{e}"
    );
    assert!(!out.exists());
    let o = merge(&shards[..2], Path::new("unused"), &["--check"]);
    assert_eq!(o.status.code(), Some(2), "--check takes no --out");
    let o = vlm_eval(&[
        "merge",
        "--check",
        shards[0].to_str().unwrap(),
        shards[1].to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    let report = String::from_utf8_lossy(&o.stdout).into_owned();
    let lines: Vec<&str> = report.lines().collect();
    assert!(
        lines[0].starts_with("shard 0/3: 2/2 episode(s) done, complete"),
        "{report}"
    );
    assert!(
        lines[1].starts_with("shard 1/3: 1/2 episode(s) done, unfinished seeds [2]"),
        "{report}"
    );
    assert!(
        lines[2].starts_with("shard 2/3: 0/2 episode(s) done, missing: no folder"),
        "{report}"
    );
    assert!(report.contains("missing seeds: [2, 4, 5]"), "{report}");
    assert!(
        report.contains("sbatch --array=1,2 --export=ALL,VLM_EVAL_SHARD_COUNT=3 "),
        "{report}"
    );
    assert!(!out.exists());
    let o = merge(&shards[..2], &out, &["--allow-missing"]);
    ok(&o);
    let e = err(&o);
    assert!(
        e.contains("1 unfinished episode(s) not copied (seeds [2])"),
        "{e}"
    );
    assert!(
        e.contains("no input planned") && e.contains("[4, 5]"),
        "{e}"
    );
    let summary = read_json(&out.join("summary.json"));
    assert_eq!(summary["seeds"], serde_json::json!([0, 1, 3]));
    assert!(!out.join("episodes/seed_2").exists());
    let info = read_json(&out.join("run.json"));
    assert_eq!(
        info["config"]["seeds"],
        serde_json::json!({"start": 0, "end": 4})
    );
}

#[test]
fn shard_auto_reads_the_scheduler_environment() {
    let d = tmp("auto");
    // Outside a scheduler: exit 2, one line, nothing written.
    let o = run(&d, &["--shard", "auto"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        one_line(&o).contains("neither SLURM_ARRAY_TASK_ID"),
        "{}",
        err(&o)
    );
    assert!(std::fs::read_dir(&d).unwrap().next().is_none());

    let args = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = BASE.iter().map(|s| s.to_string()).collect();
        v.extend(["--out".into(), d.display().to_string()]);
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let go = |extra: &[&str], vars: &[(&str, &str)]| {
        let a = args(extra);
        vlm_eval_env(&a.iter().map(String::as_str).collect::<Vec<_>>(), vars)
    };
    // A whole Slurm array of 3: task 1 plays shard 1/3 (seeds 2, 3) like `--shard 1/3`.
    let slurm = |id: &'static str, count, min, max| {
        [
            ("SLURM_ARRAY_TASK_ID", id),
            ("SLURM_ARRAY_TASK_COUNT", count),
            ("SLURM_ARRAY_TASK_MIN", min),
            ("SLURM_ARRAY_TASK_MAX", max),
        ]
    };
    ok(&go(&["--shard", "auto"], &slurm("1", "3", "0", "2")));
    let info = read_json(&shard_dir(&d, 1).join("run.json"));
    assert_eq!(
        info["config"]["seeds"],
        serde_json::json!({"start": 2, "end": 4})
    );
    assert_eq!(
        info["shard_from"],
        serde_json::json!({"index": "SLURM_ARRAY_TASK_ID", "count": "SLURM_ARRAY_TASK_COUNT"})
    );
    // A resubmitted subset (`--array=2`): its task count is 1, so the original count must be
    // given; with it, shard 2/3 plays seeds 4, 5.
    let o = go(&["--shard", "auto"], &slurm("2", "1", "2", "2"));
    assert_eq!(o.status.code(), Some(2));
    assert!(one_line(&o).contains("VLM_EVAL_SHARD_COUNT"), "{}", err(&o));
    let mut vars = slurm("2", "1", "2", "2").to_vec();
    vars.push(("VLM_EVAL_SHARD_COUNT", "3"));
    ok(&go(&["--shard", "auto"], &vars));
    let info = read_json(&shard_dir(&d, 2).join("run.json"));
    assert_eq!(
        info["config"]["seeds"],
        serde_json::json!({"start": 4, "end": 6})
    );
    assert_eq!(info["shard_from"]["count"], "VLM_EVAL_SHARD_COUNT");
    // Kubernetes: the index from JOB_COMPLETION_INDEX, the count from auto/N; a config file's
    // `shard = "auto/3"` works the same.
    let cfg = d.join("auto.toml");
    std::fs::write(&cfg, "shard = \"auto/3\"\n").unwrap();
    ok(&go(
        &["--config", cfg.to_str().unwrap()],
        &[("JOB_COMPLETION_INDEX", "0")],
    ));
    let info = read_json(&shard_dir(&d, 0).join("run.json"));
    assert_eq!(
        info["config"]["seeds"],
        serde_json::json!({"start": 0, "end": 2})
    );
    assert_eq!(info["shard_from"]["index"], "JOB_COMPLETION_INDEX");
    // Out of range, a count that disagrees, a count not given: exit 2, one line each.
    for (extra, vars, needle) in [
        (
            "auto/3",
            vec![("JOB_COMPLETION_INDEX", "3")],
            "out of range",
        ),
        (
            "auto/3",
            vec![("JOB_COMPLETION_INDEX", "1"), ("VLM_EVAL_SHARD_COUNT", "4")],
            "disagrees",
        ),
        ("auto", vec![("JOB_COMPLETION_INDEX", "1")], "count is not"),
    ] {
        let o = go(&["--shard", extra], &vars);
        assert_eq!(o.status.code(), Some(2), "{extra} {vars:?}");
        assert!(one_line(&o).contains(needle), "{}", err(&o));
    }
    // The shards made from the environment merge like any others.
    let shards: Vec<PathBuf> = (0..3).map(|i| shard_dir(&d, i)).collect();
    let merged = d.join("merged");
    ok(&merge(&shards, &merged, &[]));
    let mi = read_json(&merged.join("run.json"));
    assert!(mi.get("shard_from").is_none());
    assert_eq!(mi["episodes_complete"], 6);
    let o = vlm_eval(&[
        "merge",
        "--check",
        shards[0].to_str().unwrap(),
        shards[1].to_str().unwrap(),
        shards[2].to_str().unwrap(),
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
}

#[test]
fn merge_names_a_shard_count_that_disagrees_and_errored_seeds() {
    let d = tmp("count");
    ok(&run(&d, &["--shard", "0/3"]));
    ok(&run(&d, &["--shard", "1/2"]));
    let other = d.join("scripted_tool_both_64px_5t_shard1of2");
    for extra in [&[][..], &["--allow-missing"][..]] {
        let o = merge(&[shard_dir(&d, 0), other.clone()], &d.join("m"), extra);
        assert_eq!(o.status.code(), Some(2));
        let e = one_line(&o);
        assert!(
            e.contains("shard1of2") && e.contains("shard 1/2") && e.contains("one of 3 shards"),
            "{e}"
        );
    }
    // An episode that ended in an error is kept by a merge but reported by --check, whose
    // shard is to be resubmitted (a rerun plays it again).
    for i in 1..3 {
        ok(&run(&d, &["--shard", &format!("{i}/3")]));
    }
    let ep = shard_dir(&d, 1).join("episodes/seed_3/episode.json");
    let mut v = read_json(&ep);
    v["termination"] = serde_json::json!("error");
    std::fs::write(&ep, serde_json::to_string(&v).unwrap()).unwrap();
    let dirs: Vec<String> = (0..3)
        .map(|i| shard_dir(&d, i).display().to_string())
        .collect();
    let mut args = vec!["merge", "--check"];
    args.extend(dirs.iter().map(String::as_str));
    let o = vlm_eval(&args);
    assert_eq!(o.status.code(), Some(1));
    let report = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        report.contains("shard 1/3: 1/2 episode(s) done, errored seeds [3]")
            && report.contains("--array=1 "),
        "{report}"
    );
}
