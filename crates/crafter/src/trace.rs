//! The trace contract (`vlm-eval env trace`): JSONL `reset` and `step` records with the field
//! names and hash definitions of crafter's golden traces, for parity checks.

use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use super::env::Env;
use super::rng::RandomState;
use super::rules::{Action, Material, ACHIEVEMENT_NAMES, ITEM_NAMES};
use super::world::{Kind, World, PLAYER};

/// Lower-case hex sha256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

fn player_record(world: &World) -> Value {
    let p = &world.player;
    let pos = world.player_pos();
    let inventory: Map<String, Value> = ITEM_NAMES
        .iter()
        .zip(p.inventory.iter())
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    json!({
        "pos": pos,
        "facing": p.facing,
        "sleeping": p.sleeping,
        "inventory": inventory,
        "hunger": p.hunger,
        "thirst": p.thirst,
        "fatigue": p.fatigue,
        "recover": p.recover,
    })
}

/// The `reset` record for the env's current (just reset) state.
pub fn reset_record(env: &Env) -> Value {
    let world = env.world();
    let mut counts = Map::new();
    let mut objects = Vec::new();
    for &id in &world.live {
        let o = &world.objects[id as usize];
        objects.push(json!({"kind": o.kind.name(), "pos": o.pos, "health": world.health(id)}));
        let c = counts.entry(o.kind.name()).or_insert(json!(0));
        *c = json!(c.as_i64().unwrap_or(0) + 1);
    }
    let mut mat_counts = Map::new();
    for m in &Material::ALL[1..] {
        mat_counts.insert(
            m.name().into(),
            json!(world.mat.iter().filter(|&&v| v == *m as u8).count()),
        );
    }
    json!({
        "type": "reset",
        "episode": env.episode(),
        "env_seed": env.config().seed,
        "world_seed": env.world_seed(),
        "simplex_seed": env.simplex_seed(),
        "daylight": world.daylight,
        "mat_map_sha256": sha256_hex(&world.mat),
        "mat_counts": mat_counts,
        "object_counts": counts,
        "objects": objects,
        "player": player_record(world),
        "frame_sha256": sha256_hex(env.frame()),
        "frame_shape": [env.config().size[1], env.config().size[0], 3],
        "rng_sha256": sha256_hex(&world.rng.state_bytes()),
    })
}

/// The `step` record after `env.step(action)` returned `reward` and `done`.
pub fn step_record(env: &Env, action: Action, reward: f64, done: bool, dead: bool) -> Value {
    let world = env.world();
    let achievements: Map<String, Value> = ACHIEVEMENT_NAMES
        .iter()
        .zip(world.player.achievements.iter())
        .filter(|(_, &v)| v > 0)
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    let mut unlocked: Vec<&str> = ACHIEVEMENT_NAMES
        .iter()
        .zip(env.unlocked().iter())
        .filter(|(_, &u)| u)
        .map(|(k, _)| *k)
        .collect();
    unlocked.sort_unstable();
    let mut counts = Map::new();
    for kind in [
        Kind::Cow,
        Kind::Zombie,
        Kind::Skeleton,
        Kind::Arrow,
        Kind::Plant,
    ] {
        let n = world
            .live
            .iter()
            .filter(|&&id| world.objects[id as usize].kind == kind)
            .count();
        counts.insert(kind.name().into(), json!(n));
    }
    json!({
        "type": "step",
        "episode": env.episode(),
        "t": env.step_count(),
        "action": action.id(),
        "action_name": action.name(),
        "reward": reward,
        "done": done,
        "discount": if dead { 0.0 } else { 1.0 },
        "daylight": world.daylight,
        "player": player_record(world),
        "achievements": achievements,
        "unlocked": unlocked,
        "n_objects": world.live.len(),
        "object_counts": counts,
        "semantic_sha256": sha256_hex(&world.semantic()),
        "frame_sha256": sha256_hex(env.frame()),
        "rng_sha256": sha256_hex(&world.rng.state_bytes()),
    })
}

/// What `run_trace` plays.
#[derive(Clone, Debug, Default)]
pub struct TraceOptions {
    /// Number of steps.
    pub steps: u64,
    /// Seed of the random action stream (`RandomState(A).randint(0, 17)` per step).
    pub action_seed: u32,
    /// Fixed actions to cycle through instead of random ones.
    pub actions: Option<Vec<Action>>,
    /// Refill health to 9 before each step.
    pub immortal: bool,
    /// Play one `noop` right after every reset (BALROG's wrapper does), emitted as a step
    /// record before the options' steps.
    pub reset_noop: bool,
    /// Render once more after every step, as BALROG's wrapper does (at night each render draws
    /// noise from the game's RNG, so this changes the game from dusk on).
    pub render_twice: bool,
}

/// Play the options' steps, resetting after `done`, calling `emit` for every record (the
/// first is the initial `reset`).
pub fn run_trace(env: &mut Env, options: &TraceOptions, mut emit: impl FnMut(Value)) {
    run_trace_with(env, options, |_, record| emit(record));
}

/// [`run_trace`], also handing `emit` the env in the state the record describes.
pub fn run_trace_with(env: &mut Env, options: &TraceOptions, mut emit: impl FnMut(&Env, Value)) {
    let mut rng = RandomState::new(options.action_seed);
    let reset = |env: &mut Env, emit: &mut dyn FnMut(&Env, Value)| {
        env.reset();
        emit(env, reset_record(env));
        if options.reset_noop {
            let out = env.step(Action::Noop);
            if options.render_twice {
                env.render();
            }
            emit(
                env,
                step_record(env, Action::Noop, out.reward, out.done, out.dead),
            );
        }
    };
    reset(env, &mut emit);
    for t in 0..options.steps {
        let action = match &options.actions {
            Some(list) if !list.is_empty() => list[(t % list.len() as u64) as usize],
            _ => Action::from_id(rng.randint(0, Action::ALL.len() as i64)).unwrap_or(Action::Noop),
        };
        if options.immortal && env.world().health(PLAYER) < 9 {
            env.set_player_health(9);
        }
        let out = env.step(action);
        if options.render_twice {
            env.render();
        }
        emit(
            env,
            step_record(env, action, out.reward, out.done, out.dead),
        );
        if out.done {
            reset(env, &mut emit);
        }
    }
}
