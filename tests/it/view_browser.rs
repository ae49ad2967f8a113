//! `vlm-eval view` in headless Chromium: a run started with `--view` against a slow
//! OpenAI-compatible server (our own, in this test) shows a live panel whose turn changes
//! without a reload; the index and a finished run's page load; any script error fails.
//!
//! How it reads the page: Chromium's `--dump-dom` after `--virtual-time-budget` (virtual time
//! runs the page's timers fast and waits for its fetches to the server, so the live script polls
//! many times in a few real seconds while the run plays). The page records what it saw in
//! attributes: `data-turns-seen` per panel (each distinct turn drawn), `data-live-ok` (polls
//! drawn) and `data-script-error` (set by an error hook that runs first, for uncaught errors
//! and rejections). Console errors are read too (`--enable-logging=stderr`): an "Uncaught"
//! line fails the test. Set `VLM_EVAL_SCREENSHOTS=DIR` to also save a screenshot of each page.

use crate::support;
use crate::view_support;

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use axum::{routing::post, Json, Router};
use serde_json::{json, Value};
use support::{chromium, fresh_dir};
use view_support::model_run;

/// Headless Chromium on a URL with `mode` (`--dump-dom` or `--screenshot=FILE`); returns
/// (stdout, stderr). Its process group is killed after 120 s.
fn chromium_run(
    bin: &Path,
    work: &Path,
    tag: &str,
    mode: &str,
    url: &str,
    budget_ms: u32,
) -> (String, String) {
    let profile = work.join(format!("profile-{tag}"));
    let _ = std::fs::remove_dir_all(&profile);
    let mut child = Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
            &format!("--user-data-dir={}", profile.display()),
            "--window-size=1000,1300",
            &format!("--virtual-time-budget={budget_ms}"),
            mode,
            url,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("start chromium");
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let r1 = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let r2 = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "chromium {mode} exited with {status}");
            break;
        }
        if Instant::now() > deadline {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", child.id())])
                .status();
            let _ = child.wait();
            panic!("chromium {mode} hung for 120 s and was killed");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    (r1.join().unwrap(), r2.join().unwrap())
}

/// Fail on a script error: the page's error hook or an uncaught console error.
fn assert_no_script_error(what: &str, dom: &str, log: &str) {
    if let Some(e) = attr(dom, "<html", "data-script-error") {
        panic!("{what}: script error in the page: {e}");
    }
    for line in log.lines() {
        assert!(
            !(line.contains("CONSOLE") && (line.contains("Uncaught") || line.contains("Error"))),
            "{what}: console error: {line}"
        );
    }
}

fn attr<'a>(dom: &'a str, element_start: &str, name: &str) -> Option<&'a str> {
    let i = dom.find(element_start)?;
    let rest = &dom[i..dom[i..].find('>').map(|j| i + j).unwrap_or(dom.len())];
    let k = rest.find(&format!("{name}=\""))? + name.len() + 2;
    Some(&rest[k..k + rest[k..].find('"')?])
}

/// A slow model: every reply takes 150 ms and asks for four actions.
async fn slow(Json(_): Json<Value>) -> Json<Value> {
    tokio::time::sleep(Duration::from_millis(150)).await;
    Json(
        json!({"id": "x", "object": "chat.completion", "created": 1, "model": "slow",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant",
            "content": "<script>document.title='pwned'</script> going left\nACTION: move_left"}}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}}),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_panel_changes_turn_without_reload_in_chromium() {
    let Some(bin) = chromium() else { return };
    let dir = fresh_dir("browser");
    let results = dir.join("results");
    std::fs::create_dir_all(&results).unwrap();
    model_run(&results, "mock", "mock-done", "3", "30", &[]);
    model_run(&results, "random", "random-done", "3", "30", &[]);

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let app = Router::new().route("/v1/chat/completions", post(slow));
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    // The run under test: --view serves its output folder while it plays.
    let mut run = support::command()
        .args([
            "--model",
            "slow",
            "--base-url",
            &format!("http://127.0.0.1:{port}/v1"),
        ])
        .args(["--seeds", "2", "--steps", "400", "--protocol", "text"])
        .args(["--out", results.to_str().unwrap(), "--run-name", "playing"])
        .args(["--quiet", "--view"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(run.stderr.take().unwrap());
    let mut url = String::new();
    let mut line = String::new();
    while url.is_empty() && stderr.read_line(&mut line).unwrap() > 0 {
        if let Some(u) = line.trim().strip_prefix("live view: ") {
            url = u.to_string();
        }
        line.clear();
    }
    // --view prints this run's own live page, not the index.
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with("/run/playing/"),
        "--view printed {url:?}, not the run's page"
    );
    let page = url.clone();
    let url = url.trim_end_matches("run/playing/").to_string();
    std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = stderr.read_to_string(&mut rest);
    });
    // Let the run write its first turns.
    for _ in 0..200 {
        if results
            .join("playing/episodes/seed_1/trajectory.jsonl")
            .is_file()
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let shots = std::env::var_os("VLM_EVAL_SCREENSHOTS").map(PathBuf::from);
    let pages = [
        ("live", page, 600_000),
        ("index", url.clone(), 2_000),
        ("run", format!("{url}run/mock-done/"), 2_000),
    ];
    let work = dir.clone();
    let bin2 = bin.clone();
    let doms = tokio::task::spawn_blocking(move || {
        pages
            .iter()
            .map(|(tag, u, budget)| {
                let (dom, log) = chromium_run(&bin2, &work, tag, "--dump-dom", u, *budget);
                if let Some(d) = &shots {
                    let f = d.join(format!("view-{tag}.png"));
                    chromium_run(
                        &bin2,
                        &work,
                        &format!("{tag}-shot"),
                        &format!("--screenshot={}", f.display()),
                        u,
                        *budget.min(&20_000),
                    );
                }
                (tag.to_string(), dom, log)
            })
            .collect::<Vec<_>>()
    })
    .await
    .unwrap();
    let _ = run.kill();
    let _ = run.wait();

    for (tag, dom, log) in &doms {
        assert_no_script_error(tag, dom, log);
        // Every page declares its icon: no request for /favicon.ico, no 404 in the log.
        assert!(
            dom.contains(r#"<link rel="icon" href="data:image/png;base64,"#),
            "{tag}: no icon"
        );
        // Chromium reports a failed load as "... responded with a status of 404 (Not Found)".
        // Match that phrase, not a bare "404": the log's timestamps hold digits like 540459.
        for line in log.lines() {
            assert!(
                !(line.contains("status of 404") || line.contains("404 (Not Found)")),
                "{tag}: {line}"
            );
        }
    }
    let (_, live, _) = &doms[0];
    let polls: u32 = attr(live, "<html", "data-live-ok")
        .unwrap_or_else(|| panic!("the live script never drew: {live}"))
        .parse()
        .unwrap();
    assert!(polls >= 2, "{polls}");
    let seen = attr(live, r#"id="live-seed-0""#, "data-turns-seen")
        .or_else(|| attr(live, r#"id="live-seed-1""#, "data-turns-seen"))
        .unwrap_or_else(|| panic!("no live panel: {live}"));
    let turns: Vec<&str> = seen.split(',').collect();
    assert!(turns.len() >= 2, "the panel's turn never changed: {seen}");
    assert!(live.contains("reward so far") && live.contains("achievements so far"));
    assert!(
        live.contains("&lt;script&gt;document.title"),
        "the reply is shown as text"
    );
    assert!(!live.contains("<title>pwned"));

    let (_, index, _) = &doms[1];
    assert!(
        index.contains("<h2>Protocol: ")
            && !index.contains("Protocol group")
            && index.contains(r#"href="/run/mock-done/""#),
        "{index}"
    );
    assert!(index.contains(r#"class="heat""#));
    let (_, page, _) = &doms[2];
    assert!(page.contains("<h1>mock-done</h1>") && page.contains(r#"id="achievement-chart""#));
    let _ = std::fs::remove_dir_all(&dir);
}
