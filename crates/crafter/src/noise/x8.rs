//! `noise3` with AVX-512, eight points per register (one point per lane) and four registers'
//! worth per call, bit-identical to the scalar kernel.
//!
//! Every lane performs the reference's IEEE operations on its point in the reference's order
//! (no fused multiply-add: each product and sum is its own instruction), so each lane's value
//! is the scalar one to the bit:
//!
//! - the comparisons that pick the vertices become masks, folded into the case of
//!   [`super::cases`], whose table gives each of the eight slots' lattice offset and offset
//!   expression; slots are added in the table's order, which is the reference's;
//! - the lattice hash `perm[perm[perm[x] + y] + z] % 24` is three lookups in 256-entry byte
//!   tables held in registers (`vpermi2b`, AVX-512 VBMI), and the gradient one more in a
//!   24-entry one: byte lanes wrap at 256 exactly as Python's `& 0xFF`, and no gather waits
//!   on memory; the byte work of 32 points shares each instruction (four groups of eight
//!   lanes), the floating-point work goes eight points per instruction.
//!
//! Points in a world's fields come in spatial order, where the scalar kernel's branches are
//! mostly predicted; this kernel has none to mispredict and does eight points' arithmetic per
//! instruction.

#![allow(unsafe_code)]

use super::cases::{COMPACT, GRADIENT_BYTES, K, SLOT_BYTES};
use super::{OpenSimplex, NORM, SQUISH, STRETCH};
use std::arch::x86_64::*;

/// Whether this CPU runs [`noise3_many_x8`]: AVX-512 F, BW, DQ, VL and VBMI.
pub(super) fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("avx512dq")
        && std::arch::is_x86_feature_detected!("avx512vl")
        && std::arch::is_x86_feature_detected!("avx512vbmi")
}

/// A 256-byte table held in four registers.
#[derive(Clone, Copy)]
struct Lut([__m512i; 4]);

impl Lut {
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn load(t: &[u8; 256]) -> Lut {
        // SAFETY: four 64-byte loads inside the 256-byte table.
        Lut([0, 64, 128, 192].map(|o| unsafe { _mm512_loadu_si512(t.as_ptr().add(o).cast()) }))
    }

    /// `t[i]` for every byte lane `i` of `idx`: two 128-byte halves, picked by the top bit.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    fn get(&self, idx: __m512i) -> __m512i {
        let [t0, t1, t2, t3] = self.0;
        let lo = _mm512_permutex2var_epi8(t0, idx, t1);
        let hi = _mm512_permutex2var_epi8(t2, idx, t3);
        _mm512_mask_blend_epi8(_mm512_movepi8_mask(idx), lo, hi)
    }
}

/// Eight `i32` lanes as the low eight byte lanes of a register (wrapping to a byte).
#[inline]
#[target_feature(enable = "avx512f,avx512vl")]
fn i32_bytes(v: __m256i) -> __m512i {
    _mm512_zextsi128_si512(_mm256_cvtepi32_epi8(v))
}

/// The case of each lane, as in [`super::cases::case_index`]: the same comparisons, with
/// masks for booleans and blends for selects.
#[inline]
#[target_feature(enable = "avx512f,avx512vl")]
fn case_x8(xi: __m512d, yi: __m512d, zi: __m512d, in_sum: __m512d) -> __m256i {
    let gt = |a, b| _mm512_cmp_pd_mask::<_CMP_GT_OQ>(a, b);
    let ge = |a, b| _mm512_cmp_pd_mask::<_CMP_GE_OQ>(a, b);
    let lt = |a, b| _mm512_cmp_pd_mask::<_CMP_LT_OQ>(a, b);
    let le = |a, b| _mm512_cmp_pd_mask::<_CMP_LE_OQ>(a, b);
    // `m ? a : b`, for floats and for ints.
    let pick = |m: __mmask8, a, b| _mm512_mask_blend_pd(m, b, a);
    let pick_i = |m: __mmask8, a, b| _mm256_mask_blend_epi32(m, b, a);
    let int = _mm256_set1_epi32;
    let one = _mm512_set1_pd(1.0);

    // Region 1 (`in_sum <= 1`): a = (xins, 1), b = (yins, 2), z may replace one of them.
    let t1 = ge(xi, yi) & gt(zi, yi);
    let t2 = lt(xi, yi) & gt(zi, xi);
    let b_s = pick(t1, zi, yi);
    let b_p = pick_i(t1, int(4), int(2));
    let a_s = pick(t2, zi, xi);
    let a_p = pick_i(t2, int(4), int(1));
    let w = _mm512_sub_pd(one, in_sum);
    let near = gt(w, a_s) | gt(w, b_s);
    let closer = pick_i(gt(b_s, a_s), b_p, a_p);
    let r1 = pick_i(near, closer, _mm256_or_si256(a_p, b_p));

    // Region 2 (`in_sum >= 2`): a = (xins, 6), b = (yins, 5), z may replace one of them.
    let u1 = le(xi, yi) & lt(zi, yi);
    let u2 = gt(xi, yi) & lt(zi, xi);
    let b_s = pick(u1, zi, yi);
    let b_p = pick_i(u1, int(3), int(5));
    let a_s = pick(u2, zi, xi);
    let a_p = pick_i(u2, int(3), int(6));
    let w = _mm512_sub_pd(_mm512_set1_pd(3.0), in_sum);
    let near = lt(w, a_s) | lt(w, b_s);
    let closer = pick_i(lt(b_s, a_s), b_p, a_p);
    let r2 = _mm256_add_epi32(int(8), pick_i(near, closer, _mm256_and_si256(a_p, b_p)));

    // Region 3, the octahedron: scores are not updated when a point is replaced.
    let score = |p: __m512d, far: __mmask8| pick(far, _mm512_sub_pd(p, one), _mm512_sub_pd(one, p));
    let p1 = _mm512_add_pd(xi, yi);
    let af0 = gt(p1, one);
    let a_s = score(p1, af0);
    let a_p0 = pick_i(af0, int(3), int(4));
    let p2 = _mm512_add_pd(xi, zi);
    let bf0 = gt(p2, one);
    let b_s = score(p2, bf0);
    let b_p0 = pick_i(bf0, int(5), int(2));
    let p3 = _mm512_add_pd(yi, zi);
    let far3 = gt(p3, one);
    let s3 = score(p3, far3);
    let q = pick_i(far3, int(6), int(1));
    let ra = le(a_s, b_s) & lt(a_s, s3);
    let rb = gt(a_s, b_s) & lt(b_s, s3);
    let a_p = pick_i(ra, q, a_p0);
    let af = (ra & far3) | (!ra & af0);
    let b_p = pick_i(rb, q, b_p0);
    let bf = (rb & far3) | (!rb & bf0);
    let same = pick_i(
        af,
        _mm256_add_epi32(int(16), _mm256_and_si256(a_p, b_p)),
        _mm256_add_epi32(int(24), _mm256_or_si256(a_p, b_p)),
    );
    let c1 = pick_i(af, a_p, b_p);
    let c2 = pick_i(af, b_p, a_p);
    let mixed = _mm256_add_epi32(
        _mm256_add_epi32(int(32), _mm256_xor_si256(c1, int(7))),
        _mm256_slli_epi32::<3>(c2),
    );
    let r3 = pick_i(!(af ^ bf), same, mixed);

    pick_i(
        le(in_sum, one),
        r1,
        pick_i(ge(in_sum, _mm512_set1_pd(2.0)), r2, r3),
    )
}

/// `out[i] = noise3(x[i], y[i], z)` for all the points, thirty-two at a time ([`noise3_x32`]; the
/// last block padded), in one function so the kernel's tables stay loaded across blocks.
/// The caller checks that every coordinate fits the kernel's `i32` lattice.
///
/// # Safety
/// The CPU must have what [`available`] checks.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx512vbmi")]
pub(super) unsafe fn noise3_many_x8(
    n: &OpenSimplex,
    x: &[f64],
    y: &[f64],
    z: f64,
    out: &mut [f64],
) {
    const W: usize = 32;
    let whole = out.len() / W * W;
    for k in (0..whole).step_by(W) {
        let xs: &[f64; W] = x[k..k + W].try_into().expect("thirty-two points");
        let ys: &[f64; W] = y[k..k + W].try_into().expect("thirty-two points");
        // SAFETY: the caller's CPU has what the kernel needs.
        let v = unsafe { noise3_x32(n, xs, ys, z) };
        out[k..k + W].copy_from_slice(&v);
    }
    if whole < out.len() {
        let rest = out.len() - whole;
        let (mut xs, mut ys) = ([0.0; W], [0.0; W]);
        xs[..rest].copy_from_slice(&x[whole..]);
        ys[..rest].copy_from_slice(&y[whole..]);
        // SAFETY: as above.
        let v = unsafe { noise3_x32(n, &xs, &ys, z) };
        out[whole..].copy_from_slice(&v[..rest]);
    }
}

/// `noise3(x[i], y[i], z)` for thirty-two points, four groups of eight: the floating-point
/// work is per group, eight points per register, while the byte work (the case's table
/// lookups, the lattice hash, the gradient index) is done once for all four, group `g` in byte
/// lanes `8g..8g + 8`. Every lane performs the reference's operations on its point (module
/// documentation), so the same bits.
///
/// # Safety
/// The CPU must have what [`available`] checks.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx512vbmi")]
unsafe fn noise3_x32(n: &OpenSimplex, x: &[f64; 32], y: &[f64; 32], z: f64) -> [f64; 32] {
    // SAFETY: eight-lane loads inside thirty-two-element arrays.
    let load = |v: &[f64; 32], g: usize| unsafe { _mm512_loadu_pd(v.as_ptr().add(8 * g)) };
    let (x, y) = (
        [0, 1, 2, 3].map(|g| load(x, g)),
        [0, 1, 2, 3].map(|g| load(y, g)),
    );
    let z = _mm512_set1_pd(z);
    const FLOOR: i32 = _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC;
    // Per group: the honeycomb placement, the super-cell origin, the offsets, the case.
    let per_group = |g: usize| {
        let (x, y) = (x[g], y[g]);
        let stretch = _mm512_mul_pd(
            _mm512_add_pd(_mm512_add_pd(x, y), z),
            _mm512_set1_pd(STRETCH),
        );
        let (xs, ys, zs) = (
            _mm512_add_pd(x, stretch),
            _mm512_add_pd(y, stretch),
            _mm512_add_pd(z, stretch),
        );
        let (xsb, ysb, zsb) = (
            _mm512_roundscale_pd::<FLOOR>(xs),
            _mm512_roundscale_pd::<FLOOR>(ys),
            _mm512_roundscale_pd::<FLOOR>(zs),
        );
        let squish = _mm512_mul_pd(
            _mm512_add_pd(_mm512_add_pd(xsb, ysb), zsb),
            _mm512_set1_pd(SQUISH),
        );
        let d0 = [
            _mm512_sub_pd(x, _mm512_add_pd(xsb, squish)),
            _mm512_sub_pd(y, _mm512_add_pd(ysb, squish)),
            _mm512_sub_pd(z, _mm512_add_pd(zsb, squish)),
        ];
        let (xi, yi, zi) = (
            _mm512_sub_pd(xs, xsb),
            _mm512_sub_pd(ys, ysb),
            _mm512_sub_pd(zs, zsb),
        );
        let in_sum = _mm512_add_pd(_mm512_add_pd(xi, yi), zi);
        let case = i32_bytes(case_x8(xi, yi, zi, in_sum));
        let base = [xsb, ysb, zsb].map(|b| i32_bytes(_mm512_cvtpd_epi32(b)));
        (d0, case, base)
    };
    let groups = [0, 1, 2, 3].map(per_group);
    let d0 = groups.map(|g| g.0);
    // Group g in byte lanes 8g..8g + 8.
    let join = |v: [__m512i; 4]| {
        let lo = _mm512_unpacklo_epi64(v[0], v[1]);
        let hi = _mm512_unpacklo_epi64(v[2], v[3]);
        _mm512_inserti32x4::<1>(lo, _mm512_castsi512_si128(hi))
    };
    let case = join(groups.map(|g| g.1));
    let base = [0, 1, 2].map(|ax| join(groups.map(|g| g.2[ax])));
    // SAFETY: 64-byte loads from the 128-byte case map.
    let (map0, map1) = unsafe {
        (
            _mm512_loadu_si512(COMPACT.0.as_ptr().cast()),
            _mm512_loadu_si512(COMPACT.0.as_ptr().add(64).cast()),
        )
    };
    let id = _mm512_permutex2var_epi8(map0, case, map1);
    let (perm, grad24) = (Lut::load(&n.perm), Lut::load(&n.grad24));
    // SAFETY: 64-byte loads of 64-byte tables.
    let gradient = GRADIENT_BYTES.map(|t| unsafe { _mm512_loadu_si512(t.as_ptr().cast()) });
    let k_table = _mm512_setr_pd(K[0], K[1], K[2], K[3], 0.0, 0.0, 0.0, 0.0);
    let two = _mm512_set1_pd(2.0);
    // The bytes of group `g` as `i64` lanes, and as `f64`.
    let group_i64 = |v: __m512i, g: usize| {
        let quarter = if g < 2 {
            _mm512_castsi512_si128(v)
        } else {
            _mm512_extracti32x4_epi32::<1>(v)
        };
        _mm512_cvtepi8_epi64(if g.is_multiple_of(2) {
            quarter
        } else {
            _mm_unpackhi_epi64(quarter, quarter)
        })
    };
    let group_f64 = |v: __m512i, g: usize| _mm512_cvtepi64_pd(group_i64(v, g));
    let mut value = [_mm512_setzero_pd(); 4];
    for (s, tables) in SLOT_BYTES.iter().enumerate() {
        // SAFETY: 64-byte loads of 64-byte tables.
        let lut = |t: usize| unsafe {
            _mm512_permutexvar_epi8(id, _mm512_loadu_si512(tables[t].as_ptr().cast()))
        };
        let kb = lut(9);
        let o = [lut(0), lut(1), lut(2)];
        let extra = (s >= 6).then(|| [3, 4, 5, 6, 7, 8].map(lut));
        let p0 = perm.get(_mm512_add_epi8(base[0], o[0]));
        let p1 = perm.get(_mm512_add_epi8(p0, _mm512_add_epi8(base[1], o[1])));
        let gi = grad24.get(_mm512_add_epi8(p1, _mm512_add_epi8(base[2], o[2])));
        let gb = gradient.map(|t| _mm512_permutexvar_epi8(gi, t));
        for g in 0..4 {
            let b = _mm512_permutexvar_pd(group_i64(kb, g), k_table);
            let d0 = d0[g];
            // Base slots: `a` is the offset and `c` is 0 (`x - 0.0 == x`, so it is left out).
            let d = match extra {
                None => {
                    [0, 1, 2].map(|ax| _mm512_sub_pd(_mm512_sub_pd(d0[ax], group_f64(o[ax], g)), b))
                }
                Some(e) => [0, 1, 2].map(|ax| {
                    let v = _mm512_sub_pd(d0[ax], group_f64(e[ax], g));
                    _mm512_sub_pd(_mm512_sub_pd(v, b), group_f64(e[3 + ax], g))
                }),
            };
            let attn = _mm512_sub_pd(
                _mm512_sub_pd(
                    _mm512_sub_pd(two, _mm512_mul_pd(d[0], d[0])),
                    _mm512_mul_pd(d[1], d[1]),
                ),
                _mm512_mul_pd(d[2], d[2]),
            );
            let gr = gb.map(|v| group_f64(v, g));
            let ext = _mm512_add_pd(
                _mm512_add_pd(_mm512_mul_pd(gr[0], d[0]), _mm512_mul_pd(gr[1], d[1])),
                _mm512_mul_pd(gr[2], d[2]),
            );
            let a2 = _mm512_mul_pd(attn, attn);
            let contrib = _mm512_mul_pd(_mm512_mul_pd(a2, a2), ext);
            let live = _mm512_cmp_pd_mask::<_CMP_GT_OQ>(attn, _mm512_setzero_pd());
            value[g] = _mm512_add_pd(value[g], _mm512_maskz_mov_pd(live, contrib));
        }
    }
    let mut out = [0.0f64; 32];
    let norm = _mm512_set1_pd(NORM);
    for (g, v) in value.into_iter().enumerate() {
        // SAFETY: eight-lane stores inside a thirty-two-element array.
        unsafe { _mm512_storeu_pd(out.as_mut_ptr().add(8 * g), _mm512_div_pd(v, norm)) };
    }
    out
}
