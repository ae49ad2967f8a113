//! Our real chat-completions request bodies checked against OpenAI's published OpenAPI spec by
//! a third-party validator, Stoplight Prism (`prism mock`), which `.ci/run` starts and names in
//! `PRISM_URL`. Prism answers 200 to a body that conforms to the spec and 422 (with the list of
//! violations) to one that does not.
//!
//! The bodies are built exactly as a run builds them: a real Crafter env, the text observation,
//! PNG frames, the built-in system prompts, a conversation with several recorded turns (tool-call
//! replies under the tool protocol, prose replies under the text protocol) and
//! `openai::request_body`. Every protocol × modality is covered, under three client settings
//! (defaults; sampling options with `max_completion_tokens`, `reasoning_effort`,
//! `prompt_cache_key` and the append history layout; the legacy `max_tokens` with
//! `tool_choice` off and an image `detail`). Deliberately broken variants must be rejected,
//! which proves the validator is live (with an unfixed spec Prism accepts everything).
//!
//! The spec is read from `../shared/openai-spec/chat.json` next to the repository (override:
//! `VLM_EVAL_OPENAI_SPEC`); it is never copied into the project. Without `PRISM_URL` or the spec
//! the test prints why and passes.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{json, Value};
use vlm_eval::agent::conversation::{Conversation, ConversationConfig, HistoryLayout, Modality};
use vlm_eval::agent::observe::encode_png;
use vlm_eval::agent::observe::{observe, ObsFormat};
use vlm_eval::agent::parse::{parse_reply, Protocol};
use vlm_eval::agent::prompt::Prompts;
use vlm_eval::crafter::{Action, Env, EnvConfig, TextureSet};
use vlm_eval::model::openai::{parse_response, request_body, OpenAiConfig};
use vlm_eval::model::{ChatReply, Role, ToolCall};

const MAX_ACTIONS: usize = 8;
const IMAGE_SIZE: usize = 64;
/// Turns played (and recorded) before the request that is checked.
const TURNS: usize = 4;

fn spec_path() -> PathBuf {
    match std::env::var_os("VLM_EVAL_OPENAI_SPEC").filter(|s| !s.is_empty()) {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/openai-spec/chat.json"),
    }
}

/// `PRISM_URL` when the check can run; otherwise prints why not.
fn prism_url() -> Option<String> {
    let Some(url) = std::env::var("PRISM_URL").ok().filter(|s| !s.is_empty()) else {
        println!("SKIP: PRISM_URL not set (.ci/run starts Prism)");
        return None;
    };
    let spec = spec_path();
    if !spec.is_file() {
        println!(
            "SKIP: OpenAI spec not found at {} (set VLM_EVAL_OPENAI_SPEC to its path)",
            spec.display()
        );
        return None;
    }
    Some(url.trim_end_matches('/').to_string())
}

/// A model reply as a server would return it, for turn `turn` of a protocol.
fn scripted_reply(protocol: Protocol, turn: usize) -> ChatReply {
    let call = |id: &str, arguments: Value| ToolCall {
        id: id.to_string(),
        name: "interact_many".into(),
        arguments,
    };
    match (protocol, turn % 4) {
        (Protocol::Tool, 0) => ChatReply {
            tool_calls: vec![call(
                "call_7fQ2xK",
                json!(r#"{"actions":["move_left","do"],"reasoning":"A tree is to the west."}"#),
            )],
            ..ChatReply::default()
        },
        (Protocol::Tool, 1) => ChatReply {
            text: Some("Collecting wood first, then a table.".into()),
            // Some servers send the arguments as an object; it is re-encoded as a string.
            tool_calls: vec![call(
                "call_9bZ1",
                json!({"actions": ["do", "do", "move_up"]}),
            )],
            ..ChatReply::default()
        },
        // A tool-protocol model that answered in prose (parsed from the text).
        (Protocol::Tool, 2) => ChatReply {
            text: Some("I will move north.\nACTION: move_up".into()),
            ..ChatReply::default()
        },
        // Two calls: only the first is kept in history, and it gets its tool result.
        (Protocol::Tool, _) => ChatReply {
            tool_calls: vec![
                call("call_a1", json!(r#"{"actions":["noop"]}"#)),
                call("call_a2", json!(r#"{"actions":["sleep"]}"#)),
            ],
            ..ChatReply::default()
        },
        (Protocol::Text, 0) => ChatReply {
            text: Some(
                "There is a tree two steps to the west. I should collect wood.\n\nACTION: Move West"
                    .into(),
            ),
            ..ChatReply::default()
        },
        (Protocol::Text, 1) => ChatReply {
            text: Some("<think>Facing the tree now.</think>\nDo".into()),
            reasoning: Some("Facing the tree now.".into()),
            ..ChatReply::default()
        },
        // An empty reply (recorded as "(no reply)").
        (Protocol::Text, 2) => ChatReply::default(),
        (Protocol::Text, _) => ChatReply {
            text: Some("Final action: Move North".into()),
            ..ChatReply::default()
        },
    }
}

/// Client settings and sampling options of one case.
struct Setting {
    name: &'static str,
    openai: OpenAiConfig,
    temperature: Option<f32>,
    max_tokens: Option<u32>,
    seed: Option<i64>,
    image_history: usize,
    /// `--history-layout append` and a `prompt_cache_key` (with `reasoning_effort` in `openai`).
    cache: bool,
}

fn settings(detail: &str) -> Vec<Setting> {
    let base = OpenAiConfig::new("http://unused.invalid/v1", "gpt-4o-mini");
    let mut sampling = base.clone();
    sampling.image_detail = Some("low".into());
    sampling.reasoning_effort = Some("low".into());
    let mut legacy = base.clone();
    legacy.use_max_completion_tokens = false;
    legacy.send_tool_choice = false;
    legacy.image_detail = Some(detail.into());
    vec![
        Setting {
            name: "defaults",
            openai: base,
            temperature: None,
            max_tokens: None,
            seed: None,
            image_history: 1,
            cache: false,
        },
        Setting {
            name: "sampling+max_completion_tokens",
            openai: sampling,
            temperature: Some(0.2),
            max_tokens: Some(1024),
            seed: Some(42),
            image_history: 2,
            cache: true,
        },
        Setting {
            name: "legacy max_tokens, no tool_choice",
            openai: legacy,
            temperature: Some(1.0),
            max_tokens: Some(300),
            seed: Some(-7),
            image_history: 3,
            cache: false,
        },
    ]
}

/// Play `TURNS` turns of a real episode with scripted replies and return the next request's
/// body.
fn real_body(protocol: Protocol, modality: Modality, setting: &Setting, seed: i64) -> Value {
    let textures = TextureSet::builtin();
    let cfg = EnvConfig {
        seed,
        size: [IMAGE_SIZE, IMAGE_SIZE],
        ..EnvConfig::default()
    };
    let mut env = Env::new(cfg, &textures).expect("env");
    env.reset();
    let max_actions = if protocol == Protocol::Text {
        1
    } else {
        MAX_ACTIONS
    };
    let mut conversation = Conversation::new(ConversationConfig {
        system: Prompts::builtin().system(protocol, max_actions),
        protocol,
        modality,
        history: 3,
        image_history: setting.image_history,
        max_actions,
        temperature: setting.temperature,
        max_tokens: setting.max_tokens,
        seed: setting.seed,
        tool_choice: true,
        layout: if setting.cache {
            HistoryLayout::Append
        } else {
            HistoryLayout::Window
        },
    });
    let format = if seed % 2 == 0 {
        ObsFormat::State
    } else {
        ObsFormat::Balrog
    };
    let mut note: Option<&str> = None;
    for turn in 0..TURNS {
        let frame = Arc::new(encode_png(env.frame(), IMAGE_SIZE));
        let user = conversation.user_message(&observe(&env, format), frame, note);
        let reply = scripted_reply(protocol, turn);
        let parsed = parse_reply(&reply, protocol, max_actions);
        note = parsed
            .actions
            .is_empty()
            .then_some("Note: your last reply contained no valid action, so `noop` was played.");
        let actions = if parsed.actions.is_empty() {
            vec![Action::Noop]
        } else {
            parsed.actions
        };
        for a in &actions {
            env.step(*a);
        }
        let names: Vec<&str> = actions.iter().map(|a| a.name()).collect();
        let summary = format!("Executed {} action(s): {}.", names.len(), names.join(", "));
        conversation.record(user, &reply, &summary);
    }
    let frame = Arc::new(encode_png(env.frame(), IMAGE_SIZE));
    let user = conversation.user_message(&observe(&env, format), frame, note);
    let mut request = conversation.request(&user);
    if setting.cache {
        request.prompt_cache_key = Some(format!("vlm-eval-0123456789abcdef-s{seed}"));
    }
    let history_turns = request
        .messages
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .count();
    assert!(history_turns >= 2, "at least two history turns");
    request_body(&setting.openai, &request).expect("request body")
}

async fn post(client: &reqwest::Client, url: &str, body: &Value) -> (u16, String) {
    let response = client
        .post(format!("{url}/chat/completions"))
        .header("authorization", "Bearer test")
        .header("content-type", "application/json")
        .body(serde_json::to_vec(body).expect("encode"))
        .send()
        .await
        .unwrap_or_else(|e| panic!("cannot reach Prism at {url}: {e}"));
    let status = response.status().as_u16();
    let text = response.text().await.unwrap_or_default();
    (status, text)
}

fn summary(body: &Value) -> String {
    let messages = body["messages"].as_array().map(Vec::len).unwrap_or(0);
    let images = body.to_string().matches("\"image_url\"").count() / 2;
    let keys: Vec<&str> = body
        .as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default();
    format!("{messages} messages, {images} image(s), keys {keys:?}")
}

#[tokio::test]
async fn real_requests_conform_to_openai_spec() {
    let Some(url) = prism_url() else { return };
    let client = reqwest::Client::new();
    let mut failures = Vec::new();
    let mut checked = 0;
    let details = ["high", "auto", "low"];
    let mut seed = 0i64;
    for protocol in [Protocol::Tool, Protocol::Text] {
        for modality in [Modality::Image, Modality::Text, Modality::Both] {
            for setting in settings(details[seed as usize % details.len()]) {
                seed += 1;
                let body = real_body(protocol, modality, &setting, seed);
                let label = format!("{protocol:?}/{modality:?}/{}", setting.name);
                let (status, answer) = post(&client, &url, &body).await;
                println!("{status} {label}: {}", summary(&body));
                checked += 1;
                if status != 200 {
                    failures.push(format!("{label}: HTTP {status}\n{answer}"));
                    continue;
                }
                // Prism answers with the spec's example response; our parser must read it.
                let value: Value = serde_json::from_str(&answer).expect("Prism reply is JSON");
                parse_response(value).expect("Prism's example response parses");
            }
        }
    }
    assert_eq!(checked, 18);
    assert!(
        failures.is_empty(),
        "Prism rejected {} of {checked} real request bodies:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// The image part of the last user message.
fn last_image_part(body: &mut Value) -> &mut Value {
    let messages = body["messages"].as_array_mut().expect("messages");
    let user = messages
        .iter_mut()
        .rev()
        .find(|m| m["role"] == "user")
        .expect("a user message");
    let parts = user["content"].as_array_mut().expect("content parts");
    parts
        .iter_mut()
        .find(|p| p["type"] == "image_url")
        .expect("an image part")
}

#[tokio::test]
async fn broken_requests_are_rejected() {
    let Some(url) = prism_url() else { return };
    let client = reqwest::Client::new();
    let setting = settings("high").remove(1);
    let good = real_body(Protocol::Tool, Modality::Both, &setting, 11);
    let (status, answer) = post(&client, &url, &good).await;
    assert_eq!(status, 200, "the unbroken body must pass first: {answer}");

    type Mutation = Box<dyn Fn(&mut Value)>;
    let broken: Vec<(&str, &str, Mutation)> = vec![
        (
            "tool_choice \"sometimes\"",
            "tool_choice",
            Box::new(|b| b["tool_choice"] = json!("sometimes")),
        ),
        (
            "message role \"bot\"",
            "role",
            Box::new(|b| b["messages"][1]["role"] = json!("bot")),
        ),
        (
            "image detail \"medium\"",
            "detail",
            Box::new(|b| last_image_part(b)["image_url"]["detail"] = json!("medium")),
        ),
        (
            "temperature 5",
            "temperature",
            Box::new(|b| b["temperature"] = json!(5)),
        ),
        (
            "messages missing",
            "messages",
            Box::new(|b| {
                b.as_object_mut().unwrap().remove("messages");
            }),
        ),
    ];
    let mut failures = Vec::new();
    for (name, field, mutate) in &broken {
        let mut body = good.clone();
        mutate(&mut body);
        assert_ne!(body, good, "{name}: mutation changed nothing");
        let (status, answer) = post(&client, &url, &body).await;
        println!("{status} broken: {name}");
        if status != 422 || !answer.contains(field) {
            failures.push(format!(
                "{name}: expected 422 naming {field:?}, got {status}: {answer}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
