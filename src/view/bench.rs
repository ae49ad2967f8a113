//! `vlm-eval bench view`: a synthetic results folder written through the `results` writer
//! types (runs × episodes × steps, three protocols, one run still playing), then the view
//! server's index latency (cold and cached), its resident memory, and how long a written
//! turn takes to show in `live.json`. The server is a separate process (this binary's `view`),
//! so its memory is its own.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};

use crate::crafter::ACHIEVEMENT_NAMES;
use crate::results::formats::{latency_stats, EpisodeResult, FormatCounts, Spend, Termination};
use crate::results::store::{write_json, RunDir, StoreError};

/// What to generate.
#[derive(Clone, Debug)]
pub struct BenchShape {
    /// Finished runs.
    pub runs: usize,
    /// Episodes per run.
    pub episodes: usize,
    /// Steps (one turn each) per episode.
    pub steps: u32,
}

/// The measured figures.
#[derive(Clone, Debug, serde::Serialize)]
pub struct BenchFigures {
    /// Seconds to write the folder.
    pub generate_s: f64,
    /// Bytes written.
    pub folder_bytes: u64,
    /// First index request (every run read), ms.
    pub index_cold_ms: f64,
    /// Later index requests (cached on file times), median ms.
    pub index_warm_p50_ms: f64,
    /// Later index requests, slowest ms.
    pub index_warm_max_ms: f64,
    /// Index after one run changed (that run re-read, the leaderboard recomputed), ms.
    pub index_after_change_ms: f64,
    /// Index page size, bytes.
    pub index_bytes: usize,
    /// A run page (5 episodes in detail, no frames on disk), ms.
    pub run_page_ms: f64,
    /// From a trajectory line written to `live.json` showing its turn (polled every 10 ms):
    /// median and slowest over the turns written, ms.
    pub live_p50_ms: f64,
    /// Slowest live detection, ms.
    pub live_max_ms: f64,
    /// The page's poll interval, ms (a browser sees a turn within this plus the above).
    pub poll_ms: u64,
    /// Server resident memory at the end, KiB (`VmRSS`).
    pub rss_kib: u64,
    /// Server peak resident memory, KiB (`VmHWM`).
    pub peak_rss_kib: u64,
}

fn episode(seed: i64, steps: u32, rng: &mut ChaCha8Rng, skill: f64) -> EpisodeResult {
    let mut achievements = std::collections::BTreeMap::new();
    let mut unlock_step = std::collections::BTreeMap::new();
    let mut score = 0;
    for (i, name) in ACHIEVEMENT_NAMES.iter().enumerate() {
        let p = skill * (1.0 - i as f64 / 22.0);
        let got = rng.random::<f64>() < p;
        achievements.insert(name.to_string(), u32::from(got));
        if got {
            score += 1;
            unlock_step.insert(name.to_string(), rng.random_range(1..steps.max(2)));
        }
    }
    let calls: Vec<f64> = (0..steps).map(|_| rng.random_range(200.0..900.0)).collect();
    EpisodeResult {
        seed,
        world_seed: seed as u32,
        model: String::new(),
        progression: score as f64 / 22.0,
        score,
        achievements,
        unlock_step,
        num_steps: steps,
        episode_return: score as f64,
        turns: steps,
        termination: Termination::TurnBudget,
        invalid_actions: 0,
        unknown_actions: 0,
        truncated_actions: 0,
        format: Some(FormatCounts {
            exact: steps,
            repaired: 0,
            invalid: 0,
        }),
        input_tokens: Some(1000 * steps as u64),
        output_tokens: Some(20 * steps as u64),
        retries: 0,
        retry_wait_ms: 0.0,
        latency_ms: latency_stats(calls),
        cost_usd: Some(0.001 * steps as f64),
        error: None,
        wall_s: steps as f64 * 0.5,
        spent: Some(Spend {
            requests: steps as u64,
            input_tokens: 1000 * steps as u64,
            output_tokens: 20 * steps as u64,
            cost_usd: Some(0.001 * steps as f64),
            retries: 0,
            ..Spend::default()
        }),
        spent_before: None,
        frames: None,
    }
}

fn turn_line(turn: u32) -> Value {
    json!({"turn": turn, "step": turn, "observation": "", "frame": {"path": format!("frames/step_{turn:04}.png"), "sent": true},
        "reply": {"text": "ACTION: do"}, "parsed": {"actions": ["do"], "outcome": "exact"}, "invalid": false,
        "executed": [{"action": "do", "step": turn + 1, "reward": 0.0, "unlocked": [], "done": false}]})
}

fn run_info(model: &str, seeds: usize, image_size: u32) -> Value {
    json!({"config": {"model": model, "run_name": model, "preset": "vlm-eval", "parser": "lenient",
        "image_size": image_size, "seeds": (0..seeds as i64).collect::<Vec<_>>()}})
}

/// Write the synthetic folder: `shape.runs` finished runs (three protocols: image sizes 64, 96
/// and 128) and one run `live` with its first episode open. Returns the bytes written.
pub async fn generate(root: &Path, shape: &BenchShape) -> Result<u64, StoreError> {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for r in 0..shape.runs {
        let model = format!("model-{r:03}");
        let dir = RunDir::new(root.join(&model));
        let size = [64, 96, 128][r % 3];
        write_json(&dir.run_json(), &run_info(&model, shape.episodes, size))?;
        let skill = rng.random_range(0.05..0.6);
        for s in 0..shape.episodes as i64 {
            let mut ep = episode(s, shape.steps, &mut rng, skill);
            ep.model = model.clone();
            let mut w = dir.start_episode(s)?;
            for t in 0..shape.steps {
                w.append(&turn_line(t))?;
            }
            w.finish(&ep).await?;
        }
    }
    let live = RunDir::new(root.join("live"));
    write_json(&live.run_json(), &run_info("live", 2, 64))?;
    Ok(du(root))
}

fn du(p: &Path) -> u64 {
    let Ok(m) = std::fs::symlink_metadata(p) else {
        return 0;
    };
    if !m.is_dir() {
        return m.len();
    }
    std::fs::read_dir(p)
        .map(|rd| rd.flatten().map(|e| du(&e.path())).sum())
        .unwrap_or(0)
}

fn get(addr: &str, path: &str) -> std::io::Result<(f64, String)> {
    let t = Instant::now();
    let mut s = TcpStream::connect(addr)?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut buf = String::new();
    s.read_to_string(&mut buf)?;
    Ok((t.elapsed().as_secs_f64() * 1000.0, buf))
}

fn status_kib(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// Measure a running server (`addr`, process `pid`) over a folder made by [`generate`];
/// `live_turns` trajectory lines are written to the `live` run one by one.
pub async fn measure(
    root: &Path,
    addr: &str,
    pid: u32,
    live_turns: u32,
) -> std::io::Result<BenchFigures> {
    let io = |e: StoreError| std::io::Error::other(e.to_string());
    let (cold, page) = get(addr, "/")?;
    let mut warm = Vec::new();
    for _ in 0..20 {
        warm.push(get(addr, "/")?.0);
    }
    let warm_max = warm.iter().copied().fold(0.0, f64::max);
    let warm_p50 = median(warm);
    // One run changes: a new episode folder in model-000.
    let changed = RunDir::new(root.join("model-000"));
    let w = changed.start_episode(9999).map_err(io)?;
    drop(w);
    let (after, _) = get(addr, "/")?;
    let (run_ms, _) = get(addr, "/run/model-001/")?;
    let live = RunDir::new(root.join("live"));
    let mut w = live.start_episode(0).map_err(io)?;
    let mut lat = Vec::new();
    for t in 0..live_turns {
        w.append(&turn_line(t)).map_err(io)?;
        let t0 = Instant::now();
        loop {
            let (_, body) = get(addr, "/run/live/live.json")?;
            let json = body.split_once("\r\n\r\n").map(|x| x.1).unwrap_or("");
            let v: Value = serde_json::from_str(json).unwrap_or(Value::Null);
            if v["episodes"][0]["turn"].as_u64() == Some(t as u64) {
                break;
            }
            if t0.elapsed() > Duration::from_secs(10) {
                return Err(std::io::Error::other("live.json never showed the turn"));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        lat.push(t0.elapsed().as_secs_f64() * 1000.0);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let live_max = lat.iter().copied().fold(0.0, f64::max);
    Ok(BenchFigures {
        generate_s: 0.0,
        folder_bytes: 0,
        index_cold_ms: cold,
        index_warm_p50_ms: warm_p50,
        index_warm_max_ms: warm_max,
        index_after_change_ms: after,
        index_bytes: page.len(),
        run_page_ms: run_ms,
        live_p50_ms: median(lat),
        live_max_ms: live_max,
        poll_ms: super::LIVE_POLL_MS,
        rss_kib: status_kib(pid, "VmRSS:"),
        peak_rss_kib: status_kib(pid, "VmHWM:"),
    })
}

/// The whole benchmark: generate under `root` (reused when `root/.bench-done` says it has this
/// shape), start `exe view root --port 0`, measure, stop it.
pub fn run_bench(exe: &Path, root: &Path, shape: &BenchShape) -> Result<BenchFigures, String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let stamp = root.join(".bench-done");
    let want = format!("{} {} {}", shape.runs, shape.episodes, shape.steps);
    let t = Instant::now();
    let bytes = if std::fs::read_to_string(&stamp).ok().as_deref() == Some(want.as_str()) {
        du(root)
    } else {
        let _ = std::fs::remove_dir_all(root);
        std::fs::create_dir_all(root).map_err(|e| e.to_string())?;
        let b = rt
            .block_on(generate(root, shape))
            .map_err(|e| e.to_string())?;
        std::fs::write(&stamp, &want).map_err(|e| e.to_string())?;
        b
    };
    let generate_s = t.elapsed().as_secs_f64();
    let _ = std::fs::remove_dir_all(root.join("live/episodes"));
    let _ = std::fs::remove_dir_all(root.join("model-000/episodes/seed_9999"));
    let mut child = std::process::Command::new(exe)
        .args(["view", &root.display().to_string(), "--port", "0"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
    let mut line = String::new();
    {
        use std::io::BufRead;
        let mut r = std::io::BufReader::new(child.stdout.take().ok_or("no stdout")?);
        r.read_line(&mut line).map_err(|e| e.to_string())?;
    }
    let addr = line
        .trim()
        .trim_start_matches("vlm-eval view: http://")
        .trim_end_matches('/')
        .to_string();
    let pid = child.id();
    let out = rt.block_on(measure(root, &addr, pid, 20));
    let _ = child.kill();
    let _ = child.wait();
    let mut figures = out.map_err(|e| e.to_string())?;
    figures.generate_s = generate_s;
    figures.folder_bytes = bytes;
    Ok(figures)
}

/// A default place for the synthetic folder.
pub fn default_root() -> PathBuf {
    std::env::temp_dir().join("vlm-eval-bench-view")
}
