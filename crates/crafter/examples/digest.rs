//! One SHA-256 over everything an engine run produces (frames, rewards, world maps and RNG
//! states), for checking that a speed change kept every byte: build it before and after the
//! change and compare the printed digests.
//! `cargo run --release -p vlm-eval-crafter --example digest -- [EPISODES_PER_CASE]`

use sha2::{Digest, Sha256};
use vlm_eval_crafter::rng::RandomState;
use vlm_eval_crafter::{Action, Env, EnvConfig, TextureSet};

fn main() {
    let per_case = match std::env::args().nth(1).map(|s| s.parse::<u32>()) {
        None => 20,
        Some(Ok(n)) => n,
        Some(Err(_)) => {
            eprintln!("digest: EPISODES_PER_CASE must be a whole number");
            std::process::exit(2);
        }
    };
    let textures = match TextureSet::discover(None) {
        Ok((t, _)) => t,
        Err(e) => {
            eprintln!("digest: no textures ({e}); using the built-in sprites");
            TextureSet::builtin()
        }
    };
    // (frame size, render, keep the player alive so nights and sleep come round)
    let cases = [
        ([64, 64], true, false),
        ([64, 64], true, true),
        ([64, 64], false, true),
        ([224, 224], true, true),
        ([90, 70], true, true),
    ];
    let mut all = Sha256::new();
    for (ci, &(size, render, immortal)) in cases.iter().enumerate() {
        let mut h = Sha256::new();
        let cfg = EnvConfig {
            size,
            render,
            seed: ci as i64 * 1000 + 7,
            length: Some(if immortal { 700 } else { 10_000 }),
            ..EnvConfig::default()
        };
        let mut env = Env::new(cfg, &textures).expect("valid config");
        let mut actions = RandomState::new(ci as u32);
        for _ in 0..per_case {
            h.update(env.reset());
            h.update(&env.world().mat);
            h.update(env.world().rng.state_bytes());
            loop {
                let a = Action::ALL[actions.randint(0, 17) as usize];
                if immortal {
                    env.set_player_health(9);
                }
                let out = env.step(a);
                if render {
                    h.update(env.frame());
                }
                h.update(out.reward.to_le_bytes());
                h.update(env.world().player_pos()[0].to_le_bytes());
                h.update(env.world().player_pos()[1].to_le_bytes());
                if out.done {
                    break;
                }
            }
            h.update(env.world().rng.state_bytes());
            h.update(env.world().semantic());
        }
        let d = h.finalize();
        all.update(d);
        println!("case {ci} {size:?} render={render} immortal={immortal}: {d:x}");
    }
    println!("all: {:x}", all.finalize());
}
