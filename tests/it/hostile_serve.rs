//! Hostile input at serve-env's edge (issue 43): bodies that are not JSON objects, declared
//! lengths over the limit, bodies that stall, a full server, and a host that does not resolve.
//! Each case asserts the status, a one-line message that names the problem and the fix (and no
//! Rust type), and that no session was created. Requests are written by hand on a TCP socket, so
//! that the headers are exactly the hostile ones. Socket reads carry a guard of 60 s so that a
//! server that waits forever fails the test instead of hanging it; no assertion is on time.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use vlm_eval::crafter::TextureSet;
use vlm_eval::serve::{start, ServeConfig, ServerHandle};

const GUARD: Duration = Duration::from_secs(60);

async fn server(cfg: ServeConfig) -> ServerHandle {
    let textures = Arc::new(TextureSet::discover(None).expect("texture discovery").0);
    start(ServeConfig { port: 0, ..cfg }, textures)
        .await
        .expect("start server")
}

/// Write `head` (request line and headers, without the blank line) and `body`, keep the socket
/// open (a stalled client), and read the answer: status and JSON body.
async fn raw(s: &ServerHandle, head: &str, body: &[u8]) -> (u16, Value) {
    let mut sock = TcpStream::connect(s.addr()).await.expect("connect");
    let mut req = format!("{head}\r\nHost: {}\r\nConnection: close\r\n\r\n", s.addr()).into_bytes();
    req.extend_from_slice(body);
    sock.write_all(&req).await.expect("write");
    let mut buf = Vec::new();
    tokio::time::timeout(GUARD, sock.read_to_end(&mut buf))
        .await
        .expect("the server never answered")
        .expect("read");
    let text = String::from_utf8_lossy(&buf).into_owned();
    let status: u16 = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {text}"));
    let json = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    let v: Value = serde_json::from_str(json).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
    (status, v)
}

/// A POST with a whole body and the given content type.
async fn post(s: &ServerHandle, path: &str, ctype: Option<&str>, body: &str) -> (u16, Value) {
    let ct = ctype
        .map(|c| format!("\r\nContent-Type: {c}"))
        .unwrap_or_default();
    let head = format!("POST {path} HTTP/1.1{ct}\r\nContent-Length: {}", body.len());
    raw(s, &head, body.as_bytes()).await
}

/// The error message: one line, no Rust type name, containing every `needle`.
fn message(v: &Value, needles: &[&str]) -> String {
    let m = v["error"]
        .as_str()
        .unwrap_or_else(|| panic!("no error message: {v}"))
        .to_string();
    assert_eq!(m.lines().count(), 1, "{m}");
    for bad in ["struct ", "CreateRequest", "StepRequest", "serde"] {
        assert!(!m.contains(bad), "names an internal type: {m}");
    }
    for n in needles {
        assert!(m.contains(n), "{m} lacks {n}");
    }
    m
}

async fn metrics(s: &ServerHandle) -> Value {
    raw(s, "GET /metrics HTTP/1.1", b"").await.1
}

/// No session was created, and none is open.
async fn no_session(s: &ServerHandle) {
    assert_eq!(s.sessions_open(), 0);
    assert_eq!(metrics(s).await["resets"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_that_are_not_json_objects_are_refused() {
    let s = server(ServeConfig::default()).await;
    let json = Some("application/json");
    for (ctype, body, status, needles) in [
        // Not JSON by its declared type: 415, whatever the bytes.
        (
            Some("text/plain"),
            r#"{"seed": 1}"#,
            415,
            &["text/plain", "Content-Type: application/json"][..],
        ),
        (
            Some("application/x-www-form-urlencoded"),
            "seed=1",
            415,
            &["is not JSON"][..],
        ),
        // JSON, but not an object: never read by position.
        (
            json,
            "[1, 64]",
            400,
            &["is an array", "never taken by position"][..],
        ),
        (json, "[1]", 400, &["is an array"][..]),
        (json, "[]", 400, &["is an array"][..]),
        (json, "7", 400, &["is a number"][..]),
        (json, "null", 400, &["is null"][..]),
        (json, "\"seed\"", 400, &["is a string"][..]),
        // A body without a type is read as JSON, and still must be an object.
        (None, "[1, 2, 3]", 400, &["is an array"][..]),
        (json, "{\"seed\": 1", 400, &["not valid JSON"][..]),
        (json, "  ", 400, &["empty"][..]),
    ] {
        let (st, v) = post(&s, "/v1/sessions", ctype, body).await;
        assert_eq!(st, status, "{ctype:?} {body}: {v}");
        message(&v, needles);
    }
    no_session(&s).await;

    // The same rules hold for a step's body.
    let (st, v) = post(&s, "/v1/sessions", json, r#"{"seed": 1}"#).await;
    assert_eq!(st, 200, "{v}");
    let step = format!("/v1/sessions/{}/step", v["id"].as_str().unwrap());
    let (st, v) = post(&s, &step, json, r#"["noop"]"#).await;
    assert_eq!(st, 400);
    message(&v, &["is an array"]);
    let (st, v) = post(&s, &step, Some("text/plain"), r#"{"actions": ["noop"]}"#).await;
    assert_eq!(st, 415);
    message(&v, &["is not JSON"]);
    let (st, v) = post(
        &s,
        &step,
        Some("application/json; charset=utf-8"),
        r#"{"actions": ["noop"]}"#,
    )
    .await;
    assert_eq!((st, &v["step"]), (200, &Value::from(1)), "{v}");
    let m = metrics(&s).await;
    assert_eq!(
        (m["resets"].as_u64(), m["env_steps"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(m["server_errors"], 0);
    assert!(m["client_errors"].as_u64().unwrap() >= 13, "{m}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declared_length_over_the_limit_is_refused_unread() {
    // A body that stalls waits an hour here: only a refusal before reading can answer.
    let s = server(ServeConfig {
        max_body_bytes: 4096,
        body_timeout: Duration::from_secs(3600),
        ..ServeConfig::default()
    })
    .await;
    for path in ["/v1/sessions", "/v1/sessions/some-id/step"] {
        // 50 MB declared, not one byte of it sent.
        let head = format!(
            "POST {path} HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 52428800"
        );
        let (st, v) = raw(&s, &head, b"").await;
        assert_eq!(st, 413, "{path}: {v}");
        message(
            &v,
            &[
                "declares 52428800 bytes",
                "limit of 4096 bytes",
                "--max-body-bytes",
            ],
        );
    }
    no_session(&s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_stalls_times_out_with_its_limit_named() {
    let s = server(ServeConfig {
        body_timeout: Duration::from_millis(300),
        ..ServeConfig::default()
    })
    .await;
    // 100 bytes declared, 11 sent, then nothing: the connection is held open by this client.
    let head =
        "POST /v1/sessions HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 100";
    let (st, v) = raw(&s, head, br#"{"seed": 1,"#).await;
    assert_eq!(st, 408, "{v}");
    message(&v, &["stalled", "0.3 s", "--body-timeout"]);
    no_session(&s).await;
    // The server still serves the next client.
    let (st, _) = post(
        &s,
        "/v1/sessions",
        Some("application/json"),
        r#"{"seed": 1}"#,
    )
    .await;
    assert_eq!(st, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capacity_refusals_are_counted_apart_from_server_errors() {
    let s = server(ServeConfig {
        max_sessions: 1,
        ..ServeConfig::default()
    })
    .await;
    let json = Some("application/json");
    let (st, _) = post(&s, "/v1/sessions", json, r#"{"seed": 1}"#).await;
    assert_eq!(st, 200);
    for _ in 0..3 {
        let (st, v) = post(&s, "/v1/sessions", json, r#"{"seed": 2}"#).await;
        assert_eq!(st, 503);
        message(&v, &["maximum of 1 sessions", "--max-sessions"]);
    }
    let m = metrics(&s).await;
    assert_eq!(m["sessions_rejected_full"], 3, "{m}");
    assert_eq!(m["server_errors"], 0, "{m}");
    assert_eq!(
        (m["resets"].as_u64(), m["sessions_open"].as_u64()),
        (Some(1), Some(1))
    );
}

#[test]
fn a_host_that_does_not_resolve_is_named_as_the_host() {
    for (host, needle) in [
        ("not-a-host.invalid", "--host 'not-a-host.invalid'"),
        ("", "--host is empty"),
    ] {
        let o = support::vlm_eval(&["serve-env", "--host", host, "--port", "0"]);
        let err = support::stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{host}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(needle), "{err}");
        assert!(!err.contains("--port"), "blames the port: {err}");
        assert!(
            support::stdout(&o).is_empty(),
            "it listened: {}",
            support::stdout(&o)
        );
    }
    // A bad stall limit is refused before anything listens.
    let o = support::vlm_eval(&["serve-env", "--port", "0", "--body-timeout", "0"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(support::stderr(&o).contains("--body-timeout"));
}
