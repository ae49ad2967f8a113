//! `run --shard i/n` and `vlm-eval merge`: a 6-seed run split into 3 shards and merged gives the
//! same episodes, frames and summary as the unsharded run; resume works per shard; mismatched
//! configs, duplicate seeds, an existing --out, and missing, partial or corrupt inputs are
//! refused or reported with the file named.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn vlm_eval(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vlm-eval"))
        .args(args)
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("VLM_EVAL_LOG")
        .output()
        .expect("run vlm-eval")
}

fn tmp(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("shard-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
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
            serde_json::json!([2 * i, 2 * i + 1])
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

    // The merged run is an ordinary run folder: rerunning the unsharded command there resumes
    // (nothing is replayed, so every episode.json stays as it was).
    let before = std::fs::read(merged.join("episodes/seed_3/episode.json")).unwrap();
    ok(&run(&d, &["--run-name", "merged"]));
    assert_eq!(
        std::fs::read(merged.join("episodes/seed_3/episode.json")).unwrap(),
        before
    );

    // --out exists: refused without --force, replaced with it.
    let o = merge(&shards, &merged, &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        err(&o).contains("already exists") && err(&o).contains("--force"),
        "{}",
        err(&o)
    );
    ok(&merge(&shards, &merged, &["--force"]));
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

    // A partial shard: its unfinished episode is not copied, with a warning; a missing shard
    // is reported as seeds no input planned.
    std::fs::remove_file(shards[1].join("episodes/seed_2/episode.json")).unwrap();
    let o = merge(&shards[..2], &out, &[]);
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
    assert_eq!(info["config"]["seeds"], serde_json::json!([0, 1, 2, 3]));
}
