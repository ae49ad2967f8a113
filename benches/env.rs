//! Criterion benchmarks of the Crafter engine: reset, step (with and without rendering), and
//! day/night renders. `vlm-eval bench env` gives the figures compared against Python crafter.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use vlm_eval::crafter::rng::RandomState;
use vlm_eval::crafter::{Action, Env, EnvConfig, TextureSet};

fn textures() -> TextureSet {
    TextureSet::discover(None)
        .map(|(t, _)| t)
        .unwrap_or_else(|_| TextureSet::builtin())
}

fn bench(c: &mut Criterion) {
    let textures = textures();
    let mut env = Env::new(EnvConfig::default(), &textures).unwrap();
    c.bench_function("reset", |b| b.iter(|| black_box(env.reset().len())));

    for (name, render) in [("step_render_64", true), ("step_no_render", false)] {
        let mut env = Env::new(
            EnvConfig {
                render,
                ..EnvConfig::default()
            },
            &textures,
        )
        .unwrap();
        env.reset();
        let mut actions = RandomState::new(0);
        c.bench_function(name, |b| {
            b.iter(|| {
                let a = Action::ALL[actions.randint(0, 17) as usize];
                env.set_player_health(9);
                if env.step(a).done {
                    env.reset();
                }
            })
        });
    }

    let mut env = Env::new(EnvConfig::default(), &textures).unwrap();
    env.reset();
    c.bench_function("render_day_64", |b| {
        b.iter(|| black_box(env.render().len()))
    });
    while vlm_eval::crafter::env::daylight(env.step_count()) >= 0.5 {
        env.set_player_health(9);
        env.step(Action::Noop);
    }
    c.bench_function("render_night_64", |b| {
        b.iter(|| black_box(env.render().len()))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
