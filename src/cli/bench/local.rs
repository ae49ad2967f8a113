//! `vlm-eval bench local` (TTFT, decode tokens/s, achieved GB/s against a roofline) and
//! `vlm-eval bench parity` (a backend's logits and greedy tokens against the CPU f32
//! reference) for local Qwen2-VL checkpoints, including weights-only folders.

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use serde::Serialize;

use crate::cli::error::{CliError, EXIT_USAGE};
use vlm_eval_local::backend::cpu::packed::CpuPacked;
use vlm_eval_local::backend::Backend;
use vlm_eval_local::backend::DType;
use vlm_eval_local::bench::{bench_local, BenchOptions, LocalBenchReport};
use vlm_eval_local::config::ModelConfig;
use vlm_eval_local::device::{default_dtype, with_backend, Device, WithBackend};
use vlm_eval_local::engine::Engine;
use vlm_eval_local::parity::{self, ParityResult, Reference};
use vlm_eval_local::LocalError;

/// The H200's measured device-copy bandwidth (GB/s), the default CUDA roofline.
pub const H200_COPY_GBS: f64 = 4300.0;

/// `vlm-eval bench local` flags.
#[derive(Args, Debug)]
pub struct BenchLocalArgs {
    /// Checkpoint folder (a full checkpoint, or weights only: config.json + safetensors).
    #[arg(long)]
    pub model_dir: PathBuf,
    /// Device.
    #[arg(long, value_enum, default_value_t = Device::Cpu)]
    pub device: Device,
    /// Weight precision [default: f32 on cpu, bf16 on cuda].
    #[arg(long, value_enum)]
    pub dtype: Option<DType>,
    /// Greedy decode steps per batch size.
    #[arg(long, default_value_t = 128)]
    pub new: usize,
    /// Side of the square synthetic frame in pixels, resized by the model's processor (64 px:
    /// 56×56 → 4 image tokens for Qwen2-VL, 256×256 → 64 for Qwen3.5).
    #[arg(long, default_value_t = 64)]
    pub frame: usize,
    /// Decode batch sizes, comma-separated.
    #[arg(long, default_value = "1,16")]
    pub batch: String,
    /// Timed TTFT repeats.
    #[arg(long, default_value_t = 5)]
    pub repeats: usize,
    /// Untimed warm-up runs (TTFT and each batch size).
    #[arg(long, default_value_t = 1)]
    pub warmup: usize,
    /// Memory bandwidth roofline in GB/s [default: 4300 on cuda (H200 copy), none on cpu].
    #[arg(long)]
    pub peak_gbs: Option<f64>,
    /// Also write the report as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// Precisions `bench parity` compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ParityDType {
    /// f32 weights only.
    F32,
    /// bf16 weights only.
    Bf16,
    /// f32, then bf16.
    Both,
}

/// `vlm-eval bench parity` flags.
#[derive(Args, Debug)]
pub struct BenchParityArgs {
    /// Checkpoint folder (a full checkpoint, or weights only: config.json + safetensors).
    #[arg(long)]
    pub model_dir: PathBuf,
    /// Device compared with the CPU f32 reference (cpu: the reference against itself, a
    /// plumbing check).
    #[arg(long, value_enum, default_value_t = Device::Cpu)]
    pub device: Device,
    /// Precision(s) to compare.
    #[arg(long, value_enum, default_value_t = ParityDType::Both)]
    pub dtype: ParityDType,
    /// Teacher-forced text positions after the frame.
    #[arg(long, default_value_t = 128)]
    pub positions: usize,
    /// Side of the square synthetic frame in pixels.
    #[arg(long, default_value_t = 64)]
    pub frame: usize,
    /// f32 fails when the largest logit difference exceeds this.
    #[arg(long, default_value_t = 1e-4)]
    pub max_abs: f64,
    /// bf16 (and, with --reference, f32 too) fails when top-1 agreement is below this.
    #[arg(long, default_value_t = 0.99)]
    pub min_top1: f64,
    /// Compare with transformers' own logits and greedy tokens for its own inputs instead of
    /// the CPU backend (a safetensors file: `scripts/hf_baseline.py --reference FILE`, or a
    /// fixture's reference.safetensors); the file fixes the prompt, so --frame and --positions
    /// are not used.
    #[arg(long, value_name = "FILE")]
    pub reference: Option<PathBuf>,
    /// Also write the results as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// Turn an engine error into a CLI error: bad files, fields and devices are usage errors
/// (exit 2); checkpoint problems get the hint to fix the folder.
fn local_err(cmd: &str, dir: &Path, e: LocalError) -> CliError {
    let (code, hint) = match e {
        LocalError::Internal(_) => (1, ""),
        LocalError::Device(_) => (EXIT_USAGE, ""),
        LocalError::File { .. } | LocalError::Field { .. } | LocalError::Tensor { .. } => (
            EXIT_USAGE,
            " (point --model-dir at a Qwen2-VL checkpoint folder with config.json and \
             model.safetensors)",
        ),
        _ => (EXIT_USAGE, ""),
    };
    CliError {
        code,
        message: format!("bench {cmd} --model-dir {}: {e}{hint}", dir.display()),
    }
}

/// Parse `1,16` into batch sizes (each at least 1).
pub fn parse_batches(s: &str) -> Result<Vec<usize>, CliError> {
    let bad = || {
        CliError::usage(format!(
            "--batch '{s}': expected comma-separated batch sizes of at least 1, e.g. --batch 1,16"
        ))
    };
    let out: Vec<usize> = s
        .split(',')
        .map(|x| x.trim().parse::<usize>().ok().filter(|&b| b >= 1))
        .collect::<Option<_>>()
        .ok_or_else(bad)?;
    if out.is_empty() || out.iter().any(|&b| b > 4096) {
        return Err(bad());
    }
    Ok(out)
}

fn check_frame(frame: usize) -> Result<(), CliError> {
    if !(1..=4096).contains(&frame) {
        return Err(CliError::usage(format!(
            "--frame {frame}: the frame side must be 1..=4096 pixels"
        )));
    }
    Ok(())
}

fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), CliError> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| CliError::usage(format!("cannot serialise the results: {e}")))?;
    std::fs::write(path, text + "\n").map_err(|e| {
        CliError::usage(format!(
            "--json {}: {e} (choose a writable file)",
            path.display()
        ))
    })
}

struct BenchWork<'a> {
    dir: &'a Path,
    opts: BenchOptions,
}

impl WithBackend for BenchWork<'_> {
    type Output = LocalBenchReport;
    fn run<B: Backend>(self, be: B) -> Result<LocalBenchReport, LocalError> {
        tracing::info!("loading {} on {}", self.dir.display(), be.name());
        let engine = Engine::load_bare(self.dir, be)?;
        bench_local(&engine, &self.opts)
    }
}

/// Run `vlm-eval bench local`.
pub fn cmd_bench_local(a: BenchLocalArgs) -> Result<i32, CliError> {
    let batches = parse_batches(&a.batch)?;
    check_frame(a.frame)?;
    if a.new == 0 || a.repeats == 0 {
        return Err(CliError::usage("--new and --repeats must be at least 1"));
    }
    if let Some(p) = a.peak_gbs {
        if !(p.is_finite() && p > 0.0) {
            return Err(CliError::usage(format!(
                "--peak-gbs {p}: give the bandwidth in GB/s, above 0"
            )));
        }
    }
    let dtype = a.dtype.unwrap_or(default_dtype(a.device));
    let opts = BenchOptions {
        device: a.device,
        dtype,
        frame: a.frame,
        new_tokens: a.new,
        batches,
        repeats: a.repeats,
        warmup: a.warmup,
        peak_gbs: a.peak_gbs.or(match a.device {
            Device::Cuda => Some(H200_COPY_GBS),
            Device::Cpu => None,
        }),
    };
    let work = BenchWork {
        dir: &a.model_dir,
        opts,
    };
    let report = with_backend(a.device, Some(dtype), work)
        .map_err(|e| local_err("local", &a.model_dir, e))?;
    println!("{report}");
    if let Some(path) = &a.json {
        write_json(path, &report)?;
    }
    Ok(0)
}

struct CompareWork<'a> {
    dir: &'a Path,
    reference: &'a Reference,
    dtype: DType,
}

impl WithBackend for CompareWork<'_> {
    type Output = ParityResult;
    fn run<B: Backend>(self, be: B) -> Result<ParityResult, LocalError> {
        tracing::info!(
            "loading {} on {} ({})",
            self.dir.display(),
            be.name(),
            self.dtype.name()
        );
        let engine = Engine::load_bare(self.dir, be)?;
        parity::compare(&engine, self.reference, self.dtype.name())
    }
}

/// What `bench parity --json` writes.
#[derive(Debug, Serialize)]
struct ParityReport {
    model_dir: String,
    device: String,
    /// True when the CPU backend was compared with itself (plumbing check only).
    self_check: bool,
    /// What the results are compared with.
    reference: String,
    frame_px: usize,
    prompt_tokens: usize,
    max_abs_limit: f64,
    min_top1: f64,
    results: Vec<ParityResult>,
    pass: bool,
    verdict: String,
}

/// Run `vlm-eval bench parity`; exit 1 when a threshold is missed.
pub fn cmd_bench_parity(a: BenchParityArgs) -> Result<i32, CliError> {
    check_frame(a.frame)?;
    if a.positions == 0 {
        return Err(CliError::usage("--positions must be at least 1"));
    }
    let dtypes = match (a.dtype, a.device) {
        (ParityDType::F32, _) => vec![DType::F32],
        (ParityDType::Bf16, _) => vec![DType::Bf16],
        (ParityDType::Both, _) => vec![DType::F32, DType::Bf16],
    };
    let self_check = a.device == Device::Cpu && a.reference.is_none();
    let reference = match &a.reference {
        Some(file) => {
            tracing::info!("reference: transformers, {}", file.display());
            let cfg = ModelConfig::load(&a.model_dir)
                .map_err(|e| local_err("parity", &a.model_dir, e))?;
            parity::reference_from_file(file, cfg.text.vocab_size).map_err(|e| {
                CliError::usage(format!(
                    "bench parity --reference: {e} (give a file written by \
                     scripts/hf_baseline.py --reference, or a fixture's reference.safetensors)"
                ))
            })?
        }
        None => {
            tracing::info!("reference: CPU f32, {} positions", a.positions);
            Engine::load_bare(&a.model_dir, CpuPacked::default())
                .and_then(|e| parity::reference(&e, a.frame, a.positions))
                .map_err(|e| local_err("parity", &a.model_dir, e))?
        }
    };
    let against = match &a.reference {
        Some(f) => format!("transformers reference {}", f.display()),
        None => "CPU f32 reference".to_string(),
    };
    let mut results = Vec::new();
    for dt in dtypes {
        let work = CompareWork {
            dir: &a.model_dir,
            reference: &reference,
            dtype: dt,
        };
        let r = with_backend(a.device, Some(dt), work)
            .map_err(|e| local_err("parity", &a.model_dir, e))?;
        results.push(r);
    }

    let prompt_desc = if a.reference.is_some() {
        format!("{} images", reference.prompt.images.len())
    } else {
        format!("{} px frame + {} text ids", a.frame, a.positions)
    };
    println!(
        "{} on {} vs {against}: {} prompt positions ({prompt_desc}){}",
        a.model_dir.display(),
        a.device.name(),
        reference.prompt.ids.len(),
        if self_check {
            "\nnote: --device cpu compares the CPU reference with itself (a plumbing check, not a backend test)"
        } else {
            ""
        }
    );
    println!(
        "{:>6} {:>8} {:>12} {:>8} {:>8}",
        "dtype", "backend", "max |Δ|", "top-1", "greedy"
    );
    for r in &results {
        println!(
            "{:>6} {:>8} {:>12.3e} {:>8.4} {:>8}",
            r.dtype,
            r.backend,
            r.max_abs,
            r.top1_agreement,
            if r.greedy_identical { "same" } else { "differ" }
        );
        if !r.greedy_identical {
            println!(
                "       greedy: reference {:?}, {} {:?}",
                r.greedy_reference, r.dtype, r.greedy
            );
        }
    }
    let mut failures = Vec::new();
    for r in &results {
        if r.dtype == "f32" && (r.max_abs.is_nan() || r.max_abs > a.max_abs) {
            failures.push(format!("f32 max |Δ| {:.3e} > {:e}", r.max_abs, a.max_abs));
        }
        // Against transformers every precision must agree on top-1; against the CPU backend
        // f32 is held to --max-abs instead.
        if (r.dtype == "bf16" || a.reference.is_some()) && r.top1_agreement < a.min_top1 {
            failures.push(format!(
                "{} top-1 {:.4} < {}",
                r.dtype, r.top1_agreement, a.min_top1
            ));
        }
    }
    let pass = failures.is_empty();
    let verdict = if pass {
        format!(
            "PASS: f32 max |Δ| ≤ {:e} and bf16 top-1 ≥ {} where compared",
            a.max_abs, a.min_top1
        )
    } else {
        format!("FAIL: {}", failures.join("; "))
    };
    println!("{verdict}");
    if let Some(path) = &a.json {
        let report = ParityReport {
            model_dir: a.model_dir.display().to_string(),
            device: a.device.name().into(),
            self_check,
            reference: against.clone(),
            frame_px: a.frame,
            prompt_tokens: reference.prompt.ids.len(),
            max_abs_limit: a.max_abs,
            min_top1: a.min_top1,
            results,
            pass,
            verdict,
        };
        write_json(path, &report)?;
    }
    Ok(if pass { 0 } else { 1 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_lists_parse_or_fail_with_usage() {
        assert_eq!(parse_batches("1,16").unwrap(), vec![1, 16]);
        assert_eq!(parse_batches(" 4 ").unwrap(), vec![4]);
        for bad in ["", "1,,2", "0", "1,x", "-1", "5000"] {
            let e = parse_batches(bad).unwrap_err();
            assert_eq!(e.code, 2, "{bad}");
            assert!(e.message.contains("--batch"), "{}", e.message);
        }
    }
}
