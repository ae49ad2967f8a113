//! The env server driven over HTTP: parallel sessions, determinism, equality with the engine
//! and with `vlm-eval env trace`, the evaluator's parser (`engine.rs`); limits and JSON errors,
//! idle expiry, the session view and the leak metrics (`limits.rs`). The OpenRLHF example agent
//! runs under the real OpenRLHF against a live `vlm-eval serve-env` in
//! `scripts/openrlhf_check.sh` (a pinned Python venv; part of `.ci/run`).

mod balrog;
use crate::balrog_support;
mod engine;
mod limits;

use std::sync::Arc;

use base64::Engine as _;
use serde_json::Value;
use vlm_eval::crafter::rng::RandomState;
use vlm_eval::crafter::{Action, TextureSet};
use vlm_eval::serve::{start, ServeConfig, ServerHandle};

pub fn textures() -> Arc<TextureSet> {
    // The same discovery `vlm-eval env trace` does without --assets.
    Arc::new(TextureSet::discover(None).expect("texture discovery").0)
}

pub async fn server(cfg: ServeConfig) -> ServerHandle {
    let cfg = ServeConfig { port: 0, ..cfg };
    start(cfg, textures()).await.expect("start server")
}

pub struct Http {
    client: reqwest::Client,
    base: String,
    /// Bearer token sent with every request.
    pub token: Option<String>,
}

impl Http {
    pub fn new(s: &ServerHandle) -> Http {
        Http {
            client: reqwest::Client::new(),
            base: s.base_url(),
            token: None,
        }
    }

    pub async fn send(&self, method: &str, path: &str, body: Option<Vec<u8>>) -> (u16, Value) {
        let url = format!("{}{path}", self.base);
        let mut req = match method {
            "GET" => self.client.get(&url),
            "DELETE" => self.client.delete(&url),
            "PUT" => self.client.put(&url),
            _ => self.client.post(&url),
        };
        if let Some(t) = &self.token {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        if let Some(b) = body {
            req = req.header("content-type", "application/json").body(b);
        }
        let resp = req.send().await.expect("request");
        let status = resp.status().as_u16();
        let ctype = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let bytes = resp.bytes().await.expect("body");
        let v: Value = serde_json::from_slice(&bytes).unwrap_or_else(|e| {
            panic!(
                "{method} {path}: HTTP {status} body is not JSON ({e}): {}",
                String::from_utf8_lossy(&bytes)
            )
        });
        assert!(
            ctype.starts_with("application/json"),
            "{method} {path}: content-type {ctype}"
        );
        (status, v)
    }

    pub async fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        self.send("POST", path, Some(body.to_string().into_bytes()))
            .await
    }

    pub async fn ok(&self, path: &str, body: &Value) -> Value {
        let (s, v) = self.post(path, body).await;
        assert_eq!(s, 200, "POST {path} {body}: {v}");
        v
    }

    pub async fn create(&self, body: Value) -> (String, Value) {
        let v = self.ok("/v1/sessions", &body).await;
        (v["id"].as_str().expect("id").to_string(), v)
    }
}

pub fn png_rgb(b64: &Value) -> Vec<u8> {
    let png = base64::engine::general_purpose::STANDARD
        .decode(b64.as_str().expect("base64 frame"))
        .expect("valid base64");
    image::load_from_memory(&png)
        .expect("valid PNG")
        .to_rgb8()
        .into_raw()
}

pub fn actions_for(seed: u32, n: usize) -> Vec<Action> {
    let mut rng = RandomState::new(seed);
    (0..n)
        .map(|_| Action::ALL[rng.randint(0, 17) as usize])
        .collect()
}
