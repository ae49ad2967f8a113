//! `vlm-eval view`: a local web server over a results folder. The index is the leaderboard
//! (`report::leaderboard`), each run has its report page (`report::html`, GIFs left out), and a
//! run still playing gets a live panel per episode in flight that polls a small JSON route.
//!
//! It reads run folders only through `results` and never writes to them; it serves only the
//! runs found directly under its folder (looked up by name, never by joining a requested path),
//! and frames only as plain `frames/step_NNNN.png` files whose real path stays inside the
//! folder. Everything is cached on file times so the index stays fast over many runs.

pub mod bench;
mod live;
mod pages;
mod routes;
mod state;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

pub use live::LIVE_POLL_MS;
pub use state::in_progress;

/// Server settings.
#[derive(Clone, Debug)]
pub struct ViewConfig {
    /// The results folder (a folder of runs, or one run folder).
    pub root: PathBuf,
    /// Address to bind (`127.0.0.1` unless exposing on purpose).
    pub host: String,
    /// Port (0: any free port).
    pub port: u16,
    /// Episodes shown in detail on a run page.
    pub max_episodes: usize,
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    /// The folder is missing or not a folder.
    #[error("{0} is not a folder: pass a results folder (e.g. results/) or a run folder")]
    NotAFolder(String),
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: String,
        source: std::io::Error,
    },
}

/// A bound, not yet serving, view server.
pub struct Bound {
    listener: tokio::net::TcpListener,
    state: Arc<state::ViewState>,
    /// The address it listens on.
    pub addr: SocketAddr,
}

impl Bound {
    /// The URL of the index.
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// Serve until the process ends.
    pub async fn serve(self) -> std::io::Result<()> {
        axum::serve(self.listener, routes::router(self.state)).await
    }
}

/// Check the folder and bind the address (in the current tokio runtime).
pub async fn bind(cfg: ViewConfig) -> Result<Bound, ViewError> {
    if !cfg.root.is_dir() {
        return Err(ViewError::NotAFolder(cfg.root.display().to_string()));
    }
    let addr = format!("{}:{}", cfg.host, cfg.port);
    let bind_err = |source| ViewError::Bind {
        addr: addr.clone(),
        source,
    };
    let listener = tokio::net::TcpListener::bind((cfg.host.as_str(), cfg.port))
        .await
        .map_err(bind_err)?;
    let local = listener.local_addr().map_err(bind_err)?;
    Ok(Bound {
        listener,
        state: Arc::new(state::ViewState::new(cfg.root, cfg.max_episodes)),
        addr: local,
    })
}

/// Start a view server on a thread of its own (its own runtime) and return its address once it
/// listens; it serves until the process ends (`run --view`).
pub fn spawn_background(cfg: ViewConfig) -> Result<SocketAddr, ViewError> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("vlm-eval-view".into())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(source) => {
                    let _ = tx.send(Err(ViewError::Bind {
                        addr: format!("{}:{}", cfg.host, cfg.port),
                        source,
                    }));
                    return;
                }
            };
            rt.block_on(async move {
                match bind(cfg).await {
                    Ok(b) => {
                        let _ = tx.send(Ok(b.addr));
                        if let Err(e) = b.serve().await {
                            tracing::warn!("view server stopped: {e}");
                        }
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e));
                    }
                }
            });
        })
        .map_err(|source| ViewError::Bind {
            addr: "a thread for the view server".into(),
            source,
        })?;
    rx.recv().unwrap_or_else(|_| {
        Err(ViewError::Bind {
            addr: "the view server".into(),
            source: std::io::Error::other("its thread ended before it listened"),
        })
    })
}

/// The URL of a run's page (`/run/NAME/`) on a server at `base` (`http://HOST:PORT/`).
pub fn run_page_url(base: &str, run_dir: &std::path::Path) -> String {
    format!("{}{}", base.trim_end_matches('/'), live::run_url(run_dir))
}

/// The view of a run's output folder for `run --view`: the folder is created if needed, the
/// server started on 127.0.0.1:`port` in the background; returns its URL.
pub fn spawn_for_run(out: &std::path::Path, port: u16) -> Result<String, ViewError> {
    std::fs::create_dir_all(out).map_err(|source| ViewError::Bind {
        addr: out.display().to_string(),
        source,
    })?;
    let addr = spawn_background(ViewConfig {
        root: out.to_path_buf(),
        host: "127.0.0.1".into(),
        port,
        max_episodes: 5,
    })?;
    Ok(format!("http://{addr}/"))
}
