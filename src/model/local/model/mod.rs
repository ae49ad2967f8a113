//! Qwen2-VL written once over the [`Backend`](super::backend::Backend) trait.

pub mod text;
pub mod vision;

/// Rotary `cos`/`sin` tables `[rows, hd]` (f32, `emb = [f, f]` convention) from per-row
/// half-width frequency vectors.
pub(crate) fn rope_tables(freqs: &[f32], half: usize) -> (Vec<f32>, Vec<f32>) {
    let rows = freqs.len() / half;
    let (mut cos, mut sin) = (
        Vec::with_capacity(rows * 2 * half),
        Vec::with_capacity(rows * 2 * half),
    );
    for f in freqs.chunks_exact(half) {
        for _ in 0..2 {
            cos.extend(f.iter().map(|x| x.cos()));
            sin.extend(f.iter().map(|x| x.sin()));
        }
    }
    (cos, sin)
}

/// `1 / theta^(2i / dim)` for `i < dim/2`, computed in f32 as transformers does.
pub(crate) fn inv_freq(theta: f64, dim: usize) -> Vec<f32> {
    (0..dim / 2)
        .map(|i| 1.0 / (theta as f32).powf((2 * i) as f32 / dim as f32))
        .collect()
}
