//! The register tiles of the panel product (`panels.rs`): which kernel family this CPU
//! runs, and what one tile computes: `r` activation rows × one or two panels over a block of
//! inputs, `y += x · w` as one FMA chain per output in input order. The kernel body is written
//! once ([`tile_kernel!`]) and compiled for AVX-512F (16 lanes, up to 12 rows × 2 vectors, or
//! 6 rows × two panels) and AVX2 + FMA (8 lanes, 6 rows, or 2 rows × two panels); other CPUs
//! run a portable loop in the same order, with a multiply and an add.

use super::layout::bf16_to_f32;

/// The kernel family this CPU runs (x86-64 with AVX-512F or AVX2 + FMA), else portable code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kernel {
    #[cfg(target_arch = "x86_64")]
    Simd(super::gemv::Isa),
    Portable,
}

/// This CPU's kernel family (checked once, by `gemv::isa`).
pub(super) fn kernel() -> Kernel {
    #[cfg(target_arch = "x86_64")]
    if let Some(isa) = super::gemv::isa() {
        return Kernel::Simd(isa);
    }
    Kernel::Portable
}

impl Kernel {
    /// Panel width (output columns per panel).
    pub(super) fn nr(self) -> usize {
        match self {
            #[cfg(target_arch = "x86_64")]
            Kernel::Simd(super::gemv::Isa::Avx512) => 32,
            _ => 16,
        }
    }
    /// Most activation rows per register tile.
    pub(super) fn mr(self) -> usize {
        match self {
            #[cfg(target_arch = "x86_64")]
            Kernel::Simd(super::gemv::Isa::Avx512) => 12,
            #[cfg(target_arch = "x86_64")]
            Kernel::Simd(super::gemv::Isa::Avx2Fma) => 6,
            Kernel::Portable => 4,
        }
    }
    /// Most activation rows for a tile over two panels (0: no such tiles).
    pub(super) fn mr_wide(self) -> usize {
        match self {
            #[cfg(target_arch = "x86_64")]
            Kernel::Simd(super::gemv::Isa::Avx512) => 6,
            #[cfg(target_arch = "x86_64")]
            Kernel::Simd(super::gemv::Isa::Avx2Fma) => 2,
            Kernel::Portable => 0,
        }
    }
}

/// bf16 bits to f32 values (exact), vectorised for `kern`'s extension.
pub(super) fn widen(kern: Kernel, src: &[u16], dst: &mut [f32]) {
    match kern {
        // SAFETY: kern is this CPU's kernel family, so the CPU has the extension.
        #[cfg(target_arch = "x86_64")]
        Kernel::Simd(super::gemv::Isa::Avx512) => unsafe { z16::widen(src, dst) },
        // SAFETY: as above.
        #[cfg(target_arch = "x86_64")]
        Kernel::Simd(super::gemv::Isa::Avx2Fma) => unsafe { y8::widen(src, dst) },
        Kernel::Portable => widen_body(src, dst),
    }
}

#[inline(always)]
fn widen_body(src: &[u16], dst: &mut [f32]) {
    for (d, &s) in dst.iter_mut().zip(src) {
        *d = bf16_to_f32(s);
    }
}

/// Weights of a block as the kernels read them: f32, or bf16 widened in registers.
#[derive(Clone, Copy)]
pub(super) enum WBlock<'a> {
    F32(&'a [f32]),
    Bf16(&'a [u16]),
}

impl WBlock<'_> {
    fn len(self) -> usize {
        match self {
            WBlock::F32(w) => w.len(),
            WBlock::Bf16(w) => w.len(),
        }
    }
    fn get(self, i: usize) -> f32 {
        match self {
            WBlock::F32(w) => w[i],
            WBlock::Bf16(w) => bf16_to_f32(w[i]),
        }
    }
}

/// The shape of one register tile: `r` rows × `g` panels of `nr` columns over `kb` inputs,
/// panel i's weights at `wb[i·ws..]`, y's rows `ys` apart, `cols` of the `g·nr` columns real.
#[derive(Clone, Copy)]
pub(super) struct Tile {
    pub(super) r: usize,
    pub(super) g: usize,
    pub(super) kb: usize,
    pub(super) nr: usize,
    pub(super) ws: usize,
    pub(super) ys: usize,
    pub(super) cols: usize,
    /// Prefetch the next block of each panel into L2 (f32 only): set on a block's first tile.
    pub(super) prefetch: bool,
}

/// `y[i, q·nr + j] += Σ_c xt[c·r + i] · wb[q·ws + c·nr + j]` for `i < r`, panel `q < g`, and
/// `q·nr + j < cols`.
///
/// # Safety
/// `y` must be valid for writes at `i·ys + j` for those i and columns; `xt` holds `kb·r`
/// values and `wb` `(g-1)·ws + kb·nr`; `kern` must be this CPU's, `r ≤ kern.mr()` (and
/// `≤ kern.mr_wide()` when `g` is 2).
pub(super) unsafe fn tile(kern: Kernel, xt: &[f32], wb: WBlock<'_>, y: *mut f32, t: Tile) {
    let Tile {
        r,
        g,
        kb,
        nr,
        ws,
        ys,
        cols,
        ..
    } = t;
    debug_assert!(xt.len() >= kb * r && wb.len() >= (g - 1) * ws + kb * nr && cols <= g * nr);
    if cols == g * nr {
        // SAFETY: y is valid for r rows × g·nr columns; the rest is forwarded from the caller.
        unsafe { run_tile(kern, xt, wb, y, ys, t) };
        return;
    }
    // A partial tile goes through a full-width copy (the kernels write g·nr columns).
    let mut tmp = [0f32; 12 * 32];
    for i in 0..r {
        for j in 0..cols {
            // SAFETY: in bounds per the caller.
            tmp[i * g * nr + j] = unsafe { *y.add(i * ys + j) };
        }
    }
    // SAFETY: tmp holds r rows × g·nr columns; the rest is forwarded from the caller.
    unsafe { run_tile(kern, xt, wb, tmp.as_mut_ptr(), g * nr, t) };
    for i in 0..r {
        for j in 0..cols {
            // SAFETY: in bounds per the caller.
            unsafe { *y.add(i * ys + j) = tmp[i * g * nr + j] };
        }
    }
}

/// The kernel of [`tile`] on a full-width `yp` (rows `yps` apart).
///
/// # Safety
/// As [`tile`], with `yp` valid for `t.r` rows × `t.g·t.nr` columns.
unsafe fn run_tile(kern: Kernel, xt: &[f32], wb: WBlock<'_>, yp: *mut f32, yps: usize, t: Tile) {
    let Tile {
        r, g, kb, nr, ws, ..
    } = t;
    // SAFETY: forwarded from the caller.
    unsafe {
        match kern {
            #[cfg(target_arch = "x86_64")]
            Kernel::Simd(super::gemv::Isa::Avx512) => z16::tile(xt, wb, yp, yps, t),
            #[cfg(target_arch = "x86_64")]
            Kernel::Simd(super::gemv::Isa::Avx2Fma) => y8::tile(xt, wb, yp, yps, t),
            Kernel::Portable => {
                for q in 0..g {
                    portable_tile(xt, r, wb, q * ws, kb, nr, yp.add(q * nr), yps)
                }
            }
        }
    }
}

/// [`tile`] without vector extensions: the same per-output order, a multiply then an add.
///
/// # Safety
/// As [`tile`], with `y` valid for `r` rows × `nr` columns.
#[allow(clippy::too_many_arguments)]
unsafe fn portable_tile(
    xt: &[f32],
    r: usize,
    wb: WBlock<'_>,
    w0: usize,
    kb: usize,
    nr: usize,
    y: *mut f32,
    ys: usize,
) {
    for i in 0..r {
        for j in 0..nr {
            // SAFETY: per the caller.
            let yv = unsafe { &mut *y.add(i * ys + j) };
            let mut acc = *yv;
            for c in 0..kb {
                acc += xt[c * r + i] * wb.get(w0 + c * nr + j);
            }
            *yv = acc;
        }
    }
}

/// One register-tile kernel per vector width: `R` rows × 2 vectors of one panel.
#[cfg(target_arch = "x86_64")]
macro_rules! tile_kernel {
    (
        mod $m:ident, $feat:literal, lanes $l:literal, $v:ty,
        load $load:path, store $store:path, set1 $set1:path, fmadd $fmadd:path,
        load_bf16($bp:ident) $load_bf:block,
        rows [$($r:literal),*], wide [$($w:literal),*]
    ) => {
        mod $m {
            use super::{Tile, WBlock};
            use std::arch::x86_64::*;

            const NR: usize = 2 * $l;

            /// [`super::widen`] compiled with this module's extension.
            #[target_feature(enable = $feat)]
            pub unsafe fn widen(src: &[u16], dst: &mut [f32]) {
                super::widen_body(src, dst)
            }

            /// `R` rows × `G` panels of the tile (see [`super::tile`]), panels `2 · lanes`
            /// wide, panel q's weights `ws` values after panel q-1's.
            #[inline]
            #[target_feature(enable = $feat)]
            #[allow(clippy::needless_range_loop)] // the register tile reads clearest as indices
            unsafe fn rows<const R: usize, const G: usize, const BF: bool, const PF: bool>(
                xt: &[f32],
                wp: *const u8,
                ws: usize,
                kb: usize,
                y: *mut f32,
                ys: usize,
            ) {
                let xp = xt.as_ptr();
                // SAFETY: y is valid for R rows × G·NR columns, xt holds kb·R values and wp
                // (G-1)·ws + kb·NR weights, bf16 if BF else f32 (the caller's contract).
                unsafe {
                    let mut acc: [[[$v; 2]; G]; R] = std::array::from_fn(|i| {
                        std::array::from_fn(|q| {
                            let yq = y.add(i * ys + q * NR);
                            [$load(yq), $load(yq.add($l))]
                        })
                    });
                    for c in 0..kb {
                        let mut w = [[$set1(0.0); 2]; G];
                        for q in 0..G {
                            let at = q * ws + c * NR;
                            w[q] = [ldw::<BF>(wp, at), ldw::<BF>(wp, at + $l)];
                            if PF {
                                // The block after this one, into L2 while this one is used
                                // (a prefetch never faults, past the end included).
                                let next = (wp as *const f32).wrapping_add(at + kb * NR) as *const i8;
                                _mm_prefetch::<_MM_HINT_T1>(next);
                                if NR * 4 > 64 {
                                    _mm_prefetch::<_MM_HINT_T1>(next.wrapping_add(64));
                                }
                            }
                        }
                        for i in 0..R {
                            let b = $set1(*xp.add(c * R + i));
                            for q in 0..G {
                                acc[i][q][0] = $fmadd(b, w[q][0], acc[i][q][0]);
                                acc[i][q][1] = $fmadd(b, w[q][1], acc[i][q][1]);
                            }
                        }
                    }
                    for i in 0..R {
                        for q in 0..G {
                            let yq = y.add(i * ys + q * NR);
                            $store(yq, acc[i][q][0]);
                            $store(yq.add($l), acc[i][q][1]);
                        }
                    }
                }
            }

            /// `lanes` weights from value `i` of a block, f32 or (`BF`) bf16 widened.
            #[inline]
            #[target_feature(enable = $feat)]
            unsafe fn ldw<const BF: bool>(wp: *const u8, i: usize) -> $v {
                // SAFETY: the caller bounds i + lanes by the block.
                unsafe {
                    if BF {
                        let $bp = (wp as *const u16).add(i);
                        $load_bf
                    } else {
                        $load((wp as *const f32).add(i))
                    }
                }
            }

            /// [`super::tile`] for this width: `g` (1 or 2) panels, `r` up to the kernel's
            /// most rows (its wide rows for two panels).
            ///
            /// # Safety
            /// As [`super::tile`]; the CPU must have this module's extension.
            pub unsafe fn tile(xt: &[f32], w: WBlock<'_>, y: *mut f32, ys: usize, t: Tile) {
                let Tile { r, g, kb, ws, .. } = t;
                // SAFETY: forwarded from the caller.
                unsafe {
                    match (w, g, t.prefetch) {
                        (WBlock::F32(w), 1, false) => match r {
                            $($r => rows::<$r, 1, false, false>(xt, w.as_ptr().cast(), ws, kb, y, ys),)*
                            _ => unreachable!("a tile holds 1 to the kernel's most rows"),
                        },
                        (WBlock::F32(w), 1, true) => match r {
                            $($r => rows::<$r, 1, false, true>(xt, w.as_ptr().cast(), ws, kb, y, ys),)*
                            _ => unreachable!("a tile holds 1 to the kernel's most rows"),
                        },
                        (WBlock::F32(w), _, false) => match r {
                            $($w => rows::<$w, 2, false, false>(xt, w.as_ptr().cast(), ws, kb, y, ys),)*
                            _ => unreachable!("a two-panel tile holds 1 to the kernel's wide rows"),
                        },
                        (WBlock::F32(w), _, true) => match r {
                            $($w => rows::<$w, 2, false, true>(xt, w.as_ptr().cast(), ws, kb, y, ys),)*
                            _ => unreachable!("a two-panel tile holds 1 to the kernel's wide rows"),
                        },
                        (WBlock::Bf16(w), 1, _) => match r {
                            $($r => rows::<$r, 1, true, false>(xt, w.as_ptr().cast(), ws, kb, y, ys),)*
                            _ => unreachable!("a tile holds 1 to the kernel's most rows"),
                        },
                        (WBlock::Bf16(w), _, _) => match r {
                            $($w => rows::<$w, 2, true, false>(xt, w.as_ptr().cast(), ws, kb, y, ys),)*
                            _ => unreachable!("a two-panel tile holds 1 to the kernel's wide rows"),
                        },
                    }
                }
            }
        }
    };
}

#[cfg(target_arch = "x86_64")]
tile_kernel! {
    mod z16, "avx512f", lanes 16, __m512,
    load _mm512_loadu_ps, store _mm512_storeu_ps, set1 _mm512_set1_ps, fmadd _mm512_fmadd_ps,
    load_bf16(b) {
        let h = _mm256_loadu_si256(b as *const __m256i);
        _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16))
    },
    rows [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12], wide [1, 2, 3, 4, 5, 6]
}

#[cfg(target_arch = "x86_64")]
tile_kernel! {
    mod y8, "avx2,fma", lanes 8, __m256,
    load _mm256_loadu_ps, store _mm256_storeu_ps, set1 _mm256_set1_ps, fmadd _mm256_fmadd_ps,
    load_bf16(b) {
        let h = _mm_loadu_si128(b as *const __m128i);
        _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16))
    },
    rows [1, 2, 3, 4, 5, 6], wide [1, 2]
}

#[cfg(test)]
mod tests {
    use super::super::kernels::max_diff;
    use super::*;

    #[test]
    fn the_portable_tile_matches_the_simd_tile() {
        let kern = kernel();
        let (nr, kb) = (kern.nr(), 37);
        for r in 1..=kern.mr() {
            let xt: Vec<f32> = (0..kb * r).map(|i| (i as f32 * 0.23).sin()).collect();
            let wb: Vec<f32> = (0..kb * nr).map(|i| (i as f32 * 0.07).cos()).collect();
            let mut a = vec![0.5f32; r * nr];
            let mut b = a.clone();
            // SAFETY: a and b hold r × nr values; this CPU's kernel.
            unsafe {
                let t = Tile {
                    r,
                    g: 1,
                    kb,
                    nr,
                    ws: 0,
                    ys: nr,
                    cols: nr,
                    prefetch: false,
                };
                tile(kern, &xt, WBlock::F32(&wb), a.as_mut_ptr(), t);
                portable_tile(&xt, r, WBlock::F32(&wb), 0, kb, nr, b.as_mut_ptr(), nr);
            }
            let d = max_diff(&a, &b);
            assert!(d < 1e-4, "rows {r}: max |Δ| {d}");
        }
    }
}
