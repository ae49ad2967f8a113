//! The decode matrix-vector product (`y[r, j] = x[r] · w[j]` for a few rows r) with AVX-512
//! and fused multiply-adds, register-blocked over activation rows *and* weight rows: up to 8
//! rows × 3 weight rows share each 16-value load, so a batch-8 step is bound by reading the
//! weights from memory rather than by reloading the activations for every weight row.
//!
//! Each value `x[r] · w[j]` is computed the same way whatever the block it falls in (16 lane
//! sums over the chunks in order, a fixed reduction of the lanes, then the tail), so a
//! sequence's logits do not depend on the batch it is decoded in, nor on the thread count.

use super::cpu_kernels::{w_at, Weights};
use std::arch::x86_64::*;

/// Whether this CPU runs [`gemv_cols`].
pub fn available() -> bool {
    super::simd::avx512()
}

/// `emit(j, r, x[r] · w[j])` for the columns `js` and every row of `x[rows, k]`.
///
/// # Safety
/// The CPU must have AVX-512F ([`available`]); `x` must hold `rows·k` values and `w` at least
/// `js.end·k`.
pub unsafe fn gemv_cols(
    x: &[f32],
    rows: usize,
    k: usize,
    w: Weights<'_>,
    js: std::ops::Range<usize>,
    mut emit: impl FnMut(usize, usize, f32),
) {
    let mut packed = Vec::new();
    macro_rules! run {
        ($r:literal, $j:literal, $g:expr) => {{
            let xg = &x[$g * k..$g * k + $r * k];
            pack::<$r>(xg, k, &mut packed);
            let mut j = js.start;
            while j + $j <= js.end {
                // SAFETY: forwarded from the caller; packed holds $r rows' whole chunks.
                let d = unsafe { block::<$r, $j>(&packed, xg, k, w, j) };
                for (jj, row) in d.iter().enumerate() {
                    for (r, &v) in row.iter().enumerate() {
                        emit(j + jj, $g + r, v);
                    }
                }
                j += $j;
            }
            while j < js.end {
                // SAFETY: as above.
                let d = unsafe { block::<$r, 1>(&packed, xg, k, w, j) };
                for (r, &v) in d[0].iter().enumerate() {
                    emit(j, $g + r, v);
                }
                j += 1;
            }
        }};
    }
    // Rows in groups of up to 8; rows × weight rows ≤ 24 accumulators of the 32 registers.
    for g in (0..rows).step_by(8) {
        match rows - g {
            1 => run!(1, 4, g),
            2 => run!(2, 4, g),
            3 => run!(3, 4, g),
            4 => run!(4, 4, g),
            5 => run!(5, 4, g),
            6 => run!(6, 4, g),
            7 => run!(7, 3, g),
            _ => run!(8, 3, g),
        }
    }
}

/// The whole 16-value chunks of `R` rows of `x[_, k]`, interleaved (`[k/16][R][16]`), so one
/// chunk's rows are contiguous.
fn pack<const R: usize>(x: &[f32], k: usize, packed: &mut Vec<f32>) {
    packed.clear();
    for c in 0..k / 16 {
        for r in 0..R {
            packed.extend_from_slice(&x[r * k + c * 16..r * k + c * 16 + 16]);
        }
    }
}

/// 16 weights of row `j` from value `i`, as f32.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn load_w(w: Weights<'_>, k: usize, j: usize, i: usize) -> __m512 {
    // SAFETY: the caller bounds j·k + i + 16 by w's length.
    unsafe {
        match w {
            Weights::F32(w) => _mm512_loadu_ps(w.as_ptr().add(j * k + i)),
            Weights::Bf16(w) => {
                let h = _mm256_loadu_si256(w.as_ptr().add(j * k + i) as *const __m256i);
                _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16))
            }
        }
    }
}

/// Asks for the cache line of weight `i` (the same place two blocks of rows ahead) into L2: at
/// 24 multiply-adds per chunk the out-of-order window alone keeps too few loads in flight
/// (batch-8 decode of Qwen3.5-0.8B: about 25 → 30 tok/s on the 2-core VM).
#[inline]
#[target_feature(enable = "avx512f")]
fn prefetch(w: Weights<'_>, i: usize) {
    let p = match w {
        Weights::F32(w) => w.as_ptr().wrapping_add(i) as *const i8,
        Weights::Bf16(w) => w.as_ptr().wrapping_add(i) as *const i8,
    };
    // A prefetch never faults, whatever the address (past the end of w for the last block).
    _mm_prefetch::<_MM_HINT_T1>(p);
}

/// `out[jj][r] = x[r] · w[j + jj]` for `jj < J`, `r < R`.
#[target_feature(enable = "avx512f")]
#[allow(clippy::needless_range_loop)] // the register block reads clearest as indices
unsafe fn block<const R: usize, const J: usize>(
    packed: &[f32],
    x: &[f32],
    k: usize,
    w: Weights<'_>,
    j: usize,
) -> [[f32; R]; J] {
    let chunks = k / 16;
    debug_assert!(packed.len() >= chunks * R * 16 && x.len() >= R * k);
    let mut acc = [[_mm512_setzero_ps(); R]; J];
    let xp = packed.as_ptr();
    for c in 0..chunks {
        // SAFETY: (j + J)·k ≤ w.len() and c·16 + 16 ≤ k (caller); packed holds chunks·R·16.
        unsafe {
            let mut wv = [_mm512_setzero_ps(); J];
            for (jj, v) in wv.iter_mut().enumerate() {
                *v = load_w(w, k, j + jj, c * 16);
                prefetch(w, (j + 2 * J + jj) * k + c * 16);
            }
            for r in 0..R {
                let xv = _mm512_loadu_ps(xp.add((c * R + r) * 16));
                for jj in 0..J {
                    acc[jj][r] = _mm512_fmadd_ps(xv, wv[jj], acc[jj][r]);
                }
            }
        }
    }
    std::array::from_fn(|jj| {
        std::array::from_fn(|r| {
            let tail: f32 = (chunks * 16..k)
                .map(|i| x[r * k + i] * w_at(w, k, j + jj, i))
                .sum();
            _mm512_reduce_add_ps(acc[jj][r]) + tail
        })
    })
}
