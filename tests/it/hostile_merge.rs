//! Hostile input for `vlm-eval merge` (and the run folder's writers): damaged episodes are refused
//! before anything is copied, one line naming the file and what differs; an input given twice is
//! named once; a merge killed (SIGKILL) at any of its steps is redone by `merge --force` into the
//! same folder an uninterrupted merge makes; a full disk leaves no temporary file behind; and a
//! resumed run folder of other settings names the setting that differs.

use crate::support;

use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

const BASE: [&str; 8] = [
    "--model",
    "scripted",
    "--seeds",
    "4",
    "--steps",
    "3",
    "--quiet",
    "--run-name",
];

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn all(o: &Output) -> String {
    support::all_text(o)
}

fn ok(o: &Output) {
    assert!(o.status.success(), "{}", all(o));
}

/// Exit 2 with exactly one line on stderr; returns it.
fn refused(o: &Output) -> String {
    assert_eq!(o.status.code(), Some(2), "{}", all(o));
    let e = err(o);
    assert_eq!(e.trim().lines().count(), 1, "not one line: {e}");
    e
}

/// Two shards (seeds 0, 1 and 2, 3) of a 4-seed scripted run, made once in `d`.
fn shards(d: &Path) -> Vec<PathBuf> {
    (0..2)
        .map(|i| {
            let name = format!("part{i}");
            let shard = format!("{i}/2");
            let mut args: Vec<&str> = BASE.to_vec();
            args.extend([
                name.as_str(),
                "--shard",
                &shard,
                "--out",
                d.to_str().unwrap(),
            ]);
            ok(&support::vlm_eval(&args));
            d.join(&name)
        })
        .collect()
}

fn merge(inputs: &[PathBuf], out: &Path, extra: &[&str], env: &[(&str, &str)]) -> Output {
    let mut args = vec!["merge".to_string()];
    args.extend(inputs.iter().map(|p| p.display().to_string()));
    args.extend(["--out".into(), out.display().to_string()]);
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    support::run(&args, &["VLM_EVAL_MERGE_KILL_AT"], env)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let t = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &t);
        } else {
            std::fs::copy(e.path(), &t).unwrap();
        }
    }
}

/// Every file under `dir` by relative path, with its bytes (run.json without `merged_at`, the
/// one field that is the clock).
fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            if e.file_type().unwrap().is_dir() {
                walk(root, &p, out);
                continue;
            }
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            let mut bytes = std::fs::read(&p).unwrap();
            if rel == "run.json" {
                let mut v: Value = serde_json::from_slice(&bytes).unwrap();
                v.as_object_mut().unwrap().remove("merged_at");
                bytes = serde_json::to_vec(&v).unwrap();
            }
            out.insert(rel, bytes);
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// Two trees are the same: the same files with the same bytes (naming the ones that differ).
fn same_tree(got: &BTreeMap<String, Vec<u8>>, want: &BTreeMap<String, Vec<u8>>, what: &str) {
    let keys: std::collections::BTreeSet<&String> = got.keys().chain(want.keys()).collect();
    let differ: Vec<&String> = keys
        .into_iter()
        .filter(|k| got.get(*k) != want.get(*k))
        .collect();
    assert!(differ.is_empty(), "{what}: these files differ: {differ:?}");
}

/// The names in a folder (hidden ones included).
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn damaged_episodes_are_refused_before_anything_is_copied() {
    let d = support::fresh_dir("damaged");
    let parts = shards(&d);
    let out = d.join("merged");
    // Sanity: the shards as written merge (and are then removed, to test the refusals).
    ok(&merge(&parts, &out, &[], &[]));
    std::fs::remove_dir_all(&out).unwrap();

    let ep = parts[1].join("episodes/seed_3");
    let traj = ep.join("trajectory.jsonl");
    let original = std::fs::read_to_string(&traj).unwrap();
    let lines: Vec<&str> = original.lines().collect();
    assert_eq!(lines.len(), 3, "3 turns, one line each");

    // A trajectory cut to its first line, then cut in the middle of its second.
    let cuts = [
        format!("{}\n", lines[0]),
        format!("{}\n{}", lines[0], &lines[1][..lines[1].len() / 2]),
    ];
    for cut in &cuts {
        std::fs::write(&traj, cut).unwrap();
        let e = refused(&merge(&parts, &out, &[], &[]));
        assert!(
            e.contains("part1/episodes/seed_3/trajectory.jsonl")
                && e.contains("has 1 complete line(s), but episode.json records 3 turn(s)"),
            "{e}"
        );
        assert!(!out.exists(), "nothing written");
    }
    // A deleted trajectory.
    std::fs::remove_file(&traj).unwrap();
    let e = refused(&merge(&parts, &out, &[], &[]));
    assert!(
        e.contains("seed_3/trajectory.jsonl")
            && e.contains("missing, but episode.json records 3 turn(s)"),
        "{e}"
    );
    // An edited trajectory line (its frame hash) no longer adds up to episode.json's.
    let mut edited: Value = serde_json::from_str(lines[2]).unwrap();
    edited["executed"][0]["frame_sha256"] = Value::String("0".repeat(64));
    let text = format!("{}\n{}\n{}\n", lines[0], lines[1], edited);
    std::fs::write(&traj, text).unwrap();
    let e = refused(&merge(&parts, &out, &[], &[]));
    assert!(
        e.contains("seed_3/trajectory.jsonl")
            && e.contains("do not add up to episode.json's frames"),
        "{e}"
    );
    std::fs::write(&traj, &original).unwrap();

    // A changed frame: one pixel of step 2's picture changed.
    let frame = ep.join("frames/step_0002.png");
    let kept = std::fs::read(&frame).unwrap();
    let mut img = image::load_from_memory(&kept).unwrap().into_rgb8();
    let px = img.get_pixel_mut(0, 0);
    px.0[0] ^= 0xff;
    img.save_with_format(&frame, image::ImageFormat::Png)
        .unwrap();
    let e = refused(&merge(&parts, &out, &[], &[]));
    assert!(
        e.contains("seed_3/frames/step_0002.png")
            && e.contains("but the episode recorded")
            && e.contains("for step 2"),
        "{e}"
    );
    // A frame that is not a PNG at all, and a missing one (the run kept every frame).
    std::fs::write(&frame, b"not a png").unwrap();
    let e = refused(&merge(&parts, &out, &[], &[]));
    assert!(
        e.contains("step_0002.png") && e.contains("not a readable PNG"),
        "{e}"
    );
    std::fs::remove_file(&frame).unwrap();
    let e = refused(&merge(&parts, &out, &[], &[]));
    assert!(
        e.contains("step_0002.png")
            && e.contains("missing, but the episode was played with --frames all"),
        "{e}"
    );
    assert!(!out.exists());
    let left: Vec<String> = names(&d);
    assert_eq!(left, ["part0", "part1"], "no work folder left: {left:?}");
    // Restored, it merges again.
    std::fs::write(&frame, kept).unwrap();
    ok(&merge(&parts, &out, &[], &[]));

    // The same shard twice is named once; two spellings of one folder are both named.
    let twice = vec![parts[0].clone(), parts[0].clone()];
    let e = refused(&merge(&twice, &d.join("m2"), &[], &[]));
    assert_eq!(e.matches("part0").count(), 1, "{e}");
    assert!(
        e.contains("is given twice: pass each run folder once"),
        "{e}"
    );
    let other = d.join("..").join(d.file_name().unwrap()).join("part0");
    let e = refused(&merge(&[parts[0].clone(), other], &d.join("m2"), &[], &[]));
    assert!(e.contains("are the same folder"), "{e}");
    // A missing input is "no such folder", not corrupt.
    let e = refused(&merge(
        &[parts[0].clone(), d.join("nope")],
        &d.join("m2"),
        &[],
        &[],
    ));
    assert!(
        e.contains("nope: no such folder") && !e.contains("corrupt"),
        "{e}"
    );
}

#[test]
fn a_merge_killed_at_any_step_is_redone_by_force() {
    let d = support::fresh_dir("killed");
    let parts = shards(&d);
    // What an uninterrupted merge into `out` makes (then removed again).
    let uninterrupted = |out: &Path| {
        ok(&merge(&parts, out, &[], &[]));
        let t = tree(out);
        assert!(t.contains_key("run.json") && t.contains_key("summary.json"));
        std::fs::remove_dir_all(out).unwrap();
        t
    };
    let points = [
        "episode:1",
        "episode:2",
        "episode:3",
        "episode:4",
        "summary",
        "run-json",
    ];
    // Into a new folder: killed anywhere, --out does not exist (a new merge would succeed), and
    // `merge --force`, as a retried Slurm job runs it, makes the same folder.
    for point in points {
        let out = d.join(format!("new-{}", point.replace(':', "")));
        let want = uninterrupted(&out);
        let o = merge(&parts, &out, &[], &[("VLM_EVAL_MERGE_KILL_AT", point)]);
        assert_eq!(o.status.signal(), Some(9), "{point}: {}", all(&o));
        assert!(!out.exists(), "{point}: a killed merge left --out");
        ok(&merge(&parts, &out, &["--force"], &[]));
        same_tree(&tree(&out), &want, point);
        let hidden: Vec<String> = names(&d)
            .into_iter()
            .filter(|n| n.starts_with('.'))
            .collect();
        assert!(hidden.is_empty(), "{point}: work folders left: {hidden:?}");
    }
    // Replacing an earlier merge (--force): killed anywhere, including between moving the
    // earlier folder aside and renaming the new one in, the rerun gives the same folder.
    for point in points.iter().copied().chain(["swap", "renamed"]) {
        let out = d.join(format!("again-{}", point.replace(':', "")));
        let want = uninterrupted(&out);
        ok(&merge(&parts, &out, &[], &[]));
        std::fs::write(out.join("summary.json"), "{\"stale\": true}").unwrap();
        let o = merge(
            &parts,
            &out,
            &["--force"],
            &[("VLM_EVAL_MERGE_KILL_AT", point)],
        );
        assert_eq!(o.status.signal(), Some(9), "{point}: {}", all(&o));
        ok(&merge(&parts, &out, &["--force"], &[]));
        same_tree(&tree(&out), &want, point);
        let hidden: Vec<String> = names(&d)
            .into_iter()
            .filter(|n| n.starts_with('.'))
            .collect();
        assert!(hidden.is_empty(), "{point}: work folders left: {hidden:?}");
    }
    // A killed merge's work folder is not a run: the leaderboard does not list it.
    let o = merge(
        &parts,
        &d.join("lb"),
        &[],
        &[("VLM_EVAL_MERGE_KILL_AT", "run-json")],
    );
    assert_eq!(o.status.signal(), Some(9));
    assert!(d.join(".lb.merge-tmp/run.json").is_file());
    let page = d.join("lb.html");
    let o = support::vlm_eval(&[
        "leaderboard",
        d.to_str().unwrap(),
        "--out",
        page.to_str().unwrap(),
    ]);
    ok(&o);
    let csv = std::fs::read_to_string(d.join("lb.csv")).unwrap();
    assert!(!csv.contains("merge-tmp"), "{csv}");

    // What an older vlm-eval left when killed (episodes, no run.json) is replaced by --force.
    let old = d.join("old-leftover");
    let want = uninterrupted(&old);
    let reference = d.join("reference");
    ok(&merge(&parts, &reference, &[], &[]));
    copy_dir(&reference.join("episodes"), &old.join("episodes"));
    let e = refused(&merge(&parts, &old, &[], &[]));
    assert!(e.contains("already exists") && e.contains("--force"), "{e}");
    ok(&merge(&parts, &old, &["--force"], &[]));
    same_tree(&tree(&old), &want, "leftover");
    // A folder of other files still is not.
    let other = d.join("notes");
    std::fs::create_dir_all(other.join("episodes")).unwrap();
    std::fs::write(other.join("notes.txt"), "keep").unwrap();
    let e = refused(&merge(&parts, &other, &["--force"], &[]));
    assert!(e.contains("not a run folder"), "{e}");
    assert!(other.join("notes.txt").is_file());
}

/// `sh -c 'ulimit -f 1; exec vlm-eval ARGS'` with SIGXFSZ ignored: a write past a file's
/// first 512 bytes fails ("File too large"), as on a disk that is full.
fn no_space(args: &[&str]) -> Output {
    let cmd = support::command();
    let mut sh = std::process::Command::new("sh");
    sh.arg("-c")
        .arg("trap '' XFSZ; ulimit -f 1; exec \"$0\" \"$@\"")
        .arg(cmd.get_program())
        .args(args);
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => sh.env(k, v),
            None => sh.env_remove(k),
        };
    }
    sh.output().expect("sh")
}

#[test]
fn a_full_disk_leaves_no_temporary_file() {
    let d = support::fresh_dir("full");
    let parts = shards(&d);
    // merge: exit 1 (a failed write), one line; no --out, no work folder.
    let out = d.join("merged");
    let mut args = vec!["merge"];
    args.extend(parts.iter().map(|p| p.to_str().unwrap()));
    args.extend(["--out", out.to_str().unwrap()]);
    let o = no_space(&args);
    assert_eq!(o.status.code(), Some(1), "{}", all(&o));
    assert_eq!(err(&o).trim().lines().count(), 1, "{}", err(&o));
    assert!(!out.exists());
    assert_eq!(names(&d), ["part0", "part1"]);
    // run: run.json cannot be written; no `.run.json.tmpNNNN` is left in the run folder.
    let runs = d.join("runs");
    std::fs::create_dir_all(&runs).unwrap();
    let mut args: Vec<&str> = BASE.to_vec();
    args.extend(["full", "--out", runs.to_str().unwrap()]);
    let o = no_space(&args);
    assert_eq!(o.status.code(), Some(1), "{}", all(&o));
    assert!(err(&o).contains("run.json"), "{}", err(&o));
    let left = names(&runs.join("full"));
    assert!(
        left.iter().all(|n| !n.contains(".tmp")),
        "temporary files left: {left:?}"
    );
    // baseline save: exit 1 (a write, not bad input), and no temporary file beside the target.
    let file = d.join("base.json");
    let o = no_space(&[
        "baseline",
        "save",
        parts[0].to_str().unwrap(),
        file.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", all(&o));
    assert!(!file.exists());
    let tmp: Vec<String> = names(&d)
        .into_iter()
        .filter(|n| n.contains(".tmp"))
        .collect();
    assert!(tmp.is_empty(), "temporary files left: {tmp:?}");
}

#[test]
fn a_run_folder_of_other_settings_names_them() {
    let d = support::fresh_dir("settings");
    let mut args: Vec<&str> = BASE.to_vec();
    args.extend(["same", "--out", d.to_str().unwrap()]);
    ok(&support::vlm_eval(&args));
    let mut again: Vec<&str> = args.clone();
    again.extend(["--history", "2"]);
    let o = support::vlm_eval(&again);
    assert!(!o.status.success());
    let e = err(&o);
    assert_eq!(e.trim().lines().count(), 1, "{e}");
    assert!(
        e.contains("holds a run with different settings (history: 3 there, 2 now"),
        "{e}"
    );
    assert!(e.contains("--force"), "{e}");
}
