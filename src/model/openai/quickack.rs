//! Plain-HTTP connections that acknowledge at once (`TCP_QUICKACK` after every read, Linux).
//!
//! A server that writes its headers and its body in two `send`s without `TCP_NODELAY` (Python's
//! `http.server` does) has Nagle's algorithm hold the body until the headers are acknowledged;
//! a keep-alive client in delayed-ACK mode acknowledges only after ≈ 40 ms, so every call waits
//! that long. Linux leaves quick-ACK mode on its own, so the flag is set again after each read:
//! the pending ACK goes out at once and the body follows. One `setsockopt` per read costs
//! nothing measurable against servers that write once (docs/BENCHMARKS.md).
//!
//! reqwest accepts no custom connection type, so plain `http://` endpoints are sent through
//! hyper-util's client (the one reqwest wraps) with our connector; `https://` endpoints and
//! runs with an HTTP proxy in the environment keep reqwest.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::model::BoxFuture;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// An HTTP/1 client for `http://` URLs whose connections set `TCP_QUICKACK` after each read.
#[derive(Clone)]
pub(crate) struct QuickAckClient {
    inner: Client<QuickAckConnector, reqwest::Body>,
}

impl QuickAckClient {
    /// A client with this connect timeout (keep-alive pool as reqwest's: 90 s idle).
    pub(crate) fn new(connect_timeout: Duration) -> QuickAckClient {
        let mut http = HttpConnector::new();
        http.set_nodelay(true);
        http.set_connect_timeout(Some(connect_timeout));
        let inner = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(90))
            .build(QuickAckConnector { http });
        QuickAckClient { inner }
    }

    /// Send a request built by async-openai; the answer as a reqwest response.
    pub(crate) async fn execute(
        &self,
        request: reqwest::Request,
    ) -> Result<reqwest::Response, BoxError> {
        let request: http::Request<reqwest::Body> = request.try_into()?;
        let response = self.inner.request(request).await?;
        Ok(reqwest::Response::from(response.map(reqwest::Body::wrap)))
    }
}

/// Whether an HTTP proxy is configured in the environment (then reqwest, which honours it,
/// sends plain-HTTP requests too).
pub(crate) fn proxy_in_env() -> bool {
    ["http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"]
        .iter()
        .any(|k| std::env::var_os(k).is_some_and(|v| !v.is_empty()))
}

#[derive(Clone)]
struct QuickAckConnector {
    http: HttpConnector,
}

impl tower::Service<http::Uri> for QuickAckConnector {
    type Response = TokioIo<QuickAckStream>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Self::Response, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.http.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let connecting = self.http.call(uri);
        Box::pin(async move {
            let io = connecting.await?;
            Ok(TokioIo::new(QuickAckStream(io.into_inner())))
        })
    }
}

/// A TCP stream that asks for an immediate ACK after every read that brought data.
struct QuickAckStream(TcpStream);

#[cfg(target_os = "linux")]
fn quickack(stream: &TcpStream) {
    // Best effort: a failure only means the delayed ACK stays.
    let _ = socket2::SockRef::from(stream).set_tcp_quickack(true);
}

#[cfg(not(target_os = "linux"))]
fn quickack(_stream: &TcpStream) {}

impl AsyncRead for QuickAckStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.0).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            quickack(&self.0);
        }
        polled
    }
}

impl AsyncWrite for QuickAckStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

impl Connection for QuickAckStream {
    fn connected(&self) -> Connected {
        self.0.connected()
    }
}
