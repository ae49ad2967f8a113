//! `vlm-eval bench startup`: time from starting the `vlm-eval run` process to its first model
//! request, against an in-process OpenAI-compatible server, for each way textures are found.
//!
//! Each case runs the binary with one seed and one turn (`--model startup-bench --base-url
//! <local server>`); the clock starts just before the process is spawned and stops when the
//! server receives the first chat request. The reference case is the path every run took before
//! textures were cached: an empty cache, so discovery asks `python3` for an installed crafter
//! package (and, without one, plays with the built-in sprites).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::model::baseline::ScriptedModel;
use crate::model::mock::MockServer;
use crate::model::{BoxFuture, ChatModel, ChatReply, ChatRequest, ModelError};

/// One way of starting: the environment the child process gets.
#[derive(Debug, Clone)]
pub struct StartupCase {
    /// Short name for the report.
    pub name: String,
    /// What this case represents.
    pub about: String,
    /// Variables to set (`Some`) or remove (`None`) in the child's environment.
    pub env: Vec<(String, Option<OsString>)>,
    /// Give each repeat its own fresh empty folder as `$VLM_EVAL_CACHE` (so a cache filled by
    /// one repeat does not help the next).
    pub fresh_cache: bool,
}

/// Figures of one case, milliseconds.
#[derive(Debug, Clone, Serialize)]
pub struct StartupFigures {
    /// Case name.
    pub case: String,
    /// What it represents.
    pub about: String,
    /// Median time to the first model request.
    pub median_ms: f64,
    /// Fastest.
    pub min_ms: f64,
    /// Slowest.
    pub max_ms: f64,
    /// Repeats measured.
    pub repeats: usize,
}

/// The benchmark's result: one row per case, in the order given.
#[derive(Debug, Clone, Serialize)]
pub struct StartupReport {
    /// Per-case figures.
    pub cases: Vec<StartupFigures>,
}

/// A responder that notes when its first call arrives, then answers like the scripted policy.
struct FirstCall {
    inner: ScriptedModel,
    first: Mutex<Option<Instant>>,
}

impl ChatModel for FirstCall {
    fn name(&self) -> &str {
        "startup-bench"
    }
    fn chat<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<ChatReply, ModelError>> {
        let now = Instant::now();
        if let Ok(mut first) = self.first.lock() {
            first.get_or_insert(now);
        }
        self.inner.chat(request)
    }
}

/// A folder removed (best effort) when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn scratch(parent: &Path, tag: &str) -> Result<Scratch, String> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let dir = parent.join(format!(
        "vlm-eval-startup-{tag}-{}-{nanos}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    Ok(Scratch(dir))
}

fn median(sorted: &[f64]) -> f64 {
    match sorted.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// Run every case `repeats` times (after one unmeasured warm-up each) with `exe`, the
/// `vlm-eval` binary; scratch folders go under `work` and are removed.
pub async fn bench_startup(
    exe: &Path,
    cases: &[StartupCase],
    repeats: usize,
    work: &Path,
) -> Result<StartupReport, String> {
    let recorder = Arc::new(FirstCall {
        inner: ScriptedModel,
        first: Mutex::new(None),
    });
    let server = MockServer::start(recorder.clone())
        .await
        .map_err(|e| format!("cannot start the local server: {e}"))?;
    let base = server.base_url();
    let mut report = StartupReport { cases: Vec::new() };
    for case in cases {
        let mut times = Vec::with_capacity(repeats);
        for i in 0..=repeats {
            // A fresh results folder per run, as a new run name gets.
            let out = scratch(work, "run")?;
            let cache = if case.fresh_cache {
                Some(scratch(work, "cache")?)
            } else {
                None
            };
            if let Ok(mut first) = recorder.first.lock() {
                *first = None;
            }
            let mut cmd = tokio::process::Command::new(exe);
            cmd.args(["run", "--model", "startup-bench", "--base-url", &base])
                .args(["--seeds", "1", "--steps", "1", "--concurrency", "1"])
                .arg("--out")
                .arg(&out.0)
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .kill_on_drop(true);
            for (key, value) in &case.env {
                match value {
                    Some(v) => cmd.env(key, v),
                    None => cmd.env_remove(key),
                };
            }
            if let Some(c) = &cache {
                cmd.env("VLM_EVAL_CACHE", &c.0);
            }
            let started = Instant::now();
            let child = cmd
                .spawn()
                .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
            let output = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
                .await
                .map_err(|_| format!("case {}: the run did not finish in 120 s", case.name))?
                .map_err(|e| format!("case {}: {e}", case.name))?;
            if !output.status.success() {
                let err = String::from_utf8_lossy(&output.stderr);
                let last = err.lines().last().unwrap_or("").trim().to_string();
                return Err(format!(
                    "case {}: the run failed ({}): {last}",
                    case.name, output.status
                ));
            }
            let first = recorder
                .first
                .lock()
                .ok()
                .and_then(|f| *f)
                .ok_or_else(|| format!("case {}: the run sent no request", case.name))?;
            if i > 0 {
                times.push(first.saturating_duration_since(started).as_secs_f64() * 1e3);
            }
        }
        times.sort_by(f64::total_cmp);
        report.cases.push(StartupFigures {
            case: case.name.clone(),
            about: case.about.clone(),
            median_ms: median(&times),
            min_ms: times.first().copied().unwrap_or(f64::NAN),
            max_ms: times.last().copied().unwrap_or(f64::NAN),
            repeats: times.len(),
        });
    }
    drop(server);
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[1.0, 2.0, 9.0]), 2.0);
        assert_eq!(median(&[1.0, 2.0, 3.0, 9.0]), 2.5);
        assert!(median(&[]).is_nan());
    }
}
