//! The local Qwen2-VL against references computed by transformers (scripts/make_qwen2vl_fixtures.py):
//! token ids, pixel patches, M-RoPE positions, image embeddings, prefill logits and greedy tokens.

use std::path::PathBuf;

use crate::support::{self, max_abs_diff, Reference};
use serde_json::{json, Value};
use vlm_eval_local::backend::cpu::packed::CpuPacked;
use vlm_eval_local::engine::{Engine, GenParams, Prompt};
use vlm_eval_local::preprocess::{mrope_positions, preprocess_image, ImageInput};
use vlm_eval_local::sampling::SamplingParams;
use vlm_eval_local::weights::Weights;

const FIXTURE: &str = "tiny-qwen2vl";

fn fixture() -> PathBuf {
    support::fixture(FIXTURE)
}

fn engine() -> Engine<CpuPacked> {
    support::packed_engine(FIXTURE)
}

fn reference(file: &str) -> Reference {
    support::reference(FIXTURE, file)
}

/// The reference's images as model inputs (the processor's own patches).
fn ref_images(r: &Reference) -> Vec<ImageInput> {
    support::ref_images(r, 1176)
}

fn png(name: &str) -> Vec<u8> {
    std::fs::read(fixture().join(name)).unwrap()
}

fn messages_one() -> Value {
    json!([{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Describe the image."}]}])
}

fn messages_two() -> Value {
    json!([{"role": "system", "content": "You play Crafter."},
           {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is in this picture? And here:"},
                                        {"type": "image"}]}])
}

fn greedy(max_new: usize) -> GenParams {
    GenParams {
        max_new_tokens: max_new,
        sampling: SamplingParams::greedy(),
        stop_ids: Vec::new(),
    }
}

fn check_fixture(file: &str, messages: Value, pngs: &[&str]) {
    let e = engine();
    let r = reference(file);
    // Preprocessing from the PNG files: same patches and grids as HF's PIL processor.
    let images: Vec<ImageInput> = pngs
        .iter()
        .map(|p| preprocess_image(&png(p), &e.pre).unwrap())
        .collect();
    let ours: Vec<f32> = images
        .iter()
        .flat_map(|i| i.pixels.iter().copied())
        .collect();
    assert_eq!(images.iter().map(|i| i.grid).collect::<Vec<_>>(), r.grids);
    let d = max_abs_diff(&ours, &r.pixels);
    println!("{file}: pixel patches max |diff| = {d:e}");
    assert_eq!(d, 0.0, "pixel patches differ from the HF processor");

    // Token ids through the chat template and tokenizer.
    let prompt = e.prompt(&messages, None, images).unwrap();
    assert_eq!(prompt.ids, r.ids, "input_ids differ");

    // M-RoPE positions and delta.
    let (pos, delta) = mrope_positions(&prompt.ids, &r.grids, e.cfg.image_token_id, 2).unwrap();
    let flat: Vec<i64> = pos.iter().flatten().copied().collect();
    assert_eq!(flat, r.positions);
    assert_eq!(delta, r.delta);

    // Vision tower on the reference patches.
    let imgs = ref_images(&r);
    let refs: Vec<&ImageInput> = imgs.iter().collect();
    let emb = e.image_embeds(&refs).unwrap();
    let d = max_abs_diff(&emb, &r.embeds);
    println!("{file}: image embeds max |diff| = {d:e}");
    assert!(d < 1e-4);

    // Prefill logits for every position.
    let p = Prompt {
        ids: r.ids.clone(),
        images: imgs,
    };
    let logits = e.prefill_logits(&p).unwrap();
    let d = max_abs_diff(&logits, &r.logits);
    let scale = r.logits.iter().fold(0f32, |m, x| m.max(x.abs()));
    println!("{file}: prefill logits max |diff| = {d:e} (max |logit| {scale})");
    assert!(d < 1e-4);

    // 8 greedy tokens, with the KV cache and recomputing from scratch.
    let g = e.generate(p.clone(), greedy(8)).unwrap();
    assert_eq!(g.tokens, r.greedy, "greedy tokens (KV cache) differ");
    assert_eq!(g.finish_reason, "length");
    let nc = e.greedy_without_cache(&p, 8).unwrap();
    assert_eq!(nc, r.greedy, "greedy tokens (no cache) differ");
}

#[test]
fn one_image_fixture_matches_transformers() {
    check_fixture("reference.safetensors", messages_one(), &["image_64.png"]);
}

#[test]
fn two_image_fixture_matches_transformers() {
    check_fixture(
        "reference2.safetensors",
        messages_two(),
        &["image_56x112.png", "image_90x70.png"],
    );
}

#[test]
fn tools_render_like_transformers() {
    let e = engine();
    let req: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture().join("tools_request.json")).unwrap(),
    )
    .unwrap();
    let w = Weights::open_files(&[fixture().join("reference.safetensors")]).unwrap();
    let want: Vec<u32> = w
        .i64_any("tools_input_ids")
        .unwrap()
        .1
        .iter()
        .map(|&x| x as u32)
        .collect();
    let p = e
        .prompt(&req["messages"], Some(&req["tools"]), Vec::new())
        .unwrap();
    assert_eq!(p.ids, want);
    assert!(e.tok.template_has_tools);
}

#[test]
fn batched_generation_equals_one_at_a_time() {
    let e = engine();
    let r1 = reference("reference.safetensors");
    let r2 = reference("reference2.safetensors");
    let p1 = Prompt {
        ids: r1.ids.clone(),
        images: ref_images(&r1),
    };
    let p2 = Prompt {
        ids: r2.ids.clone(),
        images: ref_images(&r2),
    };
    let sampled = |seed| GenParams {
        max_new_tokens: 12,
        sampling: SamplingParams {
            temperature: 0.9,
            top_p: 0.95,
            top_k: 50,
            seed,
        },
        stop_ids: Vec::new(),
    };
    let batch = e
        .generate_batch(vec![
            (p1.clone(), greedy(8)),
            (p2.clone(), greedy(5)),
            (p1.clone(), sampled(3)),
        ])
        .unwrap();
    assert_eq!(batch[0].tokens, r1.greedy);
    assert_eq!(batch[1].tokens, r2.greedy[..5]);
    assert_eq!(batch[2].tokens, e.generate(p1, sampled(3)).unwrap().tokens);
    assert_eq!(batch[0].max_batch, 3);
}

#[test]
fn stop_ids_end_generation() {
    let e = engine();
    let r = reference("reference.safetensors");
    let p = Prompt {
        ids: r.ids.clone(),
        images: ref_images(&r),
    };
    // Declaring a later greedy token (one not produced before) a stop id ends generation there.
    let k = (1..r.greedy.len())
        .find(|&k| !r.greedy[..k].contains(&r.greedy[k]))
        .unwrap();
    let params = GenParams {
        stop_ids: vec![r.greedy[k]],
        ..greedy(8)
    };
    let g = e.generate(p, params).unwrap();
    assert_eq!(g.tokens, r.greedy[..k]);
    assert_eq!(g.finish_reason, "stop");
}
