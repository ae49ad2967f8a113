//! `vlm-eval bench env` without the harness, for profiling the engine alone:
//! `cargo run --release -p vlm-eval-crafter --example bench_env -- [STEPS] [--no-render]`;
//! `-- N --resets-only` times N resets alone and `-- N --night-only` N night renders alone
//! (steady loops for `perf record` or `time`).
//! (textures found as the CLI finds them: `$CRAFTER_ASSETS`, the cache, the Python package).

use vlm_eval_crafter::bench::bench_env;
use vlm_eval_crafter::{EnvConfig, TextureSet};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let steps = match args.iter().find(|a| !a.starts_with("--")) {
        Some(s) => match s.parse::<u64>() {
            Ok(n) => n,
            Err(_) => {
                eprintln!("bench_env: STEPS must be a whole number, got {s:?}");
                std::process::exit(2);
            }
        },
        None => 200_000,
    };
    let render = !args.iter().any(|a| a == "--no-render");
    let textures = match TextureSet::discover(None) {
        Ok((t, _)) => t,
        Err(e) => {
            eprintln!("bench_env: no textures ({e}); using the built-in sprites");
            TextureSet::builtin()
        }
    };
    let cfg = EnvConfig {
        render,
        ..EnvConfig::default()
    };
    if args.iter().any(|a| a == "--resets-only") {
        let mut env = vlm_eval_crafter::Env::new(cfg, &textures).expect("valid config");
        let t = std::time::Instant::now();
        for _ in 0..steps {
            std::hint::black_box(env.reset());
        }
        let ms = t.elapsed().as_secs_f64() * 1e3 / steps.max(1) as f64;
        println!("reset           {ms:.3} ms ({steps} resets)");
        return;
    }
    if args.iter().any(|a| a == "--night-only") {
        let mut env = vlm_eval_crafter::Env::new(cfg, &textures).expect("valid config");
        env.reset();
        while vlm_eval_crafter::env::daylight(env.step_count()) >= 0.5 {
            env.set_player_health(9);
            env.step(vlm_eval_crafter::Action::Noop);
        }
        let t = std::time::Instant::now();
        for _ in 0..steps {
            std::hint::black_box(env.render());
        }
        let us = t.elapsed().as_secs_f64() * 1e6 / steps.max(1) as f64;
        println!("night render    {us:.1} us ({steps} renders)");
        return;
    }
    match bench_env(&cfg, &textures, steps) {
        Ok(report) => println!("{report}"),
        Err(e) => {
            eprintln!("bench_env: {e}");
            std::process::exit(2);
        }
    }
}
