//! `vlm-eval bench http`: the OpenAI client's per-call overhead on loopback against two kinds
//! of server, with and without quick ACKs: one that writes headers and body in one `send`,
//! and one that writes them in two without `TCP_NODELAY`, as Python's `http.server` does
//! (there Nagle's algorithm meets a delayed ACK and a keep-alive call stalls for ≈ 40 ms).
//! The servers answer at once, so a call's time is the client's and the kernel's overhead.

use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::openai::{OpenAiConfig, OpenAiModel};
use super::{ChatModel, ChatRequest, Message, Role};

/// How a server writes its answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerWrites {
    /// Headers and body in one `send`.
    Once,
    /// Headers, then body, in two `send`s, Nagle on (Python's `http.server`).
    Twice,
}

/// One measurement.
#[derive(Clone, Debug, Serialize)]
pub struct HttpBenchRow {
    /// The server's kind.
    pub server: ServerWrites,
    /// Quick ACKs on (our plain-HTTP connections) or off (reqwest as is).
    pub quickack: bool,
    /// Calls timed (after a warm-up), one after another on a kept-alive connection.
    pub calls: usize,
    /// Mean time per call, milliseconds.
    pub mean_ms: f64,
    /// Median, milliseconds.
    pub p50_ms: f64,
    /// 95th percentile, milliseconds.
    pub p95_ms: f64,
}

fn answer_body() -> String {
    json!({
        "id": "chatcmpl-bench", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": "ACTION: noop"}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 3}
    })
    .to_string()
}

/// Read one request (headers, then `Content-Length` bytes); false at end of stream.
async fn read_request(stream: &mut TcpStream, buf: &mut Vec<u8>) -> std::io::Result<bool> {
    let mut chunk = [0u8; 16 * 1024];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            if buf.len() >= end + 4 + length {
                buf.drain(..end + 4 + length);
                return Ok(true);
            }
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(false);
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

async fn serve_connection(mut stream: TcpStream, writes: ServerWrites) -> std::io::Result<()> {
    let body = answer_body();
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    let mut buf = Vec::new();
    while read_request(&mut stream, &mut buf).await? {
        match writes {
            ServerWrites::Once => stream.write_all(format!("{head}{body}").as_bytes()).await?,
            ServerWrites::Twice => {
                stream.write_all(head.as_bytes()).await?;
                stream.write_all(body.as_bytes()).await?;
            }
        }
    }
    Ok(())
}

/// A keep-alive HTTP/1.1 server on 127.0.0.1 that writes its answers this way (Nagle left
/// on); returns its API base.
pub async fn start_server(writes: ServerWrites) -> std::io::Result<String> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let _ = stream.set_nodelay(false);
            tokio::spawn(serve_connection(stream, writes));
        }
    });
    Ok(format!("http://{addr}/v1"))
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// Time `calls` calls (after `warmup`) against each server kind, quick ACKs on and off.
pub async fn bench_http(calls: usize, warmup: usize) -> std::io::Result<Vec<HttpBenchRow>> {
    let request = ChatRequest {
        messages: vec![Message::text(Role::User, "hi")],
        ..ChatRequest::default()
    };
    let mut rows = Vec::new();
    for server in [ServerWrites::Once, ServerWrites::Twice] {
        let url = start_server(server).await?;
        for quickack in [true, false] {
            let model = OpenAiModel::new(OpenAiConfig {
                quickack,
                max_retries: 0,
                request_timeout: Duration::from_secs(10),
                ..OpenAiConfig::new(url.clone(), "m")
            })
            .map_err(std::io::Error::other)?;
            let mut times = Vec::with_capacity(calls);
            for i in 0..warmup + calls.max(1) {
                let t = Instant::now();
                model.chat(&request).await.map_err(std::io::Error::other)?;
                if i >= warmup {
                    times.push(t.elapsed().as_secs_f64() * 1000.0);
                }
            }
            let mean_ms = times.iter().sum::<f64>() / times.len() as f64;
            times.sort_by(f64::total_cmp);
            rows.push(HttpBenchRow {
                server,
                quickack,
                calls: times.len(),
                mean_ms,
                p50_ms: percentile(&times, 0.5),
                p95_ms: percentile(&times, 0.95),
            });
        }
    }
    Ok(rows)
}
