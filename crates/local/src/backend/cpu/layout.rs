//! How the CPU kernels hold their values, shared by all of them (a leaf: it imports nothing
//! of the backend): a linear layer's weights as stored (f32 or bf16 bit patterns), the exact
//! bf16 to f32 widening, one weight read, and rows of x packed into interleaved chunks.

/// Weights of a linear layer as stored by the CPU backend.
#[derive(Clone, Copy)]
pub enum Weights<'a> {
    /// f32 values.
    F32(&'a [f32]),
    /// bfloat16 bit patterns.
    Bf16(&'a [u16]),
}

/// bf16 bits to f32 (exact).
#[inline]
pub fn bf16_to_f32(b: u16) -> f32 {
    f32::from_bits((b as u32) << 16)
}

/// The whole `L`-value chunks of the first `R` rows of `x[_, k]`, interleaved (`[k/L][R][L]`):
/// the loads that one weight chunk meets are contiguous (rows k·4 bytes apart would share
/// cache sets).
pub fn pack_rows<const R: usize, const L: usize>(x: &[f32], k: usize, packed: &mut Vec<f32>) {
    packed.clear();
    for c in 0..k / L {
        for r in 0..R {
            packed.extend_from_slice(&x[r * k + c * L..r * k + c * L + L]);
        }
    }
}

/// Weight `i` of row `j`.
#[inline(always)]
pub fn w_at(w: Weights<'_>, k: usize, j: usize, i: usize) -> f32 {
    match w {
        Weights::F32(w) => w[j * k + i],
        Weights::Bf16(w) => bf16_to_f32(w[j * k + i]),
    }
}
