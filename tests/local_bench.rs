//! `vlm-eval bench local` and `bench parity` on the tiny Qwen2-VL fixture, and weights-only
//! checkpoint folders (config.json, generation_config.json and model.safetensors only).

mod support;
use support::{stderr, vlm_eval};

use std::path::{Path, PathBuf};

use serde_json::Value;
use vlm_eval::model::local::backend::cpu::Cpu;
use vlm_eval::model::local::engine::{Engine, Prompt};
use vlm_eval::model::local::preprocess::preprocess_image;

fn fixture() -> PathBuf {
    support::fixture("tiny-qwen2vl")
}

fn tmp(name: &str) -> PathBuf {
    support::fresh_dir(&format!("local-bench-{name}"))
}

fn read_json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// A copy of the fixture with only what `save_pretrained` writes.
fn weights_only(name: &str) -> PathBuf {
    let d = tmp(name);
    for f in ["config.json", "generation_config.json", "model.safetensors"] {
        std::fs::copy(fixture().join(f), d.join(f)).unwrap();
    }
    d
}

/// Decoder parameters read per token, counted straight from the safetensors header: every
/// `model.*` tensor outside the vision tower, plus `lm_head.weight` when the head is untied.
fn decoder_params_from_header(dir: &Path) -> u64 {
    let bytes = std::fs::read(dir.join("model.safetensors")).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    let tied = read_json(&dir.join("config.json"))["tie_word_embeddings"]
        .as_bool()
        .unwrap_or(false);
    let mut total = 0u64;
    for (name, t) in header.as_object().unwrap() {
        let counted = (name.starts_with("model.") && !name.starts_with("model.visual."))
            || (name == "lm_head.weight" && !tied);
        if counted {
            total += t["shape"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_u64().unwrap())
                .product::<u64>();
        }
    }
    total
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1e-12)
}

/// Checks shared by full and weights-only folders; returns the report.
fn bench_and_check(dir: &Path, json: &Path, extra: &[&str]) -> Value {
    let mut args = vec![
        "bench",
        "local",
        "--model-dir",
        dir.to_str().unwrap(),
        "--new",
        "8",
        "--batch",
        "1,3",
        "--repeats",
        "3",
        "--json",
        json.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let o = vlm_eval(&args);
    assert!(o.status.success(), "bench local failed: {}", stderr(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("tok/s per seq"), "{stdout}");
    let r = read_json(json);
    assert_eq!(r["device"], "cpu");
    assert_eq!(r["dtype"], "f32");
    assert_eq!(r["backend"], "cpu");
    // The kernels it ran, in the JSON and on the header line.
    let kernels = r["kernels"].as_str().unwrap_or_default();
    assert!(kernels.contains("panels"), "kernels: {kernels:?}");
    assert!(
        stdout.contains(&format!("backend cpu: {kernels}")),
        "{stdout}"
    );
    // 4 bytes per f32 value times the parameters in the file.
    let bytes = r["weight_bytes_per_token"].as_u64().unwrap();
    assert_eq!(bytes, 4 * decoder_params_from_header(&fixture()));
    // 64 px → smart_resize 56×56 → a 4×4 patch grid → 2×2 merged = 4 tokens; 20 + 4 + 30.
    assert_eq!(r["image_grid"], serde_json::json!([1, 4, 4]));
    assert_eq!(r["image_tokens"], 4);
    assert_eq!(r["prompt_tokens"], 54);
    let ttft = &r["ttft"];
    assert_eq!(ttft["repeats"], 3);
    let (med, min) = (
        ttft["median_ms"].as_f64().unwrap(),
        ttft["min_ms"].as_f64().unwrap(),
    );
    assert!(min > 0.0 && min <= med, "{ttft}");
    let decode = r["decode"].as_array().unwrap();
    let batches: Vec<u64> = decode
        .iter()
        .map(|d| d["batch"].as_u64().unwrap())
        .collect();
    assert_eq!(batches, vec![1, 3]);
    for d in decode {
        assert_eq!(d["steps"], 8);
        let secs = d["seconds"].as_f64().unwrap();
        assert!(secs > 0.0);
        let per_seq = d["tokens_per_s_per_seq"].as_f64().unwrap();
        assert!(close(per_seq, 8.0 / secs), "{d}");
        let b = d["batch"].as_f64().unwrap();
        assert!(close(
            d["tokens_per_s_total"].as_f64().unwrap(),
            per_seq * b
        ));
        let gbs = d["gb_per_s"].as_f64().unwrap();
        assert!(close(gbs, bytes as f64 * 8.0 / secs / 1e9), "{d}");
        match r["peak_gbs"].as_f64() {
            Some(p) => assert!(close(d["roofline_pct"].as_f64().unwrap(), 100.0 * gbs / p)),
            None => assert!(d["roofline_pct"].is_null()),
        }
    }
    r
}

#[test]
fn bench_local_reports_consistent_figures() {
    let d = tmp("full");
    let r = bench_and_check(&fixture(), &d.join("bench.json"), &[]);
    assert_eq!(r["ids_only"], false);
    assert!(r["peak_gbs"].is_null());
    assert!(r["roofline_tokens_per_s_batch1"].is_null());
}

#[test]
fn weights_only_folder_benches_with_a_peak() {
    let dir = weights_only("weights-only");
    let json = dir.join("bench.json");
    let r = bench_and_check(&dir, &json, &["--peak-gbs", "10"]);
    assert_eq!(r["ids_only"], true);
    assert_eq!(r["peak_gbs"], 10.0);
    let bytes = r["weight_bytes_per_token"].as_f64().unwrap();
    let roof = r["roofline_tokens_per_s_batch1"].as_f64().unwrap();
    assert!(close(roof, 10e9 / bytes), "{roof}");
}

#[test]
fn missing_config_and_bad_flags_exit_2() {
    let dir = tmp("no-config");
    std::fs::copy(
        fixture().join("model.safetensors"),
        dir.join("model.safetensors"),
    )
    .unwrap();
    let o = vlm_eval(&["bench", "local", "--model-dir", dir.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("config.json"), "{}", stderr(&o));
    let o = vlm_eval(&["bench", "parity", "--model-dir", dir.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("config.json"), "{}", stderr(&o));
    let f = fixture();
    let f = f.to_str().unwrap();
    for bad in ["1,x", "0", ""] {
        let o = vlm_eval(&["bench", "local", "--model-dir", f, "--batch", bad]);
        assert_eq!(o.status.code(), Some(2), "--batch {bad}: {}", stderr(&o));
        assert!(stderr(&o).contains("--batch"), "{}", stderr(&o));
    }
}

#[test]
fn an_unreadable_amx_switch_exits_2_naming_it() {
    let f = fixture();
    let f = f.to_str().unwrap();
    let args = [
        "bench",
        "local",
        "--model-dir",
        f,
        "--new",
        "1",
        "--batch",
        "1",
    ];
    let with = |v: &str| support::run(&args, &[], &[("VLM_EVAL_CPU_AMX", v)]);
    let o = with("maybe");
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    let line = err
        .lines()
        .find(|l| l.contains("VLM_EVAL_CPU_AMX"))
        .unwrap_or("");
    assert!(
        line.contains("\"maybe\"") && line.contains("0") && line.contains("1"),
        "{err}"
    );
    for ok in ["0", "off", "1"] {
        let o = with(ok);
        assert!(o.status.success(), "VLM_EVAL_CPU_AMX={ok}: {}", stderr(&o));
        // Off, the header's kernels never name AMX.
        let out = String::from_utf8_lossy(&o.stdout);
        if ok != "1" {
            assert!(!out.contains("AMX"), "VLM_EVAL_CPU_AMX={ok}: {out}");
        }
    }
}

#[test]
fn cuda_without_the_feature_exits_2_with_the_rebuild_hint() {
    if cfg!(feature = "cuda") {
        println!("skipped: this build has the cuda feature, so --device cuda is available");
        return;
    }
    let f = fixture();
    for cmd in ["local", "parity"] {
        let o = vlm_eval(&[
            "bench",
            cmd,
            "--model-dir",
            f.to_str().unwrap(),
            "--device",
            "cuda",
        ]);
        assert_eq!(o.status.code(), Some(2), "{cmd}: {}", stderr(&o));
        assert!(stderr(&o).contains("--features cuda"), "{}", stderr(&o));
    }
}

#[test]
fn parity_on_cpu_is_exact() {
    let d = tmp("parity");
    let json = d.join("parity.json");
    let o = vlm_eval(&[
        "bench",
        "parity",
        "--model-dir",
        fixture().to_str().unwrap(),
        "--device",
        "cpu",
        "--dtype",
        "f32",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("PASS"), "{stdout}");
    let r = read_json(&json);
    assert_eq!(r["self_check"], true);
    assert_eq!(r["pass"], true);
    // The frame's 4 image tokens plus the default 128 teacher-forced ids.
    assert_eq!(r["prompt_tokens"], 132);
    let res = r["results"].as_array().unwrap();
    assert_eq!(res.len(), 1, "f32 only: {r}");
    assert_eq!(res[0]["dtype"], "f32");
    assert_eq!(res[0]["positions"], 132);
    assert_eq!(res[0]["max_abs"], 0.0);
    assert_eq!(res[0]["top1_agreement"], 1.0);
    assert_eq!(res[0]["greedy_identical"], true);
    assert_eq!(res[0]["greedy"].as_array().unwrap().len(), 8);
    // bf16 matrices on the CPU: close to the f32 reference, not equal to it. The tiny
    // fixture's logits are nearly flat, so top-1 is checked at 0.9 (as the CUDA stand-in does
    // at 0.95 for bf16 activations too).
    let o = vlm_eval(&[
        "bench",
        "parity",
        "--model-dir",
        fixture().to_str().unwrap(),
        "--device",
        "cpu",
        "--dtype",
        "bf16",
        "--min-top1",
        "0.9",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r = read_json(&json);
    let res = &r["results"][0];
    assert_eq!(res["dtype"], "bf16");
    let d = res["max_abs"].as_f64().unwrap();
    assert!(d > 0.0 && d < 0.5, "bf16 max |Δ| {d}: {r}");
    assert!(res["top1_agreement"].as_f64().unwrap() >= 0.9, "{r}");
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

/// Rewrite a reference file with its logits changed by `f` (other tensors copied as they are).
fn rewrite_logits(src: &Path, dst: &Path, f: impl Fn(&mut [f32])) {
    use safetensors::tensor::{serialize_to_file, TensorView};
    let bytes = std::fs::read(src).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut logits: Vec<f32> = st
        .tensor("logits")
        .unwrap()
        .data()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    f(&mut logits);
    let logit_bytes: Vec<u8> = logits.iter().flat_map(|v| v.to_le_bytes()).collect();
    let shape = st.tensor("logits").unwrap().shape().to_vec();
    let mut views = Vec::new();
    for (name, t) in st.tensors() {
        let view = if name == "logits" {
            TensorView::new(t.dtype(), shape.clone(), &logit_bytes).unwrap()
        } else {
            t
        };
        views.push((name, view));
    }
    serialize_to_file(views, None, dst).unwrap();
}

#[test]
fn parity_against_transformers_references() {
    for file in ["reference.safetensors", "reference2.safetensors"] {
        let reference = fixture().join(file);
        let w =
            vlm_eval::model::local::weights::Weights::open_files(std::slice::from_ref(&reference))
                .unwrap();
        let ids = w.i64_any("input_ids").unwrap().1;
        let greedy: Vec<i64> = w.i64_any("greedy_ids").unwrap().1[ids.len()..].to_vec();
        let json = tmp("parity-ref").join(format!("{file}.json"));
        let o = vlm_eval(&[
            "bench",
            "parity",
            "--model-dir",
            fixture().to_str().unwrap(),
            "--reference",
            reference.to_str().unwrap(),
            "--dtype",
            "f32",
            "--json",
            json.to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(0), "{file}: {}", stderr(&o));
        let r = read_json(&json);
        assert_eq!(r["self_check"], false, "{r}");
        assert!(r["reference"].as_str().unwrap().contains("transformers"));
        assert_eq!(r["prompt_tokens"], ids.len());
        let res = &r["results"][0];
        assert!(res["max_abs"].as_f64().unwrap() <= 1e-4, "{res}");
        assert_eq!(res["top1_agreement"], 1.0);
        let got: Vec<i64> = serde_json::from_value(res["greedy"].clone()).unwrap();
        assert_eq!(
            got, greedy,
            "{file}: greedy tokens differ from transformers'"
        );
    }
    // The comparison can fail: move every row's maximum to another column.
    let bad = tmp("parity-ref").join("swapped.safetensors");
    let vocab = read_json(&fixture().join("config.json"))["text_config"]["vocab_size"]
        .as_u64()
        .or_else(|| read_json(&fixture().join("config.json"))["vocab_size"].as_u64())
        .unwrap() as usize;
    rewrite_logits(&fixture().join("reference.safetensors"), &bad, |l| {
        for row in l.chunks_exact_mut(vocab) {
            let top = row
                .iter()
                .enumerate()
                .max_by(|a, b| a.1.total_cmp(b.1))
                .unwrap()
                .0;
            row[top] -= 100.0;
        }
    });
    let o = vlm_eval(&[
        "bench",
        "parity",
        "--model-dir",
        fixture().to_str().unwrap(),
        "--reference",
        bad.to_str().unwrap(),
        "--dtype",
        "f32",
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(
        out.contains("FAIL") && out.contains("f32 top-1 0.0000"),
        "{out}"
    );
    // A file that is not a reference: one line naming the flag and the missing tensor.
    let o = vlm_eval(&[
        "bench",
        "parity",
        "--model-dir",
        fixture().to_str().unwrap(),
        "--reference",
        fixture().join("model.safetensors").to_str().unwrap(),
    ]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("--reference") && err.contains("input_ids"),
        "{err}"
    );
}
