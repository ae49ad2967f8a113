//! What running through real servers needs, checked against our own servers on 127.0.0.1:
//! every retry hint followed exactly (LiteLLM's `llm_provider-retry-after`, `retry-after` as
//! seconds or a date, `retry-after-ms`, OpenAI's `x-ratelimit-reset-*`), failed turns that keep
//! their attempts, spend over everything sent (failed attempts, errored episodes, earlier
//! tries), budgets that count the same spend, run names that stay inside `--out`, a prompt
//! folder without templates, and auth hints.

use crate::support;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use serde_json::{json, Value};

use vlm_eval::agent::conversation::{ConversationConfig, Modality};
use vlm_eval::agent::observe::{observe, ObsFormat};
use vlm_eval::agent::parse::Protocol;
use vlm_eval::agent::prompt::Prompts;
use vlm_eval::crafter::{Env, EnvConfig, TextureSet};
use vlm_eval::eval::budget::Budget;
use vlm_eval::eval::episode::EpisodeConfig;
use vlm_eval::eval::runner::{run, RunOptions};
use vlm_eval::model::openai::{OpenAiConfig, OpenAiModel};
use vlm_eval::model::{ChatModel, ChatRequest, Message, Role};
use vlm_eval::results::formats::{EpisodeResult, Termination};
use vlm_eval::results::store::RunDir;

const IMAGE_SIZE: usize = 64;
const EPISODE_LENGTH: u32 = 10_000;

fn completion(input: u64, output: u64) -> String {
    json!({
        "id": "chatcmpl-t", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "interact_many", "arguments": "{\"actions\":[\"noop\"]}"}}]}}],
        "usage": {"prompt_tokens": input, "completion_tokens": output}
    })
    .to_string()
}

fn response(status: u16, body: String, headers: &[(String, String)]) -> Response {
    let mut r = (StatusCode::from_u16(status).unwrap(), body).into_response();
    r.headers_mut()
        .insert("content-type", "application/json".parse().unwrap());
    for (k, v) in headers {
        r.headers_mut().insert(
            axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            v.parse().unwrap(),
        );
    }
    r
}

async fn serve(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}/v1")
}

fn tmp(name: &str) -> PathBuf {
    support::scratch(&format!("real-{name}"))
}

fn request() -> ChatRequest {
    ChatRequest {
        messages: vec![Message::text(Role::User, "hi")],
        ..ChatRequest::default()
    }
}

// ---------------------------------------------------------------------------------------------
// Retry hints.
// ---------------------------------------------------------------------------------------------

/// One scripted answer: status and headers (a `{date+N}` value becomes an HTTP date N seconds
/// from when it is sent).
type Act = (u16, Vec<(&'static str, &'static str)>);

#[derive(Default)]
struct Script {
    acts: Mutex<Vec<Act>>,
    hits: AtomicUsize,
}

async fn scripted(State(s): State<Arc<Script>>) -> Response {
    let n = s.hits.fetch_add(1, Ordering::SeqCst);
    let (status, headers) = {
        let acts = s.acts.lock().unwrap();
        acts.get(n).cloned().unwrap_or((200, Vec::new()))
    };
    if status == 200 {
        return response(200, completion(20, 5), &[]);
    }
    let headers: Vec<(String, String)> = headers
        .iter()
        .map(|(k, v)| {
            let v = match v.strip_prefix("{date+").and_then(|r| r.strip_suffix('}')) {
                Some(secs) => httpdate::fmt_http_date(
                    SystemTime::now() + Duration::from_secs(secs.parse().unwrap()),
                ),
                None => v.to_string(),
            };
            (k.to_string(), v)
        })
        .collect();
    response(
        status,
        r#"{"error":{"message":"slow down","type":"rate_limit"}}"#.into(),
        &headers,
    )
}

/// Calls the model once against a server answering `first`, then 200; returns the wait after
/// the first attempt as (after, ms, hint_ms, capped).
async fn wait_after(first: Act, max_wait: Duration) -> (String, f64, Option<f64>, bool) {
    let script = Arc::new(Script {
        acts: Mutex::new(vec![first]),
        hits: AtomicUsize::new(0),
    });
    let url = serve(
        Router::new()
            .route("/v1/chat/completions", post(scripted))
            .with_state(script.clone()),
    )
    .await;
    let model = OpenAiModel::new(OpenAiConfig {
        max_retries: 2,
        max_retry_wait: max_wait,
        ..OpenAiConfig::new(url, "m")
    })
    .unwrap();
    let reply = model.chat(&request()).await.unwrap();
    assert_eq!(script.hits.load(Ordering::SeqCst), 2);
    assert_eq!(reply.retries, 1);
    assert_eq!(reply.attempts.len(), 2);
    assert_eq!(reply.attempts[0].status, Some(script_status(&script)));
    assert!(reply.attempts[1].error.is_none());
    let wait = reply.attempts[0]
        .wait
        .clone()
        .expect("a wait after a retried attempt");
    assert!((reply.retry_wait_ms - wait.ms).abs() < 1e-9);
    (wait.after, wait.ms, wait.hint_ms, wait.capped)
}

fn script_status(s: &Script) -> u16 {
    s.acts.lock().unwrap()[0].0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_retry_hint_is_followed_exactly() {
    let max = Duration::from_secs(5);
    // LiteLLM forwards the upstream's Retry-After under its own name, and sends no Retry-After.
    let (after, ms, hint, capped) =
        wait_after((429, vec![("llm_provider-retry-after", "0.3")]), max).await;
    assert_eq!(after, "llm_provider-retry-after");
    assert_eq!(hint, Some(300.0));
    assert!(
        (295.0..600.0).contains(&ms),
        "no jitter below the hint: {ms}"
    );
    assert!(!capped);

    let (after, ms, hint, _) = wait_after((429, vec![("retry-after-ms", "150")]), max).await;
    assert_eq!((after.as_str(), hint), ("retry-after-ms", Some(150.0)));
    assert!((145.0..450.0).contains(&ms), "{ms}");

    // OpenAI's reset headers: only the spent limit's reset applies.
    let openai = vec![
        ("x-ratelimit-remaining-requests", "42"),
        ("x-ratelimit-reset-requests", "6m0s"),
        ("x-ratelimit-remaining-tokens", "0"),
        ("x-ratelimit-reset-tokens", "200ms"),
    ];
    let (after, ms, hint, _) = wait_after((429, openai), max).await;
    assert_eq!(
        (after.as_str(), hint),
        ("x-ratelimit-reset-tokens", Some(200.0))
    );
    assert!((195.0..500.0).contains(&ms), "{ms}");

    // The largest of several hints.
    let (after, ms, _, _) = wait_after(
        (
            503,
            vec![("retry-after", "0.1"), ("llm_provider-retry-after", "0.4")],
        ),
        max,
    )
    .await;
    assert_eq!(after, "llm_provider-retry-after");
    assert!((395.0..700.0).contains(&ms), "{ms}");

    // Retry-After as an HTTP date two seconds ahead (whole seconds: 1 to 2 s from now).
    let (after, ms, hint, _) = wait_after((503, vec![("retry-after", "{date+2}")]), max).await;
    assert_eq!(after, "retry-after");
    assert!(
        (950.0..2600.0).contains(&ms) && hint.is_some_and(|h| h >= 1000.0),
        "{ms} {hint:?}"
    );

    // No hint: backoff with jitter (recorded as such); a hint beyond the cap is cut to it.
    let (after, _, hint, _) = wait_after((429, vec![]), max).await;
    assert_eq!((after.as_str(), hint), ("backoff", None));
    let (after, ms, hint, capped) = wait_after(
        (429, vec![("llm_provider-retry-after", "30")]),
        Duration::from_millis(100),
    )
    .await;
    assert_eq!(after, "llm_provider-retry-after");
    assert_eq!(hint, Some(30_000.0));
    assert!(capped);
    assert!((95.0..400.0).contains(&ms), "{ms}");
}

// ---------------------------------------------------------------------------------------------
// Failed turns, spend and budgets through the run path.
// ---------------------------------------------------------------------------------------------

/// The first observation of a seed, JSON-escaped as it appears in a request body.
fn first_observation(seed: i64) -> String {
    let textures = TextureSet::builtin();
    let mut env = Env::new(
        EnvConfig {
            seed,
            size: [IMAGE_SIZE, IMAGE_SIZE],
            length: Some(EPISODE_LENGTH),
            ..EnvConfig::default()
        },
        &textures,
    )
    .unwrap();
    env.reset();
    let text = serde_json::to_string(&observe(&env, ObsFormat::State)).unwrap();
    text[1..text.len() - 1].to_string()
}

/// Seed 1's first turn: a 429 (`retry-after: 0`), then a billed 200 without choices. Seed 2's
/// first turn: 503 for ever. Everything else: a completion billed 20 in / 5 out.
#[derive(Default)]
struct Billing {
    seed1: String,
    seed2: String,
    seed1_hits: AtomicUsize,
    /// Fail seed 2 (a later run may heal it).
    break_seed2: AtomicBool,
}

async fn billing(State(s): State<Arc<Billing>>, body: Bytes) -> Response {
    let text = String::from_utf8_lossy(&body);
    if text.contains(&s.seed1) {
        if s.seed1_hits.fetch_add(1, Ordering::SeqCst) == 0 {
            let h = [("retry-after".to_string(), "0".to_string())];
            return response(429, r#"{"error":{"message":"slow down"}}"#.into(), &h);
        }
        let body = json!({"id": "x", "choices": [], "usage": {"prompt_tokens": 30, "completion_tokens": 7}});
        return response(200, body.to_string(), &[]);
    }
    if text.contains(&s.seed2) && s.break_seed2.load(Ordering::SeqCst) {
        let h = [("retry-after".to_string(), "0".to_string())];
        return response(503, r#"{"error":{"message":"upstream down"}}"#.into(), &h);
    }
    response(200, completion(20, 5), &[])
}

fn options(seeds: Vec<i64>, turns: u32, budget: Budget) -> RunOptions {
    let conversation = ConversationConfig {
        system: Prompts::builtin().system(Protocol::Tool, 8),
        protocol: Protocol::Tool,
        modality: Modality::Text,
        history: 1,
        image_history: 0,
        max_actions: 8,
        temperature: None,
        max_tokens: None,
        seed: None,
        tool_choice: true,
        layout: Default::default(),
    };
    RunOptions {
        episode: EpisodeConfig {
            model: "m".into(),
            turns,
            episode_length: EPISODE_LENGTH,
            image_size: IMAGE_SIZE,
            obs_format: ObsFormat::State,
            conversation,
            textures: Arc::new(TextureSet::builtin()),
            prices: Some(vlm_eval::model::prices::Price::flat("m", 1.0, 1.0, 2.0)),
            budget: Arc::new(budget),
            cache: None,
            api_seed: false,
            prompt_cache_key: None,
            play: Default::default(),
            frames: Default::default(),
        },
        seeds,
        concurrency: 1,
        force: false,
        progress: false,
        run_info: json!({"config": {"test": "real_servers"}}),
        stop_on_ctrl_c: false,
    }
}

fn read_episode(dir: &Path, seed: i64) -> (EpisodeResult, Vec<Value>) {
    let ep = dir.join(format!("episodes/seed_{seed}"));
    let result =
        serde_json::from_str(&std::fs::read_to_string(ep.join("episode.json")).unwrap()).unwrap();
    let lines = std::fs::read_to_string(ep.join("trajectory.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (result, lines)
}

async fn billing_server() -> (String, Arc<Billing>) {
    let server = Arc::new(Billing {
        seed1: first_observation(1),
        seed2: first_observation(2),
        ..Billing::default()
    });
    server.break_seed2.store(true, Ordering::SeqCst);
    assert!(!server.seed1.contains(&server.seed2) && !server.seed2.contains(&server.seed1));
    let url = serve(
        Router::new()
            .route("/v1/chat/completions", post(billing))
            .with_state(server.clone()),
    )
    .await;
    (url, server)
}

fn model(url: &str) -> Arc<OpenAiModel> {
    Arc::new(
        OpenAiModel::new(OpenAiConfig {
            max_retries: 2,
            max_retry_wait: Duration::from_millis(20),
            ..OpenAiConfig::new(url, "m")
        })
        .unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_turns_keep_their_history_and_spend_covers_everything() {
    let (url, server) = billing_server().await;
    let dir = tmp("spend");
    let out = run(
        options(vec![0, 1, 2], 2, Budget::default()),
        RunDir::new(dir.clone()),
        model(&url),
    )
    .await
    .unwrap();

    let (e0, _) = read_episode(&dir, 0);
    assert_eq!((e0.termination, e0.turns), (Termination::TurnBudget, 2));
    let s0 = e0.spent.clone().unwrap();
    assert_eq!(
        (s0.requests, s0.input_tokens, s0.output_tokens),
        (2, 40, 10)
    );

    // Seed 1: a 429, then a billed answer without choices (not retried).
    let (e1, lines) = read_episode(&dir, 1);
    assert_eq!(
        (e1.termination, e1.turns, e1.retries),
        (Termination::Error, 0, 1)
    );
    assert!(
        e1.error.as_deref().unwrap().contains("no choices"),
        "{:?}",
        e1.error
    );
    let row = &lines[0];
    assert!(
        row["error"].as_str().unwrap().contains("no choices"),
        "{row}"
    );
    assert_eq!(row["retries"], 1);
    let attempts = row["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 2);
    assert_eq!(attempts[0]["status"], 429);
    assert_eq!(attempts[0]["wait"]["after"], "retry-after");
    assert_eq!(
        attempts[1]["usage"],
        json!({"input_tokens": 30, "output_tokens": 7, "billed_output_tokens": 7, "output_rule": "completion"})
    );
    let s1 = e1.spent.clone().unwrap();
    assert_eq!(
        (s1.requests, s1.retries, s1.input_tokens, s1.output_tokens),
        (2, 1, 30, 7)
    );

    // Seed 2: 503 on every attempt; the error says so and the files agree.
    let (e2, lines) = read_episode(&dir, 2);
    assert_eq!((e2.termination, e2.retries), (Termination::Error, 2));
    assert!(e2.error.as_deref().unwrap().contains("after 2 retries"));
    let row = &lines[0];
    assert_eq!(row["retries"], 2);
    assert!(row["retry_wait_ms"].as_f64().unwrap() > 0.0);
    let attempts = row["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 3);
    assert!(attempts.iter().all(|a| a["status"] == 503), "{row}");
    assert!(attempts[2].get("wait").is_none());
    let s2 = e2.spent.clone().unwrap();
    assert_eq!((s2.requests, s2.retries, s2.input_tokens), (3, 2, 0));

    // The summary's spend is over all three episodes; its metrics only over seed 0.
    let spent = &out.summary.spent;
    assert_eq!(out.summary.completed, 1);
    assert_eq!(
        (
            spent.requests,
            spent.retries,
            spent.input_tokens,
            spent.output_tokens
        ),
        (7, 3, 70, 17)
    );
    let cost = spent.cost_usd.unwrap();
    assert!((cost - (70.0 + 2.0 * 17.0) / 1e6).abs() < 1e-12, "{cost}");
    let on_disk: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(on_disk["spent"]["requests"], 7);
    assert_eq!(out.summary.retries, 3);

    // A rerun heals seed 2 and replays the errored seeds: their earlier tries stay counted.
    server.break_seed2.store(false, Ordering::SeqCst);
    let again = run(
        options(vec![0, 1, 2], 2, Budget::default()),
        RunDir::new(dir.clone()),
        model(&url),
    )
    .await
    .unwrap();
    assert_eq!(again.skipped, 1);
    let (e2, _) = read_episode(&dir, 2);
    assert_eq!(e2.termination, Termination::TurnBudget);
    assert_eq!(e2.spent_before.as_ref().unwrap().requests, 3);
    assert_eq!(e2.spent.as_ref().unwrap().requests, 2);
    let (e1, _) = read_episode(&dir, 1);
    // Seed 1's second try: its first request is now the billed no-choice answer.
    assert_eq!(e1.spent_before.as_ref().unwrap().requests, 2);
    assert_eq!(e1.spent.as_ref().unwrap().requests, 1);
    assert_eq!(again.summary.spent.requests, 2 + (2 + 1) + (3 + 2));
    assert_eq!(again.summary.spent.input_tokens, 40 + (30 + 30) + 40);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budgets_count_billed_failures() {
    let (url, _server) = billing_server().await;
    let dir = tmp("budget");
    // Seed 1 goes first and fails, billed 37 tokens: that alone spends a 30-token budget.
    let out = run(
        options(vec![1, 0], 3, Budget::new(None, Some(30))),
        RunDir::new(dir.clone()),
        model(&url),
    )
    .await
    .unwrap();
    let (e0, _) = read_episode(&dir, 0);
    assert_eq!((e0.termination, e0.turns), (Termination::Budget, 0));
    assert_eq!(out.summary.budget_stopped, 1);
    assert_eq!(
        out.summary.spent.input_tokens + out.summary.spent.output_tokens,
        37
    );
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------------------------------------
// The CLI: auth hints, run names, prompt folders, spend shown apart.
// ---------------------------------------------------------------------------------------------

async fn vlm_eval(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = support::tokio_command();
    cmd.args(args).env_remove("MY_KEY");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let o = cmd.output().await.unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

async fn status_server(status: u16, body: &'static str) -> String {
    serve(Router::new().route(
        "/v1/chat/completions",
        post(move || async move { response(status, body.into(), &[]) }),
    ))
    .await
}

fn episode_error(out: &Path, run: &str) -> String {
    let text = std::fs::read_to_string(out.join(run).join("episodes/seed_0/episode.json")).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    v["error"].as_str().unwrap_or_default().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_errors_say_whether_and_where_a_key_was_sent() {
    let out = tmp("auth");
    let dir = out.to_str().unwrap();
    let refused = status_server(
        401,
        r#"{"error":{"message":"Invalid API key","type":"auth_error"}}"#,
    )
    .await;
    let args = |url: &str, run: &'static str| -> Vec<String> {
        [
            "--model",
            "m",
            "--base-url",
            url,
            "--seeds",
            "1",
            "--steps",
            "1",
            "--max-retries",
            "0",
            "--out",
            dir,
            "--run-name",
            run,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let call = |a: Vec<String>, env: Vec<(&'static str, &'static str)>| async move {
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        vlm_eval(&a, &env).await
    };

    let (code, stdout, stderr) = call(
        args(&refused, "sent"),
        vec![("OPENAI_API_KEY", "sk-test-SECRET-42")],
    )
    .await;
    assert_eq!(code, 1, "{stderr}");
    let err = episode_error(&out, "sent");
    assert!(
        err.contains("HTTP 401") && err.contains("Invalid API key"),
        "{err}"
    );
    assert!(
        err.contains("an API key was sent (from $OPENAI_API_KEY)"),
        "{err}"
    );
    assert!(!err.contains("SECRET") && !stdout.contains("SECRET") && !stderr.contains("SECRET"));
    assert!(
        stdout.contains("spent (all episodes, all requests): 1 requests (0 retries)"),
        "{stdout}"
    );

    let mut a = args(&refused, "unset");
    a.extend(["--api-key-env".to_string(), "MY_KEY".to_string()]);
    let (code, _, _) = call(a, vec![]).await;
    assert_eq!(code, 1);
    let err = episode_error(&out, "unset");
    assert!(
        err.contains("no API key was sent ($MY_KEY is not set)"),
        "{err}"
    );
    assert!(err.contains("export MY_KEY=<key>"), "{err}");

    let key_file = out.join("key.txt");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(&key_file, "sk-file-SECRET\n").unwrap();
    let mut a = args(&refused, "file");
    a.extend(["--api-key-file".to_string(), key_file.display().to_string()]);
    let (code, _, _) = call(a, vec![]).await;
    assert_eq!(code, 1);
    let err = episode_error(&out, "file");
    assert!(err.contains("read from --api-key-file"), "{err}");
    assert!(!err.contains("SECRET"));

    // A local server's first answer is an error while no key was sent: say so, whatever the
    // status (here a 404 for a wrong path).
    let wrong_path = format!("{}/wrong", status_server(200, "{}").await);
    let (code, _, _) = call(args(&wrong_path, "local"), vec![]).await;
    assert_eq!(code, 1);
    let err = episode_error(&out, "local");
    assert!(err.contains("HTTP 404"), "{err}");
    assert!(
        err.contains("no API key was sent ($OPENAI_API_KEY is not set)"),
        "{err}"
    );

    // LiteLLM without a database answers a wrong key with 400 "No connected db".
    let no_db = status_server(
        400,
        r#"{"error":{"message":"Authentication Error, No connected db.","type":"auth_error","param":"None","code":"400"}}"#,
    )
    .await;
    let (code, _, _) = call(args(&no_db, "nodb"), vec![("OPENAI_API_KEY", "sk-wrong")]).await;
    assert_eq!(code, 1);
    let err = episode_error(&out, "nodb");
    assert!(err.contains("an API key was sent"), "{err}");

    // An ordinary 400 with a key is not about the key.
    let bad = status_server(400, r#"{"error":{"message":"bad image"}}"#).await;
    let (_, _, _) = call(args(&bad, "bad"), vec![("OPENAI_API_KEY", "sk-x")]).await;
    let err = episode_error(&out, "bad");
    assert!(
        err.contains("bad image") && !err.contains("API key"),
        "{err}"
    );

    // compare shows the spend apart, and writes it beside the CSV.
    let csv = out.join("cmp.csv");
    let run = out.join("sent");
    let (code, stdout, stderr) = vlm_eval(
        &[
            "compare",
            run.to_str().unwrap(),
            "--csv",
            csv.to_str().unwrap(),
        ],
        &[],
    )
    .await;
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("spent (every request of every episode"),
        "{stdout}"
    );
    let spend_csv = std::fs::read_to_string(out.join("cmp.spend.csv")).unwrap();
    assert!(
        spend_csv.starts_with("run,spent_requests,spent_retries"),
        "{spend_csv}"
    );
    assert!(spend_csv.contains("sent,1,0,0,0,"), "{spend_csv}");
    let _ = std::fs::remove_dir_all(&out);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_names_stay_inside_out_and_empty_prompt_folders_are_refused() {
    let root = tmp("names");
    let out = root.join("a/b/results");
    std::fs::create_dir_all(&out).unwrap();
    for name in ["../../x", "..", ".", "a/b", "/tmp/abs", ""] {
        let (code, _, stderr) = vlm_eval(
            &[
                "--model",
                "mock",
                "--seeds",
                "1",
                "--steps",
                "1",
                "--quiet",
                "--out",
                out.to_str().unwrap(),
                "--run-name",
                name,
            ],
            &[],
        )
        .await;
        assert_eq!(code, 2, "{name}: {stderr}");
        assert!(stderr.contains("one folder name"), "{name}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    }
    assert!(!root.join("a/x").exists() && !root.join("a/b/x").exists());
    assert_eq!(
        std::fs::read_dir(&out).unwrap().count(),
        0,
        "nothing written"
    );

    // The same rule for a run name from --config.
    let config = root.join("run.toml");
    std::fs::write(&config, "model = \"mock\"\nrun-name = \"../escape\"\n").unwrap();
    let (code, _, stderr) = vlm_eval(&["--config", config.to_str().unwrap()], &[]).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("one folder name"), "{stderr}");

    let prompts = root.join("prompts");
    std::fs::create_dir_all(&prompts).unwrap();
    std::fs::write(prompts.join("system.txt"), "misnamed").unwrap();
    let (code, _, stderr) = vlm_eval(
        &[
            "--model",
            "mock",
            "--prompts",
            prompts.to_str().unwrap(),
            "--quiet",
        ],
        &[],
    )
    .await;
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("holds none of the files it reads (system_tool.txt, system_text.txt)"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&root);
}
