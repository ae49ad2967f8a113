//! `vlm-eval serve-env`: flags validated into a server config, the server run until Ctrl-C
//! or SIGTERM.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use super::common::{load_textures, runtime};
use super::error::CliError;
use crate::agent::balrog::{BalrogTexts, PINNED_COMMIT};
use crate::agent::observe::ObsFormat;
use crate::agent::parse::Protocol;
use crate::serve::api::Defaults;
use crate::serve::{start, ServeConfig};

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
    /// Largest request body in bytes (413 above it; a larger declared Content-Length is
    /// refused before the body is read).
    #[arg(long, default_value_t = 1 << 20)]
    pub max_body_bytes: usize,
    /// Seconds to wait for the next bytes of a request body before answering 408 and closing
    /// the connection.
    #[arg(long, default_value_t = crate::serve::edge::BODY_STALL_TIMEOUT.as_secs_f64())]
    pub body_timeout: f64,
    /// Require `Authorization: Bearer TOKEN` on every route but /healthz.
    #[arg(long, env = "VLM_EVAL_SERVE_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Directory with crafter's textures (else $CRAFTER_ASSETS, the cache, or an installed
    /// crafter package; else built-in sprites).
    #[arg(long)]
    pub assets: Option<PathBuf>,
    /// A BALROG checkout (commit af7d1f1) for sessions of the `balrog` preset (its feedback
    /// sentence) [default: $BALROG_SRC; without one such sessions are refused].
    #[arg(long)]
    pub balrog_src: Option<PathBuf>,
    /// Serve balrog sessions even when the checkout's texts differ from commit af7d1f1.
    #[arg(long)]
    pub allow_balrog_drift: bool,
}

/// BALROG's texts from --balrog-src or $BALROG_SRC, if given, checked against the pins.
fn balrog_texts(a: &ServeArgs) -> Result<Option<Arc<BalrogTexts>>, CliError> {
    let Some(dir) = a.balrog_src.clone().or_else(|| {
        std::env::var_os("BALROG_SRC")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    }) else {
        return Ok(None);
    };
    let texts = BalrogTexts::load(&dir).map_err(|e| CliError::usage(e.to_string()))?;
    let drift = texts.drift();
    if !drift.is_empty() && !a.allow_balrog_drift {
        return Err(CliError::usage(format!(
            "the BALROG checkout {} is not at commit {PINNED_COMMIT}: the sha256 of {} differs from the pinned value; check out {PINNED_COMMIT}, or pass --allow-balrog-drift",
            dir.display(),
            drift.join(", ")
        )));
    }
    Ok(Some(Arc::new(texts)))
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
        if !(self.body_timeout.is_finite()
            && self.body_timeout > 0.0
            && self.body_timeout <= 3600.0)
        {
            return Err(CliError::usage(
                "--body-timeout must be a positive number of seconds up to 3600, e.g. 15",
            ));
        }
        check_host(&self.host, self.port)?;
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
            body_timeout: Duration::from_secs_f64(self.body_timeout),
            token: self.token.clone(),
            balrog: None,
        })
    }
}

/// `--host` must be an address, or a name this machine resolves, before anything listens.
fn check_host(host: &str, port: u16) -> Result<(), CliError> {
    use std::net::ToSocketAddrs;
    let shown: String = host.chars().take(80).collect();
    if host.trim().is_empty() {
        return Err(CliError::usage(
            "--host is empty: give an address to listen on, e.g. 127.0.0.1 (this machine only) or 0.0.0.0 (every interface)",
        ));
    }
    match (host, port).to_socket_addrs().map(|mut a| a.next().is_some()) {
        Ok(true) => Ok(()),
        Ok(false) => Err(CliError::usage(format!(
            "--host '{shown}' resolves to no address: give an IP address such as 127.0.0.1 or 0.0.0.0"
        ))),
        Err(e) => Err(CliError::usage(format!(
            "--host '{shown}' is not an address this machine can resolve ({e}): give an IP address such as 127.0.0.1 or 0.0.0.0, or a host name that resolves"
        ))),
    }
}

/// The one-line reason a bind failed, naming the flag to change.
fn bind_error(host: &str, port: u16, e: &std::io::Error) -> CliError {
    use std::io::ErrorKind;
    let fix = match e.kind() {
        ErrorKind::AddrInUse => "pick another --port, or --port 0 for any free one",
        ErrorKind::AddrNotAvailable => {
            "--host must be an address of this machine: 127.0.0.1 (this machine only) or 0.0.0.0 (every interface)"
        }
        ErrorKind::PermissionDenied => {
            "ports below 1024 need privileges: pick a --port above 1023, or --port 0 for any free one"
        }
        _ => "check --host and --port",
    };
    CliError::usage(format!("cannot listen on {host}:{port}: {e} ({fix})"))
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
    let mut cfg = a.config()?;
    cfg.balrog = balrog_texts(&a)?;
    let textures = Arc::new(load_textures(a.assets.as_deref())?);
    let runtime = runtime()?;
    runtime.block_on(async move {
        let (host, port, token) = (cfg.host.clone(), cfg.port, cfg.token.is_some());
        let (max, idle) = (cfg.max_sessions, cfg.idle_timeout.as_secs_f64());
        let server = start(cfg, textures)
            .await
            .map_err(|e| bind_error(&host, port, &e))?;
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
