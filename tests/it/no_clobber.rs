//! No clobbering (issue 44): `report` and `leaderboard` regenerate their own page freely, but
//! never write over a page of other content without `--force`: a report of another run, a
//! leaderboard of other folders, or a file they did not write. A refusal is one line, exit 2,
//! names --force, and leaves the file as it was.

use crate::support;
use crate::view_support;

use std::path::Path;

use support::{fresh_dir, text, vlm_eval};
use view_support::model_run;

fn refused(args: &[&str], file: &Path) {
    let before = std::fs::read(file).unwrap();
    let o = vlm_eval(args);
    let (_, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("--force"), "{stderr}");
    assert!(stderr.contains(&file.display().to_string()), "{stderr}");
    assert_eq!(std::fs::read(file).unwrap(), before, "the file was changed");
}

fn ok(args: &[&str]) {
    let o = vlm_eval(args);
    assert!(o.status.success(), "{args:?}: {}", text(&o).1);
}

#[test]
fn a_report_is_never_replaced_by_another_runs_report_without_force() {
    let dir = fresh_dir("report");
    let a = model_run(&dir, "mock", "a", "1", "3", &[]);
    let b = model_run(&dir, "mock", "b", "1", "3", &[]);
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let page = dir.join("site/report.html");
    let p = page.to_str().unwrap();
    ok(&["report", a, "--no-gif", "--out", p]);
    // The same run again: regenerated.
    ok(&["report", a, "--no-gif", "--out", p]);
    refused(&["report", b, "--no-gif", "--out", p], &page);
    let o = vlm_eval(&["report", b, "--no-gif", "--out", p]);
    assert!(
        text(&o).1.contains("the report of another run (a)"),
        "{}",
        text(&o).1
    );
    ok(&["report", b, "--no-gif", "--out", p, "--force"]);
    assert!(std::fs::read_to_string(&page)
        .unwrap()
        .contains("<title>vlm-eval report: b</title>"));
    // A file that is not a report at all.
    let notes = dir.join("notes.html");
    std::fs::write(&notes, "my notes").unwrap();
    refused(
        &["report", a, "--no-gif", "--out", notes.to_str().unwrap()],
        &notes,
    );
    // The default place, RUN/report.html, is regenerated.
    ok(&["report", a, "--no-gif"]);
    ok(&["report", a, "--no-gif"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_leaderboard_is_never_replaced_by_one_of_other_folders_without_force() {
    let dir = fresh_dir("leaderboard");
    let one = dir.join("one");
    let two = dir.join("two");
    model_run(&one, "mock", "a", "2", "3", &[]);
    model_run(&two, "random", "b", "2", "3", &[]);
    let page = dir.join("lb.html");
    let (p, one_s, two_s) = (
        page.to_str().unwrap(),
        one.to_str().unwrap(),
        two.to_str().unwrap(),
    );
    ok(&["leaderboard", one_s, "--out", p]);
    // The same folders again, with a new run in them: the same leaderboard, updated.
    model_run(&one, "random", "c", "2", "3", &[]);
    ok(&["leaderboard", one_s, "--out", p]);
    // Other folders: refused, page and CSV untouched.
    refused(&["leaderboard", two_s, "--out", p], &page);
    refused(&["leaderboard", one_s, two_s, "--out", p], &page);
    ok(&["leaderboard", two_s, "--out", p, "--force"]);
    let csv = std::fs::read_to_string(dir.join("lb.csv")).unwrap();
    assert!(csv.contains(",b,") && !csv.contains(",a,"), "{csv}");
    // The CSV on its own: another file, or a leaderboard CSV of runs in other folders.
    let other = dir.join("other.csv");
    std::fs::write(&other, "a,b\n1,2\n").unwrap();
    let o = dir.join("fresh.html");
    refused(
        &[
            "leaderboard",
            two_s,
            "--out",
            o.to_str().unwrap(),
            "--csv",
            other.to_str().unwrap(),
        ],
        &other,
    );
    refused(
        &[
            "leaderboard",
            one_s,
            "--out",
            o.to_str().unwrap(),
            "--csv",
            dir.join("lb.csv").to_str().unwrap(),
        ],
        &dir.join("lb.csv"),
    );
    // A page the leaderboard did not write.
    std::fs::write(dir.join("index.html"), "<html>mine</html>").unwrap();
    refused(
        &[
            "leaderboard",
            one_s,
            "--out",
            dir.join("index.html").to_str().unwrap(),
        ],
        &dir.join("index.html"),
    );
    let _ = std::fs::remove_dir_all(&dir);
}
