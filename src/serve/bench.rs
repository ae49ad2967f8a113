//! The `bench serve` measurement: env steps per second through the HTTP API with many concurrent
//! sessions, and session-creation (reset) latency, measured with an in-process server and an
//! in-process HTTP client on loopback (both share the machine's cores): one kept-alive
//! connection per session, answers parsed for what an RL worker reads.

use std::borrow::Cow;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::{header, Method, Request};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use serde::{Deserialize, Serialize};
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

/// One kept-alive HTTP/1 connection to the server, as an RL worker holds one per env: hyper's
/// connection API with no pool in between, so the client's share of these cores stays small.
struct Conn {
    send: hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    host: String,
}

impl Conn {
    async fn open(addr: SocketAddr) -> Result<Conn, String> {
        let tcp = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|e| format!("connect {addr}: {e}"))?;
        tcp.set_nodelay(true)
            .map_err(|e| format!("connect {addr}: {e}"))?;
        let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
            .await
            .map_err(|e| format!("connect {addr}: {e}"))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(Conn {
            send,
            host: addr.to_string(),
        })
    }

    /// Send one request; the body of a 2xx answer.
    async fn call(&mut self, method: Method, path: &str, body: Vec<u8>) -> Result<Bytes, String> {
        let what = || format!("{method} {path}");
        self.send
            .ready()
            .await
            .map_err(|e| format!("{}: {e}", what()))?;
        let req = Request::builder()
            .method(method.clone())
            .uri(path)
            .header(header::HOST, &self.host)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| format!("{}: {e}", what()))?;
        let resp = self
            .send
            .send_request(req)
            .await
            .map_err(|e| format!("{}: {e}", what()))?;
        let status = resp.status();
        let bytes = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("{}: {e}", what()))?
            .to_bytes();
        if !status.is_success() {
            return Err(format!(
                "{}: HTTP {status}: {}",
                what(),
                String::from_utf8_lossy(&bytes)
            ));
        }
        Ok(bytes)
    }

    async fn post(&mut self, path: &str, body: &Value) -> Result<Bytes, String> {
        self.call(Method::POST, path, body.to_string().into_bytes())
            .await
    }

    async fn create(&mut self, seed: i64, size: usize) -> Result<String, String> {
        let bytes = self
            .post("/v1/sessions", &json!({"seed": seed, "image_size": size}))
            .await?;
        let v: Created = serde_json::from_slice(&bytes)
            .map_err(|e| format!("POST /v1/sessions: unreadable answer: {e}"))?;
        Ok(v.id)
    }

    async fn close(&mut self, id: &str) -> Result<(), String> {
        self.call(Method::DELETE, &format!("/v1/sessions/{id}"), Vec::new())
            .await
            .map(drop)
    }
}

#[derive(Deserialize)]
struct Created {
    id: String,
}

/// What an RL worker reads from a step answer (the rest is skipped by the parser).
#[derive(Deserialize)]
struct StepReply<'a> {
    #[serde(borrow)]
    actions: Vec<&'a str>,
    done: bool,
    #[serde(borrow)]
    observation: Cow<'a, str>,
    #[serde(borrow)]
    frame_png_b64: Option<&'a str>,
}

/// One session's loop: `requests` step requests with random actions; a new session after done.
async fn drive(
    mut conn: Conn,
    mut id: String,
    index: usize,
    requests: usize,
    size: usize,
    text: bool,
) -> Result<u64, String> {
    let mut rng = RandomState::new(index as u32);
    let mut seed = index as i64;
    let mut steps = 0u64;
    let mut read = 0usize;
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
        let path = format!("/v1/sessions/{id}/step");
        let bytes = conn.post(&path, &body).await?;
        let r: StepReply = serde_json::from_slice(&bytes)
            .map_err(|e| format!("POST {path}: unreadable answer: {e}"))?;
        steps += r.actions.len() as u64;
        read += r.observation.len() + r.frame_png_b64.map_or(0, str::len);
        if r.done {
            conn.close(&id).await?;
            seed += 1000;
            id = conn.create(seed, size).await?;
        }
    }
    conn.close(&id).await?;
    if read == 0 {
        return Err("the server sent no observation".into());
    }
    Ok(steps)
}

/// `a.sessions` sessions created at once, each over its own new connection (seeds `first`,
/// `first + 1`, …).
async fn open_sessions(
    addr: SocketAddr,
    first: i64,
    a: &ServeBenchOptions,
) -> Result<Vec<(Conn, String)>, String> {
    futures::future::join_all((0..a.sessions).map(|i| async move {
        let mut conn = Conn::open(addr).await?;
        let id = conn.create(first + i as i64, a.image_size).await?;
        Ok((conn, id))
    }))
    .await
    .into_iter()
    .collect()
}

async fn throughput(
    a: &ServeBenchOptions,
    addr: SocketAddr,
    text: bool,
) -> Result<(f64, f64), String> {
    // Connections and first sessions are made before the clock starts, as Python's figure
    // starts after `reset()`; the resets of episodes that end inside the window stay in it
    // (Python's figure leaves them out, so this comparison is conservative).
    let ready = open_sessions(addr, 0, a).await?;
    let started = Instant::now();
    let tasks: Vec<_> = ready
        .into_iter()
        .enumerate()
        .map(|(i, (conn, id))| tokio::spawn(drive(conn, id, i, a.requests, a.image_size, text)))
        .collect();
    let mut steps = 0;
    for t in tasks {
        steps += t.await.map_err(|e| e.to_string())??;
    }
    let wall = started.elapsed().as_secs_f64();
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
    let addr = server.addr();
    let mut conn = Conn::open(addr).await?;
    // Warm up the connection and the code paths.
    let id = conn.create(0, a.image_size).await?;
    conn.post(
        &format!("/v1/sessions/{id}/step"),
        &json!({"actions": ["noop"]}),
    )
    .await?;
    conn.close(&id).await?;

    let mut reset_ms = Vec::with_capacity(a.resets);
    for i in 0..a.resets {
        let t = Instant::now();
        let id = conn.create(10_000 + i as i64, a.image_size).await?;
        reset_ms.push(t.elapsed().as_secs_f64() * 1e3);
        conn.close(&id).await?;
    }
    reset_ms.sort_by(f64::total_cmp);
    let median = reset_ms
        .get(reset_ms.len() / 2)
        .copied()
        .unwrap_or(f64::NAN);
    let mean = reset_ms.iter().sum::<f64>() / reset_ms.len().max(1) as f64;

    // All sessions created at once, each over its own connection.
    let t = Instant::now();
    let created = open_sessions(addr, 20_000, a).await?;
    let create_all_ms = t.elapsed().as_secs_f64() * 1e3;
    for (mut c, id) in created {
        c.close(&id).await?;
    }

    let (sps_a, rps_a) = throughput(a, addr, false).await?;
    let (sps_t, rps_t) = throughput(a, addr, true).await?;
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
