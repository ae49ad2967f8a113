//! Local-model benchmark over any backend: time to first token for one synthetic frame plus
//! ~50 text tokens, batched greedy decode throughput, and achieved weight bandwidth against a
//! roofline. The prompt mirrors the transformers baseline (scripts/hf_baseline.py): 20 text
//! ids, the frame's image tokens, 30 text ids.

use std::time::{Duration, Instant};

use serde::Serialize;

use super::backend::Backend;
use super::backend::DType;
use super::device::Device;
use super::engine::{Engine, GenParams, Prompt, Sequence};
use super::preprocess::{preprocess_rgb, ImageInput};
use super::sampling::SamplingParams;
use super::LocalError;

/// Text ids before the image in the benchmark prompt.
pub const IDS_BEFORE_IMAGE: usize = 20;
/// Text ids after the image in the benchmark prompt.
pub const IDS_AFTER_IMAGE: usize = 30;

/// What to measure.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    /// Device the engine runs on (for the report).
    pub device: Device,
    /// Weight precision in use (for the report).
    pub dtype: DType,
    /// Side of the square synthetic frame in pixels.
    pub frame: usize,
    /// Greedy decode steps per batch size.
    pub new_tokens: usize,
    /// Decode batch sizes.
    pub batches: Vec<usize>,
    /// Timed TTFT repeats.
    pub repeats: usize,
    /// Untimed runs before timing (TTFT, and each decode batch size).
    pub warmup: usize,
    /// Memory bandwidth roofline in GB/s, if known.
    pub peak_gbs: Option<f64>,
}

/// Time to first token over the repeats.
#[derive(Clone, Debug, Serialize)]
pub struct Ttft {
    /// Median, milliseconds.
    pub median_ms: f64,
    /// Fastest, milliseconds.
    pub min_ms: f64,
    /// Timed repeats.
    pub repeats: usize,
}

/// Decode throughput at one batch size.
#[derive(Clone, Debug, Serialize)]
pub struct DecodeResult {
    /// Sequences decoded together.
    pub batch: usize,
    /// Greedy steps timed (each produces one token per sequence).
    pub steps: usize,
    /// Wall time of the timed steps, seconds.
    pub seconds: f64,
    /// Tokens per second of one sequence (= steps per second).
    pub tokens_per_s_per_seq: f64,
    /// Tokens per second over the batch.
    pub tokens_per_s_total: f64,
    /// Decoder weight bytes read per second (weight bytes per step × steps/s), GB/s.
    pub gb_per_s: f64,
    /// `gb_per_s` as a percentage of the peak, when a peak is known.
    pub roofline_pct: Option<f64>,
}

/// Everything `vlm-eval bench local` measures.
#[derive(Clone, Debug, Serialize)]
pub struct LocalBenchReport {
    /// `cpu` or `cuda`.
    pub device: String,
    /// `f32` or `bf16`.
    pub dtype: String,
    /// Checkpoint folder.
    pub model_dir: String,
    /// Backend name reported by the backend.
    pub backend: String,
    /// The kernels the backend runs on this machine (`Backend::kernels`).
    pub kernels: String,
    /// Whether the folder had no tokenizer.json (token ids only).
    pub ids_only: bool,
    /// Decoder weight bytes read per decode step.
    pub weight_bytes_per_token: u64,
    /// Side of the synthetic frame, pixels.
    pub frame_px: usize,
    /// Patch grid `(t, h, w)` of the frame after smart_resize.
    pub image_grid: [usize; 3],
    /// Prompt length in tokens (text and image).
    pub prompt_tokens: usize,
    /// Image tokens in the prompt (after the 2×2 merge).
    pub image_tokens: usize,
    /// Untimed runs before timing.
    pub warmup: usize,
    /// Time to first token (vision, decoder prefill and first token) of the one-frame prompt.
    pub ttft: Ttft,
    /// Decode throughput per batch size.
    pub decode: Vec<DecodeResult>,
    /// Roofline bandwidth used for percentages, GB/s.
    pub peak_gbs: Option<f64>,
    /// Batch-1 tokens/s the roofline allows (= peak ÷ bytes per token).
    pub roofline_tokens_per_s_batch1: Option<f64>,
}

/// A deterministic RGB frame `side × side` (smooth gradients plus a fine pattern, so resizing
/// and normalisation see varied values). Models know nothing of where frames come from.
pub fn synthetic_frame(side: usize) -> Vec<u8> {
    let mut rgb = Vec::with_capacity(side * side * 3);
    for y in 0..side {
        for x in 0..side {
            let n = side.max(1);
            rgb.push((x * 255 / n) as u8);
            rgb.push((y * 255 / n) as u8);
            rgb.push(((x * 7 + y * 13) % 256) as u8);
        }
    }
    rgb
}

/// The synthetic frame through the engine's real preprocessing.
pub fn frame_input<B: Backend>(engine: &Engine<B>, side: usize) -> Result<ImageInput, LocalError> {
    if side == 0 {
        return Err(LocalError::Image(
            "the frame side must be at least 1 pixel".into(),
        ));
    }
    preprocess_rgb(&synthetic_frame(side), side, side, &engine.pre)
}

/// A text id usable as filler: `want` unless it is the image token or outside the vocabulary,
/// else the smallest id that is neither.
pub fn filler_id<B: Backend>(engine: &Engine<B>, want: u32) -> u32 {
    let (img, v) = (engine.cfg.image_token_id, engine.vocab_len() as u32);
    if want != img && want < v {
        return want;
    }
    (0..v).find(|&i| i != img).unwrap_or(0)
}

/// The benchmark prompt: 20 × id 1, the frame's image tokens, 30 × id 2 (ids as in the
/// transformers baseline, replaced by [`filler_id`] when they collide with the image token).
pub fn bench_prompt<B: Backend>(engine: &Engine<B>, image: ImageInput) -> Prompt {
    let n_img = image.merged_tokens(engine.cfg.vision.spatial_merge_size);
    let mut ids = vec![filler_id(engine, 1); IDS_BEFORE_IMAGE];
    ids.extend(std::iter::repeat_n(engine.cfg.image_token_id, n_img));
    ids.extend(std::iter::repeat_n(filler_id(engine, 2), IDS_AFTER_IMAGE));
    Prompt {
        ids,
        images: vec![image],
    }
}

/// Greedy, no stop ids (random weights must not stop early), `max_new_tokens` tokens.
pub fn greedy_params(max_new_tokens: usize) -> GenParams {
    GenParams {
        max_new_tokens,
        sampling: SamplingParams::greedy(),
        stop_ids: Vec::new(),
    }
}

fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    let n = xs.len();
    if n == 0 {
        0.0
    } else if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}

/// Accept a prompt and prefill it (vision, decoder prefill, first token); returns the time.
fn one_ttft<B: Backend>(engine: &Engine<B>, prompt: &Prompt) -> Result<Duration, LocalError> {
    let t0 = Instant::now();
    let mut seq = engine.start(prompt.clone(), greedy_params(1))?;
    engine.prefill(&mut [&mut seq])?;
    Ok(t0.elapsed())
}

/// `batch` copies of the prompt prefilled together, then `steps` timed greedy decode steps.
fn decode_run<B: Backend>(
    engine: &Engine<B>,
    prompt: &Prompt,
    batch: usize,
    steps: usize,
) -> Result<Duration, LocalError> {
    // The first token comes from prefill; `steps` more come from decode steps.
    let mut seqs: Vec<Sequence<B>> = (0..batch)
        .map(|_| engine.start(prompt.clone(), greedy_params(steps + 1)))
        .collect::<Result<_, _>>()?;
    let mut refs: Vec<&mut Sequence<B>> = seqs.iter_mut().collect();
    engine.prefill(&mut refs)?;
    let t0 = Instant::now();
    for i in 0..steps {
        if refs.iter().any(|s| s.is_done()) {
            return Err(LocalError::Internal(format!(
                "a sequence finished after {i} of {steps} decode steps"
            )));
        }
        engine.step(&mut refs)?;
    }
    Ok(t0.elapsed())
}

/// Run the benchmark on a loaded engine.
pub fn bench_local<B: Backend>(
    engine: &Engine<B>,
    opts: &BenchOptions,
) -> Result<LocalBenchReport, LocalError> {
    if opts.batches.is_empty() || opts.batches.contains(&0) {
        return Err(LocalError::Internal(
            "decode batch sizes must be at least 1".into(),
        ));
    }
    let image = frame_input(engine, opts.frame)?;
    let grid = image.grid;
    let prompt = bench_prompt(engine, image);
    let image_tokens = prompt
        .ids
        .iter()
        .filter(|&&t| t == engine.cfg.image_token_id)
        .count();
    let bytes = engine.decode_weight_bytes() as f64;

    tracing::info!(
        "TTFT: {} warm-up + {} timed prefills of {} tokens",
        opts.warmup,
        opts.repeats,
        prompt.ids.len()
    );
    for _ in 0..opts.warmup {
        one_ttft(engine, &prompt)?;
    }
    let mut times: Vec<f64> = (0..opts.repeats.max(1))
        .map(|_| one_ttft(engine, &prompt).map(|d| d.as_secs_f64() * 1e3))
        .collect::<Result<_, _>>()?;
    let min_ms = times.iter().copied().fold(f64::INFINITY, f64::min);
    let ttft = Ttft {
        median_ms: median(&mut times),
        min_ms,
        repeats: times.len(),
    };

    let mut decode = Vec::new();
    for &b in &opts.batches {
        tracing::info!("decode: batch {b}, {} greedy steps", opts.new_tokens);
        for _ in 0..opts.warmup {
            decode_run(engine, &prompt, b, opts.new_tokens.min(2))?;
        }
        let secs = decode_run(engine, &prompt, b, opts.new_tokens)?.as_secs_f64();
        let steps = opts.new_tokens;
        let per_seq = if secs > 0.0 { steps as f64 / secs } else { 0.0 };
        let gb_per_s = bytes * per_seq / 1e9;
        decode.push(DecodeResult {
            batch: b,
            steps,
            seconds: secs,
            tokens_per_s_per_seq: per_seq,
            tokens_per_s_total: per_seq * b as f64,
            gb_per_s,
            roofline_pct: opts.peak_gbs.map(|p| 100.0 * gb_per_s / p),
        });
    }

    Ok(LocalBenchReport {
        device: opts.device.name().into(),
        dtype: opts.dtype.name().into(),
        model_dir: engine.dir.display().to_string(),
        backend: engine.be.name().into(),
        kernels: engine.be.kernels(),
        ids_only: !engine.tok.has_text(),
        weight_bytes_per_token: bytes as u64,
        frame_px: opts.frame,
        image_grid: grid,
        prompt_tokens: prompt.ids.len(),
        image_tokens,
        warmup: opts.warmup,
        ttft,
        decode,
        peak_gbs: opts.peak_gbs,
        roofline_tokens_per_s_batch1: opts.peak_gbs.map(|p| p * 1e9 / bytes),
    })
}

impl std::fmt::Display for LocalBenchReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "{} on {} ({}, backend {}: {}){}",
            self.model_dir,
            self.device,
            self.dtype,
            self.backend,
            self.kernels,
            if self.ids_only { ", ids only" } else { "" }
        )?;
        writeln!(
            f,
            "decoder weights read per token: {} bytes ({:.3} GB)",
            self.weight_bytes_per_token,
            self.weight_bytes_per_token as f64 / 1e9
        )?;
        writeln!(
            f,
            "TTFT, {} px frame ({} image tokens) + {} text tokens = {} prompt tokens: median {:.3} ms, min {:.3} ms over {} runs",
            self.frame_px,
            self.image_tokens,
            self.prompt_tokens - self.image_tokens,
            self.prompt_tokens,
            self.ttft.median_ms,
            self.ttft.min_ms,
            self.ttft.repeats
        )?;
        writeln!(
            f,
            "{:>6} {:>6} {:>14} {:>14} {:>10} {:>10}",
            "batch", "steps", "tok/s per seq", "tok/s total", "GB/s", "roofline"
        )?;
        for d in &self.decode {
            let pct = d
                .roofline_pct
                .map_or("-".to_string(), |p| format!("{p:.1}%"));
            writeln!(
                f,
                "{:>6} {:>6} {:>14.1} {:>14.1} {:>10.2} {:>10}",
                d.batch, d.steps, d.tokens_per_s_per_seq, d.tokens_per_s_total, d.gb_per_s, pct
            )?;
        }
        match (self.peak_gbs, self.roofline_tokens_per_s_batch1) {
            (Some(p), Some(t)) => write!(f, "roofline: {p:.0} GB/s peak → {t:.1} tok/s at batch 1"),
            _ => write!(f, "roofline: no peak bandwidth given (--peak-gbs)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
    }

    #[test]
    fn frame_is_deterministic_rgb() {
        let f = synthetic_frame(4);
        assert_eq!(f.len(), 4 * 4 * 3);
        assert_eq!(f, synthetic_frame(4));
        // Pixel (x=3, y=1): 3·255/4, 1·255/4, (21 + 13) % 256.
        let p = (4 + 3) * 3;
        assert_eq!(&f[p..p + 3], &[191, 63, 34]);
    }
}
