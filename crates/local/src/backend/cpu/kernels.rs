//! The CPU backend's heavy kernels: matrix products (the `gemm` crate for prefill, our own
//! threaded matrix-vector product for a few rows, with AVX-512 or AVX2 + FMA in `gemv.rs` where
//! the CPU has them), weights stored as f32 or bf16, and attention split across threads by query rows.
//! Each output value is computed by one thread in a fixed order, so results do not depend on
//! the thread count.

pub use super::layout::Weights;
use super::layout::{bf16_to_f32, pack_rows, w_at};
use super::pool::threads_for;
use crate::backend::AttnShape;

/// Most rows that take [`gemv`] (decode) rather than `gemm` (which packs the weights on every
/// call: at a few rows that doubles the memory traffic of a step that is bound by it).
pub const GEMV_ROWS: usize = 16;

/// Most values of a bf16 weight converted to f32 at once for a prefill product (16 MiB, kept
/// per thread and reused, so the conversion does not page in fresh memory on every call).
const BF16_BLOCK_VALUES: usize = 1 << 22;

thread_local! {
    /// The f32 copy of a bf16 weight block (see [`BF16_BLOCK_VALUES`]).
    static BF16_SCRATCH: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// `x · y` with eight independent partial sums, so the compiler can vectorise it.
#[inline]
pub fn dot(x: &[f32], y: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (xc, yc) = (x.chunks_exact(8), y.chunks_exact(8));
    let tail: f32 = xc
        .remainder()
        .iter()
        .zip(yc.remainder())
        .map(|(a, b)| a * b)
        .sum();
    for (a, b) in xc.zip(yc) {
        for i in 0..8 {
            acc[i] += a[i] * b[i];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// `y[rows, n] += x[rows, k] · w[n, k]ᵀ`.
pub fn matmul_add(x: &[f32], rows: usize, k: usize, w: Weights<'_>, n: usize, y: &mut [f32]) {
    if rows == 0 || n == 0 || k == 0 {
        return;
    }
    if rows <= GEMV_ROWS {
        gemv(x, rows, k, w, n, y);
        return;
    }
    match w {
        Weights::F32(w) => gemm_f32(x, rows, k, w, n, n, y),
        Weights::Bf16(w) => {
            let step = (BF16_BLOCK_VALUES / k.max(1)).clamp(1, n);
            BF16_SCRATCH.with_borrow_mut(|block| {
                if block.len() < step * k {
                    block.resize(step * k, 0.0);
                }
                bf16_blocks(x, rows, k, w, n, step, block, y);
            });
        }
    }
}

/// [`matmul_add`] for bf16 weights: `step` output columns at a time converted into `block`
/// (across threads), then multiplied into y's columns.
#[allow(clippy::too_many_arguments)]
fn bf16_blocks(
    x: &[f32],
    rows: usize,
    k: usize,
    w: &[u16],
    n: usize,
    step: usize,
    block: &mut [f32],
    y: &mut [f32],
) {
    for j0 in (0..n).step_by(step) {
        let cols = step.min(n - j0);
        let (dst, src) = (&mut block[..cols * k], &w[j0 * k..(j0 + cols) * k]);
        let per = (cols * k).div_ceil(threads_for(cols * k * 16));
        let mut parts: Vec<_> = dst.chunks_mut(per).zip(src.chunks(per)).collect();
        super::pool::run_each(&mut parts, |_, (o, i)| {
            o.iter_mut().zip(*i).for_each(|(o, &b)| *o = bf16_to_f32(b));
        });
        gemm_f32(x, rows, k, &block[..cols * k], cols, n, &mut y[j0..]);
    }
}

/// `y[r, j] += x[r, :] · w[j, :]` for `j < n`, where y's rows are `y_stride` apart.
fn gemm_f32(x: &[f32], rows: usize, k: usize, w: &[f32], n: usize, y_stride: usize, y: &mut [f32]) {
    assert!(x.len() >= rows * k && w.len() >= n * k && y.len() >= (rows - 1) * y_stride + n);
    let par = match threads_for(rows * k * n) {
        1 => gemm::Parallelism::None,
        t => gemm::Parallelism::Rayon(t),
    };
    // SAFETY: the assertion above bounds every index gemm reads or writes: dst y[rows, n] with
    // row stride y_stride, lhs x[rows, k] row-major, rhs wᵀ (w[n, k] read column-wise).
    unsafe {
        gemm::gemm(
            rows,
            n,
            k,
            y.as_mut_ptr(),
            1,
            y_stride as isize,
            true,
            x.as_ptr(),
            1,
            k as isize,
            w.as_ptr(),
            k as isize,
            1,
            1.0f32,
            1.0f32,
            false,
            false,
            false,
            par,
        );
    }
}

/// `y[rows, n] += x[rows, k] · w[n, k]ᵀ` for a few rows: each weight row is read once for all
/// rows, output columns split across threads.
fn gemv(x: &[f32], rows: usize, k: usize, w: Weights<'_>, n: usize, y: &mut [f32]) {
    let threads = threads_for(rows * k * n).min(n.div_ceil(256)).max(1);
    let cols = n.div_ceil(threads);
    // Each thread fills a column-major copy of its block of y, scattered back after.
    let mut parts: Vec<Vec<f32>> = vec![Vec::new(); threads];
    {
        let y = &*y;
        super::pool::run_each(&mut parts, |t, part| {
            let (j0, j1) = (t * cols, ((t + 1) * cols).min(n));
            part.resize(rows * (j1.saturating_sub(j0)), 0.0);
            gemv_cols(x, rows, k, w, j0..j1, |j, r, d| {
                part[(j - j0) * rows + r] = y[r * n + j] + d;
            });
        });
    }
    for (t, part) in parts.iter().enumerate() {
        let j0 = t * cols;
        for (i, v) in part.iter().enumerate() {
            let (j, r) = (j0 + i / rows, i % rows);
            y[r * n + j] = *v;
        }
    }
}

/// `emit(j, r, x[r]·w[j])` for the columns `js` and every row: `gemv.rs`'s FMA kernels where
/// the CPU has AVX-512F or AVX2 + FMA, else portable code in a fixed order.
fn gemv_cols(
    x: &[f32],
    rows: usize,
    k: usize,
    w: Weights<'_>,
    js: std::ops::Range<usize>,
    emit: impl FnMut(usize, usize, f32),
) {
    assert!(x.len() >= rows * k);
    match w {
        Weights::F32(w) => assert!(w.len() >= js.end * k),
        Weights::Bf16(w) => assert!(w.len() >= js.end * k),
    }
    #[cfg(target_arch = "x86_64")]
    if let Some(isa) = super::gemv::isa() {
        // SAFETY: the CPU has isa's extension; x and w are bounded by the assertions above.
        unsafe { super::gemv::gemv_cols(isa, x, rows, k, w, js, emit) };
        return;
    }
    gemv_cols_portable(x, rows, k, w, js, emit);
}

/// [`gemv_cols`] without vector extensions (lengths checked by the caller).
fn gemv_cols_portable(
    x: &[f32],
    rows: usize,
    k: usize,
    w: Weights<'_>,
    js: std::ops::Range<usize>,
    mut emit: impl FnMut(usize, usize, f32),
) {
    let mut packed = Vec::new();
    macro_rules! run {
        ($r:literal, $g:expr) => {{
            let xg = &x[$g * k..];
            pack_rows::<$r, 8>(xg, k, &mut packed);
            for j in js.clone() {
                let d: [f32; $r] = dots::<$r>(&packed, xg, k, w, j);
                for (r, v) in d.into_iter().enumerate() {
                    emit(j, $g + r, v);
                }
            }
        }};
    }
    // Rows in groups of up to 8 (accumulators that fit in registers).
    for g in (0..rows).step_by(8) {
        match rows - g {
            1 => run!(1, g),
            2 => run!(2, g),
            3 => run!(3, g),
            4 => run!(4, g),
            5 => run!(5, g),
            6 => run!(6, g),
            7 => run!(7, g),
            _ => run!(8, g),
        }
    }
}

/// `x[r] · w[j]` for the first `R` rows of `x[_, k]` (`packed`: their whole chunks of 8,
/// interleaved): eight lane sums per row (as [`dot`]), the lanes added in order, then the tail.
fn dots<const R: usize>(packed: &[f32], x: &[f32], k: usize, w: Weights<'_>, j: usize) -> [f32; R] {
    let mut acc = [[0f32; 8]; R];
    let chunks = k / 8;
    for c in 0..chunks {
        let wc: [f32; 8] = std::array::from_fn(|i| w_at(w, k, j, c * 8 + i));
        for (r, a) in acc.iter_mut().enumerate() {
            for i in 0..8 {
                a[i] += packed[(c * R + r) * 8 + i] * wc[i];
            }
        }
    }
    std::array::from_fn(|r| {
        let tail: f32 = (chunks * 8..k)
            .map(|i| x[r * k + i] * w_at(w, k, j, i))
            .sum();
        acc[r].iter().sum::<f32>() + tail
    })
}

/// Scaled dot-product attention (see [`crate::backend::Backend::attention`]); query rows are split
/// across threads.
#[allow(clippy::too_many_arguments)]
pub fn attention(
    q: &[f32],
    q_row: usize,
    n_q: usize,
    k: &[f32],
    v: &[f32],
    n_kv: usize,
    s: AttnShape,
    causal: bool,
    out: &mut [f32],
) {
    let qd = s.heads * s.hd;
    if n_q == 0 || qd == 0 {
        return;
    }
    let threads = threads_for(n_q * n_kv * qd).min(n_q).max(1);
    let per = n_q.div_ceil(threads);
    let rows = &mut out[q_row * qd..(q_row + n_q) * qd];
    let mut chunks: Vec<&mut [f32]> = rows.chunks_mut(per * qd).collect();
    super::pool::run_each(&mut chunks, |t, chunk| {
        let mut scores = vec![0f32; n_kv];
        for (ii, o) in chunk.chunks_exact_mut(qd).enumerate() {
            let i = t * per + ii;
            let visible = if causal { n_kv - n_q + i + 1 } else { n_kv };
            let qv = &q[(q_row + i) * qd..(q_row + i + 1) * qd];
            attend_row(qv, k, v, visible, s, &mut scores, o);
        }
    });
}

super::simd::multiversion! {
/// One query row over keys `0 .. visible`, every head.
fn attend_row(
    qv: &[f32],
    k: &[f32],
    v: &[f32],
    visible: usize,
    s: AttnShape,
    scores: &mut [f32],
    o: &mut [f32],
) {
    let kd = s.kv_heads * s.hd;
    let scale = 1.0 / (s.hd as f32).sqrt();
    let group = s.heads / s.kv_heads;
    for h in 0..s.heads {
        let kh = h / group;
        let qh = &qv[h * s.hd..(h + 1) * s.hd];
        let mut max = f32::NEG_INFINITY;
        for (j, sc) in scores.iter_mut().enumerate().take(visible) {
            *sc = dot(qh, &k[j * kd + kh * s.hd..j * kd + (kh + 1) * s.hd]) * scale;
            max = max.max(*sc);
        }
        let mut sum = 0f32;
        for sc in scores.iter_mut().take(visible) {
            *sc = super::simd::exp(*sc - max);
            sum += *sc;
        }
        let oh = &mut o[h * s.hd..(h + 1) * s.hd];
        oh.iter_mut().for_each(|x| *x = 0.0);
        for (j, &p) in scores.iter().enumerate().take(visible) {
            let vv = &v[j * kd + kh * s.hd..j * kd + (kh + 1) * s.hd];
            let p = p / sum;
            oh.iter_mut().zip(vv).for_each(|(a, b)| *a += p * b);
        }
    }
}
}

/// Largest |a[i] − b[i]| (for the backend's unit tests).
#[cfg(test)]
pub(super) fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(a, b)| (a - b).abs())
        .fold(0., f32::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(x: &[f32], rows: usize, k: usize, w: &[f32], n: usize) -> Vec<f32> {
        let mut y = vec![0f32; rows * n];
        for r in 0..rows {
            for j in 0..n {
                y[r * n + j] = (0..k).map(|i| x[r * k + i] * w[j * k + i]).sum();
            }
        }
        y
    }

    fn vals(n: usize, seed: u32) -> Vec<f32> {
        (0..n)
            .map(|i| ((i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) % 1000) as f32)
            .map(|v| v / 500.0 - 1.0)
            .collect()
    }

    #[test]
    fn empty_inputs_do_nothing() {
        let s = AttnShape {
            heads: 2,
            kv_heads: 1,
            hd: 4,
        };
        let mut out = vec![7f32; 8];
        attention(&[], 0, 0, &[0.0; 4], &[0.0; 4], 1, s, true, &mut out);
        assert_eq!(out, vec![7f32; 8]);
        let mut y = vec![1f32; 3];
        matmul_add(&[], 3, 0, Weights::F32(&[]), 1, &mut y);
        assert_eq!(y, vec![1f32; 3]);
        let s = crate::backend::DeltaShape {
            k_heads: 1,
            v_heads: 2,
            dk: 4,
            dv: 4,
        };
        let mut st = vec![0f32; s.state_len()];
        assert!(
            super::super::hybrid::delta_rule(&[], &[], &[], &[], &[], 0, s, &mut st).is_empty()
        );
    }

    #[test]
    fn a_decode_row_does_not_depend_on_its_batch() {
        // Continuous batching: a sequence's product is bit-identical whether it is decoded
        // alone or with others, at any position in the batch (k has a tail past the chunks).
        let (k, n) = (1040 + 5, 301);
        let (x, w) = (vals(GEMV_ROWS * k, 3), vals(n * k, 4));
        let wb: Vec<u16> = w
            .iter()
            .map(|&v| half::bf16::from_f32(v).to_bits())
            .collect();
        for weights in [Weights::F32(&w), Weights::Bf16(&wb)] {
            let mut all = vec![0f32; GEMV_ROWS * n];
            matmul_add(&x, GEMV_ROWS, k, weights, n, &mut all);
            for r in [0, 5, 7, 8, GEMV_ROWS - 1] {
                let mut one = vec![0f32; n];
                matmul_add(&x[r * k..(r + 1) * k], 1, k, weights, n, &mut one);
                assert_eq!(one, all[r * n..(r + 1) * n], "row {r}");
            }
        }
    }

    #[test]
    fn every_gemv_kernel_this_cpu_runs_matches_the_naive_product() {
        // The portable kernel and each vector kernel the CPU has (AVX-512 CPUs run both
        // widths), rows 1..=9 (every register block and a second group), k with a tail.
        let (k, n) = (16 * 9 + 5, 37);
        for rows in 1..=9 {
            let (x, w) = (vals(rows * k, 5), vals(n * k, 6));
            let want = naive(&x, rows, k, &w, n);
            let check = |name: &str, y: Vec<f32>| {
                let d = max_diff(&y, &want);
                assert!(d < 1e-4, "{name}, rows {rows}: max |Δ| {d}");
            };
            let mut y = vec![f32::NAN; rows * n];
            gemv_cols_portable(&x, rows, k, Weights::F32(&w), 0..n, |j, r, v| {
                y[r * n + j] = v
            });
            check("portable", y);
            #[cfg(target_arch = "x86_64")]
            {
                use super::super::gemv::{gemv_cols, Isa};
                let has_fma = std::arch::is_x86_feature_detected!("fma");
                for (isa, has) in [
                    (Isa::Avx512, super::super::simd::avx512()),
                    (Isa::Avx2Fma, super::super::simd::avx2() && has_fma),
                ] {
                    if !has {
                        continue;
                    }
                    let mut y = vec![f32::NAN; rows * n];
                    // SAFETY: the CPU has isa's extension; x and w hold rows·k and n·k values.
                    unsafe {
                        gemv_cols(isa, &x, rows, k, Weights::F32(&w), 0..n, |j, r, v| {
                            y[r * n + j] = v
                        })
                    };
                    check(&format!("{isa:?}"), y);
                }
            }
        }
    }

    #[test]
    fn gemv_and_gemm_paths_match_the_naive_product() {
        // Rows on both sides of GEMV_ROWS; sizes large enough to use threads; n not a multiple
        // of the bf16 block.
        let (k, n) = (300, 1100);
        for rows in [1, 3, 7, 8, 11, GEMV_ROWS, GEMV_ROWS + 1, 40] {
            let (x, w) = (vals(rows * k, 1), vals(n * k, 2));
            let want = naive(&x, rows, k, &w, n);
            let mut y = vec![0f32; rows * n];
            matmul_add(&x, rows, k, Weights::F32(&w), n, &mut y);
            let d = max_diff(&y, &want);
            assert!(d < 1e-3, "f32 rows {rows}: max |Δ| {d}");
            // bf16 weights: the product of the rounded weights.
            let wb: Vec<u16> = w
                .iter()
                .map(|&v| half::bf16::from_f32(v).to_bits())
                .collect();
            let wr: Vec<f32> = wb.iter().map(|&b| bf16_to_f32(b)).collect();
            let want = naive(&x, rows, k, &wr, n);
            let mut y = vec![1f32; rows * n];
            matmul_add(&x, rows, k, Weights::Bf16(&wb), n, &mut y);
            let d = y
                .iter()
                .zip(&want)
                .map(|(a, b)| (a - 1.0 - b).abs())
                .fold(0., f32::max);
            assert!(d < 1e-3, "bf16 rows {rows} (accumulating): max |Δ| {d}");
        }
    }
}
