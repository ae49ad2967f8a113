//! The `vlm-eval view` command: the local web server over a results folder (`crate::view`).

use std::path::PathBuf;

use clap::Args;

use super::common::runtime;
use super::error::CliError;

use crate::view::{bind, ViewConfig, ViewError};

/// `vlm-eval view` flags.
#[derive(Args, Debug)]
pub struct ViewArgs {
    /// Results folder (a folder of runs, or one run folder).
    #[arg(default_value = "results")]
    pub dir: PathBuf,
    /// Address to listen on (loopback by default; anything else exposes your results).
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Port (0: any free port; the URL is printed).
    #[arg(long, default_value_t = 8765)]
    pub port: u16,
    /// Episodes shown in detail on a run page (each turn's frame is embedded).
    #[arg(long, default_value_t = 5)]
    pub max_episodes: usize,
}

/// The one-line error for a view server that could not start.
pub fn view_error(e: ViewError) -> CliError {
    match e {
        ViewError::NotAFolder(_) => CliError::usage(e.to_string()),
        ViewError::Bind { .. } => CliError::usage(format!(
            "{e} (is another server using the port? pass --port 0 for any free port)"
        )),
    }
}

/// Run `vlm-eval view`: print the URL, then serve until interrupted.
pub fn cmd_view(a: ViewArgs) -> Result<i32, CliError> {
    let cfg = ViewConfig {
        root: a.dir,
        host: a.host,
        port: a.port,
        max_episodes: a.max_episodes,
    };
    let rt = runtime()?;
    rt.block_on(async move {
        let bound = bind(cfg).await.map_err(view_error)?;
        println!("vlm-eval view: {}", bound.url());
        use std::io::Write as _;
        let _ = std::io::stdout().flush();
        tokio::select! {
            r = bound.serve() => r.map_err(|e| CliError { code: 1, message: format!("view server failed: {e}") })?,
            _ = tokio::signal::ctrl_c() => {}
        }
        Ok(0)
    })
}
