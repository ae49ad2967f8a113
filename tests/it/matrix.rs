//! The model matrix (`run --model a,b,c`, `[[models]]` in `--config`): every model plays the
//! same seeds as its own single run would, the end prints and writes what `compare` prints and
//! writes, a rerun resumes every model, a slow and failing endpoint holds only its own model's
//! slots, and bad model lists are one-line usage errors.

use crate::support;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::post;
use axum::Router;
use support::vlm_eval;
use vlm_eval::model::baseline::ScriptedModel;
use vlm_eval::model::mock::MockServer;

fn tmp(name: &str) -> PathBuf {
    support::scratch(&format!("matrix-{name}"))
}

fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_str(
        &std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    )
    .unwrap()
}

/// An episode without its timings (what must not depend on scheduling).
fn outcome(ep: &serde_json::Value) -> serde_json::Value {
    let mut v = ep.clone();
    let o = v.as_object_mut().unwrap();
    for volatile in ["latency_ms", "wall_s"] {
        o.remove(volatile);
    }
    v
}

fn episode_json(run: &Path, seed: i64) -> PathBuf {
    run.join(format!("episodes/seed_{seed}/episode.json"))
}

fn finished_episodes(run: &Path) -> usize {
    std::fs::read_dir(run.join("episodes"))
        .map(|d| {
            d.flatten()
                .filter(|e| e.path().join("episode.json").is_file())
                .count()
        })
        .unwrap_or(0)
}

const MODELS: [&str; 3] = ["mock", "scripted", "random"];

#[test]
fn every_model_plays_as_its_own_run_and_the_end_is_compare_s_table() {
    let out = tmp("three");
    let single = tmp("three-single");
    let o = vlm_eval(&[
        "--model",
        "mock,scripted,random",
        "--seeds",
        "3",
        "--steps",
        "4",
        "--concurrency",
        "2",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", support::stderr(&o));
    let stdout = support::stdout(&o);

    // Oracle: each model run on its own, with the same flags, into another folder.
    let mut dirs = Vec::new();
    for model in MODELS {
        let name = format!("{model}_tool_both_64px_4t");
        let s = vlm_eval(&[
            "--model",
            model,
            "--seeds",
            "3",
            "--steps",
            "4",
            "--out",
            single.to_str().unwrap(),
            "--quiet",
        ]);
        assert!(s.status.success(), "{}", support::stderr(&s));
        let (m, r) = (out.join(&name), single.join(&name));
        assert!(m.join("run.json").is_file(), "default run name {name}");
        let info = read_json(&m.join("run.json"));
        assert_eq!(info["config"]["model"], model);
        assert_eq!(
            info["config"]["seeds"],
            serde_json::json!({"start": 0, "end": 3})
        );
        for seed in 0..3 {
            assert_eq!(
                outcome(&read_json(&episode_json(&m, seed))),
                outcome(&read_json(&episode_json(&r, seed))),
                "{model} seed {seed}: the matrix plays as a single run does"
            );
        }
        assert!(stdout.contains(&format!("results: {}", m.display())));
        dirs.push(m);
    }
    // mock and scripted are the same policy (over HTTP and in process): same episodes.
    for seed in 0..3 {
        assert_eq!(
            read_json(&episode_json(&dirs[0], seed))["progression"],
            read_json(&episode_json(&dirs[1], seed))["progression"]
        );
    }

    // The end is `compare` over the three folders, table and CSV alike.
    let cmp_csv = out.join("cmp.csv");
    let mut args: Vec<&str> = vec!["compare"];
    args.extend(dirs.iter().map(|d| d.to_str().unwrap()));
    args.extend(["--csv", cmp_csv.to_str().unwrap()]);
    let c = vlm_eval(&args);
    assert!(c.status.success(), "{}", support::stderr(&c));
    assert!(
        stdout.contains(support::stdout(&c).trim_end()),
        "matrix output:\n{stdout}\ncompare output:\n{}",
        support::stdout(&c)
    );
    let matrix_csv = out.join("matrix_mock+scripted+random_tool_both_64px_4t.csv");
    assert_eq!(
        std::fs::read_to_string(&matrix_csv).unwrap(),
        std::fs::read_to_string(&cmp_csv).unwrap()
    );
    assert_eq!(
        std::fs::read_to_string(
            out.join("matrix_mock+scripted+random_tool_both_64px_4t.spend.csv")
        )
        .unwrap(),
        std::fs::read_to_string(out.join("cmp.spend.csv")).unwrap()
    );
    assert!(stdout.contains(&format!("comparison: {}", matrix_csv.display())));

    // A rerun resumes every model: kept episodes are not played again, a missing one is.
    let kept: Vec<Vec<u8>> = dirs
        .iter()
        .flat_map(|d| (0..3).map(move |s| std::fs::read(episode_json(d, s)).unwrap()))
        .collect();
    std::fs::remove_dir_all(dirs[1].join("episodes/seed_2")).unwrap();
    let again = vlm_eval(&[
        "--model",
        "mock,scripted,random",
        "--seeds",
        "3",
        "--steps",
        "4",
        "--concurrency",
        "2",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(again.status.code(), Some(0), "{}", support::stderr(&again));
    let err = support::stderr(&again);
    assert!(
        err.contains("mock: resuming: 3 finished episode(s) kept"),
        "{err}"
    );
    assert!(
        err.contains("scripted: resuming: 2 finished episode(s) kept"),
        "{err}"
    );
    assert!(
        err.contains("random: resuming: 3 finished episode(s) kept"),
        "{err}"
    );
    assert!(err.contains("scripted: seed     2:"), "{err}");
    for (i, d) in dirs.iter().enumerate() {
        for s in 0..3 {
            let now = std::fs::read(episode_json(d, s)).unwrap();
            if i == 1 && s == 2 {
                assert_eq!(
                    outcome(&serde_json::from_slice(&now).unwrap()),
                    outcome(&read_json(&episode_json(
                        &single.join("scripted_tool_both_64px_4t"),
                        2
                    )))
                );
            } else {
                assert_eq!(
                    now,
                    kept[i * 3 + s as usize],
                    "{} seed {s} was replayed",
                    d.display()
                );
            }
        }
    }
    let _ = std::fs::remove_dir_all(&out);
    let _ = std::fs::remove_dir_all(&single);
}

/// The slow endpoint: holds every request until the fast model's run has finished all its
/// episodes (or gives up after a minute, which the test then reports), then fails it.
#[derive(Clone)]
struct Slow {
    fast_run: PathBuf,
    episodes: usize,
    held: Arc<AtomicUsize>,
    gave_up: Arc<AtomicBool>,
}

async fn slow_then_fail(State(s): State<Slow>) -> impl IntoResponse {
    s.held.fetch_add(1, Ordering::SeqCst);
    let t0 = Instant::now();
    while finished_episodes(&s.fast_run) < s.episodes {
        if t0.elapsed() > Duration::from_secs(60) {
            s.gave_up.store(true, Ordering::SeqCst);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    (
        StatusCode::INTERNAL_SERVER_ERROR,
        r#"{"error":{"message":"overloaded","type":"server_error"}}"#,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_failing_endpoint_does_not_starve_the_other_model() {
    let out = tmp("fair");
    std::fs::create_dir_all(&out).unwrap();
    let fast = MockServer::start(Arc::new(ScriptedModel)).await.unwrap();
    let slow = Slow {
        fast_run: out.join("fast-model_tool_both_64px_3t"),
        episodes: 4,
        held: Arc::default(),
        gave_up: Arc::default(),
    };
    let app = Router::new()
        .route("/v1/chat/completions", post(slow_then_fail))
        .with_state(slow.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let slow_url = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    // The slow model comes first and has as many episodes as the concurrency allows twice
    // over: one pool shared first-come would give it every slot.
    let cfg = out.join("matrix.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"seeds = 4
steps = 3
concurrency = 2
max-retries = 0
out = "{out}"

[[models]]
model = "slow-model"
base-url = "{slow_url}"

[[models]]
model = "fast-model"
base-url = "{fast_url}"
price-in = 1.5
price-out = 6.0
headers = ["X-Team: crafter"]
"#,
            out = out.display(),
            fast_url = fast.base_url(),
        ),
    )
    .unwrap();
    let run = |extra: &'static [&'static str]| {
        let mut cmd = support::tokio_command();
        cmd.args(["--config", cfg.to_str().unwrap()]).args(extra);
        cmd.output()
    };
    let o = run(&[]).await.unwrap();
    let stdout = support::stdout(&o);
    assert!(
        !slow.gave_up.load(Ordering::SeqCst),
        "the fast model never finished while the slow one held its requests: {}",
        support::stderr(&o)
    );
    assert!(slow.held.load(Ordering::SeqCst) >= 1);
    // Worst of the models: the slow one's episodes errored.
    assert_eq!(o.status.code(), Some(1), "{}", support::stderr(&o));

    let fast_run = out.join("fast-model_tool_both_64px_3t");
    let slow_run = out.join("slow-model_tool_both_64px_3t");
    let fast_summary = read_json(&fast_run.join("summary.json"));
    assert_eq!(fast_summary["episodes"], 4);
    assert_eq!(fast_summary["errors"], 0);
    let slow_summary = read_json(&slow_run.join("summary.json"));
    assert_eq!(slow_summary["errors"], 4);
    assert!(fast.requests_served() >= 4);
    // Each entry's own endpoint settings, recorded in its own run.json.
    let fast_cfg = read_json(&fast_run.join("run.json"))["config"].clone();
    assert_eq!(fast_cfg["endpoint"], fast.base_url());
    assert_eq!(
        fast_cfg["prices_usd_per_1m"],
        serde_json::json!({"input": 1.5, "output": 6.0})
    );
    assert_eq!(fast_cfg["header_names"], serde_json::json!(["X-Team"]));
    let slow_cfg = read_json(&slow_run.join("run.json"))["config"].clone();
    assert_eq!(slow_cfg["endpoint"], slow_url);
    assert_eq!(slow_cfg["header_names"], serde_json::json!([]));
    assert!(
        stdout.contains("slow-model_tool_both_64px_3t: 4 episodes ended in an error"),
        "{stdout}"
    );

    // A rerun resumes: the fast model's episodes are kept, the slow one's errored ones are
    // played again (and fail again); --allow-errors makes that exit 0, as for one run.
    let kept = std::fs::read(episode_json(&fast_run, 3)).unwrap();
    let again = run(&["--allow-errors"]).await.unwrap();
    assert_eq!(again.status.code(), Some(0), "{}", support::stderr(&again));
    assert_eq!(std::fs::read(episode_json(&fast_run, 3)).unwrap(), kept);
    assert!(support::stderr(&again).contains("fast-model: resuming: 4 finished episode(s) kept"));
    drop(fast);
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn bad_model_lists_are_one_line_usage_errors() {
    let out = tmp("bad");
    std::fs::create_dir_all(&out).unwrap();
    let results = out.join("results");
    let check = |args: &[&str], needle: &str| {
        let mut all: Vec<&str> = args.to_vec();
        all.extend([
            "--out",
            results.to_str().unwrap(),
            "--seeds",
            "1",
            "--steps",
            "1",
        ]);
        let o = vlm_eval(&all);
        let err = support::stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {needle:?} not in {err}");
        assert_eq!(
            err.trim_end().lines().count(),
            1,
            "{args:?}: one line: {err}"
        );
        assert!(!results.exists(), "{args:?}: nothing may run");
    };
    check(
        &["--model", "mock,scripted,mock"],
        "\"mock\" is listed twice",
    );
    check(&["--model", "mock,,random"], "empty name");
    check(&["--model", "mock,random", "--run-name", "r"], "--run-name");
    check(
        &["--model", "a/b,a_b", "--base-url", "http://127.0.0.1:9/v1"],
        "would both write to",
    );

    let cfg = |name: &str, body: &str| {
        let p = out.join(name);
        std::fs::write(&p, body).unwrap();
        p.to_str().unwrap().to_string()
    };
    let two = cfg(
        "two.toml",
        "[[models]]\nmodel = \"m1\"\nbase-url = \"http://127.0.0.1:9/v1\"\n\n[[models]]\nmodel = \"m2\"\n",
    );
    check(
        &["--config", &two, "--base-url", "http://127.0.0.1:8/v1"],
        "--base-url http://127.0.0.1:8/v1 disagrees with",
    );
    check(
        &["--config", &two, "--model", "m1,m3"],
        "--model m3 is not among",
    );
    let dup = cfg(
        "dup.toml",
        "[[models]]\nmodel = \"m1\"\n\n[[models]]\nmodel = \"m1\"\n",
    );
    check(&["--config", &dup], "\"m1\" is listed twice");
    let both = cfg(
        "both.toml",
        "model = \"mock\"\n\n[[models]]\nmodel = \"random\"\n",
    );
    check(&["--config", &both], "both `model` and [[models]]");
    let typo = cfg("typo.toml", "[[models]]\nmodle = \"mock\"\n");
    check(&["--config", &typo], "modle");
    let price = cfg("price.toml", "[[models]]\nmodel = \"x\"\nprice-in = 1.0\n");
    check(&["--config", &price], "price-in and price-out");
    let _ = std::fs::remove_dir_all(&out);
}
