//! The local model (crates/local) through the `vlm-eval` binary: runs with `--model local:DIR`
//! on the tiny checkpoints of crates/local/tests/fixtures/, bad checkpoints exit 2 naming the
//! fault, `bench local` and `bench parity`, and (`--features cuda`) the CUDA error lines. The
//! engine's own tests, against transformers' references, are crates/local/tests/it/.

mod support;

use std::path::{Path, PathBuf};

use vlm_eval_local::backend::cpu::packed::CpuPacked;
use vlm_eval_local::engine::Engine;

/// A checkpoint fixture folder of the local model's crate (`tiny-qwen2vl`, `tiny-qwen35`, …).
fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("crates/local/tests/fixtures")
        .join(name)
}

/// The fixture `name` loaded on the packed CPU backend (the one `--device cpu` runs).
fn packed_engine(name: &str) -> Engine<CpuPacked> {
    Engine::load(&fixture(name), CpuPacked::default())
        .unwrap_or_else(|e| panic!("load the {name} fixture: {e}"))
}

/// Runs on the tiny Qwen2-VL (formerly tests/local_vlm.rs).
mod local_vlm {
    use std::path::PathBuf;

    use serde_json::Value;

    use super::support;

    fn fixture() -> PathBuf {
        super::fixture("tiny-qwen2vl")
    }

    #[test]
    fn run_command_plays_with_the_local_model() {
        let out = support::scratch("local_vlm_run");
        let model = format!("local:{}", fixture().display());
        let o = support::command()
            .args([
                "--model",
                &model,
                "--device",
                "cpu",
                "--seeds",
                "2",
                "--steps",
                "3",
                "--max-tokens",
                "24",
            ])
            .args(["--run-name", "tiny", "--quiet", "--out"])
            .arg(&out)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "stderr: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let run = vlm_eval::results::run::open_run(&out.join("tiny")).unwrap();
        assert_eq!(run.episodes.len(), 2);
        let traj = std::fs::read_to_string(run.episode_dir(0).join("trajectory.jsonl")).unwrap();
        let first: Value = serde_json::from_str(traj.lines().next().unwrap()).unwrap();
        let text = first.to_string();
        // The reply carries the engine's accounting.
        assert!(
            text.contains("decode_tokens_per_s") && text.contains("ttft_ms"),
            "{text}"
        );
    }

    #[test]
    fn bad_checkpoint_folder_is_a_usage_error() {
        let results = support::scratch("bad_checkpoint_results");
        let o = support::command()
            .args([
                "--model",
                "local:/nonexistent/ckpt",
                "--seeds",
                "1",
                "--steps",
                "1",
                "--quiet",
                "--out",
            ])
            .arg(&results)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2));
        let err = String::from_utf8_lossy(&o.stderr);
        let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
        assert_eq!(errors.len(), 1, "{err}");
        assert!(errors[0].contains("/nonexistent/ckpt"), "{err}");
        // The checkpoint is read before the run folder is made: a bad one leaves no folder behind.
        assert!(!results.exists(), "{} was created", results.display());
        // bf16 weights run on the CPU too, and run.json says so.
        let out = support::scratch("local_vlm_bf16");
        let o = support::command()
            .args([
                "--model",
                &format!("local:{}", fixture().display()),
                "--dtype",
                "bf16",
                "--seeds",
                "1",
                "--steps",
                "2",
                "--max-tokens",
                "24",
                "--run-name",
                "bf16",
                "--quiet",
                "--out",
            ])
            .arg(&out)
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let info: Value =
            serde_json::from_slice(&std::fs::read(out.join("bf16").join("run.json")).unwrap())
                .unwrap();
        assert_eq!(info["config"]["dtype"], "bf16", "{info}");
        assert_eq!(info["config"]["device"], "cpu", "{info}");
    }
}

/// Runs and bad checkpoints on the tiny Qwen3.5 (formerly tests/local_qwen35.rs).
mod local_qwen35 {
    use std::path::{Path, PathBuf};

    use serde_json::{json, Value};
    use vlm_eval_local::backend::cpu::packed::CpuPacked;
    use vlm_eval_local::engine::Engine;

    use super::support;

    const FIXTURE: &str = "tiny-qwen35";

    fn fixture() -> PathBuf {
        super::fixture(FIXTURE)
    }

    fn engine() -> Engine<CpuPacked> {
        super::packed_engine(FIXTURE)
    }

    /// A copy of the fixture with `edit` applied, for bad-input tests.
    fn broken_copy(name: &str, edit: impl FnOnce(&Path)) -> PathBuf {
        let dir = support::fresh_dir(&format!("qwen35-{name}"));
        for f in std::fs::read_dir(fixture()).unwrap() {
            let f = f.unwrap().path();
            std::fs::copy(&f, dir.join(f.file_name().unwrap())).unwrap();
        }
        edit(&dir);
        dir
    }

    fn edit_config(dir: &Path, f: impl FnOnce(&mut Value)) {
        let p = dir.join("config.json");
        let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        f(&mut v);
        std::fs::write(&p, v.to_string()).unwrap();
    }

    /// Run `vlm-eval` on a local checkpoint; expect exit 2 and one error line containing `want`.
    fn expect_usage_error(dir: &Path, want: &str) {
        let results = dir.with_extension("results");
        let _ = std::fs::remove_dir_all(&results);
        let o = support::command()
            .args(["--model", &format!("local:{}", dir.display())])
            .args(["--device", "cpu", "--seeds", "1", "--steps", "1", "--quiet"])
            .arg("--out")
            .arg(&results)
            .output()
            .unwrap();
        // The checkpoint is read before the run folder is made: a bad one leaves none behind.
        assert!(!results.exists(), "{} was created", results.display());
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(!err.contains("panicked"), "{err}");
        let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
        assert_eq!(errors.len(), 1, "{err}");
        assert!(errors[0].contains(want), "wanted `{want}` in: {err}");
    }

    #[test]
    fn bad_checkpoints_exit_2_naming_the_fault() {
        // Layer 0 declared full attention: its q_proj is missing.
        let d = broken_copy("missing", |d| {
            edit_config(d, |v| {
                v["text_config"]["layer_types"][0] = json!("full_attention")
            })
        });
        expect_usage_error(&d, "model.layers.0.self_attn.q_proj.weight");
        // A wider value head than the weights: in_proj_z is mis-shaped.
        let d = broken_copy("shape", |d| {
            edit_config(d, |v| v["text_config"]["linear_value_head_dim"] = json!(16))
        });
        expect_usage_error(&d, "in_proj_qkv.weight");
        let d = broken_copy("layer-type", |d| {
            edit_config(d, |v| {
                v["text_config"]["layer_types"][2] = json!("sliding_attention")
            })
        });
        expect_usage_error(&d, "layer_types[2]");
        let d = broken_copy("model-type", |d| {
            edit_config(d, |v| v["model_type"] = json!("qwen9_vl"))
        });
        expect_usage_error(&d, "qwen2_vl, qwen3_5");
        let d = broken_copy("tokenizer", |d| {
            let p = d.join("tokenizer.json");
            let t = std::fs::read_to_string(&p)
                .unwrap()
                .replace("<|image_pad|>", "<|img|>");
            std::fs::write(&p, t).unwrap();
        });
        expect_usage_error(&d, "<|image_pad|>");
    }

    #[test]
    fn past_tool_calls_render_as_qwen35_xml() {
        // Our messages -> HF messages (structured tool_calls, since the template renders tools)
        // -> the template: the assistant's earlier call comes back in Qwen3.5's own XML form.
        use vlm_eval::model::{ChatRequest, Message, Role, ToolCall, ToolSpec};
        let e = engine();
        let mut said = Message::text(Role::Assistant, "Chop.");
        said.tool_calls.push(ToolCall {
            id: "call_1".into(),
            name: "interact_many".into(),
            arguments: Value::String(r#"{"actions": ["do", "noop"]}"#.into()),
        });
        let req = ChatRequest {
            messages: vec![
                Message::text(Role::User, "Play."),
                said,
                Message::text(Role::User, "Again."),
            ],
            tools: vec![ToolSpec {
                name: "interact_many".into(),
                description: "Act.".into(),
                parameters: serde_json::json!({"type": "object"}),
            }],
            ..ChatRequest::default()
        };
        let (msgs, tools, _) = vlm_eval::model::local::hf_messages(&req, e.tok.template_has_tools);
        let text = e.tok.render(&msgs, tools.as_ref()).unwrap();
        assert!(
        text.contains(
            "<|im_start|>assistant\nChop.\n\n<tool_call>\n<function=interact_many>\n\
             <parameter=actions>\n[\"do\", \"noop\"]\n</parameter>\n</function>\n</tool_call><|im_end|>"
        ),
        "{text}"
    );
    }

    #[test]
    fn run_plays_qwen35_and_records_thinking() {
        let out = support::scratch("local_qwen35_run");
        let o = support::command()
            .args(["--model", &format!("local:{}", fixture().display())])
            .args([
                "--device",
                "cpu",
                "--seeds",
                "2",
                "--steps",
                "3",
                "--max-tokens",
                "24",
            ])
            .args(["--run-name", "tiny35", "--quiet", "--out"])
            .arg(&out)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "stderr: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let run = vlm_eval::results::run::open_run(&out.join("tiny35")).unwrap();
        assert_eq!(run.episodes.len(), 2);
        let info: Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("tiny35/run.json")).unwrap())
                .unwrap();
        assert_eq!(info["config"]["thinking"], "off");
        let p = vlm_eval::report::protocol::protocol_of(&info);
        assert_eq!(p["thinking"], "off");
    }

    #[test]
    fn trainer_checkpoint_bf16_sharded_plays_a_run() {
        // tests/fixtures/tiny-qwen35-ckpt-bf16: save_pretrained output (bf16, 3 shards and the
        // index, the tokenizer and processor files the trainer saved), read as it is.
        let ckpt = super::fixture("tiny-qwen35-ckpt-bf16");
        let out = support::scratch("local_qwen35_ckpt_run");
        let o = support::command()
            .args(["--model", &format!("local:{}", ckpt.display())])
            .args([
                "--device",
                "cpu",
                "--seeds",
                "1",
                "--steps",
                "2",
                "--max-tokens",
                "16",
            ])
            .args(["--run-name", "ckpt", "--quiet", "--out"])
            .arg(&out)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "stderr: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let run = vlm_eval::results::run::open_run(&out.join("ckpt")).unwrap();
        assert_eq!(run.episodes.len(), 1);
    }
}

/// `vlm-eval bench local` and `bench parity` on the tiny Qwen2-VL and weights-only checkpoint
/// folders (formerly tests/local_bench.rs).
mod local_bench {
    use std::path::{Path, PathBuf};

    use serde_json::Value;

    use super::support::{self, stderr, vlm_eval};

    fn fixture() -> PathBuf {
        super::fixture("tiny-qwen2vl")
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

    /// Rewrite a reference file with its logits changed by `f` (every other byte as it is): the
    /// logits are the f32 values at the offsets the safetensors header gives.
    fn rewrite_logits(src: &Path, dst: &Path, f: impl Fn(&mut [f32])) {
        let mut bytes = std::fs::read(src).unwrap();
        let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        let header: Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
        assert_eq!(header["logits"]["dtype"], "F32");
        let at = |i: usize| 8 + n + header["logits"]["data_offsets"][i].as_u64().unwrap() as usize;
        let (a, b) = (at(0), at(1));
        let mut logits: Vec<f32> = bytes[a..b]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        f(&mut logits);
        for (c, v) in bytes[a..b].chunks_exact_mut(4).zip(&logits) {
            c.copy_from_slice(&v.to_le_bytes());
        }
        std::fs::write(dst, bytes).unwrap();
    }

    #[test]
    fn parity_against_transformers_references() {
        for file in ["reference.safetensors", "reference2.safetensors"] {
            let reference = fixture().join(file);
            let w = vlm_eval_local::weights::Weights::open_files(std::slice::from_ref(&reference))
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
}

/// The CUDA backend's errors through the binary (formerly in tests/cuda_backend.rs). Without the
/// CUDA libraries each test prints why it skipped; `VLM_EVAL_REQUIRE_CUDA=1` turns skips into
/// failures.
#[cfg(feature = "cuda")]
mod cuda_backend {
    use std::path::PathBuf;

    use vlm_eval_local::backend::cuda::{self, Cuda};
    use vlm_eval_local::backend::DType;

    use super::support;

    fn required() -> bool {
        std::env::var("VLM_EVAL_REQUIRE_CUDA").is_ok_and(|v| v == "1")
    }

    /// The backend, or `None` (with the reason printed) when this machine cannot run it.
    fn gpu(dtype: DType) -> Option<Cuda> {
        let missing = cuda::missing_libraries();
        if !missing.is_empty() {
            assert!(!required(), "CUDA required but missing: {missing:?}");
            eprintln!("skipped: CUDA libraries not found: {}", missing.join(", "));
            return None;
        }
        match Cuda::new(0, dtype) {
            Ok(be) => Some(be),
            Err(e) => {
                assert!(!required(), "CUDA required but unavailable: {e}");
                eprintln!("skipped: no usable CUDA device: {e}");
                None
            }
        }
    }

    fn fixture() -> PathBuf {
        std::env::var_os("VLM_EVAL_FIXTURE")
            .map_or_else(|| super::fixture("tiny-qwen2vl"), PathBuf::from)
    }

    /// `vlm-eval bench parity --device cuda` on the tiny fixture with extra environment.
    fn parity_child(env: &[(&str, &str)], dtype: &str) -> (Option<i32>, String) {
        let mut cmd = support::command();
        cmd.args(["bench", "parity", "--model-dir"])
            .arg(fixture())
            .args(["--device", "cuda", "--dtype", dtype, "--positions", "4"]);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        let line = err
            .lines()
            .find(|l| l.starts_with("error:"))
            .unwrap_or_default()
            .to_string();
        assert!(!err.contains("panicked"), "{err}");
        (out.status.code(), line)
    }

    #[test]
    fn driver_too_old_for_nvrtc_or_bf16_is_a_one_line_error() {
        // Conditions no GPU can be put in on demand; the stand-in's driver version and compute
        // capability can be set (tests/cuda_standin/README.md).
        let Some(g) = gpu(DType::F32) else { return };
        if !g.info.name.starts_with("CUDA stand-in") {
            eprintln!(
                "skipped: needs the CUDA stand-in (scripts/cuda_standin.sh) to fake the driver"
            );
            return;
        }
        // NVRTC's PTX is newer than a CUDA 12.4 driver can load.
        let (code, line) = parity_child(&[("CUDA_STANDIN_DRIVER_VERSION", "12040")], "f32");
        assert_eq!(code, Some(2), "{line}");
        assert!(line.contains("driver (CUDA 12.4)"), "{line}");
        assert!(line.contains("NVRTC no newer than CUDA 12.4"), "{line}");
        // bf16 needs compute capability 8.0; f32 runs on 7.5.
        let env = [("CUDA_STANDIN_CC", "7.5")];
        let (code, line) = parity_child(&env, "bf16");
        assert_eq!(code, Some(2), "{line}");
        assert!(line.contains("compute capability 8.0"), "{line}");
        assert!(line.contains("--dtype f32"), "{line}");
        assert_eq!(parity_child(&env, "f32").0, Some(0));
    }

    #[test]
    fn cuda_without_a_driver_is_a_one_line_error() {
        // The child runs without LD_LIBRARY_PATH, so libraries found only through it (pip wheels,
        // scripts/cuda_standin.sh's stand-in) are missing there; system-wide ones are not.
        let out_dir = support::scratch("cuda-missing");
        let out = support::command()
            .env_remove("LD_LIBRARY_PATH")
            .args(["--model", &format!("local:{}", fixture().display())])
            .args([
                "--device", "cuda", "--seeds", "1", "--steps", "1", "--quiet", "--out",
            ])
            .arg(&out_dir)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        let line = err
            .lines()
            .find(|l| l.starts_with("error:"))
            .unwrap_or_default();
        let known = [
            "libcuda.so.1 (NVIDIA driver)",
            "libcublas (cuBLAS)",
            "libnvrtc (NVRTC)",
        ];
        let named: Vec<&str> = known.iter().copied().filter(|m| line.contains(m)).collect();
        if named.is_empty() && cuda::missing_libraries().is_empty() {
            eprintln!(
                "skipped: the CUDA libraries are installed system-wide, so there is no \
             missing-library path to test (child exit {:?})",
                out.status.code()
            );
            return;
        }
        assert_eq!(out.status.code(), Some(2), "stderr: {err}");
        assert!(!err.contains("panicked"), "{err}");
        assert!(line.contains("not found"), "{line}");
        assert!(!named.is_empty(), "{line} names no missing library");
        // What this process lacks even with LD_LIBRARY_PATH, the child lacks too.
        for m in cuda::missing_libraries() {
            assert!(line.contains(m), "{line} does not name {m}");
        }
        assert!(line.contains("--device cpu"), "{line} gives no way out");
    }
}
