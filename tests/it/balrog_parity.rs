//! `env trace --preset balrog` against BALROG's own Crafter language wrapper (../shared/balrog,
//! run on Python crafter 1.8.3): every observation of many seeded episodes must be byte-identical,
//! and the episodes must between them cover sleep, death, plants, arrows and both kinds of
//! map edge (the empty view near the west/north edges, the cut view near the east/south ones).
//! With crafter's official textures the image BALROG attaches (its wrapper's second render) must
//! equal our frame pixel for pixel at every step, night included.
//! Skips with a printed reason when ../shared or the crafter venv is absent.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{json, Value};
use vlm_eval::crafter::{Action, Env, EnvConfig, TextureSet};

use crate::balrog_support;
use crate::support;
use balrog_support::{crafter_python, shared_balrog};

/// SplitMix64: a small seeded generator for the action streams.
struct Mix(u64);

impl Mix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The first move of a shortest walk (grass, sand, path: never lava; free of creatures) to a cell
/// satisfying `goal`, if one is reachable.
fn first_move(env: &Env, goal: impl Fn([i32; 2]) -> bool) -> Option<Action> {
    let world = env.world();
    let start = world.player_pos();
    let mut first: std::collections::HashMap<[i32; 2], Action> = Default::default();
    let mut queue = std::collections::VecDeque::from([start]);
    let moves = [
        (Action::MoveLeft, [-1, 0]),
        (Action::MoveRight, [1, 0]),
        (Action::MoveUp, [0, -1]),
        (Action::MoveDown, [0, 1]),
    ];
    while let Some(p) = queue.pop_front() {
        if p != start && goal(p) {
            return first.get(&p).copied();
        }
        for (a, d) in moves {
            let q = [p[0] + d[0], p[1] + d[1]];
            let open = world.inside(q) && world.material(q).walkable() && world.object_at(q) == 0;
            if open && q != start && !first.contains_key(&q) {
                let via = if p == start { a } else { first[&p] };
                first.insert(q, via);
                queue.push_back(q);
            }
        }
    }
    None
}

/// A seed's action stream. Seeds 0, 4, … walk to the west edge and then the north edge (the
/// view leaves the map), seeds 1, 5, … to the east and south edges (the view is cut), both
/// planned on our engine playing BALROG's game (reset Noop, every frame rendered twice at
/// 256 px) and then playing at random; seeds 2, 6, … gather, sleep and plant; the rest play
/// at random. Both sides replay the same list.
fn actions(seed: i64, len: usize) -> Vec<u8> {
    let mut r = Mix(seed as u64 ^ 0x5eed);
    let mode = seed % 4;
    let random = |r: &mut Mix| match r.below(100) {
        x if mode == 2 && x < 35 => 5,
        x if mode == 2 && x < 45 => 6,
        x if mode == 2 && x < 55 => 10,
        _ => r.below(17) as u8,
    };
    if mode >= 2 {
        return (0..len).map(|_| random(&mut r)).collect();
    }
    let cfg = EnvConfig {
        seed,
        size: [256, 256],
        ..EnvConfig::default()
    };
    let mut env = Env::new(cfg, &TextureSet::builtin()).unwrap();
    env.reset();
    env.step(Action::Noop);
    env.render();
    let goals: [fn([i32; 2]) -> bool; 2] = if mode == 0 {
        [|p| p[0] <= 1, |p| p[1] <= 1]
    } else {
        [|p| p[0] >= 62, |p| p[1] >= 62]
    };
    let mut stage = 0;
    let mut out = Vec::with_capacity(len);
    for _ in 0..len {
        while stage < goals.len() && goals[stage](env.world().player_pos()) {
            stage += 1;
        }
        let action = match goals.get(stage).and_then(|g| first_move(&env, g)) {
            Some(a) => a,
            None => {
                stage = goals.len();
                Action::from_id(random(&mut r) as i64).unwrap()
            }
        };
        let step = env.step(action);
        env.render();
        out.push(action.id());
        if step.done {
            break;
        }
    }
    out
}

#[test]
fn env_trace_matches_balrogs_wrapper_at_every_step() {
    let Some(shared) = shared_balrog() else {
        println!("SKIP: ../shared/balrog (BALROG's reference files) not present");
        return;
    };
    let Some(python) = crafter_python() else {
        println!("SKIP: .venv-crafter/bin/python with crafter==1.8.3 not present");
        return;
    };
    let seeds: Vec<i64> = (0..32).collect();
    let len = 300;
    let jobs: Vec<(i64, Vec<u8>)> = seeds.iter().map(|&s| (s, actions(s, len))).collect();

    // BALROG's side: the seeds split over a few Python processes.
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/balrog_observations.py");
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 8));
    let children: Vec<_> = (0..workers)
        .map(|w| {
            let mut child = Command::new(&python)
                .arg(&script)
                .arg(&shared)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("start the reference");
            let mut stdin = child.stdin.take().unwrap();
            for (seed, acts) in jobs.iter().skip(w).step_by(workers) {
                writeln!(stdin, "{}", json!({"seed": seed, "actions": acts})).unwrap();
            }
            child
        })
        .collect();
    let mut by_seed = std::collections::BTreeMap::new();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "reference failed");
        for line in String::from_utf8(out.stdout).unwrap().lines() {
            let v: Value = serde_json::from_str(line).unwrap();
            by_seed.insert(v["seed"].as_i64().unwrap(), v);
        }
    }
    let reference: Vec<Value> = jobs.iter().map(|(s, _)| by_seed[s].clone()).collect();

    let (mut compared, mut sleeping, mut dead, mut plants, mut arrows) = (0, 0, 0, 0, 0);
    let (mut empty_view, mut cut_view, mut facing_nothing) = (0, 0, 0);
    let official = TextureSet::discover(None).map(|(t, _)| t.kind()).ok() == Some("official");
    if !official {
        println!("NOTE: crafter's textures not found; comparing texts but not images");
    }
    let mut images = 0;
    for ((seed, acts), expected) in jobs.iter().zip(&reference) {
        let expected = expected["obs"].as_array().unwrap();
        let list: Vec<String> = acts.iter().map(u8::to_string).collect();
        // Our side: the CLI, one episode (the trace resets after `done`; only the first counts).
        let out = support::command()
            .args(["env", "trace", "--preset", "balrog", "--size", "256"])
            .args(["--seed", &seed.to_string()])
            .args([
                "--steps",
                &acts.len().to_string(),
                "--actions",
                &list.join(","),
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let records: Vec<Value> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        // Records: reset, the reset Noop's step, then the actions' steps.
        assert_eq!(records[0]["type"], "reset");
        let steps: Vec<&Value> = records[1..]
            .iter()
            .take_while(|r| r["type"] == "step")
            .collect();
        assert_eq!(
            steps.len(),
            expected.len(),
            "seed {seed}: observation count"
        );
        for (got, want) in steps.iter().zip(expected) {
            assert_eq!(got["t"], want["step"], "seed {seed}");
            let b = &got["balrog"];
            for key in ["long_term_context", "short_term_context"] {
                assert_eq!(
                    b[key].as_str().unwrap(),
                    want[key].as_str().unwrap(),
                    "seed {seed} step {}: {key}",
                    want["step"]
                );
            }
            if official {
                assert_eq!(
                    got["frame_sha256"], want["image_sha256"],
                    "seed {seed} step {}: image",
                    want["step"]
                );
                images += 1;
            }
            compared += 1;
            let view = want["long_term_context"].as_str().unwrap();
            sleeping += view.starts_with("You are sleeping") as usize;
            dead += view.starts_with("You died.") as usize;
            plants += view.contains("- plant ") as usize;
            arrows += view.contains("- arrow ") as usize;
            empty_view += view.contains("You see nothing away from you.") as usize;
            facing_nothing += view.contains("You face nothing at your front.") as usize;
            let pos = &got["player"]["pos"];
            let (x, y) = (pos[0].as_i64().unwrap(), pos[1].as_i64().unwrap());
            cut_view += (x > 59 || y > 60) as usize;
        }
    }
    println!(
        "{compared} observations over {} seeds byte-identical ({images} images pixel-identical): {sleeping} asleep, {dead} dead, \
         {plants} with plants, {arrows} with arrows, {empty_view} with an empty view (west/north \
         edge), {cut_view} with a cut view (east/south edge), {facing_nothing} facing nothing",
        seeds.len()
    );
    for (what, n) in [
        ("asleep", sleeping),
        ("dead", dead),
        ("plants", plants),
        ("empty view", empty_view),
        ("cut view", cut_view),
        ("facing nothing", facing_nothing),
    ] {
        assert!(
            n > 0,
            "no observation {what}: the episodes no longer cover it"
        );
    }
}
