//! Sessions against the engine, `env trace` and the evaluator's parser.

use std::sync::Arc;

use serde_json::{json, Value};
use vlm_eval::agent::observe::{observe, ObsFormat};
use vlm_eval::agent::parse::{judge_reply, ParserMode, Protocol};
use vlm_eval::crafter::trace::sha256_hex;
use vlm_eval::crafter::{Action, Env, EnvConfig, TextureSet, ACHIEVEMENT_NAMES};
use vlm_eval::model::ChatReply;
use vlm_eval::serve::ServeConfig;

use super::{actions_for, png_rgb, server, textures, Http};

/// What a trajectory consists of, per env step: reward, vitals, achievements, frame, text.
#[derive(Debug, PartialEq)]
struct StepView {
    reward: f64,
    vitals: [i64; 4],
    achievements: Vec<String>,
    done: bool,
    frame_sha: String,
    observation: String,
}

/// Play `actions` in chunks of 1, 2, 3, … through the server, one frame per step.
async fn play_http(http: &Http, seed: i64, actions: &[Action]) -> (Value, Vec<StepView>) {
    let (id, created) = http.create(json!({"seed": seed})).await;
    let mut out = Vec::new();
    let mut rest = actions;
    let mut chunk = 1;
    while !rest.is_empty() {
        let (now, later) = rest.split_at(chunk.min(rest.len()));
        rest = later;
        chunk += 1;
        let names: Vec<&str> = now.iter().map(|a| a.name()).collect();
        let v = http
            .ok(
                &format!("/v1/sessions/{id}/step"),
                &json!({"actions": names, "frames": "all"}),
            )
            .await;
        let frames = v["frames_png_b64"].as_array().expect("frames");
        let rewards = v["rewards"].as_array().expect("rewards");
        assert_eq!(frames.len(), rewards.len());
        assert_eq!(v["actions"].as_array().unwrap().len(), rewards.len());
        let sum: f64 = rewards.iter().map(|r| r.as_f64().unwrap()).sum();
        assert!((v["reward"].as_f64().unwrap() - sum).abs() < 1e-9);
        for (i, (f, r)) in frames.iter().zip(rewards).enumerate() {
            let last = i + 1 == rewards.len();
            let vit = &v["vitals"];
            out.push(StepView {
                reward: r.as_f64().unwrap(),
                // Vitals, achievements and text are reported after the last step of a request.
                vitals: if last {
                    ["health", "food", "drink", "energy"].map(|k| vit[k].as_i64().unwrap())
                } else {
                    [-1; 4]
                },
                achievements: if last {
                    serde_json::from_value(v["achievements"].clone()).unwrap()
                } else {
                    Vec::new()
                },
                done: last && v["done"].as_bool().unwrap(),
                frame_sha: sha256_hex(&png_rgb(f)),
                observation: if last {
                    v["observation"].as_str().unwrap().into()
                } else {
                    String::new()
                },
            });
        }
        if v["done"].as_bool().unwrap() {
            break;
        }
    }
    (created, out)
}

/// The same trajectory computed by the engine directly, masked like `play_http`'s chunks.
fn play_engine(seed: i64, actions: &[Action], tex: &TextureSet) -> (Env, Vec<StepView>) {
    let cfg = EnvConfig {
        seed,
        ..EnvConfig::default()
    };
    let mut env = Env::new(cfg, tex).unwrap();
    env.reset();
    let first = env.clone();
    let mut out = Vec::new();
    let (mut chunk, mut left) = (1usize, 1usize);
    for (i, &a) in actions.iter().enumerate() {
        let o = env.step(a);
        left -= 1;
        let last = left == 0 || o.done || i + 1 == actions.len();
        let inv = env.world().player.inventory;
        out.push(StepView {
            reward: o.reward,
            vitals: if last {
                [0, 1, 2, 3].map(|i| inv[i] as i64)
            } else {
                [-1; 4]
            },
            achievements: if last {
                ACHIEVEMENT_NAMES
                    .iter()
                    .zip(env.unlocked())
                    .filter(|(_, &u)| u)
                    .map(|(n, _)| n.to_string())
                    .collect()
            } else {
                Vec::new()
            },
            done: last && o.done,
            frame_sha: sha256_hex(env.frame()),
            observation: if last {
                observe(&env, ObsFormat::State)
            } else {
                String::new()
            },
        });
        if o.done {
            break;
        }
        if left == 0 {
            chunk += 1;
            left = chunk;
        }
    }
    (first, out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_sessions_repeat_exactly_and_equal_the_engine() {
    let s = server(ServeConfig::default()).await;
    let http = Arc::new(Http::new(&s));
    // 32 sessions at once: 16 seeds, each played twice with the same actions.
    let mut tasks = Vec::new();
    for k in 0..32u32 {
        let http = http.clone();
        let seed = (k % 16) as i64 * 7 - 20;
        tasks.push(tokio::spawn(async move {
            let actions = actions_for(k % 16, 60);
            (
                seed,
                actions.clone(),
                play_http(&http, seed, &actions).await,
            )
        }));
    }
    let mut results = Vec::new();
    for t in tasks {
        results.push(t.await.expect("task"));
    }
    let tex = textures();
    for k in 0..16 {
        let (seed, actions, (created, a)) = &results[k];
        let (_, _, (created_b, b)) = &results[k + 16];
        assert_eq!(
            a, b,
            "seed {seed}: two sessions with the same actions differ"
        );
        assert_eq!(created["observation"], created_b["observation"]);
        let (first, engine) = play_engine(*seed, actions, &tex);
        assert_eq!(
            created["world_seed"].as_u64(),
            Some(first.world_seed() as u64)
        );
        assert_eq!(
            sha256_hex(&png_rgb(&created["frame_png_b64"])),
            sha256_hex(first.frame())
        );
        assert_eq!(
            created["observation"].as_str(),
            Some(observe(&first, ObsFormat::State).as_str())
        );
        assert_eq!(
            a, &engine,
            "seed {seed}: the server differs from the engine"
        );
    }
    assert_eq!(s.sessions_open(), 32);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_equals_env_trace() {
    let s = server(ServeConfig::default()).await;
    let http = Http::new(&s);
    let names = [
        "move_left",
        "do",
        "do",
        "move_up",
        "do",
        "place_table",
        "move_right",
        "do",
        "noop",
        "make_wood_pickaxe",
        "move_down",
        "do",
        "sleep",
        "place_stone",
    ];
    let steps = 90;
    let out = crate::support::command()
        .args([
            "env",
            "trace",
            "--seed",
            "11",
            "--steps",
            &steps.to_string(),
            "--actions",
        ])
        .arg(names.join(","))
        .output()
        .expect("run vlm-eval env trace");
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
    assert_eq!(records[0]["type"], "reset");
    let (id, created) = http.create(json!({"seed": 11})).await;
    assert_eq!(created["world_seed"], records[0]["world_seed"]);
    assert_eq!(
        sha256_hex(&png_rgb(&created["frame_png_b64"])),
        records[0]["frame_sha256"]
    );
    let mut total = 0.0;
    let mut seen: Vec<String> = Vec::new();
    let mut unlocks = 0;
    for (t, rec) in records[1..=steps].iter().enumerate() {
        assert_eq!(
            rec["type"], "step",
            "the trace reset early; pick another seed"
        );
        let name = names[t % names.len()];
        assert_eq!(rec["action_name"], name);
        let v = http
            .ok(
                &format!("/v1/sessions/{id}/step"),
                &json!({"actions": [name]}),
            )
            .await;
        let p = &rec["player"]["inventory"];
        assert_eq!(v["rewards"], json!([rec["reward"]]), "step {}", t + 1);
        assert_eq!(v["step"], rec["t"]);
        assert_eq!(v["done"], rec["done"]);
        for k in ["health", "food", "drink", "energy"] {
            assert_eq!(v["vitals"][k], p[k], "{k} at step {}", t + 1);
        }
        for (k, n) in v["inventory"].as_object().unwrap() {
            assert_eq!(n, &p[k], "{k} at step {}", t + 1);
        }
        // The trace lists achievements with counts and the episode's unlocked set (sorted).
        let trace_ach: Vec<String> = rec["achievements"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        let mut ours: Vec<String> = serde_json::from_value(v["achievements"].clone()).unwrap();
        ours.sort();
        let mut sorted_trace = trace_ach.clone();
        sorted_trace.sort();
        assert_eq!(ours, sorted_trace);
        assert_eq!(json!(ours), rec["unlocked"]);
        // Newly unlocked this step = this step's set minus the previous step's.
        let mut new: Vec<String> = trace_ach
            .iter()
            .filter(|a| !seen.contains(*a))
            .cloned()
            .collect();
        new.sort();
        let mut reported: Vec<String> = serde_json::from_value(v["unlocked"].clone()).unwrap();
        reported.sort();
        assert_eq!(reported, new, "newly unlocked at step {}", t + 1);
        unlocks += new.len();
        seen = trace_ach;
        assert_eq!(
            sha256_hex(&png_rgb(&v["frame_png_b64"])),
            rec["frame_sha256"],
            "frame at step {}",
            t + 1
        );
        total += rec["reward"].as_f64().unwrap();
    }
    // Something happened beyond walking (the actions collect wood, so the reward is positive).
    assert!(
        total > 0.0 && unlocks > 0,
        "the chosen actions should unlock something"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_is_parsed_as_the_evaluator_parses_it() {
    let s = server(ServeConfig::default()).await;
    let http = Http::new(&s);
    let replies = [
        "<tool_call>\n{\"name\": \"interact_many\", \"arguments\": {\"actions\": [\"move_left\", \"do\"], \"reasoning\": \"tree\"}}\n</tool_call>",
        "I will go west.\nACTION: move_left",
        "- Move West\n- Do\n- collect wood",
        "{\"actions\": [\"noop\",\"noop\",\"noop\",\"noop\",\"noop\",\"noop\",\"noop\",\"noop\",\"noop\",\"noop\"]}",
        "Let me think about this carefully.",
        "<think>maybe sleep</think>",
    ];
    for protocol in [Protocol::Tool, Protocol::Text] {
        let (id, _) = http.create(json!({"seed": 2, "protocol": protocol})).await;
        for text in replies {
            let v = http
                .ok(&format!("/v1/sessions/{id}/step"), &json!({"text": text}))
                .await;
            let reply = ChatReply {
                text: Some(text.into()),
                ..ChatReply::default()
            };
            let judged = judge_reply(&reply, protocol, 8, ParserMode::Lenient);
            assert_eq!(
                v["parsed"],
                serde_json::to_value(&judged).unwrap(),
                "{protocol:?}: {text}"
            );
            let expected = judged.parsed;
            let played: Vec<&str> = if expected.actions.is_empty() {
                vec!["noop"]
            } else {
                expected.actions.iter().map(|a| a.name()).collect()
            };
            assert_eq!(v["actions"], json!(played));
            assert_eq!(v["invalid"], json!(expected.actions.is_empty()));
            assert_eq!(v["note"].is_string(), expected.actions.is_empty());
        }
    }
    // Hand-checked cases: the tool protocol caps at 8 actions, the text protocol at 1.
    let (id, _) = http.create(json!({"seed": 2})).await;
    let v = http
        .ok(
            &format!("/v1/sessions/{id}/step"),
            &json!({"text": replies[3]}),
        )
        .await;
    assert_eq!(
        (
            v["actions"].as_array().unwrap().len(),
            &v["parsed"]["truncated"]
        ),
        (8, &json!(2))
    );
    let v = http
        .ok(
            &format!("/v1/sessions/{id}/step"),
            &json!({"text": replies[4]}),
        )
        .await;
    assert_eq!(v["actions"], json!(["noop"]));
    assert_eq!(v["invalid"], json!(true));
}
