//! Backend parity: the same teacher-forced prompt through the CPU f32 reference and another
//! backend; maximum logit difference, top-1 agreement per position and greedy-token identity.

use std::path::Path;

use serde::Serialize;

use super::backend::Backend;
use super::bench::{frame_input, greedy_params};
use super::engine::{Engine, Prompt};
use super::preprocess::ImageInput;
use super::sampling::{argmax, Rng};
use super::weights::Weights;
use super::LocalError;

/// Greedy tokens compared per backend.
pub const GREEDY_TOKENS: usize = 8;

/// What the reference engine produced for the parity prompt.
#[derive(Clone, Debug)]
pub struct Reference {
    /// The prompt (frame tokens then teacher-forced text ids).
    pub prompt: Prompt,
    /// Prefill logits `[positions, vocab]`.
    pub logits: Vec<f32>,
    /// Embedding rows per logit row.
    pub vocab: usize,
    /// Ids that may be produced (argmax is taken over these).
    pub vocab_len: usize,
    /// Greedy tokens after the prompt.
    pub greedy: Vec<u32>,
}

/// One backend/precision against the reference.
#[derive(Clone, Debug, Serialize)]
pub struct ParityResult {
    /// `f32` or `bf16`.
    pub dtype: String,
    /// Backend name.
    pub backend: String,
    /// Prompt positions compared.
    pub positions: usize,
    /// Largest |Δ| over every logit of every position.
    pub max_abs: f64,
    /// Fraction of positions whose argmax (over the real vocabulary) agrees.
    pub top1_agreement: f64,
    /// Reference greedy tokens.
    pub greedy_reference: Vec<u32>,
    /// This backend's greedy tokens.
    pub greedy: Vec<u32>,
    /// Whether the greedy tokens are identical.
    pub greedy_identical: bool,
}

/// `n` deterministic text ids below `vocab_len`, never the image token.
pub fn teacher_ids(n: usize, vocab_len: usize, image_token_id: u32) -> Vec<u32> {
    let mut rng = Rng::new(0x5eed_0f7a_11aa);
    let mut out = Vec::with_capacity(n);
    while out.len() < n && vocab_len > 1 {
        let id = (rng.next_u64() % vocab_len as u64) as u32;
        if id != image_token_id {
            out.push(id);
        }
    }
    out
}

/// The parity prompt for an engine: the synthetic frame's image tokens, then `positions`
/// teacher-forced text ids.
pub fn parity_prompt<B: Backend>(
    engine: &Engine<B>,
    frame: usize,
    positions: usize,
) -> Result<Prompt, LocalError> {
    let image = frame_input(engine, frame)?;
    let n_img = image.merged_tokens(engine.cfg.vision.spatial_merge_size);
    let mut ids = vec![engine.cfg.image_token_id; n_img];
    ids.extend(teacher_ids(
        positions,
        engine.vocab_len(),
        engine.cfg.image_token_id,
    ));
    Ok(Prompt {
        ids,
        images: vec![image],
    })
}

/// Logits and greedy tokens of the reference engine.
pub fn reference<B: Backend>(
    engine: &Engine<B>,
    frame: usize,
    positions: usize,
) -> Result<Reference, LocalError> {
    let prompt = parity_prompt(engine, frame, positions)?;
    let (logits, greedy) = run(engine, &prompt, GREEDY_TOKENS)?;
    Ok(Reference {
        prompt,
        logits,
        vocab: engine.cfg.text.vocab_size,
        vocab_len: engine.vocab_len(),
        greedy,
    })
}

/// transformers' own result for its own inputs, as written by `scripts/hf_baseline.py
/// --reference` (and as in the fixtures' `reference*.safetensors`): `input_ids` `[1, S]`,
/// `pixel_values` `[patches, C·T·P·P]`, `image_grid_thw` `[images, 3]`, `logits` `[1, S, V]`
/// (f32) and `greedy_ids` `[1, S + k]` (the prompt, then k greedy tokens). Argmax is taken over
/// all `V` columns, as transformers does.
pub fn reference_from_file(path: &Path, vocab: usize) -> Result<Reference, LocalError> {
    let w = Weights::open_files(&[path.to_path_buf()])?;
    let field = |name: &str, msg: String| LocalError::Tensor {
        file: path.to_path_buf(),
        name: name.into(),
        msg,
    };
    let ids: Vec<u32> = w
        .i64_any("input_ids")?
        .1
        .iter()
        .map(|&x| u32::try_from(x).map_err(|_| field("input_ids", format!("has id {x}"))))
        .collect::<Result<_, _>>()?;
    let (pshape, pixels) = w.f32_any("pixel_values")?;
    let (_, grids) = w.i64_any("image_grid_thw")?;
    let (_, logits) = w.f32_any("logits")?;
    let (_, greedy_all) = w.i64_any("greedy_ids")?;
    let width = pshape.last().copied().unwrap_or(0);
    if pshape.len() != 2 || width == 0 {
        return Err(field(
            "pixel_values",
            format!("has shape {pshape:?}, expected [patches, dim]"),
        ));
    }
    let mut images = Vec::new();
    let mut at = 0;
    for g in grids.chunks(3) {
        let grid = match *g {
            [t, h, w] if t > 0 && h > 0 && w > 0 => [t as usize, h as usize, w as usize],
            _ => return Err(field("image_grid_thw", format!("has row {g:?}"))),
        };
        let n = grid[0] * grid[1] * grid[2] * width;
        let px = pixels.get(at..at + n).ok_or_else(|| {
            field(
                "pixel_values",
                "has fewer patches than the grids need".into(),
            )
        })?;
        images.push(ImageInput {
            pixels: px.to_vec(),
            grid,
        });
        at += n;
    }
    if logits.len() != ids.len() * vocab {
        return Err(field(
            "logits",
            format!(
                "has {} values, expected {} positions × vocab_size {vocab}",
                logits.len(),
                ids.len()
            ),
        ));
    }
    if greedy_all.len() < ids.len() {
        return Err(field("greedy_ids", "is shorter than input_ids".into()));
    }
    let greedy = greedy_all[ids.len()..].iter().map(|&x| x as u32).collect();
    Ok(Reference {
        prompt: Prompt { ids, images },
        logits,
        vocab,
        vocab_len: vocab,
        greedy,
    })
}

/// Prefill logits of every position and `n` greedy tokens (batched generation, no stop ids).
fn run<B: Backend>(
    engine: &Engine<B>,
    prompt: &Prompt,
    n: usize,
) -> Result<(Vec<f32>, Vec<u32>), LocalError> {
    let logits = engine.prefill_logits(prompt)?;
    let mut gens = engine.generate_batch(vec![(prompt.clone(), greedy_params(n.max(1)))])?;
    let greedy = gens.pop().map(|g| g.tokens).unwrap_or_default();
    Ok((logits, greedy))
}

/// Run the reference prompt on `engine` and compare.
pub fn compare<B: Backend>(
    engine: &Engine<B>,
    reference: &Reference,
    dtype: &str,
) -> Result<ParityResult, LocalError> {
    if engine.cfg.text.vocab_size != reference.vocab {
        return Err(LocalError::Internal(format!(
            "the engines disagree on vocab_size ({} vs {})",
            engine.cfg.text.vocab_size, reference.vocab
        )));
    }
    let (logits, mut greedy) = run(engine, &reference.prompt, reference.greedy.len())?;
    greedy.truncate(reference.greedy.len());
    let (max_abs, top1_agreement) = compare_logits(
        &reference.logits,
        &logits,
        reference.vocab,
        reference.vocab_len,
    )?;
    Ok(ParityResult {
        dtype: dtype.to_string(),
        backend: engine.be.name().to_string(),
        positions: reference.logits.len() / reference.vocab.max(1),
        max_abs,
        top1_agreement,
        greedy_identical: greedy == reference.greedy,
        greedy_reference: reference.greedy.clone(),
        greedy,
    })
}

/// Max |Δ| over all values and the fraction of rows (width `vocab`) whose argmax over the
/// first `vocab_len` columns agrees. A NaN anywhere makes the difference infinite.
pub fn compare_logits(
    reference: &[f32],
    other: &[f32],
    vocab: usize,
    vocab_len: usize,
) -> Result<(f64, f64), LocalError> {
    if reference.len() != other.len() || vocab == 0 || !reference.len().is_multiple_of(vocab) {
        return Err(LocalError::Internal(format!(
            "logit shapes differ: {} vs {} values (vocab {vocab})",
            reference.len(),
            other.len()
        )));
    }
    let mut max_abs = 0f64;
    for (a, b) in reference.iter().zip(other) {
        let d = (*a as f64 - *b as f64).abs();
        max_abs = if d.is_nan() {
            f64::INFINITY
        } else {
            max_abs.max(d)
        };
    }
    let rows = reference.len() / vocab;
    let k = vocab_len.clamp(1, vocab);
    let agree = reference
        .chunks_exact(vocab)
        .zip(other.chunks_exact(vocab))
        .filter(|(a, b)| argmax(&a[..k]) == argmax(&b[..k]))
        .count();
    let top1 = if rows == 0 {
        1.0
    } else {
        agree as f64 / rows as f64
    };
    Ok((max_abs, top1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn teacher_ids_skip_the_image_token_and_stay_in_vocab() {
        let ids = teacher_ids(500, 7, 5);
        assert_eq!(ids.len(), 500);
        assert!(ids.iter().all(|&i| i < 7 && i != 5));
        assert_eq!(ids, teacher_ids(500, 7, 5));
        assert!(teacher_ids(3, 1, 0).is_empty());
    }

    #[test]
    fn logits_compare_by_hand() {
        // Two rows of width 3, only the first 2 columns are real vocabulary.
        let a = [1.0, 2.0, 9.0, 0.5, 0.0, 0.0];
        let b = [1.0, 1.5, 0.0, 0.0, 0.25, 0.0];
        let (m, t) = compare_logits(&a, &b, 3, 2).unwrap();
        assert_eq!(m, 9.0);
        // Row 0: argmax over [1,2] and [1,1.5] is 1 for both; row 1: 0 vs 1.
        assert_eq!(t, 0.5);
        let (_, t) = compare_logits(&a, &b, 3, 3).unwrap();
        assert_eq!(t, 0.0);
        let (m, _) = compare_logits(&[f32::NAN], &[0.0], 1, 1).unwrap();
        assert!(m.is_infinite());
        assert!(compare_logits(&a, &b[..3], 3, 2).is_err());
    }
}
