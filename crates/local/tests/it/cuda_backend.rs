//! The CUDA backend against the CPU reference backend, op by op and on the tiny fixture.
//! Built only with `--features cuda`. Without the CUDA libraries or a GPU every test prints why
//! it skipped; `VLM_EVAL_REQUIRE_CUDA=1` (set by scripts/gpu_check.sh) turns skips into failures.
//! The NVRTC test needs only libnvrtc (CI installs the pip wheel and sets
//! `VLM_EVAL_REQUIRE_NVRTC=1` so that it cannot skip), no GPU.
use std::path::PathBuf;

use crate::support;

use vlm_eval_local::backend::cpu::Cpu;
use vlm_eval_local::backend::cuda::{self, Cuda};
use vlm_eval_local::backend::DType;
use vlm_eval_local::backend::{hybrid, AttnShape, BResult, Backend, DeltaShape};
use vlm_eval_local::engine::{Engine, GenParams, Prompt};
use vlm_eval_local::preprocess::{preprocess_image, ImageInput};
use vlm_eval_local::sampling::{argmax, SamplingParams};

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

/// Deterministic values in [-1, 1).
fn rand_vec(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "lengths differ");
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

fn close(what: &str, got: &[f32], want: &[f32], tol: f32) {
    let d = max_diff(got, want);
    assert!(d <= tol, "{what}: max |Δ| {d} > {tol}");
    eprintln!("{what}: max |Δ| {d:.2e}");
}

fn bf16_round(v: &[f32]) -> Vec<f32> {
    v.iter()
        .map(|&x| half::bf16::from_f32(x).to_f32())
        .collect()
}

#[test]
fn kernels_compile_with_nvrtc() {
    if !cuda::nvrtc_present() {
        let nvrtc_required = std::env::var("VLM_EVAL_REQUIRE_NVRTC").is_ok_and(|v| v == "1");
        assert!(
            !required() && !nvrtc_required,
            "libnvrtc required but not found on LD_LIBRARY_PATH"
        );
        eprintln!("skipped: libnvrtc not found (CI installs the nvidia-cuda-nvrtc wheel)");
        return;
    }
    let ptx = cuda::compile_kernels("compute_90").expect("NVRTC compiles kernels.cu");
    let ptx = ptx.to_src();
    if let Some(path) = std::env::var_os("VLM_EVAL_PTX_OUT") {
        std::fs::write(path, &ptx).unwrap();
    }
    // Every `extern "C" __global__` entry point of the source must be a PTX entry, unmangled.
    let names: Vec<&str> = cuda::KERNELS
        .split("extern \"C\" __global__ void ")
        .skip(1)
        .map(|s| s.split('(').next().unwrap().trim())
        .collect();
    assert!(names.len() >= 13, "found entry points {names:?}");
    for n in &names {
        assert!(ptx.contains(&format!(".entry {n}(")), "PTX lacks entry {n}");
    }
    assert!(ptx.contains(".target sm_90"), "PTX targets another arch");
}

#[test]
fn elementwise_and_norm_ops_match_cpu() {
    let Some(g) = gpu(DType::F32) else { return };
    let c = Cpu;
    let (rows, dim) = (5, 1000);
    let x = rand_vec(rows * dim, 1);
    let w = rand_vec(dim, 2);
    let b = rand_vec(dim, 3);
    let (xg, wg, bg) = (
        g.upload(&x).unwrap(),
        g.upload(&w).unwrap(),
        g.upload(&b).unwrap(),
    );
    let got = g
        .download(&g.rms_norm(&xg, rows, dim, &wg, 1e-6).unwrap())
        .unwrap();
    close(
        "rms_norm",
        &got,
        &c.rms_norm(&x, rows, dim, &w, 1e-6).unwrap(),
        1e-5,
    );
    let got = g
        .download(&g.layer_norm(&xg, rows, dim, &wg, &bg, 1e-6).unwrap())
        .unwrap();
    close(
        "layer_norm",
        &got,
        &c.layer_norm(&x, rows, dim, &w, &b, 1e-6).unwrap(),
        1e-5,
    );
    let mut a = xg;
    g.quick_gelu(&mut a).unwrap();
    let mut want = x.clone();
    c.quick_gelu(&mut want).unwrap();
    close("quick_gelu", &g.download(&a).unwrap(), &want, 1e-6);
    let mut a = g.upload(&x).unwrap();
    g.gelu_erf(&mut a).unwrap();
    let mut want = x.clone();
    c.gelu_erf(&mut want).unwrap();
    close("gelu_erf", &g.download(&a).unwrap(), &want, 1e-6);
    let gu = rand_vec(rows * 2 * 300, 4);
    let got = g
        .download(&g.silu_mul(&g.upload(&gu).unwrap(), rows, 300).unwrap())
        .unwrap();
    close("silu_mul", &got, &c.silu_mul(&gu, rows, 300).unwrap(), 1e-6);
    let y = rand_vec(rows * dim, 5);
    let mut a = g.upload(&x).unwrap();
    g.add_assign(&mut a, &g.upload(&y).unwrap()).unwrap();
    let mut want = x.clone();
    c.add_assign(&mut want, &y).unwrap();
    close("add_assign", &g.download(&a).unwrap(), &want, 0.0);
}

#[test]
fn layout_ops_match_cpu() {
    let Some(g) = gpu(DType::F32) else { return };
    let c = Cpu;
    let (rows, stride) = (7, 96);
    let x = rand_vec(rows * stride, 5);
    let xg = g.upload(&x).unwrap();
    let got = g
        .download(&g.slice_cols(&xg, rows, stride, 40, 33).unwrap())
        .unwrap();
    assert_eq!(got, c.slice_cols(&x, rows, stride, 40, 33).unwrap());
    let mut dst = g.zeros(10 * stride).unwrap();
    g.copy_rows(&mut dst, 3, &xg, 2, 4, stride).unwrap();
    let mut want = vec![0.0; 10 * stride];
    c.copy_rows(&mut want, 3, &x, 2, 4, stride).unwrap();
    assert_eq!(g.download(&dst).unwrap(), want);
    let table = rand_vec(50 * 24, 6);
    let ids = [3u32, 49, 0, 3, 17];
    let got = g
        .download(&g.gather_rows(&g.upload(&table).unwrap(), 24, &ids).unwrap())
        .unwrap();
    assert_eq!(got, c.gather_rows(&table, 24, &ids).unwrap());
    assert!(g
        .gather_rows(&g.upload(&table).unwrap(), 24, &[50])
        .is_err());
    // Rotary on 3 heads of width 80 (the vision tower's) and 128 (the decoder's).
    for hd in [80, 128] {
        let (rows, heads) = (6, 3);
        let v = rand_vec(rows * heads * hd, 7);
        let (cos, sin) = (rand_vec(rows * hd, 8), rand_vec(rows * hd, 9));
        let mut vg = g.upload(&v).unwrap();
        g.rope(
            &mut vg,
            rows,
            heads,
            hd,
            &g.upload(&cos).unwrap(),
            &g.upload(&sin).unwrap(),
        )
        .unwrap();
        let mut want = v.clone();
        c.rope(&mut want, rows, heads, hd, &cos, &sin).unwrap();
        close(
            &format!("rope hd {hd}"),
            &g.download(&vg).unwrap(),
            &want,
            1e-6,
        );
    }
}

#[test]
fn split_qkv_rope_matches_cpu() {
    let Some(g) = gpu(DType::F32) else { return };
    let c = Cpu;
    for (heads, kv_heads, hd, rows) in [(12, 2, 128, 5), (16, 16, 80, 3)] {
        let s = AttnShape {
            heads,
            kv_heads,
            hd,
        };
        let qkv = rand_vec(rows * (heads + 2 * kv_heads) * hd, 30);
        let (cos, sin) = (rand_vec(rows * hd, 31), rand_vec(rows * hd, 32));
        let (q, k, v) = g
            .split_qkv_rope(
                &g.upload(&qkv).unwrap(),
                rows,
                s,
                &g.upload(&cos).unwrap(),
                &g.upload(&sin).unwrap(),
            )
            .unwrap();
        let (wq, wk, wv) = c.split_qkv_rope(&qkv, rows, s, &cos, &sin).unwrap();
        close("split q", &g.download(&q).unwrap(), &wq, 1e-6);
        close("split k", &g.download(&k).unwrap(), &wk, 1e-6);
        assert_eq!(g.download(&v).unwrap(), wv);
    }
}

#[test]
fn matmuls_match_cpu_in_f32_and_bf16() {
    let c = Cpu;
    for dtype in [DType::F32, DType::Bf16] {
        let Some(g) = gpu(dtype) else { return };
        // bf16 with ≤ 8 rows and k % 8 == 0 takes gemv_bf16, the rest cuBLAS.
        for (rows, k, n) in [
            (1, 1536, 2048),
            (3, 8960, 1536),
            (8, 1536, 100),
            (2, 36, 50),
            (9, 64, 130),
            (33, 1280, 80),
        ] {
            let x = rand_vec(rows * k, 10);
            let w = rand_vec(n * k, 11);
            let bias = rand_vec(n, 12);
            let wg = g.matrix(w.clone()).unwrap();
            let bg = g.weight(bias.clone()).unwrap();
            let xg = g.upload(&x).unwrap();
            let got = g
                .download(&g.linear(&xg, rows, k, &wg, n, Some(&bg)).unwrap())
                .unwrap();
            // bf16: the oracle rounds weights and inputs the same way and accumulates in f32.
            let (xr, wr) = match dtype {
                DType::F32 => (x.clone(), w.clone()),
                DType::Bf16 => (bf16_round(&x), bf16_round(&w)),
            };
            let want = c.linear(&xr, rows, k, &wr, n, Some(&bias)).unwrap();
            let tol = 2e-5 * (k as f32).sqrt();
            close(
                &format!("linear {dtype:?} {rows}x{k}x{n}"),
                &got,
                &want,
                tol,
            );
            let acc0 = rand_vec(rows * n, 13);
            let mut acc = g.upload(&acc0).unwrap();
            g.linear_add(&xg, rows, k, &wg, n, None, &mut acc).unwrap();
            let mut want_acc = acc0.clone();
            c.linear_add(&xr, rows, k, &wr, n, None, &mut want_acc)
                .unwrap();
            close("linear_add", &g.download(&acc).unwrap(), &want_acc, tol);
        }
        // Embedding rows from a bf16 table equal the rounded f32 rows.
        let table = rand_vec(40 * 16, 14);
        let got = g
            .download(
                &g.gather_rows(&g.matrix(table.clone()).unwrap(), 16, &[1, 39])
                    .unwrap(),
            )
            .unwrap();
        let want_t = match dtype {
            DType::F32 => table.clone(),
            DType::Bf16 => bf16_round(&table),
        };
        assert_eq!(got, c.gather_rows(&want_t, 16, &[1, 39]).unwrap());
    }
}

#[test]
fn attention_matches_cpu() {
    let Some(g) = gpu(DType::F32) else { return };
    let c = Cpu;
    // (heads, kv_heads, hd, n_q, n_kv, causal, q_row): decode, prefill over several key tiles,
    // grouped-query, the vision layout, a head wider than one tile.
    let cases = [
        (12, 2, 128, 1, 300, true, 0),
        (12, 2, 128, 70, 333, true, 5),
        (16, 16, 80, 64, 64, false, 0),
        (4, 1, 200, 3, 129, true, 2),
        (2, 2, 64, 257, 257, false, 0),
    ];
    for (heads, kv_heads, hd, n_q, n_kv, causal, q_row) in cases {
        let s = AttnShape {
            heads,
            kv_heads,
            hd,
        };
        let q = rand_vec((q_row + n_q) * heads * hd, 20);
        let k: Vec<f32> = rand_vec(n_kv * kv_heads * hd, 21)
            .iter()
            .map(|v| v * 3.0)
            .collect();
        let v = rand_vec(n_kv * kv_heads * hd, 22);
        let mut out = g.zeros((q_row + n_q) * heads * hd).unwrap();
        let (qg, kg, vg) = (
            g.upload(&q).unwrap(),
            g.upload(&k).unwrap(),
            g.upload(&v).unwrap(),
        );
        g.attention(&qg, q_row, n_q, &kg, &vg, n_kv, s, causal, &mut out)
            .unwrap();
        let mut want = vec![0.0; (q_row + n_q) * heads * hd];
        c.attention(&q, q_row, n_q, &k, &v, n_kv, s, causal, &mut want)
            .unwrap();
        close(
            &format!("attention h{heads}/{kv_heads} hd{hd} q{n_q} kv{n_kv} causal {causal}"),
            &g.download(&out).unwrap(),
            &want,
            2e-5,
        );
    }
}

fn fixture() -> PathBuf {
    std::env::var_os("VLM_EVAL_FIXTURE")
        .map_or_else(|| support::fixture("tiny-qwen2vl"), PathBuf::from)
}

fn fixture_prompt<B: Backend>(e: &Engine<B>) -> Prompt {
    let png = std::fs::read(fixture().join("image_64.png")).unwrap();
    let img = preprocess_image(&png, &e.pre).unwrap();
    let msgs = serde_json::json!([{"role": "user", "content": [
        {"type": "image"}, {"type": "text", "text": "What should the player do next?"}]}]);
    e.prompt(&msgs, None, vec![img]).unwrap()
}

fn greedy(n: usize) -> GenParams {
    GenParams {
        max_new_tokens: n,
        sampling: SamplingParams {
            temperature: 0.0,
            top_p: 1.0,
            top_k: 0,
            seed: 0,
        },
        stop_ids: vec![],
    }
}

#[test]
fn tiny_model_on_gpu_matches_cpu_reference() {
    if gpu(DType::F32).is_none() {
        return;
    }
    let cpu = Engine::load(&fixture(), Cpu).unwrap();
    let prompt = fixture_prompt(&cpu);
    let want = cpu.prefill_logits(&prompt).unwrap();
    let want_tokens = cpu.generate(prompt.clone(), greedy(8)).unwrap().tokens;
    let v = cpu.cfg.text.vocab_size;
    let real = cpu.tok.vocab_len.min(v);
    for dtype in [DType::F32, DType::Bf16] {
        let Some(g) = gpu(dtype) else { return };
        let e = Engine::load(&fixture(), g).unwrap();
        let got = e.prefill_logits(&prompt).unwrap();
        let agree = got
            .chunks(v)
            .zip(want.chunks(v))
            .filter(|(a, b)| argmax(&a[..real]) == argmax(&b[..real]))
            .count() as f64
            / (want.len() / v) as f64;
        let tokens = e.generate(prompt.clone(), greedy(8)).unwrap().tokens;
        eprintln!("{dtype:?}: top-1 agreement {agree:.4}, greedy {tokens:?} vs {want_tokens:?}");
        match dtype {
            DType::F32 => {
                close("tiny prefill logits f32", &got, &want, 1e-4);
                assert_eq!(tokens, want_tokens);
            }
            // Near-ties are common in a tiny random model; the 0.99 gate is for real shapes
            // (`bench parity`).
            DType::Bf16 => assert!(agree >= 0.9, "bf16 top-1 agreement {agree}"),
        }
    }
}

/// Nine prompts of three lengths (two images, one, none) with different token budgets: batched
/// prefill of ragged prompts, decode of 9 rows (cuBLAS) shrinking to 8 and fewer (gemv in bf16)
/// as sequences finish.
fn ragged_batch<B: Backend>(e: &Engine<B>) -> Vec<(Prompt, GenParams)> {
    let img =
        |f: &str| preprocess_image(&std::fs::read(fixture().join(f)).unwrap(), &e.pre).unwrap();
    let two = serde_json::json!([{"role": "user", "content": [
        {"type": "image"}, {"type": "image"}, {"type": "text", "text": "Which frame is newer?"}]}]);
    let none = serde_json::json!([{"role": "user", "content": "Name one tool."}]);
    let prompts = [
        fixture_prompt(e),
        e.prompt(
            &two,
            None,
            vec![img("image_56x112.png"), img("image_90x70.png")],
        )
        .unwrap(),
        e.prompt(&none, None, Vec::new()).unwrap(),
    ];
    (0..9)
        .map(|i| (prompts[i % 3].clone(), greedy(3 + i)))
        .collect()
}

#[test]
fn batched_generation_matches_cpu() {
    let Some(g) = gpu(DType::F32) else { return };
    let cpu = Engine::load(&fixture(), Cpu).unwrap();
    let want: Vec<Vec<u32>> = cpu
        .generate_batch(ragged_batch(&cpu))
        .unwrap()
        .into_iter()
        .map(|r| r.tokens)
        .collect();
    let e = Engine::load(&fixture(), g).unwrap();
    let got = e.generate_batch(ragged_batch(&e)).unwrap();
    assert_eq!(got[0].max_batch, 9);
    let got: Vec<Vec<u32>> = got.into_iter().map(|r| r.tokens).collect();
    assert_eq!(got, want);
    // The same in bf16, against the emulation of its rounding.
    let Some(g) = gpu(DType::Bf16) else { return };
    let emu = Engine::load(&fixture(), Bf16Emulation).unwrap();
    let want: Vec<Vec<u32>> = emu
        .generate_batch(ragged_batch(&emu))
        .unwrap()
        .into_iter()
        .map(|r| r.tokens)
        .collect();
    let e = Engine::load(&fixture(), g).unwrap();
    let got: Vec<Vec<u32>> = e
        .generate_batch(ragged_batch(&e))
        .unwrap()
        .into_iter()
        .map(|r| r.tokens)
        .collect();
    assert_eq!(got, want);
}

/// The CPU reference with the CUDA backend's bf16 rounding points and nothing else: matrices
/// stored in bf16 and the inputs of a matmul with a bf16 matrix rounded to bf16, products
/// accumulated in f32. An oracle for `--dtype bf16` that does not share its code.
struct Bf16Emulation;

struct EmuBuf {
    v: Vec<f32>,
    bf16: bool,
}

fn emu(v: Vec<f32>) -> EmuBuf {
    EmuBuf { v, bf16: false }
}

impl Bf16Emulation {
    /// The matmul input as the backend uses it: rounded to bf16 when the matrix is bf16.
    fn input(x: &EmuBuf, w: &EmuBuf) -> Vec<f32> {
        if w.bf16 {
            bf16_round(&x.v)
        } else {
            x.v.clone()
        }
    }
}

impl Backend for Bf16Emulation {
    type Buf = EmuBuf;

    fn name(&self) -> &'static str {
        "cpu-bf16-emulation"
    }
    fn weight_bytes_per_value(&self) -> usize {
        2
    }
    fn weight(&self, data: Vec<f32>) -> BResult<EmuBuf> {
        Ok(emu(data))
    }
    fn matrix(&self, data: Vec<f32>) -> BResult<EmuBuf> {
        Ok(EmuBuf {
            v: bf16_round(&data),
            bf16: true,
        })
    }
    fn upload(&self, data: &[f32]) -> BResult<EmuBuf> {
        Ok(emu(data.to_vec()))
    }
    fn download(&self, x: &EmuBuf) -> BResult<Vec<f32>> {
        Ok(x.v.clone())
    }
    fn zeros(&self, n: usize) -> BResult<EmuBuf> {
        Ok(emu(vec![0.0; n]))
    }
    fn linear(
        &self,
        x: &EmuBuf,
        rows: usize,
        k: usize,
        w: &EmuBuf,
        n: usize,
        bias: Option<&EmuBuf>,
    ) -> BResult<EmuBuf> {
        let b = bias.map(|b| &b.v);
        Ok(emu(Cpu.linear(&Self::input(x, w), rows, k, &w.v, n, b)?))
    }
    fn linear_add(
        &self,
        x: &EmuBuf,
        rows: usize,
        k: usize,
        w: &EmuBuf,
        n: usize,
        bias: Option<&EmuBuf>,
        acc: &mut EmuBuf,
    ) -> BResult<()> {
        let b = bias.map(|b| &b.v);
        Cpu.linear_add(&Self::input(x, w), rows, k, &w.v, n, b, &mut acc.v)
    }
    fn add_assign(&self, x: &mut EmuBuf, y: &EmuBuf) -> BResult<()> {
        Cpu.add_assign(&mut x.v, &y.v)
    }
    fn rms_norm(
        &self,
        x: &EmuBuf,
        rows: usize,
        dim: usize,
        w: &EmuBuf,
        eps: f32,
    ) -> BResult<EmuBuf> {
        Ok(emu(Cpu.rms_norm(&x.v, rows, dim, &w.v, eps)?))
    }
    fn layer_norm(
        &self,
        x: &EmuBuf,
        rows: usize,
        dim: usize,
        w: &EmuBuf,
        b: &EmuBuf,
        eps: f32,
    ) -> BResult<EmuBuf> {
        Ok(emu(Cpu.layer_norm(&x.v, rows, dim, &w.v, &b.v, eps)?))
    }
    fn rope(
        &self,
        x: &mut EmuBuf,
        rows: usize,
        heads: usize,
        hd: usize,
        cos: &EmuBuf,
        sin: &EmuBuf,
    ) -> BResult<()> {
        Cpu.rope(&mut x.v, rows, heads, hd, &cos.v, &sin.v)
    }
    fn silu_mul(&self, gu: &EmuBuf, rows: usize, m: usize) -> BResult<EmuBuf> {
        Ok(emu(Cpu.silu_mul(&gu.v, rows, m)?))
    }
    fn quick_gelu(&self, x: &mut EmuBuf) -> BResult<()> {
        Cpu.quick_gelu(&mut x.v)
    }
    fn gelu_erf(&self, x: &mut EmuBuf) -> BResult<()> {
        Cpu.gelu_erf(&mut x.v)
    }
    fn gather_rows(&self, table: &EmuBuf, dim: usize, ids: &[u32]) -> BResult<EmuBuf> {
        Ok(emu(Cpu.gather_rows(&table.v, dim, ids)?))
    }
    fn slice_cols(
        &self,
        x: &EmuBuf,
        rows: usize,
        stride: usize,
        col0: usize,
        n: usize,
    ) -> BResult<EmuBuf> {
        Ok(emu(Cpu.slice_cols(&x.v, rows, stride, col0, n)?))
    }
    fn copy_rows(
        &self,
        dst: &mut EmuBuf,
        dst_row: usize,
        src: &EmuBuf,
        src_row: usize,
        rows: usize,
        dim: usize,
    ) -> BResult<()> {
        Cpu.copy_rows(&mut dst.v, dst_row, &src.v, src_row, rows, dim)
    }
    fn attention(
        &self,
        q: &EmuBuf,
        q_row: usize,
        n_q: usize,
        k: &EmuBuf,
        v: &EmuBuf,
        n_kv: usize,
        shape: AttnShape,
        causal: bool,
        out: &mut EmuBuf,
    ) -> BResult<()> {
        Cpu.attention(
            &q.v, q_row, n_q, &k.v, &v.v, n_kv, shape, causal, &mut out.v,
        )
    }
}

#[test]
fn tiny_model_bf16_matches_an_emulation_of_its_rounding() {
    // Top-1 agreement with the f32 reference says little on a tiny random model: bf16 rounding
    // alone flips near-ties (about 2 % of positions here). Against an emulation of the same
    // rounding points the bf16 backend must be far closer than bf16 is to f32; what remains is
    // f32 summation order deciding an occasional bf16 rounding the other way.
    let Some(g) = gpu(DType::Bf16) else { return };
    let emu = Engine::load(&fixture(), Bf16Emulation).unwrap();
    let prompt = fixture_prompt(&emu);
    let want = emu.prefill_logits(&prompt).unwrap();
    let want_tokens = emu.generate(prompt.clone(), greedy(8)).unwrap().tokens;
    let f32_ref = Engine::load(&fixture(), Cpu)
        .unwrap()
        .prefill_logits(&prompt)
        .unwrap();
    let e = Engine::load(&fixture(), g).unwrap();
    let got = e.prefill_logits(&prompt).unwrap();
    let mean = |a: &[f32], b: &[f32]| {
        a.iter()
            .zip(b)
            .map(|(x, y)| f64::from((x - y).abs()))
            .sum::<f64>()
            / a.len() as f64
    };
    let v = e.cfg.text.vocab_size;
    let real = e.tok.vocab_len.min(v);
    let agree = |a: &[f32], b: &[f32]| {
        a.chunks(v)
            .zip(b.chunks(v))
            .filter(|(x, y)| argmax(&x[..real]) == argmax(&y[..real]))
            .count() as f64
            / (a.len() / v) as f64
    };
    let (d_bf16, d_emu) = (mean(&want, &f32_ref), mean(&got, &want));
    let agree_emu = agree(&got, &want);
    eprintln!(
        "bf16 emulation vs f32: mean |Δ| {d_bf16:.2e}, top-1 {:.4}; backend vs emulation: mean \
         |Δ| {d_emu:.2e}, max |Δ| {:.2e}, top-1 {agree_emu:.4}",
        agree(&want, &f32_ref),
        max_diff(&got, &want)
    );
    assert!(
        d_emu <= 0.25 * d_bf16,
        "bf16 logits are as far from the emulation ({d_emu:.2e}) as bf16 is from f32 ({d_bf16:.2e})"
    );
    assert!(
        agree_emu >= 0.99,
        "top-1 agreement with the emulation {agree_emu}"
    );
    assert_eq!(e.generate(prompt, greedy(8)).unwrap().tokens, want_tokens);
}

// ---- Qwen3.5 ops and the tiny Qwen3.5 fixture ------------------------------------------------

/// Values in one flattened Qwen3.5 patch: 3 channels · 2 frames · 16 · 16.
const QWEN35_PATCH: usize = 1536;

fn sigmoid_vec(v: &[f32]) -> Vec<f32> {
    v.iter().map(|&x| 1.0 / (1.0 + (-x).exp())).collect()
}

#[test]
fn qwen35_elementwise_and_norm_ops_match_cpu() {
    let Some(g) = gpu(DType::F32) else { return };
    let c = Cpu;
    // Partial rotary: head width 256 rotating 64 (Qwen3.5's), and a narrow head rotating all.
    for (heads, hd, rot) in [(3, 256, 64), (2, 32, 32), (4, 40, 16)] {
        let rows = 5;
        let x = rand_vec(rows * heads * hd, 11);
        let (cos, sin) = (rand_vec(rows * rot, 12), rand_vec(rows * rot, 13));
        let mut xg = g.upload(&x).unwrap();
        let (cg, sg) = (g.upload(&cos).unwrap(), g.upload(&sin).unwrap());
        g.rope_partial(&mut xg, rows, heads, hd, rot, &cg, &sg)
            .unwrap();
        let mut want = x.clone();
        c.rope_partial(&mut want, rows, heads, hd, rot, &cos, &sin)
            .unwrap();
        let got = g.download(&xg).unwrap();
        close(
            &format!("rope_partial hd {hd} rot {rot}"),
            &got,
            &want,
            1e-6,
        );
        // The unrotated dims pass through bit for bit.
        for (gr, xr) in got.chunks(hd).zip(x.chunks(hd)) {
            assert_eq!(gr[rot..], xr[rot..], "rope_partial touched dims past {rot}");
        }
    }
    let n = 3000;
    let (x, gate) = (rand_vec(n, 14), rand_vec(n, 15));
    let mut xg = g.upload(&x).unwrap();
    g.mul_sigmoid(&mut xg, &g.upload(&gate).unwrap()).unwrap();
    let mut want = x.clone();
    c.mul_sigmoid(&mut want, &gate).unwrap();
    close("mul_sigmoid", &g.download(&xg).unwrap(), &want, 1e-6);
    // tanh-GELU over a wider range than [-1, 1): the tails matter.
    let wide: Vec<f32> = rand_vec(n, 16).iter().map(|v| v * 8.0).collect();
    let mut xg = g.upload(&wide).unwrap();
    g.gelu_tanh(&mut xg).unwrap();
    let mut want = wide.clone();
    c.gelu_tanh(&mut want).unwrap();
    close("gelu_tanh", &g.download(&xg).unwrap(), &want, 1e-6);
    // Per-head L2 norm (rows of 128, and of 300 to cross the block width) and the gated RMSNorm.
    for dim in [128, 300] {
        let rows = 12;
        let x = rand_vec(rows * dim, 17);
        let got = g
            .download(&g.l2_norm(&g.upload(&x).unwrap(), rows, dim, 1e-6).unwrap())
            .unwrap();
        close(
            &format!("l2_norm {dim}"),
            &got,
            &c.l2_norm(&x, rows, dim, 1e-6).unwrap(),
            1e-6,
        );
        let (z, w) = (rand_vec(rows * dim, 18), rand_vec(dim, 19));
        let (xg, zg, wg) = (
            g.upload(&x).unwrap(),
            g.upload(&z).unwrap(),
            g.upload(&w).unwrap(),
        );
        let got = g
            .download(&g.rms_norm_gated(&xg, &zg, rows, dim, &wg, 1e-6).unwrap())
            .unwrap();
        close(
            &format!("rms_norm_gated {dim}"),
            &got,
            &c.rms_norm_gated(&x, &z, rows, dim, &w, 1e-6).unwrap(),
            1e-5,
        );
    }
    // The gates, with a + dt_bias on both sides of softplus's threshold (20).
    let (rows, heads) = (9, 6);
    let b = rand_vec(rows * heads, 20);
    let a: Vec<f32> = rand_vec(rows * heads, 21)
        .iter()
        .map(|v| v * 30.0)
        .collect();
    let (a_log, dt) = (rand_vec(heads, 22), rand_vec(heads, 23));
    let (beta, gg) = g
        .delta_gates(
            &g.upload(&b).unwrap(),
            &g.upload(&a).unwrap(),
            rows,
            heads,
            &g.upload(&a_log).unwrap(),
            &g.upload(&dt).unwrap(),
        )
        .unwrap();
    let (wb, wg) = c.delta_gates(&b, &a, rows, heads, &a_log, &dt).unwrap();
    close("delta_gates beta", &g.download(&beta).unwrap(), &wb, 1e-6);
    close("delta_gates g", &g.download(&gg).unwrap(), &wg, 2e-5);
    // Weighted gather with 4 taps (the position table's bilinear resampling).
    let (table_rows, dim, taps, out_rows) = (100, 72, 4, 37);
    let table = rand_vec(table_rows * dim, 24);
    let idx: Vec<u32> = rand_vec(out_rows * taps, 25)
        .iter()
        .map(|v| ((v + 1.0) * 0.5 * table_rows as f32) as u32 % table_rows as u32)
        .collect();
    let w = rand_vec(out_rows * taps, 26);
    let tg = g.upload(&table).unwrap();
    let got = g
        .download(&g.gather_weighted(&tg, dim, &idx, &w, taps).unwrap())
        .unwrap();
    close(
        "gather_weighted",
        &got,
        &c.gather_weighted(&table, dim, &idx, &w, taps).unwrap(),
        1e-6,
    );
    assert!(g.gather_weighted(&tg, dim, &[100], &[1.0], 1).is_err());
}

#[test]
fn conv1d_prefill_then_decode_matches_cpu() {
    let Some(g) = gpu(DType::F32) else { return };
    let c = Cpu;
    // 300 channels (two blocks), kernel 4; prefills longer and shorter than the state (3 rows),
    // then single-row decode steps, each continuing the state the previous call left.
    let (ch, k) = (300, 4);
    let w = rand_vec(ch * k, 30);
    let wg = g.upload(&w).unwrap();
    for (case, lens) in [[7, 1, 1, 1], [2, 1, 3, 1], [1, 1, 1, 1]]
        .iter()
        .enumerate()
    {
        let mut sg = g.zeros((k - 1) * ch).unwrap();
        let mut sc = vec![0.0; (k - 1) * ch];
        for (step, &n) in lens.iter().enumerate() {
            let x = rand_vec(n * ch, 31 + (10 * case + step) as u64);
            let got = g
                .conv1d_silu(&g.upload(&x).unwrap(), n, ch, &wg, k, &mut sg)
                .unwrap();
            let want = c.conv1d_silu(&x, n, ch, &w, k, &mut sc).unwrap();
            let what = format!("conv1d case {case} step {step} (n {n})");
            close(&what, &g.download(&got).unwrap(), &want, 1e-6);
            // The state is a copy of inputs: exact.
            assert_eq!(g.download(&sg).unwrap(), sc, "{what}: state differs");
        }
    }
}

/// q, k, v, β and g of one delta-rule call.
type DeltaInputs = (Vec<f32>, Vec<f32>, Vec<f32>, Vec<f32>, Vec<f32>);

/// Random inputs of one delta-rule call: q, k L2-normalised, β in (0, 1), g < 0.
fn delta_inputs(n: usize, s: DeltaShape, seed: u64) -> DeltaInputs {
    let qk = n * s.k_heads * s.dk;
    let q = hybrid::l2_norm(&rand_vec(qk, seed), n * s.k_heads, s.dk, 1e-6);
    let k = hybrid::l2_norm(&rand_vec(qk, seed + 1), n * s.k_heads, s.dk, 1e-6);
    let v = rand_vec(n * s.v_heads * s.dv, seed + 2);
    let beta = sigmoid_vec(&rand_vec(n * s.v_heads, seed + 3));
    let g: Vec<f32> = rand_vec(n * s.v_heads, seed + 4)
        .iter()
        .map(|x| -0.5 * (x + 1.0) - 0.01)
        .collect();
    (q, k, v, beta, g)
}

#[test]
fn delta_rule_matches_cpu_and_splits_like_one_call() {
    let Some(gp) = gpu(DType::F32) else { return };
    let c = Cpu;
    let shapes = [
        // Hv > Hk (q/k heads repeat-interleaved), Dk ≠ Dv, neither a multiple of the tiles.
        DeltaShape {
            k_heads: 2,
            v_heads: 6,
            dk: 50,
            dv: 40,
        },
        // Qwen3.5-0.8B's head widths.
        DeltaShape {
            k_heads: 2,
            v_heads: 2,
            dk: 128,
            dv: 128,
        },
        // The widest key head the kernel takes.
        DeltaShape {
            k_heads: 1,
            v_heads: 2,
            dk: 256,
            dv: 24,
        },
    ];
    for s in shapes {
        // One 12-token call on the CPU against a 9-token call then three single-token calls on
        // the device, from the same non-zero state.
        let n = 12;
        let (q, k, v, beta, g) = delta_inputs(n, s, 40);
        let init: Vec<f32> = rand_vec(s.state_len(), 45)
            .iter()
            .map(|x| x * 0.3)
            .collect();
        let mut want_state = init.clone();
        let want = c
            .delta_rule(&q, &k, &v, &beta, &g, n, s, &mut want_state)
            .unwrap();
        let mut st = gp.upload(&init).unwrap();
        let mut got = Vec::new();
        let (kd, vd) = (s.k_heads * s.dk, s.v_heads * s.dv);
        let mut t0 = 0;
        for m in [9, 1, 1, 1] {
            let part = |x: &[f32], w: usize| gp.upload(&x[t0 * w..(t0 + m) * w]).unwrap();
            let o = gp
                .delta_rule(
                    &part(&q, kd),
                    &part(&k, kd),
                    &part(&v, vd),
                    &part(&beta, s.v_heads),
                    &part(&g, s.v_heads),
                    m,
                    s,
                    &mut st,
                )
                .unwrap();
            got.extend(gp.download(&o).unwrap());
            t0 += m;
        }
        let what = format!("delta_rule {s:?}");
        close(&format!("{what} outputs"), &got, &want, 2e-5);
        close(
            &format!("{what} state"),
            &gp.download(&st).unwrap(),
            &want_state,
            2e-5,
        );
    }
    let bad = DeltaShape {
        k_heads: 1,
        v_heads: 1,
        dk: 257,
        dv: 8,
    };
    let (q, k, v, beta, g) = delta_inputs(1, bad, 50);
    let up = |x: &[f32]| gp.upload(x).unwrap();
    let mut st = gp.zeros(bad.state_len()).unwrap();
    let r = gp.delta_rule(
        &up(&q),
        &up(&k),
        &up(&v),
        &up(&beta),
        &up(&g),
        1,
        bad,
        &mut st,
    );
    assert!(
        r.is_err(),
        "a key head wider than the kernel takes must be an error"
    );
}

/// The tiny Qwen3.5 fixture (`VLM_EVAL_FIXTURE35` where the binary runs away from its source
/// tree, as scripts/gpu_check.sh does).
fn qwen35_fixture() -> PathBuf {
    std::env::var_os("VLM_EVAL_FIXTURE35")
        .map_or_else(|| support::fixture("tiny-qwen35"), PathBuf::from)
}

/// transformers' reference in one of the fixture's files: the prompt, image embeddings, prefill
/// and decode-step logits, greedy tokens.
struct Qwen35Reference {
    prompt: Prompt,
    embeds: Vec<f32>,
    logits: Vec<f32>,
    decode_logits: Vec<f32>,
    greedy: Vec<u32>,
}

fn qwen35_reference(file: &str) -> Qwen35Reference {
    let r = support::reference_at(&qwen35_fixture(), file);
    Qwen35Reference {
        prompt: Prompt {
            ids: r.ids.clone(),
            images: support::ref_images(&r, QWEN35_PATCH),
        },
        embeds: r.embeds,
        logits: r.logits,
        decode_logits: r.decode_logits.expect("decode_logits in the reference"),
        greedy: r.greedy,
    }
}

#[test]
fn tiny_qwen35_on_gpu_matches_transformers() {
    let Some(g) = gpu(DType::F32) else { return };
    let e = Engine::load(&qwen35_fixture(), g).unwrap();
    for file in ["reference.safetensors", "reference2.safetensors"] {
        let r = qwen35_reference(file);
        let imgs: Vec<&ImageInput> = r.prompt.images.iter().collect();
        let emb = e.image_embeds(&imgs).unwrap();
        close(&format!("{file}: image embeds"), &emb, &r.embeds, 1e-4);
        let logits = e.prefill_logits(&r.prompt).unwrap();
        close(&format!("{file}: prefill logits"), &logits, &r.logits, 1e-4);
        let step = e.decode_step_logits(&r.prompt, r.greedy[0]).unwrap();
        close(
            &format!("{file}: decode-step logits"),
            &step,
            &r.decode_logits,
            1e-4,
        );
        let tokens = e.generate(r.prompt.clone(), greedy(16)).unwrap().tokens;
        assert_eq!(
            tokens, r.greedy,
            "{file}: greedy tokens (with cache) differ"
        );
    }
}

/// A ragged batch: both references' prompts and a text-only one, different budgets; each
/// sequence carries its own KV, conv and recurrent state through prefill and decode.
fn qwen35_batch<B: Backend>(e: &Engine<B>) -> Vec<(Prompt, GenParams)> {
    let text = serde_json::json!([{"role": "user", "content": "Name one tool."}]);
    let prompts = [
        qwen35_reference("reference.safetensors").prompt,
        qwen35_reference("reference2.safetensors").prompt,
        e.prompt(&text, None, Vec::new()).unwrap(),
    ];
    (0..6)
        .map(|i| (prompts[i % 3].clone(), greedy(3 + 2 * i)))
        .collect()
}

#[test]
fn tiny_qwen35_batch_on_gpu_matches_cpu_and_bf16_agrees() {
    let Some(g) = gpu(DType::F32) else { return };
    let cpu = Engine::load(&qwen35_fixture(), Cpu).unwrap();
    let want: Vec<Vec<u32>> = cpu
        .generate_batch(qwen35_batch(&cpu))
        .unwrap()
        .into_iter()
        .map(|r| r.tokens)
        .collect();
    let e = Engine::load(&qwen35_fixture(), g).unwrap();
    let got: Vec<Vec<u32>> = e
        .generate_batch(qwen35_batch(&e))
        .unwrap()
        .into_iter()
        .map(|r| r.tokens)
        .collect();
    assert_eq!(got, want, "batched greedy tokens differ from the CPU's");
    // bf16 weights: top-1 agreement with transformers' f32 logits (near-ties flip in a tiny
    // random model, as for Qwen2-VL).
    let Some(g) = gpu(DType::Bf16) else { return };
    let e = Engine::load(&qwen35_fixture(), g).unwrap();
    let r = qwen35_reference("reference.safetensors");
    let got = e.prefill_logits(&r.prompt).unwrap();
    let v = e.cfg.text.vocab_size;
    let real = e.vocab_len();
    let agree = got
        .chunks(v)
        .zip(r.logits.chunks(v))
        .filter(|(a, b)| argmax(&a[..real]) == argmax(&b[..real]))
        .count() as f64
        / (r.logits.len() / v) as f64;
    eprintln!(
        "qwen35 bf16: top-1 agreement {agree:.4}, max |Δ| {:.2e}",
        max_diff(&got, &r.logits)
    );
    assert!(agree >= 0.9, "bf16 top-1 agreement {agree}");
}
