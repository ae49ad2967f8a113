//! The edge of the env server: what a request body must be before a handler sees it. A declared
//! `Content-Length` over the limit is refused before a byte of the body is read (413), a body
//! whose next bytes do not arrive within the stall limit is answered 408 (both close the
//! connection), and a body that declares a type must declare JSON (415). The body is read here,
//! once, and handed on whole.

use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;

use super::api::ApiError;

/// The limits the edge enforces (from `ServeConfig`), the middleware's state.
#[derive(Clone, Copy, Debug)]
pub struct EdgeLimits {
    /// Largest request body, bytes.
    pub max_body_bytes: usize,
    /// Longest wait for the next bytes of a body.
    pub body_timeout: Duration,
}

/// Longest wait for the next bytes of a request body before it is answered 408
/// (`serve-env --body-timeout`). A client sending a body sends it at once; a stall this long is
/// a dead or hostile client holding a connection.
pub const BODY_STALL_TIMEOUT: Duration = Duration::from_secs(15);

/// Whether a `Content-Type` value names JSON (`application/json`, or `application/…+json`),
/// parameters such as `charset` aside.
pub fn is_json_type(value: &str) -> bool {
    let essence = value
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// 415 for a body that declares a type other than JSON (a body without `Content-Type` is read
/// as JSON, as most clients send it).
fn check_type(headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(v) = headers.get(header::CONTENT_TYPE) else {
        return Ok(());
    };
    let shown = v.to_str().unwrap_or("(not text)");
    if is_json_type(shown) {
        return Ok(());
    }
    Err(ApiError::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        format!(
            "Content-Type `{}` is not JSON: send the body as a JSON object with `Content-Type: application/json`",
            shown.chars().take(60).collect::<String>()
        ),
    ))
}

/// 413 for a declared length over the limit, before the body is read.
fn check_length(headers: &HeaderMap, max: usize) -> Result<(), ApiError> {
    let Some(v) = headers.get(header::CONTENT_LENGTH) else {
        return Ok(());
    };
    let declared = v.to_str().ok().and_then(|s| s.trim().parse::<u64>().ok());
    match declared {
        Some(n) if n > max as u64 => Err(too_large(max, Some(n))),
        Some(_) => Ok(()),
        None => Err(ApiError::bad_request(
            "the Content-Length header is not a number of bytes",
        )),
    }
}

/// The 413 answer, naming the limit (and the declared size when there was one).
pub fn too_large(max: usize, declared: Option<u64>) -> ApiError {
    let what = match declared {
        Some(n) => format!("the request body declares {n} bytes, over"),
        None => "the request body is over".to_string(),
    };
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("{what} the server's limit of {max} bytes (raise --max-body-bytes)"),
    )
}

/// Read the whole body, at most `max` bytes, waiting at most `stall` for each next piece.
async fn read_body(body: Body, max: usize, stall: Duration) -> Result<Vec<u8>, ApiError> {
    let mut body = body;
    let mut out = Vec::new();
    loop {
        let frame = match tokio::time::timeout(stall, body.frame()).await {
            Err(_) => {
                return Err(ApiError::new(
                    StatusCode::REQUEST_TIMEOUT,
                    format!(
                        "the request body stalled: no bytes for {} s after {} received (the server's --body-timeout); send the whole body at once",
                        stall.as_secs_f64(),
                        out.len()
                    ),
                ))
            }
            Ok(None) => return Ok(out),
            Ok(Some(Err(e))) => {
                return Err(ApiError::bad_request(format!(
                    "cannot read the request body: {e}"
                )))
            }
            Ok(Some(Ok(frame))) => frame,
        };
        if let Some(data) = frame.data_ref() {
            if out.len() + data.len() > max {
                return Err(too_large(max, None));
            }
            out.extend_from_slice(data);
        }
    }
}

/// Middleware: check a request's body (type, declared length) and read it with the stall limit,
/// for every request that may carry one; GET, DELETE and HEAD pass untouched.
pub async fn body_edge(State(limits): State<EdgeLimits>, req: Request, next: Next) -> Response {
    use axum::http::Method;
    if matches!(*req.method(), Method::GET | Method::HEAD | Method::DELETE) {
        return next.run(req).await;
    }
    let max = limits.max_body_bytes;
    if let Err(e) = check_length(req.headers(), max) {
        return close_after(e);
    }
    let (parts, body) = req.into_parts();
    // Read before the type is judged, so that a refused body is not left unread in the socket
    // (closing over unread bytes resets the connection and can lose the answer).
    let bytes = match read_body(body, max, limits.body_timeout).await {
        Ok(bytes) => bytes,
        Err(e) => return close_after(e),
    };
    if let Err(e) = check_type(&parts.headers) {
        return e.into_response();
    }
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

/// An error answer that also closes the connection: the rest of the body is not read.
fn close_after(e: ApiError) -> Response {
    let mut r = e.into_response();
    r.headers_mut().insert(
        header::CONNECTION,
        header::HeaderValue::from_static("close"),
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_types_are_json() {
        for t in [
            "application/json",
            "application/json; charset=utf-8",
            "Application/JSON",
            "application/vnd.api+json",
        ] {
            assert!(is_json_type(t), "{t}");
        }
        for t in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "",
            "json",
        ] {
            assert!(!is_json_type(t), "{t}");
        }
    }

    #[test]
    fn declared_lengths_over_the_limit_are_refused() {
        let mut h = HeaderMap::new();
        assert!(check_length(&h, 1024).is_ok());
        h.insert(header::CONTENT_LENGTH, "1024".parse().unwrap());
        assert!(check_length(&h, 1024).is_ok());
        h.insert(header::CONTENT_LENGTH, "52428800".parse().unwrap());
        let e = check_length(&h, 1024).unwrap_err();
        assert_eq!(e.status, StatusCode::PAYLOAD_TOO_LARGE);
        assert!(
            e.message.contains("declares 52428800 bytes"),
            "{}",
            e.message
        );
        assert!(e.message.contains("limit of 1024 bytes"), "{}", e.message);
    }
}
