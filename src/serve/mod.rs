//! `vlm-eval serve-env`: Crafter episodes over an HTTP JSON API for RL trainers.
//!
//! Each session is one seeded episode stepped exactly as the evaluator steps it (same
//! observation text, frames, reply parser and rewards); see `docs/RL.md` for the API. Sessions
//! live in memory, expire after an idle timeout, and are capped in number; one session's
//! requests are serialised by its own lock while different sessions step in parallel: small
//! steps on the async workers, larger ones (and resets) on the blocking thread pool.

pub mod api;
pub mod bench;
pub mod edge;
mod routes;
pub mod session;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use self::api::Defaults;
use self::session::Session;
use crate::agent::balrog::BalrogTexts;
use crate::crafter::TextureSet;

/// Server settings.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    /// Address to bind (`127.0.0.1` unless exposing on purpose).
    pub host: String,
    /// Port (0: any free port).
    pub port: u16,
    /// Session defaults.
    pub defaults: Defaults,
    /// Most sessions open at once.
    pub max_sessions: usize,
    /// A session untouched this long is closed.
    pub idle_timeout: Duration,
    /// Largest request body, bytes (a larger declared `Content-Length` is refused unread).
    pub max_body_bytes: usize,
    /// Longest wait for the next bytes of a request body (`edge::BODY_STALL_TIMEOUT`).
    pub body_timeout: Duration,
    /// Bearer token required on every route but `/healthz`.
    pub token: Option<String>,
    /// BALROG's texts (`--balrog-src`), for sessions of the `balrog` preset.
    pub balrog: Option<Arc<BalrogTexts>>,
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            host: "127.0.0.1".into(),
            port: 8000,
            defaults: Defaults::default(),
            max_sessions: 1024,
            idle_timeout: Duration::from_secs(600),
            max_body_bytes: 1 << 20,
            body_timeout: edge::BODY_STALL_TIMEOUT,
            token: None,
            balrog: None,
        }
    }
}

/// One open session and when it was last used.
struct Slot {
    session: Mutex<Session>,
    /// Frame side in pixels (fixed at creation; read without the lock).
    image_size: usize,
    /// Most actions taken from one `text` input (fixed at creation).
    max_actions: usize,
    /// Milliseconds since the server started.
    last_used: AtomicU64,
    /// The episode has ended (a session still open then is waiting for its DELETE).
    finished: AtomicBool,
}

/// Counters reported by `/metrics`. Every session created is open, closed or expired:
/// `created == open + closed + expired`.
#[derive(Default)]
struct Counters {
    created: AtomicU64,
    /// Closed by DELETE.
    closed: AtomicU64,
    /// Closed by DELETE before the episode ended (clients stopping early, e.g. on a budget).
    closed_unfinished: AtomicU64,
    /// Closed by the idle timeout: sessions their client never closed (a leak).
    expired: AtomicU64,
    /// Creates refused because the server held its maximum of sessions (503; not counted in
    /// `server_errors`).
    rejected_full: AtomicU64,
    step_requests: AtomicU64,
    env_steps: AtomicU64,
    invalid_replies: AtomicU64,
    episodes_done: AtomicU64,
    client_errors: AtomicU64,
    server_errors: AtomicU64,
}

/// Shared server state.
struct AppState {
    cfg: ServeConfig,
    textures: Arc<TextureSet>,
    sessions: Mutex<HashMap<String, Arc<Slot>>>,
    started: Instant,
    counters: Counters,
    next_id: AtomicU64,
    id_salt: u64,
}

impl AppState {
    fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Slot>>> {
        // The table holds only Arcs; a panic elsewhere cannot leave it half-updated.
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn new_id(&self) -> String {
        let n = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut bytes = self.id_salt.to_le_bytes().to_vec();
        bytes.extend_from_slice(&n.to_le_bytes());
        crate::crafter::trace::sha256_hex(&bytes)[..20].to_string()
    }

    /// Close sessions idle longer than the timeout; returns how many.
    fn reap(&self) -> usize {
        let now = self.now_ms();
        let limit = self.cfg.idle_timeout.as_millis() as u64;
        let mut table = self.table();
        let before = table.len();
        table.retain(|_, s| now.saturating_sub(s.last_used.load(Ordering::Relaxed)) <= limit);
        let n = before - table.len();
        self.counters.expired.fetch_add(n as u64, Ordering::Relaxed);
        n
    }
}

/// A running server; dropping it (or calling [`ServerHandle::shutdown`]) stops it.
pub struct ServerHandle {
    addr: SocketAddr,
    state: Arc<AppState>,
    shutdown: Option<oneshot::Sender<()>>,
    serve_task: Option<tokio::task::JoinHandle<()>>,
    reaper: tokio::task::JoinHandle<()>,
}

impl ServerHandle {
    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Sessions open now.
    pub fn sessions_open(&self) -> usize {
        self.state.table().len()
    }

    /// Stop accepting connections and wait for in-flight requests.
    pub async fn shutdown(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.serve_task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        self.reaper.abort();
    }
}

/// Bind `cfg.host:cfg.port` and serve in the current tokio runtime.
pub async fn start(cfg: ServeConfig, textures: Arc<TextureSet>) -> std::io::Result<ServerHandle> {
    let listener = tokio::net::TcpListener::bind((cfg.host.as_str(), cfg.port)).await?;
    let addr = listener.local_addr()?;
    let salt = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
        ^ ((std::process::id() as u64) << 32)
        ^ (addr.port() as u64);
    let state = Arc::new(AppState {
        cfg,
        textures,
        sessions: Mutex::new(HashMap::new()),
        started: Instant::now(),
        counters: Counters::default(),
        next_id: AtomicU64::new(0),
        id_salt: salt,
    });
    let router = routes::router(state.clone());
    let (tx, rx) = oneshot::channel::<()>();
    let serve_task = tokio::spawn(async move {
        let served = axum::serve(listener, router).with_graceful_shutdown(async move {
            let _ = rx.await;
        });
        if let Err(e) = served.await {
            tracing::warn!("env server stopped: {e}");
        }
    });
    let reaper = tokio::spawn(reap_loop(Arc::downgrade(&state)));
    Ok(ServerHandle {
        addr,
        state,
        shutdown: Some(tx),
        serve_task: Some(serve_task),
        reaper,
    })
}

async fn reap_loop(state: Weak<AppState>) {
    let period = match state.upgrade() {
        Some(s) => {
            (s.cfg.idle_timeout / 4).clamp(Duration::from_millis(20), Duration::from_secs(5))
        }
        None => return,
    };
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(s) = state.upgrade() else { return };
        let n = s.reap();
        if n > 0 {
            tracing::info!("closed {n} idle session(s)");
        }
    }
}
