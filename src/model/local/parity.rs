//! Backend parity: the same teacher-forced prompt through the CPU f32 reference and another
//! backend; maximum logit difference, top-1 agreement per position and greedy-token identity.

use serde::Serialize;

use super::backend::Backend;
use super::bench::{frame_input, greedy_params};
use super::engine::{Engine, Prompt};
use super::sampling::{argmax, Rng};
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
    let (logits, greedy) = run(engine, &prompt)?;
    Ok(Reference {
        prompt,
        logits,
        vocab: engine.cfg.text.vocab_size,
        vocab_len: engine.vocab_len(),
        greedy,
    })
}

/// Prefill logits of every position and greedy tokens (batched generation, no stop ids).
fn run<B: Backend>(
    engine: &Engine<B>,
    prompt: &Prompt,
) -> Result<(Vec<f32>, Vec<u32>), LocalError> {
    let logits = engine.prefill_logits(prompt)?;
    let mut gens = engine.generate_batch(vec![(prompt.clone(), greedy_params(GREEDY_TOKENS))])?;
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
    let (logits, greedy) = run(engine, &reference.prompt)?;
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
