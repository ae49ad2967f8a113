//! Prompt caching, measured: a local server that applies OpenAI's documented cache rule
//! (https://platform.openai.com/docs/guides/prompt-caching: caching starts at 1,024 prompt
//! tokens; hits come in 128-token steps; a hit is the longest exact prefix seen before, tools
//! and images included; `usage.prompt_tokens_details.cached_tokens` reports it) behind the
//! scripted (`mock`) policy, and the real binary playing against it with the default
//! (`window`) history layout and `--history-layout append`.
//!
//! Token counts are ours (no provider tokenizer here), stated so the figures can be redone:
//! - text: one token per 4 bytes (rounded up) of each text piece: the tools JSON, each message's
//!   role, text parts, tool calls (as JSON) and tool-call id; roughly o200k on English and JSON;
//! - images, by OpenAI's image rules (https://platform.openai.com/docs/guides/images-vision,
//!   "Calculating costs"; the model split is discussed in
//!   https://github.com/openai/openai-python/issues/2851): gpt-5-mini counts 32 px patches ×
//!   1.62 (64 px: 7 tokens, 256 px: 104); gpt-4o-mini counts 2,833 + 5,667 per 512 px tile
//!   (our frames are one tile, not upscaled: 8,500). Each model has its own cache.
//! - the cache is shared by every episode of a run (one organisation) and never expires
//!   within a run; `prompt_cache_key` routing is assumed perfect.
//!
//! `cache_benchmark` (ignored; run it with `--ignored --nocapture`) plays 20 seeds × 50 turns
//! per layout, at 64 px and at BALROG's 256 px (history 3), and at 64 px with history 16, and
//! prints the table of docs/BENCHMARKS.md.

use crate::support;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use axum::{extract::State, routing::post, Json, Router};
use base64::Engine as _;
use serde_json::{json, Value};
use vlm_eval::model::baseline::ScriptedModel;
use vlm_eval::model::mock::{reply_to_openai_json, request_from_openai_json};
use vlm_eval::model::ChatModel;

/// How a model counts an image of `w`×`h` pixels.
#[derive(Clone, Copy)]
enum ImageRule {
    /// gpt-5-mini: 32 px patches × 1.62, rounded up.
    Patches162,
    /// gpt-4o-mini: 2,833 + 5,667 per 512 px tile.
    Tiles4oMini,
}

impl ImageRule {
    fn tokens(self, w: u64, h: u64) -> u64 {
        match self {
            ImageRule::Patches162 => {
                ((w.div_ceil(32) * h.div_ceil(32)) as f64 * 1.62).ceil() as u64
            }
            ImageRule::Tiles4oMini => 2833 + 5667 * w.div_ceil(512) * h.div_ceil(512),
        }
    }
}

fn hash64(bytes: &[u8], salt: u64) -> u64 {
    // FNV-1a, salted: stable token ids for chunks.
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ salt.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn text_tokens(out: &mut Vec<u64>, text: &str) {
    for chunk in text.as_bytes().chunks(4) {
        out.push(hash64(chunk, 1));
    }
}

/// PNG width and height from a `data:image/png;base64,` URL.
fn png_size(url: &str) -> Option<(u64, u64)> {
    let b64 = url.split_once("base64,")?.1;
    let head = base64::engine::general_purpose::STANDARD
        .decode(&b64[..b64.len().min(32)])
        .ok()?;
    let w = u32::from_be_bytes(head.get(16..20)?.try_into().ok()?);
    let h = u32::from_be_bytes(head.get(20..24)?.try_into().ok()?);
    Some((u64::from(w), u64::from(h)))
}

/// The prompt of a request body as a token stream (see the module doc).
fn prompt_tokens(body: &Value, rule: ImageRule) -> Vec<u64> {
    let mut out = Vec::new();
    if let Some(tools) = body.get("tools") {
        text_tokens(&mut out, &tools.to_string());
    }
    for m in body["messages"].as_array().into_iter().flatten() {
        text_tokens(&mut out, m["role"].as_str().unwrap_or(""));
        match &m["content"] {
            Value::String(s) => text_tokens(&mut out, s),
            Value::Array(parts) => {
                for p in parts {
                    if let Some(t) = p["text"].as_str() {
                        text_tokens(&mut out, t);
                    } else if let Some(url) = p["image_url"]["url"].as_str() {
                        let (w, h) = png_size(url).expect("PNG data URL");
                        let id = hash64(url.as_bytes(), 2);
                        out.extend((0..rule.tokens(w, h)).map(|k| id ^ k));
                    }
                }
            }
            _ => {}
        }
        if let Some(calls) = m.get("tool_calls") {
            text_tokens(&mut out, &calls.to_string());
        }
        if let Some(id) = m["tool_call_id"].as_str() {
            text_tokens(&mut out, id);
        }
    }
    out
}

/// OpenAI's rule over one model's token streams: prefixes of 1,024 + 128·k tokens seen before.
#[derive(Default)]
struct PrefixCache {
    seen: HashSet<u64>,
}

impl PrefixCache {
    /// Cached tokens of this prompt, then remember its prefixes.
    fn serve(&mut self, tokens: &[u64]) -> u64 {
        let mut h = 0u64;
        let mut cached = 0;
        let mut boundaries = Vec::new();
        for (i, t) in tokens.iter().enumerate() {
            h = h.wrapping_mul(0x100_0000_01b3).wrapping_add(*t ^ 0x5555);
            let len = i + 1;
            if len >= 1024 && (len - 1024) % 128 == 0 {
                if self.seen.contains(&h) {
                    cached = len as u64;
                }
                boundaries.push(h);
            }
        }
        self.seen.extend(boundaries);
        cached
    }
}

/// Per-model totals of one run.
#[derive(Clone, Copy, Default, Debug)]
struct Totals {
    prompt: u64,
    cached: u64,
}

#[derive(Default)]
struct Server {
    caches: [PrefixCache; 2],
    totals: [Totals; 2],
    completion: u64,
    requests: u64,
    /// Earlier turns shown (assistant messages in the history), summed.
    earlier_turns: u64,
    /// Each episode's (prompt_cache_key's) request bodies' messages, in order.
    episodes: HashMap<String, Vec<Vec<Value>>>,
    keep_bodies: bool,
}

const RULES: [ImageRule; 2] = [ImageRule::Patches162, ImageRule::Tiles4oMini];

async fn completions(State(s): State<Arc<Mutex<Server>>>, Json(body): Json<Value>) -> Json<Value> {
    let request = request_from_openai_json(&body).expect("a valid request");
    let reply = ScriptedModel.chat(&request).await.expect("scripted reply");
    let mut out = reply_to_openai_json(&reply, "cache-sim");
    let completion = (out["choices"][0]["message"].to_string().len() as u64).div_ceil(4);
    let mut s = s.lock().unwrap();
    let mut usage = Vec::new();
    for (k, rule) in RULES.iter().enumerate() {
        let tokens = prompt_tokens(&body, *rule);
        let cached = s.caches[k].serve(&tokens);
        s.totals[k].prompt += tokens.len() as u64;
        s.totals[k].cached += cached;
        usage.push((tokens.len() as u64, cached));
    }
    s.completion += completion;
    s.requests += 1;
    let messages = body["messages"].as_array().unwrap();
    s.earlier_turns += messages.iter().filter(|m| m["role"] == "assistant").count() as u64;
    if s.keep_bodies {
        let key = body["prompt_cache_key"].as_str().unwrap_or("").to_string();
        s.episodes.entry(key).or_default().push(messages.clone());
    }
    out["usage"] = json!({
        "prompt_tokens": usage[0].0, "completion_tokens": completion,
        "total_tokens": usage[0].0 + completion,
        "prompt_tokens_details": {"cached_tokens": usage[0].1},
        "x_gpt_4o_mini": {"prompt_tokens": usage[1].0, "cached_tokens": usage[1].1}
    });
    Json(out)
}

struct Measured {
    requests: u64,
    earlier_turns: f64,
    totals: [Totals; 2],
    completion: u64,
    episodes: HashMap<String, Vec<Vec<Value>>>,
}

/// Play `seeds` × `turns` against a fresh cache server with extra flags.
async fn play(name: &str, seeds: u32, turns: u32, flags: &[&str], keep: bool) -> Measured {
    let state = Arc::new(Mutex::new(Server {
        keep_bodies: keep,
        ..Server::default()
    }));
    let app = Router::new()
        .route("/v1/chat/completions", post(completions))
        .layer(axum::extract::DefaultBodyLimit::max(64 << 20))
        .with_state(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let out = support::scratch(&format!("prompt-cache-{name}"));
    let base = format!("http://127.0.0.1:{port}/v1");
    let o = support::tokio_command()
        .args(["--model", "cache-sim", "--base-url", &base])
        .args(["--seeds", &seeds.to_string(), "--steps", &turns.to_string()])
        .args(["--prompt-cache-key", "on", "--frames", "none"])
        .args(flags)
        .args([
            "--out",
            out.to_str().unwrap(),
            "--run-name",
            name,
            "--quiet",
        ])
        .output()
        .await
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = state.lock().unwrap();
    Measured {
        requests: s.requests,
        earlier_turns: s.earlier_turns as f64 / s.requests as f64,
        totals: s.totals,
        completion: s.completion,
        episodes: s.episodes.clone(),
    }
}

#[test]
fn the_cache_rule() {
    let mut c = PrefixCache::default();
    let prompt: Vec<u64> = (0..1500).collect();
    assert_eq!(
        c.serve(&prompt[..1000]),
        0,
        "under 1,024 tokens: never cached"
    );
    assert_eq!(c.serve(&prompt), 0, "first sight");
    assert_eq!(c.serve(&prompt), 1408, "1,024 + 3·128 ≤ 1,500");
    let mut other = prompt.clone();
    other[1100] = 7;
    assert_eq!(
        c.serve(&other),
        1024,
        "the longest exact prefix, in 128-token steps"
    );
    other[5] = 7;
    assert_eq!(
        c.serve(&other),
        0,
        "a change inside the first 1,024 tokens: a miss"
    );
    // Images count by the model's rule, and a different frame is a different prefix.
    assert_eq!(ImageRule::Patches162.tokens(64, 64), 7);
    assert_eq!(ImageRule::Patches162.tokens(256, 256), 104);
    assert_eq!(ImageRule::Tiles4oMini.tokens(256, 256), 8500);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_append_layout_only_adds_to_the_previous_request() {
    let turns = 12;
    let window = play("window", 2, turns, &[], false).await;
    let append = play("append", 2, turns, &["--history-layout", "append"], true).await;
    assert_eq!((window.requests, append.requests), (24, 24));
    for (key, bodies) in &append.episodes {
        assert_eq!(bodies.len(), turns as usize, "{key}");
        for (t, pair) in bodies.windows(2).enumerate() {
            let (p, m) = (&pair[0], &pair[1]);
            if m.len() < p.len() {
                continue; // the oldest --history turns went at once
            }
            assert_eq!(
                m.len(),
                p.len() + 3,
                "turn {}: the previous messages + 3",
                t + 1
            );
            // Byte for byte, except the one frame that left the window (now the stub).
            let changed: Vec<usize> = (0..p.len()).filter(|&k| p[k] != m[k]).collect();
            assert_eq!(changed.len(), 1, "turn {}: {changed:?}", t + 1);
            let k = changed[0];
            assert_eq!(p[k]["content"][1]["type"], "image_url");
            assert_eq!(
                m[k]["content"][1],
                json!({"type": "text", "text": "[earlier frame omitted]"})
            );
            assert_eq!(p[k]["content"][0], m[k]["content"][0]);
        }
    }
    // The cache sees it: a larger share of the input is cached than with the window.
    let share = |m: &Measured| m.totals[0].cached as f64 / m.totals[0].prompt as f64;
    assert!(
        share(&append) > share(&window) + 0.2,
        "{} vs {}",
        share(&append),
        share(&window)
    );
    assert!(append.earlier_turns >= window.earlier_turns);
}

/// gpt-5-mini and gpt-4o-mini: USD per 1M input, cached input, output tokens, from
/// https://openai.com/api/pricing (read 2026-12-06).
const PRICES: [(&str, f64, f64, f64); 2] = [
    ("gpt-5-mini", 0.25, 0.025, 2.00),
    ("gpt-4o-mini", 0.15, 0.075, 0.60),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: 6 runs of 20 seeds × 50 turns (run with --ignored --nocapture)"]
async fn cache_benchmark() {
    let (seeds, turns) = (20u32, 50u32);
    let mut table = String::from(
        "| frames | history | layout | earlier turns shown (mean) | input tokens / turn | cached share (gpt-5-mini / gpt-4o-mini counts) | gpt-5-mini $/episode | $/turn | gpt-4o-mini $/episode | $/turn |\n|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let mut ratios = Vec::new();
    // The default settings, BALROG's 256 px frames, and a longer history (BALROG keeps 16).
    for (size, history) in [("64", "3"), ("256", "3"), ("64", "16")] {
        let mut per_turn = Vec::new();
        for layout in ["window", "append"] {
            let m = play(
                &format!("bench-{size}-{history}-{layout}"),
                seeds,
                turns,
                &[
                    "--image-size",
                    size,
                    "--history",
                    history,
                    "--history-layout",
                    layout,
                ],
                false,
            )
            .await;
            let episodes = f64::from(seeds);
            let cost = |k: usize| {
                let (_, pin, pcached, pout) = PRICES[k];
                let t = m.totals[k];
                ((t.prompt - t.cached) as f64 * pin
                    + t.cached as f64 * pcached
                    + m.completion as f64 * pout)
                    / 1e6
            };
            let (c5, c4) = (cost(0), cost(1));
            per_turn.push(c5 / m.requests as f64);
            table.push_str(&format!(
                "| {size} px | {history} | {layout} | {:.2} | {:.0} | {:.1} % / {:.1} % | ${:.5} | ${:.7} | ${:.5} | ${:.7} |\n",
                m.earlier_turns,
                m.totals[0].prompt as f64 / m.requests as f64,
                100.0 * m.totals[0].cached as f64 / m.totals[0].prompt as f64,
                100.0 * m.totals[1].cached as f64 / m.totals[1].prompt as f64,
                c5 / episodes,
                c5 / m.requests as f64,
                c4 / episodes,
                c4 / m.requests as f64,
            ));
        }
        ratios.push(format!(
            "{size} px, history {history}: append/window cost per turn at gpt-5-mini prices = {:.3}",
            per_turn[1] / per_turn[0]
        ));
    }
    println!("{table}\n{}", ratios.join("\n"));
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("prompt_cache_bench.md");
    std::fs::write(&path, format!("{table}\n{}\n", ratios.join("\n"))).unwrap();
    println!("written: {}", path.display());
}
