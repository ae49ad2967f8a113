//! The local Qwen3.5 against references computed by transformers 5.23.0
//! (scripts/make_qwen35_fixtures.py): pixel patches, token ids, M-RoPE positions, image
//! embeddings, prefill logits, a decode step with the cache, 16 greedy tokens; ragged batches
//! (each sequence its own KV, conv and recurrent state); the chat template against jinja2.

use std::path::{Path, PathBuf};

use crate::support::{self, max_abs_diff, Reference};
use serde_json::{json, Value};
use vlm_eval_local::backend::cpu::packed::CpuPacked;
use vlm_eval_local::config::{ModelConfig, PreprocessorConfig};
use vlm_eval_local::engine::{Engine, GenParams, Prompt};
use vlm_eval_local::preprocess::{mrope_positions, preprocess_image, preprocess_rgb, ImageInput};
use vlm_eval_local::sampling::{argmax, SamplingParams};
use vlm_eval_local::tokenizer::ChatTokenizer;
use vlm_eval_local::weights::Weights;

const FIXTURE: &str = "tiny-qwen35";

fn fixture() -> PathBuf {
    support::fixture(FIXTURE)
}

fn engine() -> Engine<CpuPacked> {
    support::packed_engine(FIXTURE)
}

/// Values in one flattened patch: 3 channels · 2 frames · 16 · 16.
const PATCH_DIM: usize = 1536;

fn reference(file: &str) -> Reference {
    support::reference(FIXTURE, file)
}

fn ref_images(r: &Reference) -> Vec<ImageInput> {
    support::ref_images(r, PATCH_DIM)
}

fn ref_prompt(r: &Reference) -> Prompt {
    Prompt {
        ids: r.ids.clone(),
        images: ref_images(r),
    }
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
    let images: Vec<ImageInput> = pngs
        .iter()
        .map(|p| preprocess_image(&std::fs::read(fixture().join(p)).unwrap(), &e.pre).unwrap())
        .collect();
    assert_eq!(images.iter().map(|i| i.grid).collect::<Vec<_>>(), r.grids);
    let ours: Vec<f32> = images
        .iter()
        .flat_map(|i| i.pixels.iter().copied())
        .collect();
    assert_eq!(max_abs_diff(&ours, &r.pixels), 0.0, "pixel patches differ");

    let prompt = e.prompt(&messages, None, images).unwrap();
    assert_eq!(prompt.ids, r.ids, "input_ids differ");
    let (pos, delta) = mrope_positions(&prompt.ids, &r.grids, e.cfg.image_token_id, 2).unwrap();
    assert_eq!(
        pos.iter().flatten().copied().collect::<Vec<_>>(),
        r.positions
    );
    assert_eq!(delta, r.delta);

    let imgs = ref_images(&r);
    let emb = e.image_embeds(&imgs.iter().collect::<Vec<_>>()).unwrap();
    let d = max_abs_diff(&emb, &r.embeds);
    println!("{file}: image embeds max |diff| = {d:e}");
    assert!(d <= 1e-4, "image embeds differ by {d}");

    let p = ref_prompt(&r);
    let logits = e.prefill_logits(&p).unwrap();
    let d = max_abs_diff(&logits, &r.logits);
    println!("{file}: prefill logits max |diff| = {d:e}");
    assert!(d <= 1e-4, "prefill logits differ by {d}");

    // One decode step with the cache: prefill, then feed the first greedy token.
    let v = e.cfg.text.vocab_size;
    let step = e.decode_step_logits(&p, r.greedy[0]).unwrap();
    let d = max_abs_diff(
        &step,
        r.decode_logits
            .as_ref()
            .expect("decode_logits in the reference"),
    );
    println!("{file}: decode-step logits max |diff| = {d:e}");
    assert!(d <= 1e-4, "decode-step logits differ by {d}");
    assert_eq!(
        argmax(&logits[logits.len() - v..][..e.vocab_len()]) as u32,
        r.greedy[0]
    );

    let g = e.generate(p.clone(), greedy(16)).unwrap();
    assert_eq!(g.tokens, r.greedy, "greedy tokens (with cache) differ");
    let nc = e.greedy_without_cache(&p, 16).unwrap();
    assert_eq!(nc, r.greedy, "greedy tokens (no cache) differ");
}

#[test]
fn one_image_matches_transformers() {
    check_fixture(
        "reference.safetensors",
        json!([{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Describe the image."}]}]),
        &["image_64.png"],
    );
}

#[test]
fn two_images_with_text_between_match_transformers() {
    check_fixture(
        "reference2.safetensors",
        json!([{"role": "system", "content": "You play Crafter."},
               {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is in this picture? And here:"},
                                            {"type": "image"}]}]),
        &["image_56x112.png", "image_90x70.png"],
    );
}

#[test]
fn tools_request_tokenizes_like_transformers() {
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
}

#[test]
fn ragged_batch_keeps_each_sequence_state_apart() {
    let e = engine();
    let (r1, r2) = (
        reference("reference.safetensors"),
        reference("reference2.safetensors"),
    );
    let (p1, p2) = (ref_prompt(&r1), ref_prompt(&r2));
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
    // Different prompt lengths and stop points: prefill rows of 24 and 66 tokens in one call,
    // then decode steps over 3, then 2, then 1 sequences.
    let batch = e
        .generate_batch(vec![
            (p1.clone(), greedy(16)),
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
fn crafter_frame_becomes_64_image_tokens_with_the_published_processor() {
    // Qwen3.5's processor defaults (no preprocessor_config.json): factor 32, min 65,536 pixels.
    let cfg = ModelConfig::load(&fixture()).unwrap();
    let pre = PreprocessorConfig::load_or_default(Path::new("/nonexistent-dir"), &cfg).unwrap();
    assert_eq!((pre.min_pixels, pre.image_mean), (65_536, [0.5; 3]));
    let img = preprocess_rgb(&vec![128u8; 64 * 64 * 3], 64, 64, &pre).unwrap();
    assert_eq!(img.grid, [1, 16, 16]);
    assert_eq!(img.merged_tokens(2), 64);
}

#[test]
fn chat_template_renders_like_jinja2() {
    // templates.json: transformers' apply_chat_template (jinja2) output for tools, several
    // turns with images, reasoning and a tool call, thinking on and off.
    let mut e = engine();
    let cases: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(fixture().join("templates.json")).unwrap())
            .unwrap();
    assert_eq!(cases.len(), 5);
    for c in &cases {
        e.tok.enable_thinking = c["enable_thinking"].as_bool();
        let tools = (!c["tools"].is_null()).then_some(&c["tools"]);
        let got = e.tok.render(&c["messages"], tools).unwrap();
        assert_eq!(got, c["text"].as_str().unwrap(), "case {}", c["name"]);
    }
}

#[test]
fn chat_template_cases_render_like_jinja2() {
    // tests/fixtures/chat-templates/*.json (scripts/template_cases.py: transformers'
    // apply_chat_template) rendered again through our ChatTokenizer, byte for byte; a case the
    // template refuses (raise_exception) must be refused here too. VLM_EVAL_TEMPLATE_CASES
    // adds a file made the same way from a real checkpoint's template.
    let dir = support::fixture("chat-templates");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no case files in {}", dir.display());
    match std::env::var_os("VLM_EVAL_TEMPLATE_CASES") {
        Some(extra) => files.push(PathBuf::from(extra)),
        None => eprintln!("VLM_EVAL_TEMPLATE_CASES not set: only the committed templates"),
    }
    let config: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture().join("config.json")).unwrap())
            .unwrap();
    let image_token_id = config["image_token_id"].as_u64().unwrap() as u32;
    let tmp = support::fresh_dir("templates");
    std::fs::copy(fixture().join("tokenizer.json"), tmp.join("tokenizer.json")).unwrap();
    let mut checked = 0;
    for file in &files {
        let text = std::fs::read_to_string(file)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()));
        let sets: Vec<Value> = serde_json::from_str(&text).unwrap_or_else(|e| {
            panic!(
                "{}: not a scripts/template_cases.py file: {e}",
                file.display()
            )
        });
        for set in &sets {
            let name = set["template_name"].as_str().unwrap();
            std::fs::write(
                tmp.join("chat_template.jinja"),
                set["template"].as_str().unwrap(),
            )
            .unwrap();
            let mut tok = ChatTokenizer::load(&tmp, image_token_id).unwrap();
            for c in set["cases"].as_array().unwrap() {
                tok.enable_thinking = c["enable_thinking"].as_bool();
                let tools = (!c["tools"].is_null()).then_some(&c["tools"]);
                let what = format!("{name} / {} / thinking {}", c["name"], c["enable_thinking"]);
                match (tok.render(&c["messages"], tools), c["text"].as_str()) {
                    (Ok(got), Some(want)) => assert_eq!(got, want, "{what}"),
                    (Err(e), None) => {
                        let want = c["error"].as_str().unwrap();
                        assert!(e.to_string().contains(want), "{what}: {e} lacks {want:?}");
                    }
                    (got, _) => panic!("{what}: rendered {got:?}, jinja2 gave {c}"),
                }
                checked += 1;
            }
        }
    }
    std::fs::remove_dir_all(&tmp).ok();
    eprintln!("{checked} template cases from {} file(s)", files.len());
}

#[test]
fn thinking_text_is_split_from_the_reply() {
    let e = engine();
    let ids = e
        .tok
        .encode("<think>\nA tree is west.\n</think>\n\nmove_left")
        .unwrap();
    let (think, text) = e.tok.split_thinking(&ids);
    assert_eq!(think.as_deref(), Some("A tree is west."));
    assert_eq!(text, "move_left");
    let ids = e.tok.encode("move_left").unwrap();
    assert_eq!(e.tok.split_thinking(&ids), (None, "move_left".to_string()));
}

#[test]
fn trainer_checkpoint_bf16_is_the_f32_fixture_rounded() {
    // tests/fixtures/tiny-qwen35-ckpt-bf16: save_pretrained output (bf16, 3 shards and the
    // index, the tokenizer and processor files the trainer saved), read as it is (vlm-eval's
    // tests/local_cli plays a run on it).
    // The bf16 weights are the f32 fixture's rounded: the same model up to that rounding.
    let full = engine();
    let bf = support::packed_engine("tiny-qwen35-ckpt-bf16");
    let r = reference("reference.safetensors");
    let (a, b) = (
        full.prefill_logits(&ref_prompt(&r)).unwrap(),
        bf.prefill_logits(&ref_prompt(&r)).unwrap(),
    );
    let d = max_abs_diff(&a, &b);
    println!("bf16 checkpoint: prefill logits max |diff| vs f32 = {d:e}");
    assert!(d > 0.0 && d < 0.5, "{d}");
}
