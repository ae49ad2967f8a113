//! `vlm-eval serve-env`: Crafter episodes over an HTTP JSON API for RL trainers.
//!
//! Each session is one seeded episode stepped exactly as the evaluator steps it (same
//! observation text, frames, reply parser and rewards); see `docs/RL.md` for the API. Sessions
//! live in memory, expire after an idle timeout, and are capped in number; one session's
//! requests are serialised by its own lock while different sessions step in parallel on the
//! blocking thread pool.

pub mod api;
pub mod bench;
mod routes;
pub mod session;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use clap::Args;
use tokio::sync::oneshot;

use self::api::Defaults;
use self::session::Session;
use crate::agent::observe::ObsFormat;
use crate::agent::parse::Protocol;
use crate::cli::CliError;
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
    /// Largest request body, bytes.
    pub max_body_bytes: usize,
    /// Bearer token required on every route but `/healthz`.
    pub token: Option<String>,
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
            token: None,
        }
    }
}

/// One open session and when it was last used.
struct Slot {
    session: Mutex<Session>,
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

/// `vlm-eval serve-env` flags.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on; loopback unless you mean to expose it (then also set --token).
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Port (0: any free port; the address is printed on the first line).
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
    /// Default frame size in pixels (sessions may override).
    #[arg(long, default_value_t = 64)]
    pub image_size: usize,
    /// Default text observation format (sessions may override).
    #[arg(long, value_enum, default_value = "state")]
    pub obs_format: ObsFormat,
    /// Default parsing protocol for `text` inputs, as in `vlm-eval run` (sessions may override).
    #[arg(long, value_enum, default_value = "tool")]
    pub protocol: Protocol,
    /// Default actions taken from one text reply under the tool protocol (1..=64).
    #[arg(long, default_value_t = 8)]
    pub max_actions_per_turn: usize,
    /// Default episode length in env steps (0: unlimited).
    #[arg(long, default_value_t = 10_000)]
    pub length: u32,
    /// Most sessions open at once; creating more answers 503 until some close or expire.
    #[arg(long, default_value_t = 1024)]
    pub max_sessions: usize,
    /// Close sessions unused for this many seconds.
    #[arg(long, default_value_t = 600.0)]
    pub idle_timeout: f64,
    /// Largest request body in bytes (413 above it).
    #[arg(long, default_value_t = 1 << 20)]
    pub max_body_bytes: usize,
    /// Require `Authorization: Bearer TOKEN` on every route but /healthz.
    #[arg(long, env = "VLM_EVAL_SERVE_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Directory with crafter's textures (else $CRAFTER_ASSETS, the cache, or an installed
    /// crafter package; else built-in sprites).
    #[arg(long)]
    pub assets: Option<PathBuf>,
}

impl ServeArgs {
    /// Validate the flags into a server config.
    pub fn config(&self) -> Result<ServeConfig, CliError> {
        if !(9..=1024).contains(&self.image_size) {
            return Err(CliError::usage(format!(
                "--image-size {} is out of range: use 9..=1024 pixels (64 is crafter's default)",
                self.image_size
            )));
        }
        if !(1..=64).contains(&self.max_actions_per_turn) {
            return Err(CliError::usage("--max-actions-per-turn must be 1..=64"));
        }
        if self.max_sessions == 0 {
            return Err(CliError::usage("--max-sessions must be at least 1"));
        }
        if !(self.idle_timeout.is_finite() && self.idle_timeout > 0.0 && self.idle_timeout < 1e9) {
            return Err(CliError::usage(
                "--idle-timeout must be a positive number of seconds, e.g. 600",
            ));
        }
        if self.max_body_bytes < 1024 {
            return Err(CliError::usage(
                "--max-body-bytes must be at least 1024 (model replies need room)",
            ));
        }
        if matches!(&self.token, Some(t) if t.trim().is_empty()) {
            return Err(CliError::usage(
                "--token is empty: give a non-empty token or leave it out",
            ));
        }
        Ok(ServeConfig {
            host: self.host.clone(),
            port: self.port,
            defaults: Defaults {
                image_size: self.image_size,
                obs_format: self.obs_format,
                length: self.length,
                protocol: self.protocol,
                max_actions: self.max_actions_per_turn,
            },
            max_sessions: self.max_sessions,
            idle_timeout: Duration::from_secs_f64(self.idle_timeout),
            max_body_bytes: self.max_body_bytes,
            token: self.token.clone(),
        })
    }
}

/// Wait for Ctrl-C (or SIGTERM on Unix, as container runtimes send).
async fn stop_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

/// Run `vlm-eval serve-env` until Ctrl-C or SIGTERM.
pub fn cmd_serve_env(a: ServeArgs) -> Result<i32, CliError> {
    let cfg = a.config()?;
    let textures = Arc::new(crate::cli::load_textures(a.assets.as_deref())?);
    let runtime = crate::cli::runtime()?;
    runtime.block_on(async move {
        let (host, port, token) = (cfg.host.clone(), cfg.port, cfg.token.is_some());
        let (max, idle) = (cfg.max_sessions, cfg.idle_timeout.as_secs_f64());
        let server = start(cfg, textures).await.map_err(|e| {
            CliError::usage(format!(
                "cannot listen on {host}:{port}: {e} (pick another --port, or --port 0 for any free one)"
            ))
        })?;
        let addr = server.addr();
        if !addr.ip().is_loopback() && !token {
            tracing::warn!(
                "serving on {addr} without --token: anyone who can reach this address can use it"
            );
        }
        println!("listening on http://{addr}");
        eprintln!(
            "Crafter env server: up to {max} sessions, idle timeout {idle} s{}; Ctrl-C to stop",
            if token { ", bearer token required" } else { "" }
        );
        stop_signal().await;
        eprintln!("stopping");
        server.shutdown().await;
        Ok(0)
    })
}
