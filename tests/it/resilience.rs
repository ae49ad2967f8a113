//! Resilience of the OpenAI backend against our own misbehaving servers on 127.0.0.1: a
//! rate-limiting server driven through the real run path (the adaptive limiter must settle
//! near the server's capacity), and faults (5xx bursts, hangs, resets, truncated bodies, long
//! `Retry-After`, turn deadlines) through `OpenAiModel::chat` and through a full run.

use crate::support;

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use vlm_eval::agent::conversation::{ConversationConfig, Modality};
use vlm_eval::agent::observe::{observe, ObsFormat};
use vlm_eval::agent::parse::Protocol;
use vlm_eval::agent::prompt::Prompts;
use vlm_eval::crafter::{Env, EnvConfig, TextureSet};
use vlm_eval::eval::episode::EpisodeConfig;
use vlm_eval::eval::runner::{run, RunOptions};
use vlm_eval::model::limit::AdaptiveLimit;
use vlm_eval::model::openai::{OpenAiConfig, OpenAiModel};
use vlm_eval::model::{ChatModel, ChatRequest, Message, ModelError, Role};
use vlm_eval::results::formats::{EpisodeResult, Termination};
use vlm_eval::results::store::RunDir;
use vlm_eval::results::summary::Summary;

const IMAGE_SIZE: usize = 64;
const EPISODE_LENGTH: u32 = 10_000;

/// A valid completion calling the game tool with one `noop`.
fn completion() -> String {
    json!({
        "id": "chatcmpl-r", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "interact_many",
                "arguments": "{\"actions\":[\"noop\"],\"reasoning\":\"wait\"}"}}]}}],
        "usage": {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25}
    })
    .to_string()
}

fn json_response(status: u16, body: String, headers: &[(&'static str, &str)]) -> Response {
    let mut r = (StatusCode::from_u16(status).unwrap(), body).into_response();
    r.headers_mut()
        .insert("content-type", "application/json".parse().unwrap());
    for (k, v) in headers {
        r.headers_mut().insert(*k, v.parse().unwrap());
    }
    r
}

async fn serve_axum(app: Router) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}/v1")
}

fn config(base_url: &str) -> OpenAiConfig {
    OpenAiConfig {
        request_timeout: Duration::from_secs(5),
        max_retries: 3,
        max_retry_wait: Duration::from_millis(50),
        ..OpenAiConfig::new(base_url, "test-model")
    }
}

fn simple_request() -> ChatRequest {
    ChatRequest {
        messages: vec![Message::text(Role::User, "hi")],
        ..ChatRequest::default()
    }
}

fn run_options(seeds: std::ops::Range<i64>, turns: u32, concurrency: usize) -> RunOptions {
    let conversation = ConversationConfig {
        system: Prompts::builtin().system(Protocol::Tool, 8),
        protocol: Protocol::Tool,
        modality: Modality::Text,
        history: 2,
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
            model: "test-model".into(),
            turns,
            episode_length: EPISODE_LENGTH,
            image_size: IMAGE_SIZE,
            obs_format: ObsFormat::State,
            conversation,
            textures: Arc::new(TextureSet::builtin()),
            prices: None,
            budget: Default::default(),
            cache: None,
            api_seed: false,
            prompt_cache_key: None,
            play: Default::default(),
            frames: Default::default(),
        },
        seeds: seeds.collect(),
        concurrency,
        force: true,
        progress: false,
        run_info: json!({"config": {"test": "resilience"}}),
        stop_on_ctrl_c: false,
    }
}

fn tmp(name: &str) -> PathBuf {
    support::scratch(&format!("resilience-{name}"))
}

/// Every `episode.json` and trajectory line of a run folder, parsed (panics on a torn file).
fn read_run(root: &Path) -> (Vec<EpisodeResult>, Vec<Value>) {
    let mut episodes = Vec::new();
    let mut lines = Vec::new();
    for entry in std::fs::read_dir(root.join("episodes")).unwrap() {
        let dir = entry.unwrap().path();
        let text = std::fs::read_to_string(dir.join("episode.json")).unwrap();
        episodes.push(serde_json::from_str::<EpisodeResult>(&text).unwrap());
        let traj = std::fs::read_to_string(dir.join("trajectory.jsonl")).unwrap();
        for line in traj.lines() {
            lines.push(serde_json::from_str::<Value>(line).unwrap());
        }
    }
    episodes.sort_by_key(|e| e.seed);
    (episodes, lines)
}

// ---------------------------------------------------------------------------------------------
// a. Rate limit through the full run path.
// ---------------------------------------------------------------------------------------------

const CAPACITY: usize = 5;
/// Accepted requests before which the limit is still coming down from 32.
const WARM_UP: usize = 40;

#[derive(Default)]
struct Limited {
    in_progress: AtomicUsize,
    accepted_busy: AtomicUsize,
    accepted: AtomicUsize,
    refused: AtomicUsize,
    refused_late: AtomicUsize,
    /// Most requests (accepted or refused) in progress at once after the warm-up.
    peak_late: AtomicUsize,
    peak: AtomicUsize,
}

async fn limited(State(s): State<Arc<Limited>>) -> Response {
    let now = s.in_progress.fetch_add(1, Ordering::SeqCst) + 1;
    s.peak.fetch_max(now, Ordering::SeqCst);
    let late = s.accepted.load(Ordering::SeqCst) >= WARM_UP;
    if late {
        s.peak_late.fetch_max(now, Ordering::SeqCst);
    }
    let response = if s.accepted_busy.fetch_add(1, Ordering::SeqCst) >= CAPACITY {
        s.accepted_busy.fetch_sub(1, Ordering::SeqCst);
        // A refusal takes a moment too, so overlapping ones show in `peak`.
        tokio::time::sleep(Duration::from_millis(2)).await;
        s.refused.fetch_add(1, Ordering::SeqCst);
        if late {
            s.refused_late.fetch_add(1, Ordering::SeqCst);
        }
        json_response(
            429,
            r#"{"error":{"message":"too many requests in flight","type":"rate_limit"}}"#.into(),
            &[("retry-after", "0")],
        )
    } else {
        tokio::time::sleep(Duration::from_millis(50)).await;
        s.accepted_busy.fetch_sub(1, Ordering::SeqCst);
        s.accepted.fetch_add(1, Ordering::SeqCst);
        json_response(200, completion(), &[])
    };
    s.in_progress.fetch_sub(1, Ordering::SeqCst);
    response
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rate_limited_run_settles_near_the_server_capacity() {
    let server = Arc::new(Limited::default());
    let url = serve_axum(
        Router::new()
            .route("/v1/chat/completions", post(limited))
            .with_state(server.clone()),
    )
    .await;
    let limit = Arc::new(AdaptiveLimit::new(32, 5));
    let model = Arc::new(
        OpenAiModel::new(OpenAiConfig {
            max_retries: 30,
            adaptive: Some(limit.clone()),
            turn_deadline: Some(Duration::from_secs(15)),
            ..config(&url)
        })
        .unwrap(),
    );
    assert_eq!(model.concurrency_limit(), Some(32));

    // Sample the limit while the run goes on.
    let samples = Arc::new(Mutex::new(Vec::<(usize, usize)>::new()));
    let sampler = {
        let (limit, server, samples) = (limit.clone(), server.clone(), samples.clone());
        tokio::spawn(async move {
            loop {
                let accepted = server.accepted.load(Ordering::SeqCst);
                samples.lock().unwrap().push((accepted, limit.current()));
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };

    let dir = tmp("ratelimit");
    let started = Instant::now();
    let out = run(
        run_options(0..32, 5, 32),
        RunDir::new(dir.clone()),
        model.clone(),
    )
    .await
    .unwrap();
    let wall = started.elapsed();
    sampler.abort();

    let (episodes, lines) = read_run(&dir);
    assert_eq!(episodes.len(), 32);
    for e in &episodes {
        assert_ne!(
            e.termination,
            Termination::Error,
            "seed {}: {:?}",
            e.seed,
            e.error
        );
        assert_eq!(e.turns, 5, "seed {}", e.seed);
    }
    assert_eq!(out.summary.errors, 0);
    assert_eq!(lines.len(), 160);
    assert_eq!(server.accepted.load(Ordering::SeqCst), 160);

    let final_limit = limit.current();
    let refused = server.refused.load(Ordering::SeqCst);
    let refused_late = server.refused_late.load(Ordering::SeqCst);
    let peak_late = server.peak_late.load(Ordering::SeqCst);
    let samples = samples.lock().unwrap().clone();
    let late: Vec<usize> = samples
        .iter()
        .filter(|(accepted, _)| *accepted >= WARM_UP)
        .map(|(_, l)| *l)
        .collect();
    let mut histogram = std::collections::BTreeMap::new();
    for l in &late {
        *histogram.entry(*l).or_insert(0usize) += 1;
    }
    eprintln!(
        "rate limit: final limit {final_limit}, halvings {}, refused {refused} ({refused_late} after warm-up), \
         server peak {} ({peak_late} after warm-up), limit after warm-up {histogram:?}, \
         retries {}, wall {:.2} s",
        limit.halvings(),
        server.peak.load(Ordering::SeqCst),
        out.summary.retries,
        wall.as_secs_f64()
    );

    // The limit came down from 32 and settled around the capacity: halving from 6 (the
    // first value the server refuses) gives 3, and it only grows while fully used.
    assert!((3..=8).contains(&final_limit), "final limit {final_limit}");
    assert!(!late.is_empty());
    assert!(
        late.iter().all(|l| (3..=8).contains(l)),
        "limit after warm-up: {histogram:?}"
    );
    // After the warm-up the server never sees the 32-wide burst again, and refusals are a
    // small fraction of the 120 accepted requests (about one per growth step).
    assert!(peak_late <= 8, "server peak after warm-up {peak_late}");
    assert!(
        refused_late <= 40,
        "{refused_late} refusals after warm-up for 120 accepted"
    );
    assert_eq!(out.summary.retries as usize, refused);
    assert!(wall < Duration::from_secs(20), "{wall:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------------------------------------
// b. Faults through `OpenAiModel::chat`.
// ---------------------------------------------------------------------------------------------

/// What a scripted axum server does with one request.
#[derive(Clone)]
enum Act {
    Status(u16, &'static str),
    Hang,
    Ok,
}

#[derive(Default)]
struct Script {
    acts: Mutex<Vec<Act>>,
    hits: AtomicUsize,
}

/// Answers request `n` with `acts[n]`, the last act repeating.
async fn scripted(State(s): State<Arc<Script>>) -> Response {
    let n = s.hits.fetch_add(1, Ordering::SeqCst);
    let act = {
        let acts = s.acts.lock().unwrap();
        acts[n.min(acts.len() - 1)].clone()
    };
    match act {
        Act::Status(status, retry_after) => json_response(
            status,
            format!(r#"{{"error":{{"message":"fault {status}","type":"server_error"}}}}"#),
            &[("retry-after", retry_after)],
        ),
        Act::Hang => {
            tokio::time::sleep(Duration::from_secs(30)).await;
            json_response(200, completion(), &[])
        }
        Act::Ok => json_response(200, completion(), &[]),
    }
}

async fn serve_script(acts: Vec<Act>) -> (String, Arc<Script>) {
    let script = Arc::new(Script {
        acts: Mutex::new(acts),
        hits: AtomicUsize::new(0),
    });
    let url = serve_axum(
        Router::new()
            .route("/v1/chat/completions", post(scripted))
            .with_state(script.clone()),
    )
    .await;
    (url, script)
}

#[tokio::test]
async fn a_burst_of_500s_then_success() {
    let (url, script) = serve_script(vec![
        Act::Status(500, "0.01"),
        Act::Status(500, "0.01"),
        Act::Status(500, "0.01"),
        Act::Ok,
    ])
    .await;
    let reply = OpenAiModel::new(config(&url))
        .unwrap()
        .chat(&simple_request())
        .await
        .unwrap();
    assert_eq!(reply.retries, 3);
    assert_eq!(reply.tool_calls[0].name, "interact_many");
    assert_eq!(script.hits.load(Ordering::SeqCst), 4);
    assert!(
        (25.0..1000.0).contains(&reply.retry_wait_ms),
        "3 waits of 10 ms: {}",
        reply.retry_wait_ms
    );
    assert!(reply.latency_ms >= reply.retry_wait_ms);

    // One more 500 than retries allow: the last status comes back.
    let (url, script) = serve_script(vec![Act::Status(500, "0")]).await;
    let err = OpenAiModel::new(config(&url))
        .unwrap()
        .chat(&simple_request())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ModelError::Http { status: 500, message } if message.contains("after 3 retries")),
        "{err:?}"
    );
    assert_eq!(script.hits.load(Ordering::SeqCst), 4);
}

#[tokio::test]
async fn a_hang_is_retried_then_times_out() {
    let cfg = |url: &str| OpenAiConfig {
        request_timeout: Duration::from_millis(300),
        max_retries: 2,
        ..config(url)
    };
    let (url, script) = serve_script(vec![Act::Hang, Act::Ok]).await;
    let reply = OpenAiModel::new(cfg(&url))
        .unwrap()
        .chat(&simple_request())
        .await
        .unwrap();
    assert_eq!(reply.retries, 1);
    assert!(reply.latency_ms >= 300.0, "{}", reply.latency_ms);
    assert_eq!(script.hits.load(Ordering::SeqCst), 2);

    let (url, script) = serve_script(vec![Act::Hang]).await;
    let started = Instant::now();
    let err = OpenAiModel::new(cfg(&url))
        .unwrap()
        .chat(&simple_request())
        .await
        .unwrap_err();
    assert!(
        matches!(err, ModelError::Timeout(t) if (t - 0.3).abs() < 1e-9),
        "{err:?}"
    );
    assert_eq!(script.hits.load(Ordering::SeqCst), 3);
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn retry_after_beyond_max_retry_wait_is_capped() {
    let (url, script) = serve_script(vec![Act::Status(429, "30"), Act::Ok]).await;
    let started = Instant::now();
    let reply = OpenAiModel::new(OpenAiConfig {
        max_retry_wait: Duration::from_millis(200),
        ..config(&url)
    })
    .unwrap()
    .chat(&simple_request())
    .await
    .unwrap();
    let elapsed = started.elapsed();
    assert_eq!(reply.retries, 1);
    assert_eq!(script.hits.load(Ordering::SeqCst), 2);
    assert!(elapsed < Duration::from_secs(3), "waited {elapsed:?}");
    assert!(
        (190.0..1500.0).contains(&reply.retry_wait_ms),
        "{}",
        reply.retry_wait_ms
    );
}

#[tokio::test]
async fn the_turn_deadline_bounds_retries_waits_and_queueing() {
    // Persistent 429 with Retry-After 1 s: the second wait would pass a 1.5 s deadline.
    let (url, script) = serve_script(vec![Act::Status(429, "1")]).await;
    let cfg = OpenAiConfig {
        max_retries: 10,
        max_retry_wait: Duration::from_secs(5),
        turn_deadline: Some(Duration::from_millis(1500)),
        ..config(&url)
    };
    let started = Instant::now();
    let err = OpenAiModel::new(cfg)
        .unwrap()
        .chat(&simple_request())
        .await
        .unwrap_err();
    assert!(
        matches!(err, ModelError::Timeout(t) if (t - 1.5).abs() < 1e-9),
        "{err:?}"
    );
    assert_eq!(script.hits.load(Ordering::SeqCst), 2);
    assert!(started.elapsed() < Duration::from_millis(1500));

    // A hang shorter than the attempt timeout but longer than the deadline.
    let (url, script) = serve_script(vec![Act::Hang]).await;
    let started = Instant::now();
    let err = OpenAiModel::new(OpenAiConfig {
        request_timeout: Duration::from_secs(10),
        turn_deadline: Some(Duration::from_millis(400)),
        ..config(&url)
    })
    .unwrap()
    .chat(&simple_request())
    .await
    .unwrap_err();
    let elapsed = started.elapsed();
    assert!(matches!(err, ModelError::Timeout(_)), "{err:?}");
    assert_eq!(script.hits.load(Ordering::SeqCst), 1);
    assert!(
        elapsed >= Duration::from_millis(390) && elapsed < Duration::from_secs(2),
        "{elapsed:?}"
    );

    // Waiting for a permit counts too.
    let (url, script) = serve_script(vec![Act::Ok]).await;
    let limit = Arc::new(AdaptiveLimit::new(1, 1));
    let model = OpenAiModel::new(OpenAiConfig {
        adaptive: Some(limit.clone()),
        turn_deadline: Some(Duration::from_millis(200)),
        ..config(&url)
    })
    .unwrap();
    let held = limit.acquire().await;
    let err = model.chat(&simple_request()).await.unwrap_err();
    assert!(matches!(err, ModelError::Timeout(_)), "{err:?}");
    assert_eq!(script.hits.load(Ordering::SeqCst), 0);
    drop(held);
    model.chat(&simple_request()).await.unwrap();
    assert_eq!(limit.in_flight(), 0, "permits are given back");
    assert!(OpenAiModel::new(OpenAiConfig {
        turn_deadline: Some(Duration::ZERO),
        ..config(&url)
    })
    .is_err());
}

/// What a raw TCP server does with one connection.
#[derive(Clone, Copy, Debug)]
enum Raw {
    /// Close as soon as accepted, without reading.
    Close,
    /// Read only the start of the request, then close: the unread rest makes the kernel
    /// reset the connection.
    Reset,
    /// Announce a longer body than is sent, then close.
    ShortBody,
    /// A complete response whose JSON is cut in the middle (length matches).
    CutJson,
    /// A proper answer.
    Ok,
}

/// Read one HTTP request (headers and `Content-Length` body).
async fn read_request(stream: &mut TcpStream) -> io::Result<()> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            while buf.len() < end + 4 + length {
                let n = stream.read(&mut chunk).await?;
                if n == 0 {
                    return Ok(());
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            return Ok(());
        }
    }
}

async fn raw_answer(mut stream: TcpStream, act: Raw) -> io::Result<()> {
    match act {
        Raw::Close => return Ok(()),
        Raw::Reset => {
            let mut start = [0u8; 16];
            stream.read_exact(&mut start).await?;
            return Ok(());
        }
        _ => read_request(&mut stream).await?,
    }
    let head = |len: usize| {
        format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {len}\r\nconnection: close\r\n\r\n")
    };
    let body = completion();
    match act {
        Raw::Close | Raw::Reset => {}
        Raw::ShortBody => {
            stream.write_all(head(body.len() + 500).as_bytes()).await?;
            stream.write_all(&body.as_bytes()[..body.len() / 2]).await?;
            stream.flush().await?;
        }
        Raw::CutJson => {
            let cut = &body[..body.len() / 2];
            stream.write_all(head(cut.len()).as_bytes()).await?;
            stream.write_all(cut.as_bytes()).await?;
            stream.shutdown().await?;
        }
        Raw::Ok => {
            stream.write_all(head(body.len()).as_bytes()).await?;
            stream.write_all(body.as_bytes()).await?;
            stream.shutdown().await?;
        }
    }
    Ok(())
}

/// A raw HTTP/1.1 server: connection `n` gets `acts[n]`, the last act repeating.
async fn serve_raw(acts: Vec<Raw>) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let n = counter.fetch_add(1, Ordering::SeqCst);
            let act = acts[n.min(acts.len() - 1)];
            tokio::spawn(async move {
                let _ = raw_answer(stream, act).await;
            });
        }
    });
    (format!("http://{addr}/v1"), hits)
}

async fn raw_chat(acts: Vec<Raw>) -> (Result<f64, ModelError>, usize, u32) {
    let (url, hits) = serve_raw(acts).await;
    let result = OpenAiModel::new(OpenAiConfig {
        max_retries: 2,
        ..config(&url)
    })
    .unwrap()
    .chat(&simple_request())
    .await;
    let retries = result.as_ref().map(|r| r.retries).unwrap_or(0);
    (
        result.map(|r| r.retry_wait_ms),
        hits.load(Ordering::SeqCst),
        retries,
    )
}

#[tokio::test]
async fn resets_and_closed_connections_are_retried_then_connect_errors() {
    // The sanity case: our raw server answers properly.
    let (ok, hits, _) = raw_chat(vec![Raw::Ok]).await;
    assert!(ok.is_ok(), "{ok:?}");
    assert_eq!(hits, 1);
    for fault in [Raw::Reset, Raw::Close] {
        let (ok, hits, retries) = raw_chat(vec![fault, Raw::Ok]).await;
        assert!(ok.is_ok(), "{fault:?}: {ok:?}");
        assert_eq!((hits, retries), (2, 1), "{fault:?}");

        let (err, hits, _) = raw_chat(vec![fault]).await;
        let err = err.unwrap_err();
        assert!(
            matches!(&err, ModelError::Connect(m) if m.contains("after 2 retries")),
            "{fault:?}: {err:?}"
        );
        assert_eq!(hits, 3, "{fault:?}");
    }
}

#[tokio::test]
async fn truncated_bodies() {
    // Connection closed inside the announced body: a transport fault, retried.
    let (ok, hits, retries) = raw_chat(vec![Raw::ShortBody, Raw::Ok]).await;
    assert!(ok.is_ok(), "{ok:?}");
    assert_eq!((hits, retries), (2, 1));
    let (err, hits, _) = raw_chat(vec![Raw::ShortBody]).await;
    let err = err.unwrap_err();
    assert!(
        matches!(&err, ModelError::Connect(m) if m.contains("cut off") && m.contains("after 2 retries")),
        "{err:?}"
    );
    assert_eq!(hits, 3);

    // A complete response whose JSON is cut: the server said this, so not retried.
    let (err, hits, _) = raw_chat(vec![Raw::CutJson, Raw::Ok]).await;
    assert!(matches!(err, Err(ModelError::BadResponse(_))), "{err:?}");
    assert_eq!(hits, 1);
}

// ---------------------------------------------------------------------------------------------
// b'. Faults through a full run.
// ---------------------------------------------------------------------------------------------

const POISONED_SEED: i64 = 3;

#[derive(Default)]
struct Faulty {
    /// The first observation of the poisoned seed, JSON-escaped as it appears in a body.
    poison: String,
    attempts: Mutex<HashMap<u64, u32>>,
    injected: AtomicUsize,
    poisoned_hits: AtomicUsize,
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ *b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Every request of the poisoned seed fails (503); every other distinct request fails once
/// (500, 429, a hang or nothing, chosen by its hash) and then succeeds.
async fn faulty(State(s): State<Arc<Faulty>>, body: Bytes) -> Response {
    let text = String::from_utf8_lossy(&body);
    if text.contains(&s.poison) {
        s.poisoned_hits.fetch_add(1, Ordering::SeqCst);
        return json_response(
            503,
            r#"{"error":{"message":"backend down for this one","type":"server_error"}}"#.into(),
            &[("retry-after", "0")],
        );
    }
    let key = fnv(&body);
    let first = {
        let mut attempts = s.attempts.lock().unwrap();
        let n = attempts.entry(key).or_insert(0);
        *n += 1;
        *n == 1
    };
    if first && key % 4 != 3 {
        s.injected.fetch_add(1, Ordering::SeqCst);
        match key % 4 {
            0 => {
                return json_response(500, "internal error".into(), &[("retry-after", "0")]);
            }
            1 => {
                return json_response(429, "slow down".into(), &[("retry-after", "0")]);
            }
            _ => tokio::time::sleep(Duration::from_secs(5)).await,
        }
    }
    json_response(200, completion(), &[])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_run_with_faults_errors_only_the_poisoned_episode() {
    let opts = run_options(0..8, 4, 8);
    // The poisoned seed's first observation, as the episode will send it.
    let textures = TextureSet::builtin();
    let first_obs = |seed: i64| {
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
    };
    let poison = first_obs(POISONED_SEED);
    for seed in (0..8).filter(|&s| s != POISONED_SEED) {
        assert!(!first_obs(seed).contains(&poison), "seed {seed}");
    }
    let server = Arc::new(Faulty {
        poison,
        ..Faulty::default()
    });
    let url = serve_axum(
        Router::new()
            .route("/v1/chat/completions", post(faulty))
            .with_state(server.clone()),
    )
    .await;
    let limit = Arc::new(AdaptiveLimit::new(8, 4));
    let model = Arc::new(
        OpenAiModel::new(OpenAiConfig {
            request_timeout: Duration::from_millis(400),
            max_retries: 3,
            adaptive: Some(limit.clone()),
            ..config(&url)
        })
        .unwrap(),
    );
    let dir = tmp("faults");
    let started = Instant::now();
    let out = run(opts, RunDir::new(dir.clone()), model).await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(20));

    let (episodes, lines) = read_run(&dir);
    assert_eq!(episodes.len(), 8);
    for e in &episodes {
        if e.seed == POISONED_SEED {
            assert_eq!(e.termination, Termination::Error);
            assert_eq!(e.turns, 0);
            let reason = e.error.as_deref().unwrap();
            assert!(
                reason.starts_with("turn 0: HTTP 503")
                    && reason.contains("backend down")
                    && reason.contains("after 3 retries"),
                "{reason}"
            );
        } else {
            assert_ne!(
                e.termination,
                Termination::Error,
                "seed {}: {:?}",
                e.seed,
                e.error
            );
            assert_eq!(e.turns, 4, "seed {}", e.seed);
        }
    }
    assert_eq!(server.poisoned_hits.load(Ordering::SeqCst), 4);
    // Every injected fault cost exactly one retry of a turn that then succeeded; the poisoned
    // turn's 3 retries count too (a failed turn keeps its history).
    let injected = server.injected.load(Ordering::SeqCst);
    assert!(injected >= 10, "only {injected} faults injected");
    let retries: u32 = episodes.iter().map(|e| e.retries).sum();
    assert_eq!(retries as usize, injected + 3);
    let poisoned = episodes.iter().find(|e| e.seed == POISONED_SEED).unwrap();
    assert_eq!(poisoned.retries, 3);
    assert_eq!(poisoned.spent.as_ref().unwrap().requests, 4);
    // Per-turn waits in the trajectory add up to the episodes' totals.
    let per_turn: f64 = lines
        .iter()
        .filter_map(|l| l.get("retry_wait_ms").and_then(Value::as_f64))
        .sum();
    let total: f64 = episodes.iter().map(|e| e.retry_wait_ms).sum();
    assert!((per_turn - total).abs() < 1e-6, "{per_turn} vs {total}");
    assert!(lines
        .iter()
        .filter(|l| l.get("error").is_none())
        .all(|l| l["retry_wait_ms"].is_f64()));

    let summary: Summary =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary, out.summary);
    assert_eq!((summary.errors, summary.completed), (1, 7));
    assert_eq!(summary.retries as usize, injected + 3);
    assert_eq!(summary.spent.retries as usize, injected + 3);
    assert!((summary.retry_wait_s - total / 1000.0).abs() < 1e-9);
    assert_eq!(limit.in_flight(), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn old_episode_files_without_retry_wait_still_parse() {
    let mut ep = serde_json::to_value(EpisodeResult {
        seed: 1,
        world_seed: 2,
        model: "m".into(),
        progression: 0.0,
        score: 0,
        achievements: Default::default(),
        unlock_step: Default::default(),
        num_steps: 0,
        episode_return: 0.0,
        turns: 0,
        termination: Termination::TurnBudget,
        invalid_actions: 0,
        unknown_actions: 0,
        truncated_actions: 0,
        format: None,
        input_tokens: None,
        output_tokens: None,
        retries: 0,
        retry_wait_ms: 12.5,
        latency_ms: Default::default(),
        cost_usd: None,
        error: None,
        wall_s: 0.0,
        spent: None,
        spent_before: None,
        frames: None,
    })
    .unwrap();
    assert_eq!(ep["retry_wait_ms"], 12.5);
    ep.as_object_mut().unwrap().remove("retry_wait_ms");
    let back: EpisodeResult = serde_json::from_value(ep).unwrap();
    assert_eq!(back.retry_wait_ms, 0.0);
}
