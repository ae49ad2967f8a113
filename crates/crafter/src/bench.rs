//! `vlm-eval bench env`: environment throughput measured the way crafter_bench.py measures
//! Python crafter (random policy with resets, resets alone, render alone).

use std::fmt;
use std::time::Instant;

use serde::Serialize;

use crate::rng::RandomState;
use crate::{Action, Env, EnvConfig, EnvError, TextureSet};

/// Environment benchmark figures.
#[derive(Debug, Clone, Serialize)]
pub struct EnvBenchReport {
    /// Frame size (width, height); 0,0 when rendering is off.
    pub size: [usize; 2],
    /// Rendering on.
    pub render: bool,
    /// Random-policy steps per second, resets included (end to end).
    pub steps_per_sec: f64,
    /// Steps per second with reset time excluded.
    pub step_only_per_sec: f64,
    /// Mean `reset()` time (world generation + first frame), milliseconds.
    pub reset_ms: f64,
    /// Mean time of one `render()`, microseconds (day and night frames alternating).
    pub render_us: f64,
    /// Mean render time of a day frame, microseconds.
    pub render_day_us: f64,
    /// Mean render time of a night frame (noise drawn from the game RNG), microseconds.
    pub render_night_us: f64,
    /// Steps timed.
    pub steps: u64,
    /// Episodes started (resets) during the random-policy run.
    pub resets: u64,
}

impl fmt::Display for EnvBenchReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "size            {}x{} (render {})",
            self.size[0], self.size[1], self.render
        )?;
        writeln!(
            f,
            "steps/s         {:.0} (random policy, {} resets included)",
            self.steps_per_sec, self.resets
        )?;
        writeln!(f, "step-only/s     {:.0}", self.step_only_per_sec)?;
        writeln!(f, "reset           {:.3} ms", self.reset_ms)?;
        write!(
            f,
            "render          {:.1} us (day {:.1}, night {:.1})",
            self.render_us, self.render_day_us, self.render_night_us
        )
    }
}

/// Time `steps` random-policy steps (resetting on done), resets, and renders.
pub fn bench_env(
    cfg: &EnvConfig,
    textures: &TextureSet,
    steps: u64,
) -> Result<EnvBenchReport, EnvError> {
    let mut env = Env::new(cfg.clone(), textures)?;
    let mut actions = RandomState::new(0);
    let mut reset_time = 0.0f64;
    let mut resets = 0u64;
    let t0 = Instant::now();
    let r0 = Instant::now();
    env.reset();
    reset_time += r0.elapsed().as_secs_f64();
    resets += 1;
    for _ in 0..steps {
        let action = Action::ALL[actions.randint(0, 17) as usize];
        if env.step(action).done {
            let r = Instant::now();
            env.reset();
            reset_time += r.elapsed().as_secs_f64();
            resets += 1;
        }
    }
    let total = t0.elapsed().as_secs_f64();
    // Reset time alone over a fixed number of fresh episodes.
    let n_resets = 50;
    let r = Instant::now();
    for _ in 0..n_resets {
        std::hint::black_box(env.reset());
    }
    let reset_ms = r.elapsed().as_secs_f64() * 1000.0 / n_resets as f64;
    // Render alone: day frames (step 0) and, after stepping into the night, night frames.
    let mut render_env = Env::new(
        EnvConfig {
            render: true,
            ..cfg.clone()
        },
        textures,
    )?;
    render_env.reset();
    let n_render = 2000;
    let t = Instant::now();
    for _ in 0..n_render {
        std::hint::black_box(render_env.render());
    }
    let day = t.elapsed().as_secs_f64();
    while crate::env::daylight(render_env.step_count()) >= 0.5 {
        render_env.set_player_health(9);
        if render_env.step(Action::Noop).done {
            break;
        }
    }
    let t = Instant::now();
    for _ in 0..n_render {
        std::hint::black_box(render_env.render());
    }
    let night = t.elapsed().as_secs_f64();
    Ok(EnvBenchReport {
        size: if cfg.render { cfg.size } else { [0, 0] },
        render: cfg.render,
        steps_per_sec: steps as f64 / total,
        step_only_per_sec: steps as f64 / (total - reset_time).max(1e-9),
        reset_ms,
        render_us: (day + night) * 1e6 / (2 * n_render) as f64,
        render_day_us: day * 1e6 / n_render as f64,
        render_night_us: night * 1e6 / n_render as f64,
        steps,
        resets,
    })
}
