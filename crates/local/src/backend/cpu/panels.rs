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
//! FMA (6 rows × 2 vectors, 16 registers) and 16 in the portable fallback. Decode (up to 8
//! rows) tiles span two panels, so two weight streams are in flight; prefill prefetches each
//! panel's next block into L2 while a block's first row tile runs. bf16 panels keep the same
//! layout: decode widens them in registers, prefill widens each block once into a per-thread
//! f32 buffer that every row tile then reads.

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
use super::amx;
use super::layout::bf16_to_f32;
use super::pool::{self, threads_for, Out};
use super::start::Start;
use super::tile::{kernel, tile, widen, Tile, WBlock};
use std::mem::MaybeUninit;

/// Bytes of one panel block (`KC · NR` f32 values), sized to stay in L1 beside the tile.
const BLOCK_BYTES: usize = 16 << 10;

/// Most rows of a product that counts as decode (tiles over two panels, see `matmul_add`).
const FEW_ROWS: usize = 8;

/// The stored values of a panelled weight.
#[derive(Clone, Debug)]
enum PanelValues {
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

impl Panels {
    /// Pack `w[n, k]` (row-major, as safetensors stores an `nn.Linear` weight), rounding to
    /// bf16 when `bf16` is set. Panics if `w` does not hold `n·k` values (callers check shapes).
    pub fn pack(w: &[f32], n: usize, k: usize, bf16: bool) -> Panels {
        assert_eq!(w.len(), n * k, "panel pack: weight is not n·k values");
        let nr = kernel().nr();
        let mut packed = vec![0f32; n.div_ceil(nr) * nr * k];
        for (p, panel) in packed.chunks_exact_mut((nr * k).max(1)).enumerate() {
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

    /// [`Panels::matmul_add`] for `phase`'s rows (the backend only ever starts prompts fresh).
    #[cfg(test)]
    pub fn matmul_add_in(&self, x: &[f32], rows: usize, y: &mut [f32], phase: Phase) {
        self.add(x, rows, y, threads_for(rows * self.k * self.n), phase);
    }

    /// [`Panels::matmul_add`] on at most `threads` threads.
    pub fn matmul_add_on(&self, x: &[f32], rows: usize, y: &mut [f32], threads: usize) {
        self.add(x, rows, y, threads, Phase::Decode);
    }

    fn add(&self, x: &[f32], rows: usize, y: &mut [f32], threads: usize, phase: Phase) {
        assert!(
            x.len() >= rows * self.k && y.len() >= rows * self.n,
            "panel product: short buffers"
        );
        let y = Out(y.as_mut_ptr());
        // SAFETY: y holds rows·n initialised values (asserted above).
        unsafe { self.product(x, rows, y, threads, Start::Existing, phase) };
    }

    /// `x[rows, k] · wᵀ (+ bias)` as a new `[rows, n]`. Not filled first: each thread writes
    /// zeros or the bias into its own columns just before it adds into them, so the buffer is
    /// written once, in parallel, while it is in cache. Panics if x is shorter than `rows·k`
    /// or the bias than n (callers check shapes).
    pub fn matmul(&self, x: &[f32], rows: usize, bias: Option<&[f32]>) -> Vec<f32> {
        self.matmul_in(x, rows, bias, Phase::Decode)
    }

    /// [`Panels::matmul`] for `phase`'s rows.
    pub fn matmul_in(
        &self,
        x: &[f32],
        rows: usize,
        bias: Option<&[f32]>,
        phase: Phase,
    ) -> Vec<f32> {
        assert!(x.len() >= rows * self.k, "panel product: short input");
        assert!(
            bias.is_none_or(|b| b.len() >= self.n),
            "panel product: short bias"
        );
        let len = rows * self.n;
        let mut y = Vec::with_capacity(len);
        let threads = threads_for(rows * self.k * self.n);
        // SAFETY: y has capacity for rows·n values, and `product` from `Fresh` writes every
        // one of them (threads' column ranges cover all n columns of every row) before
        // reading any.
        unsafe {
            self.product(
                x,
                rows,
                Out(y.as_mut_ptr()),
                threads,
                Start::Fresh(bias),
                phase,
            );
            y.set_len(len);
        }
        y
    }

    /// `y[rows, n] += x[rows, k] · wᵀ` on at most `threads` threads, y starting from `start`.
    ///
    /// # Safety
    /// `y` must be valid for `rows·n` writes, and (for `Existing`) reads; x holds `rows·k`,
    /// a bias n values.
    unsafe fn product(
        &self,
        x: &[f32],
        rows: usize,
        y: Out,
        threads: usize,
        start: Start<'_>,
        phase: Phase,
    ) {
        let (n, k, nr) = (self.n, self.k, self.nr);
        if rows == 0 || n == 0 {
            return;
        }
        if k == 0 {
            // SAFETY: all of y's rows·n values (the caller's contract).
            unsafe { start.fill(y, rows, n, 0..n) };
            return;
        }
        let kern = kernel();
        assert_eq!(kern.nr(), nr, "panels packed for another kernel");
        #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
        if let (Phase::Prompt, PanelValues::Bf16(w)) = (phase, &self.values) {
            if nr == 32 && amx::available() {
                // SAFETY: AMX is available; y per the caller's contract; the panels hold
                // ⌈n/32⌉·32·k values, x rows·k and a bias n (asserted by the public callers).
                unsafe { amx::product(x, rows, k, w, n, y, threads, start) };
                return;
            }
        }
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
        let work = |p0: usize, p1: usize| {
            // SAFETY: this thread's columns, inside y's rows·n values.
            unsafe { start.fill(y, rows, n, p0 * nr..(p1 * nr).min(n)) };
            let kc = (BLOCK_BYTES / 4 / nr).min(k);
            // bf16 prefill widens one block at a time into this buffer.
            let mut block = match &self.values {
                PanelValues::Bf16(_) if group == 1 => vec![0f32; kc * nr],
                _ => Vec::new(),
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
                        // Many rows (g is 1): widen the block once for all row tiles.
                        PanelValues::Bf16(v) => {
                            widen(kern, &v[start..end], &mut block[..kb * nr]);
                            (WBlock::F32(&block[..kb * nr]), 0)
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
        pool::run(threads, &|t| {
            let (p0, p1) = (t * per, ((t + 1) * per).min(panels));
            if p0 < p1 {
                work(p0, p1);
            }
        });
    }
}

/// Which rows a product computes: decode steps run the FMA chains (`tile.rs`); prompts
/// over bf16 panels run AMX's products where the CPU has AMX-BF16 (`amx.rs`), else the
/// FMA chains too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Decode steps (and every product of the attention kernels).
    Decode,
    /// Prompt rows (prefill and the vision tower).
    Prompt,
}

/// x's rows in tiles of `mr` (the last one shorter), each tile `[k][r]`: a tile's activations
/// for one input index are adjacent. Tiles are packed in parallel when there are several,
/// straight into the new buffer (no zero fill first).
fn pack_x(x: &[f32], rows: usize, k: usize, mr: usize) -> Vec<f32> {
    let len = rows * k;
    let mut out = Vec::with_capacity(len);
    let mut tiles: Vec<&mut [MaybeUninit<f32>]> =
        out.spare_capacity_mut()[..len].chunks_mut(mr * k).collect();
    let pack = |ti: usize, t: &mut &mut [MaybeUninit<f32>]| {
        let (r0, r) = (ti * mr, t.len() / k);
        let src = &x[r0 * k..(r0 + r) * k];
        // Written in order; the tile's rows are read side by side.
        for (c, col) in t.chunks_exact_mut(r).enumerate() {
            for (i, v) in col.iter_mut().enumerate() {
                v.write(src[i * k + c]);
            }
        }
    };
    if threads_for(rows * k * 64) > 1 {
        pool::run_each(&mut tiles, pack);
    } else {
        tiles.iter_mut().enumerate().for_each(|(i, t)| pack(i, t));
    }
    // SAFETY: the tiles cover all `len` values and each tile writes every one of its values
    // (r rows × k inputs, t.len() = r·k).
    unsafe { out.set_len(len) };
    out
}

#[cfg(test)]
mod tests {
    use super::super::kernels::max_diff;
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
    fn a_fresh_product_over_no_inputs_is_zeros() {
        assert_eq!(
            Panels::pack(&[], 3, 0, false).matmul(&[], 2, None),
            vec![0.0; 6]
        );
    }

    #[test]
    fn panel_products_match_the_naive_product_for_every_tile_and_block_shape() {
        // n with a partial panel, k over several blocks with a tail, rows over several tiles.
        for &(rows, k, n) in &[
            (1, 7, 3),
            (5, 300, 45),
            (13, 1030, 70),
            (30, 64, 33),
            (40, 700, 400),
        ] {
            let x: Vec<f32> = (0..rows * k).map(|i| (i as f32 * 0.37).sin()).collect();
            let w: Vec<f32> = (0..n * k).map(|i| (i as f32 * 0.11).cos() / 3.0).collect();
            let y0: Vec<f32> = (0..rows * n).map(|i| i as f32 * 0.01).collect();
            let p = Panels::pack(&w, n, k, false);
            assert_eq!(p.unpack(), w);
            let mut y = y0.clone();
            p.matmul_add(&x, rows, &mut y);
            let want = naive(&x, rows, k, &w, n, &y0);
            let d = max_diff(&y, &want);
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
            // A fresh product (no zero-filled buffer first) gives the bits of adding into zeros.
            let mut z = vec![0f32; rows * n];
            p.matmul_add(&x, rows, &mut z);
            assert_eq!(
                p.matmul(&x, rows, None),
                z,
                "rows {rows} k {k} n {n}: fresh product"
            );
            // ... and with a bias, the bits of adding into rows of the bias.
            let bias: Vec<f32> = (0..n).map(|j| j as f32 * 0.5 - 1.0).collect();
            let mut yb0: Vec<f32> = (0..rows).flat_map(|_| bias.iter().copied()).collect();
            p.matmul_add(&x, rows, &mut yb0);
            assert_eq!(
                p.matmul(&x, rows, Some(&bias)),
                yb0,
                "rows {rows} k {k} n {n}: fresh product with a bias"
            );
            // bf16 panels: the product of the rounded weights.
            let wr: Vec<f32> = w
                .iter()
                .map(|&v| half::bf16::from_f32(v).to_f32())
                .collect();
            let pb = Panels::pack(&w, n, k, true);
            assert_eq!(pb.unpack(), wr);
            let mut yb = vec![0f32; rows * n];
            pb.matmul_add(&x, rows, &mut yb);
            assert_eq!(
                pb.matmul(&x, rows, None),
                yb,
                "bf16 rows {rows} k {k} n {n}: fresh product"
            );
            let mut yb = y0.clone();
            pb.matmul_add(&x, rows, &mut yb);
            let want = naive(&x, rows, k, &wr, n, &y0);
            let d = max_diff(&yb, &want);
            assert!(
                d < 1e-4 * (k as f32).sqrt(),
                "bf16 rows {rows} k {k} n {n}: max |Δ| {d}"
            );
        }
    }

    #[test]
    fn prompt_products_are_as_accurate_as_the_fma_chains_and_do_not_depend_on_the_batch() {
        // Where the CPU has AMX, prompt rows over bf16 panels run AMX's products (amx.rs);
        // f32 panels, and CPUs without AMX, run the FMA chains. Shapes: partial row tiles and
        // panels, k over several weight blocks with a tail, a bias.
        if !cfg!(target_arch = "x86_64") || !super::super::amx::available() {
            println!("no AMX-BF16 here: prompt products run the FMA chains");
        }
        for &(rows, k, n) in &[(1, 7, 3), (17, 300, 45), (40, 1030, 70), (64, 64, 64)] {
            let x: Vec<f32> = (0..rows * k).map(|i| (i as f32 * 0.37).sin()).collect();
            let w: Vec<f32> = (0..n * k).map(|i| (i as f32 * 0.11).cos() / 3.0).collect();
            let bias: Vec<f32> = (0..n).map(|j| j as f32 * 0.5 - 1.0).collect();
            let rows_of_bias: Vec<f32> = (0..rows).flat_map(|_| bias.iter().copied()).collect();
            // f32 panels: the FMA chains, prompt or not.
            let p = Panels::pack(&w, n, k, false);
            assert_eq!(
                p.matmul_in(&x, rows, Some(&bias), Phase::Prompt),
                p.matmul(&x, rows, Some(&bias)),
                "f32 rows {rows} k {k} n {n}"
            );
            // bf16 panels: within twice the FMA chains' error against the exact product of
            // the rounded weights (or f32's rounding of the result, for small k).
            let wr: Vec<f32> = w
                .iter()
                .map(|&v| half::bf16::from_f32(v).to_f32())
                .collect();
            let want = naive(&x, rows, k, &wr, n, &rows_of_bias);
            let pb = Panels::pack(&w, n, k, true);
            let prompt = pb.matmul_in(&x, rows, Some(&bias), Phase::Prompt);
            let d_fma = max_diff(&pb.matmul(&x, rows, Some(&bias)), &want);
            let d_prompt = max_diff(&prompt, &want);
            let scale = want.iter().fold(0f32, |m, v| m.max(v.abs()));
            assert!(
                d_prompt <= (2.0 * d_fma).max(scale * f32::EPSILON * 2.0),
                "rows {rows} k {k} n {n}: prompt max |Δ| {d_prompt}, FMA chains {d_fma}"
            );
            // Without a bias, the same accuracy against the product alone.
            let want0 = naive(&x, rows, k, &wr, n, &vec![0.0; rows * n]);
            let d0 = max_diff(&pb.matmul_in(&x, rows, None, Phase::Prompt), &want0);
            let d0_fma = max_diff(&pb.matmul(&x, rows, None), &want0);
            let scale0 = want0.iter().fold(0f32, |m, v| m.max(v.abs()));
            assert!(
                d0 <= (2.0 * d0_fma).max(scale0 * f32::EPSILON * 2.0),
                "rows {rows} k {k} n {n}, no bias: prompt max |Δ| {d0}, FMA chains {d0_fma}"
            );
            // Adding into y gives the bits of a fresh product from the bias.
            let mut y = rows_of_bias.clone();
            pb.matmul_add_in(&x, rows, &mut y, Phase::Prompt);
            assert_eq!(y, prompt, "rows {rows} k {k} n {n}: add into y");
            // Each row alone, and the rows in another split, give the same bits.
            for r in [0, rows / 2, rows - 1] {
                let one = pb.matmul_in(&x[r * k..(r + 1) * k], 1, Some(&bias), Phase::Prompt);
                assert_eq!(
                    one,
                    prompt[r * n..(r + 1) * n],
                    "rows {rows} k {k} n {n}: row {r}"
                );
            }
            let h = rows / 3;
            let mut parts = pb.matmul_in(&x[..h * k], h, Some(&bias), Phase::Prompt);
            parts.extend(pb.matmul_in(&x[h * k..], rows - h, Some(&bias), Phase::Prompt));
            assert_eq!(parts, prompt, "rows {rows} k {k} n {n}: split batch");
        }
    }
}
