//! Weights-only checkpoint folders (config.json, generation_config.json and model.safetensors
//! only) load without a tokenizer and give the full checkpoint's logits (vlm-eval's
//! tests/local_cli runs `bench local` and `bench parity` on them).

use std::path::PathBuf;

use crate::support;
use vlm_eval_local::backend::cpu::Cpu;
use vlm_eval_local::engine::{Engine, Prompt};
use vlm_eval_local::preprocess::preprocess_image;

fn fixture() -> PathBuf {
    support::fixture("tiny-qwen2vl")
}

fn tmp(name: &str) -> PathBuf {
    support::fresh_dir(&format!("local-bench-{name}"))
}

/// A copy of the fixture with only what `save_pretrained` writes.
fn weights_only(name: &str) -> PathBuf {
    let d = tmp(name);
    for f in ["config.json", "generation_config.json", "model.safetensors"] {
        std::fs::copy(fixture().join(f), d.join(f)).unwrap();
    }
    d
}

#[test]
fn weights_only_engine_matches_the_full_checkpoint_on_ids() {
    let dir = weights_only("engine");
    let full = Engine::load(&fixture(), Cpu).unwrap();
    // The run path still needs the tokenizer.
    assert!(Engine::load(&dir, Cpu).is_err());
    let bare = Engine::load_bare(&dir, Cpu).unwrap();
    assert!(!bare.tok.has_text());
    // Default preprocessing equals the fixture's preprocessor_config.json (HF defaults).
    assert_eq!(bare.pre, full.pre);
    // Text needs tokenizer.json, and the error says so.
    let msgs = serde_json::json!([{"role": "user", "content": "hi"}]);
    let e = bare.prompt(&msgs, None, vec![]).err().unwrap().to_string();
    assert!(e.contains("tokenizer.json"), "{e}");
    // The same ids and image give the same logits as the full checkpoint.
    let png = std::fs::read(fixture().join("image_64.png")).unwrap();
    let image = preprocess_image(&png, &bare.pre).unwrap();
    let img = full.cfg.image_token_id;
    let mut ids = vec![1u32, 7, 9];
    ids.extend([img; 4]);
    ids.extend([11u32, 2]);
    let p = Prompt {
        ids,
        images: vec![image],
    };
    assert_eq!(
        bare.prefill_logits(&p).unwrap(),
        full.prefill_logits(&p).unwrap()
    );
    // A full folder through load_bare keeps its tokenizer.
    assert!(Engine::load_bare(&fixture(), Cpu).unwrap().tok.has_text());
}
