//! The decode matrix-vector product (`y[r, j] = x[r] · w[j]` for a few rows r) with fused
//! multiply-adds, register-blocked over activation rows *and* weight rows: several rows × a
//! few weight rows share each vector load, so a batch-8 step is bound by reading the weights
//! from memory rather than by reloading the activations for every weight row. Compiled twice
//! from one body ([`kernel!`]): 16 lanes with AVX-512F (32 registers: up to 8 rows × 3 weight
//! rows) and 8 lanes with AVX2 + FMA (16 registers: up to 8 rows × 1, fewer rows × up to 4).
//!
//! Each value `x[r] · w[j]` is computed the same way whatever the block it falls in (lane sums
//! over the chunks in order, a fixed reduction of the lanes, then the tail), so a sequence's
//! logits do not depend on the batch it is decoded in, nor on the thread count.

use super::layout::{pack_rows, w_at, Weights};
use std::arch::x86_64::*;

/// The vector extension a kernel of this module uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isa {
    /// 16 lanes, AVX-512F.
    Avx512,
    /// 8 lanes, AVX2 with FMA.
    Avx2Fma,
}

/// The widest kernel this CPU runs, if any (checked once).
pub fn isa() -> Option<Isa> {
    use std::sync::OnceLock;
    static ISA: OnceLock<Option<Isa>> = OnceLock::new();
    *ISA.get_or_init(|| {
        if super::simd::avx512() {
            Some(Isa::Avx512)
        } else if super::simd::avx2() && std::arch::is_x86_feature_detected!("fma") {
            Some(Isa::Avx2Fma)
        } else {
            None
        }
    })
}

/// `emit(j, r, x[r] · w[j])` for the columns `js` and every row of `x[rows, k]`.
///
/// # Safety
/// The CPU must have `isa`'s extension (see [`isa`]); `x` must hold `rows·k` values and `w`
/// at least `js.end·k`.
pub unsafe fn gemv_cols(
    isa: Isa,
    x: &[f32],
    rows: usize,
    k: usize,
    w: Weights<'_>,
    js: std::ops::Range<usize>,
    emit: impl FnMut(usize, usize, f32),
) {
    // SAFETY: forwarded from the caller.
    unsafe {
        match isa {
            Isa::Avx512 => z16::gemv_cols(x, rows, k, w, js, emit),
            Isa::Avx2Fma => y8::gemv_cols(x, rows, k, w, js, emit),
        }
    }
}

/// Asks for the cache line holding weight `i` into L2. At many multiply-adds per chunk the
/// out-of-order window alone keeps too few loads in flight (batch-8 decode of Qwen3.5-0.8B
/// with AVX-512: about 25 → 30 tok/s on a 2-core VM).
#[inline(always)]
fn prefetch(w: Weights<'_>, i: usize) {
    let p = match w {
        Weights::F32(w) => w.as_ptr().wrapping_add(i) as *const i8,
        Weights::Bf16(w) => w.as_ptr().wrapping_add(i) as *const i8,
    };
    // SAFETY: SSE is baseline on x86-64, and a prefetch never faults, whatever the address
    // (past the end of w for the last block).
    unsafe { _mm_prefetch::<_MM_HINT_T1>(p) };
}

/// One kernel per vector width. `$blocks` maps a group's row count (1..=8) to the weight rows
/// per block, so that rows × weight rows accumulators, the weight vectors and one activation
/// vector fit in the registers.
macro_rules! kernel {
    (
        mod $m:ident, $feat:literal, lanes $l:literal, $v:ty,
        zero $zero:expr, load $load:path, fmadd $fmadd:path, sum $sum:path,
        load_w($wv:ident, $wp:ident, $bp:ident) $load_w:block,
        blocks [$($r:literal => $j:literal),*]
    ) => {
        mod $m {
            use super::*;

            #[doc = concat!("`", $l, "` weights of row `j` from value `i`, as f32.")]
            #[inline]
            #[target_feature(enable = $feat)]
            unsafe fn load_w($wv: Weights<'_>, k: usize, j: usize, i: usize) -> $v {
                let at = j * k + i;
                // SAFETY: the caller bounds j·k + i + lanes by w's length.
                unsafe {
                    match $wv {
                        Weights::F32($wp) => $load($wp.as_ptr().add(at)),
                        Weights::Bf16($bp) => {
                            let $bp = $bp.as_ptr().add(at);
                            $load_w
                        }
                    }
                }
            }

            /// `out[jj][r] = x[r] · w[j + jj]` for `jj < J`, `r < R`.
            #[target_feature(enable = $feat)]
            #[allow(clippy::needless_range_loop)] // the register block reads clearest as indices
            unsafe fn block<const R: usize, const J: usize>(
                packed: &[f32],
                x: &[f32],
                k: usize,
                w: Weights<'_>,
                j: usize,
            ) -> [[f32; R]; J] {
                let chunks = k / $l;
                debug_assert!(packed.len() >= chunks * R * $l && x.len() >= R * k);
                let mut acc = [[$zero; R]; J];
                let xp = packed.as_ptr();
                for c in 0..chunks {
                    // SAFETY: (j + J)·k ≤ w.len() and c·lanes + lanes ≤ k (caller); packed
                    // holds chunks·R·lanes values.
                    unsafe {
                        let mut wv = [$zero; J];
                        for (jj, v) in wv.iter_mut().enumerate() {
                            *v = load_w(w, k, j + jj, c * $l);
                            prefetch(w, (j + 2 * J + jj) * k + c * $l);
                        }
                        for r in 0..R {
                            let xv = $load(xp.add((c * R + r) * $l));
                            for jj in 0..J {
                                acc[jj][r] = $fmadd(xv, wv[jj], acc[jj][r]);
                            }
                        }
                    }
                }
                std::array::from_fn(|jj| {
                    std::array::from_fn(|r| {
                        let tail: f32 = (chunks * $l..k)
                            .map(|i| x[r * k + i] * w_at(w, k, j + jj, i))
                            .sum();
                        $sum(acc[jj][r]) + tail
                    })
                })
            }

            /// [`super::gemv_cols`] for this width.
            ///
            /// # Safety
            /// As [`super::gemv_cols`].
            #[allow(clippy::int_plus_one)] // `j + J <= end` reads as "a whole block fits", J = 1 too
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
                    ($rr:literal, $jj:literal, $g:expr) => {{
                        let xg = &x[$g * k..$g * k + $rr * k];
                        pack_rows::<$rr, $l>(xg, k, &mut packed);
                        let mut j = js.start;
                        while j + $jj <= js.end {
                            // SAFETY: forwarded from the caller; packed holds $rr rows'
                            // whole chunks.
                            let d = unsafe { block::<$rr, $jj>(&packed, xg, k, w, j) };
                            for (jj, row) in d.iter().enumerate() {
                                for (r, &v) in row.iter().enumerate() {
                                    emit(j + jj, $g + r, v);
                                }
                            }
                            j += $jj;
                        }
                        while j < js.end {
                            // SAFETY: as above.
                            let d = unsafe { block::<$rr, 1>(&packed, xg, k, w, j) };
                            for (r, &v) in d[0].iter().enumerate() {
                                emit(j, $g + r, v);
                            }
                            j += 1;
                        }
                    }};
                }
                // Rows in groups of up to 8.
                for g in (0..rows).step_by(8) {
                    match (rows - g).min(8) {
                        $($r => run!($r, $j, g),)*
                        _ => unreachable!("groups hold 1 to 8 rows"),
                    }
                }
            }
        }
    };
}

/// Sum of the 8 lanes in a fixed order.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn sum8(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps::<1>(s, s)))
}

kernel! {
    mod z16, "avx512f", lanes 16, __m512,
    zero _mm512_setzero_ps(), load _mm512_loadu_ps, fmadd _mm512_fmadd_ps,
    sum _mm512_reduce_add_ps,
    load_w(w, f, b) {
        let h = _mm256_loadu_si256(b as *const __m256i);
        _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16))
    },
    blocks [1 => 4, 2 => 4, 3 => 4, 4 => 4, 5 => 4, 6 => 4, 7 => 3, 8 => 3]
}

kernel! {
    mod y8, "avx2,fma", lanes 8, __m256,
    zero _mm256_setzero_ps(), load _mm256_loadu_ps, fmadd _mm256_fmadd_ps, sum sum8,
    load_w(w, f, b) {
        let h = _mm_loadu_si128(b as *const __m128i);
        _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16))
    },
    blocks [1 => 4, 2 => 4, 3 => 3, 4 => 2, 5 => 2, 6 => 2, 7 => 1, 8 => 1]
}
