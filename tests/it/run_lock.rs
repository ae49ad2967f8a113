//! One writer per run folder (`run.lock`), through the real binary against a server that holds
//! requests until let through: a second `run` on a held folder is refused with exit 2 naming
//! the holder and changes nothing; readers (`compare`, `report`, `export-sft`) read a held
//! folder and say it is in progress; `merge` refuses a held input unless `--allow-running`;
//! after `kill -9` of the holder a rerun resumes at once; shard folders never contend; two
//! processes started at once on one folder: one is refused and nothing is played twice.

use crate::lock_support;
use crate::support;

use std::path::Path;

use lock_support::{error_line, read_json, run_args, spawn, strs, vlm_eval, GatedServer};
use support::{fresh_dir, stderr};

/// Every file under `dir` with its bytes, sorted, leaving out the folders of episodes still
/// being played (the holder's frame writer may be busy there).
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    fn walk(dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name.starts_with("seed_") && !path.join("episode.json").is_file() {
                continue;
            }
            if path.is_dir() {
                walk(&path, out);
            } else {
                out.push((path.display().to_string(), std::fs::read(&path).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, &mut out);
    out.sort();
    out
}

#[test]
fn a_held_folder_refuses_a_second_run_serves_readers_and_survives_kill_9() {
    let (seeds, steps) = (3, 5);
    // Seed 0's five turns are answered; seed 1's first request waits (concurrency 1).
    let server = GatedServer::start(steps as usize);
    let out = fresh_dir("held");
    let run = out.join("r");
    let args = run_args(
        &server.url,
        &out,
        "r",
        seeds,
        steps,
        &["--concurrency", "1"],
    );
    let mut holder = spawn(&strs(&args));
    let pid = holder.id();
    server.wait_seen(steps as usize + 1);
    // Seed 1 started only after seed 0's episode.json was written.
    assert!(run.join("episodes/seed_0/episode.json").is_file());
    let lock = read_json(&run.join("run.lock"));
    assert_eq!(lock["pid"], pid);
    assert_eq!(lock["lock"], "vlm-eval run");

    // A second run: refused at once, one line naming the holder, nothing changed, no request.
    let before = snapshot(&run);
    let o = vlm_eval(&strs(&args));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let msg = error_line(&o);
    let started = lock["started_at"].as_str().unwrap();
    let host = lock["host"].as_str().unwrap();
    assert!(
        msg.contains(&run.display().to_string())
            && msg.contains(&format!("pid {pid} on host {host}, started {started}"))
            && msg.contains("wait for it to finish, or pick another --run-name"),
        "{msg}"
    );
    assert_eq!(snapshot(&run), before, "the refused run changed the folder");
    assert_eq!(server.seen(), steps as usize + 1);

    // Readers read it and say it is in progress.
    let in_progress = |o: &std::process::Output| {
        let e = stderr(o);
        assert!(o.status.success(), "{e}");
        assert!(
            e.contains("in progress:")
                && e.contains("still being written")
                && e.contains(&format!("pid {pid}")),
            "{e}"
        );
    };
    in_progress(&vlm_eval(&["compare", run.to_str().unwrap()]));
    let page = out.join("page.html");
    in_progress(&vlm_eval(&[
        "report",
        run.to_str().unwrap(),
        "--out",
        page.to_str().unwrap(),
        "--no-gif",
    ]));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains(r#"id="in-progress""#) && html.contains(&format!("pid {pid}")),
        "no in-progress notice in the page"
    );
    let sft = out.join("sft.jsonl");
    in_progress(&vlm_eval(&[
        "export-sft",
        run.to_str().unwrap(),
        "--out",
        sft.to_str().unwrap(),
    ]));

    // merge refuses the held input, naming it; --allow-running merges the finished episode.
    let merged = out.join("merged");
    let o = vlm_eval(&[
        "merge",
        run.to_str().unwrap(),
        "--out",
        merged.to_str().unwrap(),
    ]);
    let msg = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{msg}");
    assert!(
        msg.contains(&run.display().to_string())
            && msg.contains("still being written")
            && msg.contains(&format!("pid {pid}"))
            && msg.contains("--allow-running"),
        "{msg}"
    );
    assert!(!merged.exists());
    let o = vlm_eval(&[
        "merge",
        run.to_str().unwrap(),
        "--out",
        merged.to_str().unwrap(),
        "--allow-running",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("--allow-running"), "{}", stderr(&o));
    let copied: Vec<String> = std::fs::read_dir(merged.join("episodes"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(copied, ["seed_0"]);
    assert_eq!(
        std::fs::read(merged.join("episodes/seed_0/episode.json")).unwrap(),
        std::fs::read(run.join("episodes/seed_0/episode.json")).unwrap()
    );
    assert_eq!(read_json(&merged.join("summary.json"))["episodes"], 1);
    // A held folder is never a merge's --out, even with --force.
    let o = vlm_eval(&[
        "merge",
        merged.to_str().unwrap(),
        "--out",
        run.to_str().unwrap(),
        "--force",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("choose another --out"),
        "{}",
        stderr(&o)
    );
    assert!(run.join("episodes/seed_0/episode.json").is_file());

    // kill -9 mid-run: the lock file stays, the OS lock goes; the rerun resumes at once.
    let seed0 = std::fs::read(run.join("episodes/seed_0/episode.json")).unwrap();
    holder.kill().unwrap();
    holder.wait().unwrap();
    assert!(run.join("run.lock").is_file());
    assert_eq!(read_json(&run.join("run.lock"))["pid"], pid);
    server.open();
    let seen_before = server.seen();
    let o = vlm_eval(&strs(&args));
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stderr(&o).contains("in use"), "{}", stderr(&o));
    // Seed 0 was kept; seeds 1 and 2 were played, once.
    assert_eq!(
        std::fs::read(run.join("episodes/seed_0/episode.json")).unwrap(),
        seed0
    );
    assert_eq!(server.seen() - seen_before, 2 * steps as usize);
    lock_support::check_single_writer(&run, seeds, steps, (seeds * steps) as usize);
    assert_ne!(read_json(&run.join("run.lock"))["pid"], pid);
    // Finished: readers no longer say it is in progress.
    let o = vlm_eval(&["compare", run.to_str().unwrap()]);
    assert!(o.status.success() && !stderr(&o).contains("in progress"));
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn shard_folders_never_contend_and_the_same_shard_twice_is_refused() {
    let server = GatedServer::start(0);
    let out = fresh_dir("shards");
    let shard = |i: usize| {
        let mut args = run_args(&server.url, &out, "unused", 2, 2, &["--concurrency", "1"]);
        // Default names (…_shard<i>of2), so each shard gets its own folder.
        let at = args.iter().position(|a| a == "--run-name").unwrap();
        args.drain(at..at + 2);
        args.extend(["--shard".into(), format!("{i}/2")]);
        args
    };
    let (a0, a1) = (shard(0), shard(1));
    let s0 = spawn(&strs(&a0));
    let s1 = spawn(&strs(&a1));
    // Both have a request waiting at once: both hold their folders at the same time.
    server.wait_seen(2);
    let o = vlm_eval(&strs(&a0));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!("pid {} on host", s0.id())),
        "{}",
        stderr(&o)
    );
    server.open();
    for child in [s0, s1] {
        let o = child.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let mut folders: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    folders.sort();
    assert_eq!(folders.len(), 2, "{folders:?}");
    assert!(folders[0].ends_with("_shard0of2") && folders[1].ends_with("_shard1of2"));
    assert_eq!(server.seen(), 4);
    let _ = std::fs::remove_dir_all(&out);
}

// ---------------------------------------------------------------------------------------------
// Two processes started at once on one run folder (a requeued task overlapping the old one).
// ---------------------------------------------------------------------------------------------

#[test]
fn two_runs_on_one_folder_one_is_refused_and_nothing_is_played_twice() {
    use lock_support::{check_single_writer, run_args, spawn, strs, wait_until, GatedServer};
    let (seeds, steps) = (4, 5);
    // No request is answered until both processes are settled, so the winner is mid-run
    // (holding the folder) whatever the scheduling.
    let server = GatedServer::start(0);
    let out = support::fresh_dir("run-lock-twice");
    let args = run_args(
        &server.url,
        &out,
        "twice",
        seeds,
        steps,
        &["--concurrency", "4"],
    );
    let mut a = spawn(&strs(&args));
    let mut b = spawn(&strs(&args));
    let mut first_done = None;
    wait_until("one of the two runs to exit", || {
        if a.try_wait().unwrap().is_some() {
            first_done = Some('a');
        } else if b.try_wait().unwrap().is_some() {
            first_done = Some('b');
        }
        first_done.is_some()
    });
    let (loser, winner) = match first_done {
        Some('a') => (a, b),
        _ => (b, a),
    };
    let winner_pid = winner.id();
    let lost = loser.wait_with_output().unwrap();
    assert_eq!(lost.status.code(), Some(2), "{}", support::stderr(&lost));
    let msg = lock_support::error_line(&lost);
    assert!(
        msg.contains("is in use by another `vlm-eval run`")
            && msg.contains(&format!("pid {winner_pid} on host"))
            && msg.contains("started ")
            && msg.contains("--run-name"),
        "{msg}"
    );
    server.open();
    let won = winner.wait_with_output().unwrap();
    assert!(
        won.status.success(),
        "{}",
        String::from_utf8_lossy(&won.stderr)
    );
    // The refused process sent nothing: the server saw exactly one run's requests, and the
    // summary counts each of them once.
    let requests = (seeds * steps) as usize;
    assert_eq!(server.seen(), requests);
    check_single_writer(&out.join("twice"), seeds, steps, requests);
    let _ = std::fs::remove_dir_all(&out);
}
