//! Linear weights stored as column panels, packed once at load, and the one product kernel
//! that reads them for prefill and decode alike.
//!
//! A weight `w[n, k]` (an `nn.Linear`, row-major) is stored as `⌈n/NR⌉` panels of `NR` output
//! columns, each `[k][NR]`: for every input index, the `NR` weights it meets side by side (the
//! last panel zero-padded). The product `y[rows, n] += x[rows, k] · wᵀ` then runs as the
//! classic broadcast kernel: a tile of `R` activation rows × one panel held in registers, and
//! per input index one broadcast of each row's activation times the panel's vectors. Weights
//! are read contiguously and never repacked per call (the `gemm` crate transposes every weight
//! on every prefill product, about a fifth of its time), and the panel's current block (`KC`
//! inputs, 16 KiB) stays in L1 while every row tile passes over it.
//!
//! Each output is one chain of fused multiply-adds over the inputs in order, whatever the tile,
//! the number of rows or the thread count: a sequence's logits do not depend on the batch it is
//! decoded in, and prefill and decode compute a token's products the same way.
//!
//! Panels are 32 columns wide with AVX-512F (tiles up to 12 rows × 2 vectors), 16 with AVX2 +
//! FMA (6 rows × 2 vectors, 16 registers) and 16 in the portable fallback. bf16 panels keep the
//! same layout; each block is widened to f32 into a per-thread buffer before the row tiles run.

use super::cpu_kernels::{bf16_to_f32, threads_for};

/// Bytes of one panel block (`KC · NR` f32 values), sized to stay in L1 beside the tile.
const BLOCK_BYTES: usize = 16 << 10;

/// Most rows of a product that counts as decode (tiles over two panels, see `matmul_add`).
const FEW_ROWS: usize = 8;

/// The stored values of a panelled weight.
#[derive(Clone, Debug)]
pub enum PanelValues {
    /// f32 weights.
    F32(Vec<f32>),
    /// bfloat16 bit patterns.
    Bf16(Vec<u16>),
}

/// A linear weight `w[n, k]` in column panels (see the module docs).
#[derive(Clone, Debug)]
pub struct Panels {
    values: PanelValues,
    n: usize,
    k: usize,
    nr: usize,
}

/// The kernel family this CPU runs (x86-64 with AVX-512F or AVX2 + FMA), else portable code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kernel {
    #[cfg(target_arch = "x86_64")]
    Simd(super::cpu_gemv::Isa),
    Portable,
}

fn kernel() -> Kernel {
    #[cfg(target_arch = "x86_64")]
    if let Some(isa) = super::cpu_gemv::isa() {
        return Kernel::Simd(isa);
    }
    Kernel::Portable
}

impl Kernel {
    /// Panel width (output columns per panel).
    fn nr(self) -> usize {
        match self {
            #[cfg(target_arch = "x86_64")]
            Kernel::Simd(super::cpu_gemv::Isa::Avx512) => 32,
            _ => 16,
        }
    }
    /// Most activation rows per register tile.
    fn mr(self) -> usize {
        match self {
            #[cfg(target_arch = "x86_64")]
            Kernel::Simd(super::cpu_gemv::Isa::Avx512) => 12,
            #[cfg(target_arch = "x86_64")]
            Kernel::Simd(super::cpu_gemv::Isa::Avx2Fma) => 6,
            Kernel::Portable => 4,
        }
    }
}

impl Kernel {
    /// Most activation rows for a tile over two panels.
    fn mr_wide(self) -> usize {
        match self {
            #[cfg(target_arch = "x86_64")]
            Kernel::Simd(super::cpu_gemv::Isa::Avx512) => 6,
            #[cfg(target_arch = "x86_64")]
            Kernel::Simd(super::cpu_gemv::Isa::Avx2Fma) => 2,
            Kernel::Portable => 0,
        }
    }
}

impl Panels {
    /// Pack `w[n, k]` (row-major, as safetensors stores an `nn.Linear` weight), rounding to
    /// bf16 when `bf16` is set. Panics if `w` does not hold `n·k` values (callers check shapes).
    pub fn pack(w: &[f32], n: usize, k: usize, bf16: bool) -> Panels {
        assert_eq!(w.len(), n * k, "panel pack: weight is not n·k values");
        let nr = kernel().nr();
        let mut packed = vec![0f32; n.div_ceil(nr) * nr * k];
        for (p, panel) in packed.chunks_exact_mut(nr * k).enumerate() {
            for j in 0..nr.min(n - p * nr) {
                let row = &w[(p * nr + j) * k..(p * nr + j + 1) * k];
                for (c, &v) in row.iter().enumerate() {
                    panel[c * nr + j] = v;
                }
            }
        }
        let values = if bf16 {
            PanelValues::Bf16(
                packed
                    .iter()
                    .map(|&v| half::bf16::from_f32(v).to_bits())
                    .collect(),
            )
        } else {
            PanelValues::F32(packed)
        };
        Panels { values, n, k, nr }
    }

    /// Output features (rows of the original weight).
    pub fn n(&self) -> usize {
        self.n
    }
    /// Input features.
    pub fn k(&self) -> usize {
        self.k
    }

    /// Weight `w[j, i]` as f32.
    pub fn get(&self, j: usize, i: usize) -> f32 {
        let at = (j / self.nr) * self.nr * self.k + i * self.nr + j % self.nr;
        match &self.values {
            PanelValues::F32(v) => v[at],
            PanelValues::Bf16(v) => bf16_to_f32(v[at]),
        }
    }

    /// The original `w[n, k]`, row-major, as f32 (for downloads and tests).
    pub fn unpack(&self) -> Vec<f32> {
        (0..self.n * self.k)
            .map(|i| self.get(i / self.k, i % self.k))
            .collect()
    }

    /// `y[rows, n] += x[rows, k] · wᵀ`. Panics if x or y is shorter than that.
    pub fn matmul_add(&self, x: &[f32], rows: usize, y: &mut [f32]) {
        self.matmul_add_on(x, rows, y, threads_for(rows * self.k * self.n));
    }

    /// [`Panels::matmul_add`] on at most `threads` threads.
    pub fn matmul_add_on(&self, x: &[f32], rows: usize, y: &mut [f32], threads: usize) {
        let (n, k, nr) = (self.n, self.k, self.nr);
        assert!(
            x.len() >= rows * k && y.len() >= rows * n,
            "panel product: short buffers"
        );
        if rows == 0 || n == 0 || k == 0 {
            return;
        }
        let kern = kernel();
        assert_eq!(kern.nr(), nr, "panels packed for another kernel");
        // Few rows (decode) take two panels per tile, in tiles of even size: two weight
        // streams in flight rather than one.
        let (group, mr) = if rows <= FEW_ROWS && kern.mr_wide() > 0 {
            (2, rows.div_ceil(rows.div_ceil(kern.mr_wide())))
        } else {
            (1, kern.mr())
        };
        let xp = pack_x(x, rows, k, mr);
        let panels = n.div_ceil(nr);
        let threads = threads.min(panels).max(1);
        let per = panels.div_ceil(threads);
        let y = Out(y.as_mut_ptr());
        let work = |p0: usize, p1: usize| {
            let kc = (BLOCK_BYTES / 4 / nr).min(k);
            let mut block = match &self.values {
                PanelValues::F32(_) => Vec::new(),
                PanelValues::Bf16(_) if group == 1 => vec![0f32; kc * nr],
                PanelValues::Bf16(_) => Vec::new(),
            };
            let mut p = p0;
            while p < p1 {
                // A group of whole panels, or the last (maybe partial) one alone.
                let g = if p + group <= p1 && (p + group) * nr <= n {
                    group
                } else {
                    1
                };
                let cols = (g * nr).min(n - p * nr);
                for k0 in (0..k).step_by(kc) {
                    let kb = kc.min(k - k0);
                    let start = p * nr * k + k0 * nr;
                    // Panel i of the group's block starts at wb[i·ws].
                    let end = start + (g - 1) * nr * k + kb * nr;
                    let (wb, ws) = match &self.values {
                        PanelValues::F32(v) => (WBlock::F32(&v[start..end]), nr * k),
                        // Few rows: each weight is used once or twice, widen it in registers.
                        PanelValues::Bf16(v) if group > 1 => (WBlock::Bf16(&v[start..end]), nr * k),
                        PanelValues::Bf16(v) => {
                            for i in 0..g {
                                let s0 = start + i * nr * k;
                                widen(
                                    kern,
                                    &v[s0..s0 + kb * nr],
                                    &mut block[i * kc * nr..][..kb * nr],
                                );
                            }
                            (WBlock::F32(&block[..(g - 1) * kc * nr + kb * nr]), kc * nr)
                        }
                    };
                    let mut r0 = 0;
                    while r0 < rows {
                        let r = mr.min(rows - r0);
                        let xt = &xp[r0 * k + k0 * r..r0 * k + (k0 + kb) * r];
                        let t = Tile {
                            r,
                            g,
                            kb,
                            nr,
                            ws,
                            ys: n,
                            cols,
                            prefetch: r0 == 0,
                        };
                        // SAFETY: this thread alone writes columns p·nr.. p·nr + cols of y
                        // (panels are split between threads), rows r0..r0 + r < rows; y holds
                        // rows·n values (asserted above); wb holds g panels' blocks ws apart.
                        unsafe { tile(kern, xt, wb, y.at(r0 * n + p * nr), t) };
                        r0 += r;
                    }
                }
                p += g;
            }
        };
        if threads == 1 {
            work(0, panels);
            return;
        }
        std::thread::scope(|s| {
            for t in 0..threads {
                let (p0, p1) = (t * per, ((t + 1) * per).min(panels));
                if p0 < p1 {
                    let work = &work;
                    s.spawn(move || work(p0, p1));
                }
            }
        });
    }
}

/// y's pointer, shared by threads that write disjoint columns.
#[derive(Clone, Copy)]
struct Out(*mut f32);
impl Out {
    /// The pointer `i` values on (a method, so closures capture the whole `Out`).
    fn at(self, i: usize) -> *mut f32 {
        self.0.wrapping_add(i)
    }
}
// SAFETY: threads write disjoint columns through it (see `Panels::matmul_add`).
unsafe impl Send for Out {}
// SAFETY: as above.
unsafe impl Sync for Out {}

/// x's rows in tiles of `mr` (the last one shorter), each tile `[k][r]`: a tile's activations
/// for one input index are adjacent.
fn pack_x(x: &[f32], rows: usize, k: usize, mr: usize) -> Vec<f32> {
    let mut out = vec![0f32; rows * k];
    let mut r0 = 0;
    while r0 < rows {
        let r = mr.min(rows - r0);
        let t = &mut out[r0 * k..(r0 + r) * k];
        for i in 0..r {
            for (c, &v) in x[(r0 + i) * k..(r0 + i + 1) * k].iter().enumerate() {
                t[c * r + i] = v;
            }
        }
        r0 += r;
    }
    out
}

/// bf16 bits to f32 values (exact), vectorised for `kern`'s extension.
fn widen(kern: Kernel, src: &[u16], dst: &mut [f32]) {
    match kern {
        // SAFETY: kern is this CPU's kernel family, so the CPU has the extension.
        #[cfg(target_arch = "x86_64")]
        Kernel::Simd(super::cpu_gemv::Isa::Avx512) => unsafe { z16::widen(src, dst) },
        // SAFETY: as above.
        #[cfg(target_arch = "x86_64")]
        Kernel::Simd(super::cpu_gemv::Isa::Avx2Fma) => unsafe { y8::widen(src, dst) },
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
enum WBlock<'a> {
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
struct Tile {
    r: usize,
    g: usize,
    kb: usize,
    nr: usize,
    ws: usize,
    ys: usize,
    cols: usize,
    /// Prefetch the next block of each panel into L2 (f32 only): set on a block's first tile.
    prefetch: bool,
}

/// `y[i, q·nr + j] += Σ_c xt[c·r + i] · wb[q·ws + c·nr + j]` for `i < r`, panel `q < g`, and
/// `q·nr + j < cols`.
///
/// # Safety
/// `y` must be valid for writes at `i·ys + j` for those i and columns; `xt` holds `kb·r`
/// values and `wb` `(g-1)·ws + kb·nr`; `kern` must be this CPU's, `r ≤ kern.mr()` (and
/// `≤ kern.mr_wide()` when `g` is 2).
unsafe fn tile(kern: Kernel, xt: &[f32], wb: WBlock<'_>, y: *mut f32, t: Tile) {
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
            Kernel::Simd(super::cpu_gemv::Isa::Avx512) => z16::tile(xt, wb, yp, yps, t),
            #[cfg(target_arch = "x86_64")]
            Kernel::Simd(super::cpu_gemv::Isa::Avx2Fma) => y8::tile(xt, wb, yp, yps, t),
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
    use super::*;

    /// `y + x · wᵀ` in f64.
    fn naive(x: &[f32], rows: usize, k: usize, w: &[f32], n: usize, y: &[f32]) -> Vec<f32> {
        (0..rows * n)
            .map(|o| {
                let (r, j) = (o / n, o % n);
                let s: f64 = (0..k)
                    .map(|c| x[r * k + c] as f64 * w[j * k + c] as f64)
                    .sum();
                (y[o] as f64 + s) as f32
            })
            .collect()
    }

    #[test]
    fn panel_products_match_the_naive_product_for_every_tile_and_block_shape() {
        // n with a partial panel, k over several blocks with a tail, rows over several tiles.
        for &(rows, k, n) in &[(1, 7, 3), (5, 300, 45), (13, 1030, 70), (30, 64, 33)] {
            let x: Vec<f32> = (0..rows * k).map(|i| (i as f32 * 0.37).sin()).collect();
            let w: Vec<f32> = (0..n * k).map(|i| (i as f32 * 0.11).cos() / 3.0).collect();
            let y0: Vec<f32> = (0..rows * n).map(|i| i as f32 * 0.01).collect();
            let p = Panels::pack(&w, n, k, false);
            assert_eq!(p.unpack(), w);
            let mut y = y0.clone();
            p.matmul_add(&x, rows, &mut y);
            let want = naive(&x, rows, k, &w, n, &y0);
            let d = y
                .iter()
                .zip(&want)
                .map(|(a, b)| (a - b).abs())
                .fold(0., f32::max);
            assert!(
                d < 1e-4 * (k as f32).sqrt(),
                "rows {rows} k {k} n {n}: max |Δ| {d}"
            );
            // The same rows one at a time give the same bits (no dependence on the batch).
            let mut y1 = y0.clone();
            for r in 0..rows {
                p.matmul_add(&x[r * k..(r + 1) * k], 1, &mut y1[r * n..(r + 1) * n]);
            }
            assert_eq!(y, y1, "rows {rows} k {k} n {n}: batch changes the result");
            // bf16 panels: the product of the rounded weights.
            let wr: Vec<f32> = w
                .iter()
                .map(|&v| half::bf16::from_f32(v).to_f32())
                .collect();
            let pb = Panels::pack(&w, n, k, true);
            assert_eq!(pb.unpack(), wr);
            let mut yb = y0.clone();
            pb.matmul_add(&x, rows, &mut yb);
            let want = naive(&x, rows, k, &wr, n, &y0);
            let d = yb
                .iter()
                .zip(&want)
                .map(|(a, b)| (a - b).abs())
                .fold(0., f32::max);
            assert!(
                d < 1e-4 * (k as f32).sqrt(),
                "bf16 rows {rows} k {k} n {n}: max |Δ| {d}"
            );
        }
    }

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
            let d = a
                .iter()
                .zip(&b)
                .map(|(a, b)| (a - b).abs())
                .fold(0., f32::max);
            assert!(d < 1e-4, "rows {r}: max |Δ| {d}");
        }
    }
}
