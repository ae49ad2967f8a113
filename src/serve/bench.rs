//! The `bench serve` measurement: env steps per second through the HTTP API with many concurrent
//! sessions, and session-creation (reset) latency, measured with an in-process server and an
//! in-process HTTP client on loopback (both share the machine's cores).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{json, Value};

use super::{start, ServeConfig};
use crate::crafter::rng::RandomState;
use crate::crafter::{Action, TextureSet};

/// What `bench serve` measures.
#[derive(Debug, Clone, Copy)]
pub struct ServeBenchOptions {
    /// Sessions stepped concurrently.
    pub sessions: usize,
    /// Step requests per session in each throughput phase.
    pub requests: usize,
    /// Sessions created one after another to time a reset.
    pub resets: usize,
    /// Frame size in pixels.
    pub image_size: usize,
}

/// Figures from `bench serve`.
#[derive(Debug, Clone, Serialize)]
pub struct ServeBenchReport {
    /// Concurrent sessions.
    pub sessions: usize,
    /// Frame size.
    pub image_size: usize,
    /// Env steps per second, one random action per request (`actions`).
    pub steps_per_sec_actions: f64,
    /// Requests per second in that phase (equal to steps/s).
    pub requests_per_sec_actions: f64,
    /// Env steps per second with raw model text carrying 4 actions per request (`text`).
    pub steps_per_sec_text: f64,
    /// Requests per second in that phase.
    pub requests_per_sec_text: f64,
    /// Median time of `POST /v1/sessions` (reset + first observation and PNG), one at a time, ms.
    pub reset_ms_median: f64,
    /// Mean of the same, ms.
    pub reset_ms_mean: f64,
    /// Wall time to create all `sessions` concurrently, ms.
    pub create_all_ms: f64,
}

async fn post(client: &reqwest::Client, url: &str, body: &Value) -> Result<Value, String> {
    let resp = client
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .map_err(|e| format!("POST {url}: {e}"))?;
    let status = resp.status();
    let bytes = resp.bytes().await.map_err(|e| format!("POST {url}: {e}"))?;
    let v: Value = serde_json::from_slice(&bytes).map_err(|e| format!("POST {url}: {e}"))?;
    if !status.is_success() {
        return Err(format!("POST {url}: HTTP {status}: {v}"));
    }
    Ok(v)
}

async fn create(
    client: &reqwest::Client,
    base: &str,
    seed: i64,
    size: usize,
) -> Result<String, String> {
    let v = post(
        client,
        &format!("{base}/v1/sessions"),
        &json!({"seed": seed, "image_size": size}),
    )
    .await?;
    v["id"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| "no session id".to_string())
}

/// One session's loop: `requests` step requests with random actions; a new session after done.
async fn drive(
    client: reqwest::Client,
    base: String,
    index: usize,
    requests: usize,
    size: usize,
    text: bool,
) -> Result<u64, String> {
    let mut rng = RandomState::new(index as u32);
    let mut seed = index as i64;
    let mut id = create(&client, &base, seed, size).await?;
    let mut steps = 0u64;
    for _ in 0..requests {
        let mut pick = || Action::ALL[rng.randint(0, Action::ALL.len() as i64) as usize].name();
        let body = if text {
            let names: Vec<&str> = (0..4).map(|_| pick()).collect();
            json!({"text": format!(
                "I should explore.\n<tool_call>\n{{\"name\": \"interact_many\", \"arguments\": {{\"actions\": {}}}}}\n</tool_call>",
                serde_json::to_string(&names).unwrap_or_default()
            )})
        } else {
            json!({"actions": [pick()]})
        };
        let v = post(&client, &format!("{base}/v1/sessions/{id}/step"), &body).await?;
        steps += v["actions"].as_array().map_or(0, |a| a.len() as u64);
        if v["done"].as_bool() == Some(true) {
            let _ = client
                .delete(format!("{base}/v1/sessions/{id}"))
                .send()
                .await;
            seed += 1000;
            id = create(&client, &base, seed, size).await?;
        }
    }
    let _ = client
        .delete(format!("{base}/v1/sessions/{id}"))
        .send()
        .await;
    Ok(steps)
}

async fn throughput(a: &ServeBenchOptions, base: &str, text: bool) -> Result<(f64, f64), String> {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(a.sessions)
        .build()
        .map_err(|e| e.to_string())?;
    let started = Instant::now();
    let tasks: Vec<_> = (0..a.sessions)
        .map(|i| {
            tokio::spawn(drive(
                client.clone(),
                base.to_string(),
                i,
                a.requests,
                a.image_size,
                text,
            ))
        })
        .collect();
    let mut steps = 0;
    for t in tasks {
        steps += t.await.map_err(|e| e.to_string())??;
    }
    let wall = started.elapsed().as_secs_f64();
    // Session creation is inside the window; it is a small share at 200 requests/session.
    Ok((steps as f64 / wall, (a.sessions * a.requests) as f64 / wall))
}

/// Run the benchmark.
pub async fn bench_serve(
    a: &ServeBenchOptions,
    textures: Arc<TextureSet>,
) -> Result<ServeBenchReport, String> {
    let cfg = ServeConfig {
        port: 0,
        max_sessions: a.sessions * 2 + 8,
        idle_timeout: Duration::from_secs(3600),
        defaults: super::api::Defaults {
            image_size: a.image_size,
            ..Default::default()
        },
        ..ServeConfig::default()
    };
    let server = start(cfg, textures)
        .await
        .map_err(|e| format!("cannot start the server: {e}"))?;
    let base = server.base_url();
    let client = reqwest::Client::new();
    // Warm up the connection and the code paths.
    let id = create(&client, &base, 0, a.image_size).await?;
    post(
        &client,
        &format!("{base}/v1/sessions/{id}/step"),
        &json!({"actions": ["noop"]}),
    )
    .await?;
    let _ = client
        .delete(format!("{base}/v1/sessions/{id}"))
        .send()
        .await;

    let mut reset_ms = Vec::with_capacity(a.resets);
    for i in 0..a.resets {
        let t = Instant::now();
        let id = create(&client, &base, 10_000 + i as i64, a.image_size).await?;
        reset_ms.push(t.elapsed().as_secs_f64() * 1e3);
        let _ = client
            .delete(format!("{base}/v1/sessions/{id}"))
            .send()
            .await;
    }
    reset_ms.sort_by(f64::total_cmp);
    let median = reset_ms
        .get(reset_ms.len() / 2)
        .copied()
        .unwrap_or(f64::NAN);
    let mean = reset_ms.iter().sum::<f64>() / reset_ms.len().max(1) as f64;

    let t = Instant::now();
    let ids = futures::future::join_all(
        (0..a.sessions).map(|i| create(&client, &base, 20_000 + i as i64, a.image_size)),
    )
    .await;
    let create_all_ms = t.elapsed().as_secs_f64() * 1e3;
    for id in ids.into_iter().flatten() {
        let _ = client
            .delete(format!("{base}/v1/sessions/{id}"))
            .send()
            .await;
    }

    let (sps_a, rps_a) = throughput(a, &base, false).await?;
    let (sps_t, rps_t) = throughput(a, &base, true).await?;
    server.shutdown().await;
    Ok(ServeBenchReport {
        sessions: a.sessions,
        image_size: a.image_size,
        steps_per_sec_actions: sps_a,
        requests_per_sec_actions: rps_a,
        steps_per_sec_text: sps_t,
        requests_per_sec_text: rps_t,
        reset_ms_median: median,
        reset_ms_mean: mean,
        create_all_ms,
    })
}
