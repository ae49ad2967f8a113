//! Prompt products on Intel AMX for weights held as bf16 (`y[rows, n] = y₀ + x · wᵀ` over bf16
//! panels: a bf16 checkpoint in f32, or `--dtype bf16`), at f32 accuracy, for CPUs with
//! AMX-BF16 (Sapphire Rapids and later).
//!
//! AMX multiplies bf16 tiles and accumulates in f32, 16× the f32 FMA rate of AVX-512 per
//! core. Each f32 activation is split exactly into three bf16 parts by rounding to nearest
//! (`x = hi + mid + lo`, |mid| ≤ 2⁻⁹|x|, |lo| ≤ 2⁻¹⁸|x|). A bf16 weight times a part is exact
//! in f32, so the three products add up `x · w` exactly; only the f32 sum rounds (three
//! additions per input where the FMA chains make one, and AMX adds pairs of products). AMX
//! treats subnormal inputs and results as zero: the `lo` part of an activation below about
//! 3e-33 is dropped, and sums below 1.2e-38 flush to zero.
//!
//! Activations are split once per call; weights one block at a time (`KC_STEPS` steps of one
//! panel) into AMX's pair-interleaved layout, by the thread that owns the panel, each block
//! while the one before it runs. Each output's sum runs over the inputs in the same order
//! whatever its row's tile, the number of rows or the thread count, so a prompt row's
//! products do not depend on the other rows of its batch. They are not the bits of the FMA
//! chains (`tile.rs`): the engine runs prompts here and decode steps there (see
//! [`crate::backend::Backend::set_prompt`]), so each is deterministic on its own.
//! `VLM_EVAL_CPU_AMX=0` turns this path off.
//!
//! f32 weights stay on the FMA chains: splitting them into three parts as well (six
//! products) measured 1.2–1.4× faster per product but no faster end to end
//! (docs/BENCHMARKS.md).

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
pub(super) use imp::{available, product};

/// The variable that turns AMX off (`0`) or leaves it on where the CPU has it (`1`, or unset).
pub(super) const ENV: &str = "VLM_EVAL_CPU_AMX";

/// Whether `VLM_EVAL_CPU_AMX`'s value `v` allows AMX: unset, empty, `1`, `on`, `true` or
/// `yes` do (where the CPU has it), `0`, `off`, `false` or `no` do not (any case); anything
/// else is an error naming the variable and what it takes.
pub(super) fn allowed_by(v: Option<&str>) -> Result<bool, String> {
    let Some(v) = v.map(str::trim) else {
        return Ok(true);
    };
    match v.to_ascii_lowercase().as_str() {
        "" | "1" | "on" | "true" | "yes" => Ok(true),
        "0" | "off" | "false" | "no" => Ok(false),
        _ => Err(format!(
            "{ENV}={v:?}: expected 0 (prompt products off AMX) or 1 (on AMX where the CPU has \
             it, the default); unset it or set one of those"
        )),
    }
}

/// [`allowed_by`] this process's `VLM_EVAL_CPU_AMX` (a value that is not Unicode is an
/// error too).
pub(super) fn allowed() -> Result<bool, String> {
    match std::env::var(ENV) {
        Ok(v) => allowed_by(Some(&v)),
        Err(std::env::VarError::NotPresent) => allowed_by(None),
        Err(std::env::VarError::NotUnicode(_)) => Err(format!(
            "{ENV}: not valid UTF-8; set it to 0 or 1, or unset it"
        )),
    }
}

/// Whether this CPU runs AMX prompt products (AMX is used only on Linux on x86-64).
#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
pub(super) fn available() -> bool {
    false
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod imp {
    use super::super::pool::{self, Out};
    use super::super::simd::multiversion;
    use super::super::start::Start;
    use std::arch::asm;

    /// Rows of one AMX tile; the kernel covers two (32 rows) per pass.
    const TILE_ROWS: usize = 16;
    /// Inputs of one AMX step (32 bf16 per tile row).
    const STEP: usize = 32;

    /// `hi`, `mid`, `lo` bf16 parts (as f32 bit patterns, low 16 bits zero) of `v`, rounded to
    /// nearest: `v = hi + mid + lo` exactly for normal values.
    #[inline(always)]
    fn split_nearest(v: f32) -> [u32; 3] {
        #[inline(always)]
        fn rne(b: u32) -> u32 {
            b.wrapping_add(0x7fff + ((b >> 16) & 1)) & 0xffff_0000
        }
        let hi = rne(v.to_bits());
        let r1 = v - f32::from_bits(hi);
        let mid = rne(r1.to_bits());
        let lo = rne((r1 - f32::from_bits(mid)).to_bits());
        [hi, mid, lo]
    }

    /// Input steps per weight block (128 inputs × 32 columns × 2 bytes = 8 KiB).
    const KC_STEPS: usize = 4;
    /// Bytes of one tile (16 rows × 64 bytes).
    const TILE: usize = 1024;

    /// Whether this CPU and OS run AMX-BF16 (checked once): CPUID leaf 7 AMX-TILE and
    /// AMX-BF16, AVX-512F for the conversions, the kernel's permission for tile data
    /// (`arch_prctl(ARCH_REQ_XCOMP_PERM)`, Linux 5.16+), and `VLM_EVAL_CPU_AMX` not off
    /// ([`super::allowed`]).
    pub fn available() -> bool {
        use std::sync::OnceLock;
        static OK: OnceLock<bool> = OnceLock::new();
        *OK.get_or_init(|| {
            // An unreadable value was refused when the backend was built
            // (`CpuPacked::check_env`); here it leaves AMX off.
            if !super::allowed().unwrap_or(false) {
                return false;
            }
            if !super::super::simd::avx512() {
                return false;
            }
            let leaf7 = std::arch::x86_64::__cpuid_count(7, 0);
            let (bf16, tile) = (leaf7.edx >> 22 & 1 == 1, leaf7.edx >> 24 & 1 == 1);
            if !(bf16 && tile) {
                return false;
            }
            const ARCH_REQ_XCOMP_PERM: libc::c_long = 0x1023;
            const XFEATURE_XTILEDATA: libc::c_long = 18;
            // SAFETY: a plain system call with integer arguments; it only changes which
            // extended state this process may use.
            let r = unsafe {
                libc::syscall(
                    libc::SYS_arch_prctl,
                    ARCH_REQ_XCOMP_PERM,
                    XFEATURE_XTILEDATA,
                )
            };
            r == 0
        })
    }

    /// One cache line.
    #[repr(C, align(64))]
    #[derive(Clone, Copy)]
    struct Line([u8; 64]);

    /// Plain values for which every bit pattern is valid (so zeroed lines can hold them).
    trait Plain: Copy {}
    impl Plain for u16 {}
    impl Plain for u32 {}
    impl Plain for f32 {}

    /// A zeroed buffer starting on a cache line: a tile row that straddles two lines costs
    /// two accesses, and tiles read 16 rows at a time.
    struct Aligned<T: Plain> {
        lines: Vec<Line>,
        len: usize,
        _t: std::marker::PhantomData<T>,
    }

    impl<T: Plain> Aligned<T> {
        fn zeroed(len: usize) -> Self {
            let bytes = len * std::mem::size_of::<T>();
            Aligned {
                lines: vec![Line([0; 64]); bytes.div_ceil(64)],
                len,
                _t: std::marker::PhantomData,
            }
        }
        fn as_slice(&self) -> &[T] {
            // SAFETY: the lines hold len·size_of::<T>() initialised bytes, aligned for T
            // (64 bytes), and every bit pattern is a valid T (`Plain`).
            unsafe { std::slice::from_raw_parts(self.lines.as_ptr().cast(), self.len) }
        }
        fn as_mut_slice(&mut self) -> &mut [T] {
            // SAFETY: as above, borrowed uniquely.
            unsafe { std::slice::from_raw_parts_mut(self.lines.as_mut_ptr().cast(), self.len) }
        }
    }

    /// Activations split for AMX: blocks of 16 rows (the last padded with zeros, and a zero
    /// block to make the count even), each `[step][row][part][32]` bf16.
    struct SplitRows {
        data: Aligned<u16>,
        steps: usize,
        blocks: usize,
    }

    impl SplitRows {
        /// Bytes of one 16-row block.
        fn block_bytes(&self) -> usize {
            self.steps * TILE_ROWS * 3 * STEP * 2
        }
        /// The hi tile of rows `16·rb..` at step `s`; mid and lo follow 64 and 128 bytes on,
        /// rows 192 bytes apart.
        fn at(&self, rb: usize, s: usize) -> *const u8 {
            let off = rb * self.block_bytes() + s * TILE_ROWS * 3 * STEP * 2;
            self.data.as_slice().as_ptr().cast::<u8>().wrapping_add(off)
        }
    }

    multiversion! {
        /// Split one 16-row block of `x[rows, k]` (rows `16·rb..`) into `out`.
        fn split_block(x: &[f32], rows: usize, k: usize, rb: usize, out: &mut [u16]) {
            let steps = k.div_ceil(STEP);
            for r in 0..TILE_ROWS {
                let row = rb * TILE_ROWS + r;
                for s in 0..steps {
                    let dst = &mut out[(s * TILE_ROWS + r) * 3 * STEP..][..3 * STEP];
                    if row >= rows {
                        dst.fill(0);
                        continue;
                    }
                    let src = &x[row * k + s * STEP..row * k + (s * STEP + STEP).min(k)];
                    let (hi, rest) = dst.split_at_mut(STEP);
                    let (mid, lo) = rest.split_at_mut(STEP);
                    for i in 0..STEP {
                        let v = src.get(i).copied().unwrap_or(0.0);
                        let [h, m, l] = split_nearest(v);
                        hi[i] = (h >> 16) as u16;
                        mid[i] = (m >> 16) as u16;
                        lo[i] = (l >> 16) as u16;
                    }
                }
            }
        }
    }

    fn split_rows(x: &[f32], rows: usize, k: usize) -> SplitRows {
        let steps = k.div_ceil(STEP);
        let blocks = rows.div_ceil(2 * TILE_ROWS) * 2;
        let per = steps * TILE_ROWS * 3 * STEP;
        let mut data = Aligned::zeroed(blocks * per);
        let mut chunks: Vec<&mut [u16]> = data.as_mut_slice().chunks_mut(per).collect();
        let split = |rb: usize, out: &mut &mut [u16]| split_block(x, rows, k, rb, out);
        if super::super::pool::threads_for(rows * k * 64) > 1 {
            pool::run_each(&mut chunks, split);
        } else {
            chunks.iter_mut().enumerate().for_each(|(i, c)| split(i, c));
        }
        SplitRows {
            data,
            steps,
            blocks,
        }
    }

    /// Weights of bf16 panel `p` (`[k][32]` per panel, back to back), inputs `k0..k1`, in
    /// AMX's pair-interleaved tiles: per step, per 16-column half, `[16 pairs][16 columns][2]`;
    /// inputs past k1 are zeros. Only steps `st` of the block are converted (so the work can
    /// be spread between passes).
    fn convert(
        w: &[u16],
        k: usize,
        p: usize,
        (k0, k1): (usize, usize),
        st: std::ops::Range<usize>,
        out: &mut [u32],
    ) {
        let steps = (k1 - k0).div_ceil(STEP);
        let st = st.start.min(steps)..st.end.min(steps);
        assert!(
            out.len() >= steps * 2 * 256,
            "AMX weight block: short buffer"
        );
        assert!(
            w.len() >= (p + 1) * 32 * k,
            "AMX weight block: short panels"
        );
        // SAFETY: AVX-512F (`available`); the panel's rows k0..k1 and out's steps·2·256
        // values are in bounds (asserted).
        unsafe { convert_bf16(w[p * 32 * k..].as_ptr(), k0, k1, st, out.as_mut_ptr()) }
    }

    /// [`convert`] from the panel at `panel`.
    ///
    /// # Safety
    /// AVX-512F; `panel` holds rows `..k1` of 32 values, `out` the block's values.
    #[target_feature(enable = "avx512f")]
    unsafe fn convert_bf16(
        panel: *const u16,
        k0: usize,
        k1: usize,
        st: std::ops::Range<usize>,
        out: *mut u32,
    ) {
        use std::arch::x86_64::*;
        let row = |kk: usize, h: usize| {
            if kk < k1 {
                // SAFETY: row kk < k1 of the panel (the caller's contract).
                unsafe {
                    _mm512_cvtepu16_epi32(_mm256_loadu_si256(panel.add(kk * 32 + h * 16).cast()))
                }
            } else {
                _mm512_setzero_si512()
            }
        };
        for s in st.clone() {
            for i in 0..STEP / 2 {
                let ke = k0 + s * STEP + 2 * i;
                for h in 0..2 {
                    let v = _mm512_or_si512(_mm512_slli_epi32(row(ke + 1, h), 16), row(ke, h));
                    // SAFETY: inside the block (the caller's contract).
                    unsafe { _mm512_storeu_si512(out.add((s * 2 + h) * 256 + i * 16).cast(), v) };
                }
            }
        }
    }

    /// The tile configuration: palette 1, tiles 0–7 all 16 rows × 64 bytes (0–3 the 32×32
    /// f32 accumulator, 4–5 activations, 6–7 weights).
    #[repr(C, align(64))]
    struct Config([u8; 64]);

    fn config() -> Config {
        let mut c = [0u8; 64];
        c[0] = 1;
        for t in 0..8 {
            c[16 + 2 * t] = 64;
            c[48 + t] = TILE_ROWS as u8;
        }
        Config(c)
    }

    /// `y[rows, n] = start + x[rows, k] · wᵀ` for the 32-column bf16 panels `w` of a weight
    /// `[n, k]`, on at most `threads` threads (panels are split between them). The
    /// accumulators start from `start` (y's values, zeros or the bias) and are written to y
    /// once, at the end.
    ///
    /// # Safety
    /// [`available`] must be true; `y` must be valid for writes (and, for [`Start::Existing`],
    /// reads) of `rows·n` values, written only by this call while it runs; `w` holds
    /// `⌈n/32⌉·32·k` values, x `rows·k`, a bias n.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn product(
        x: &[f32],
        rows: usize,
        k: usize,
        w: &[u16],
        n: usize,
        y: Out,
        threads: usize,
        start: Start<'_>,
    ) {
        let a = split_rows(x, rows, k);
        let panels = n.div_ceil(32);
        let threads = threads.min(panels).max(1);
        let per = panels.div_ceil(threads);
        pool::run(threads, &|t| {
            let (p0, p1) = (t * per, ((t + 1) * per).min(panels));
            if p0 >= p1 {
                return;
            }
            let tiles_r = a.blocks / 2;
            let np = p1 - p0;
            // This thread's outputs as 32×32 blocks `[row tile][panel]`, each four 16×16
            // tiles (rows 0–15 then 16–31, columns 0–15 then 16–31) of contiguous rows: the
            // accumulators load and store them whole, not 16 rows a page apart in y.
            let mut acc = Aligned::<f32>::zeroed(tiles_r * np * 1024);
            let acc = acc.as_mut_slice();
            // Each tile row of the blocks: (acc's first value, y's first value, values).
            let tile_rows = (p0..p1).flat_map(|p| {
                let cols = 32.min(n - p * 32);
                (0..rows).flat_map(move |r| {
                    (0..cols.div_ceil(16)).map(move |h| {
                        let blk = (r / 32 * np + p - p0) * 1024;
                        let at = blk + (r % 32 / 16 * 2 + h) * 256 + r % 16 * 16;
                        (at, r * n + p * 32 + h * 16, (cols - h * 16).min(16))
                    })
                })
            });
            for (at, from, len) in tile_rows.clone() {
                let src = match start {
                    // Already zeros.
                    Start::Fresh(None) => continue,
                    Start::Fresh(Some(b)) => &b[from % n..from % n + len],
                    // SAFETY: row r < rows, columns p·32 + h·16.. + len ≤ n, this thread's
                    // (the caller's contract).
                    Start::Existing => unsafe { std::slice::from_raw_parts(y.at(from), len) },
                };
                acc[at..at + len].copy_from_slice(src);
            }
            // Blocks of inputs of each panel, inputs outermost (the accumulators stay in
            // cache); each block is converted while the one before it runs.
            let items: Vec<(usize, usize)> = (0..a.steps)
                .step_by(KC_STEPS)
                .flat_map(|s0| (p0..p1).map(move |p| (p, s0)))
                .collect();
            let span = |s0: usize| (s0 * STEP, ((s0 + KC_STEPS) * STEP).min(k));
            let len = KC_STEPS * 2 * 256;
            let mut bufs = [Aligned::<u32>::zeroed(len), Aligned::<u32>::zeroed(len)];
            convert(
                w,
                k,
                items[0].0,
                span(items[0].1),
                0..KC_STEPS,
                bufs[0].as_mut_slice(),
            );
            let cfg = config();
            // SAFETY: the CPU has AMX and this process may use it (`available`).
            unsafe { asm!("ldtilecfg [{}]", in(reg) cfg.0.as_ptr(), options(nostack, readonly)) };
            for (i, &(p, s0)) in items.iter().enumerate() {
                let ns = KC_STEPS.min(a.steps - s0);
                let [b0, b1] = &mut bufs;
                let (cur, next) = if i % 2 == 0 { (b0, b1) } else { (b1, b0) };
                let cur = cur.as_slice().as_ptr().cast::<u8>();
                for rt in 0..tiles_r {
                    let c = acc[(rt * np + p - p0) * 1024..][..1024].as_mut_ptr();
                    // SAFETY: c is one 32×32 block of acc; a's blocks 2rt and 2rt + 1
                    // exist (an even count); cur holds ns converted steps.
                    unsafe { pass(c, &a, 2 * rt, s0, ns, cur) };
                    // One step of the next block while these products run.
                    if let Some(&(pn, sn)) = items.get(i + 1) {
                        convert(w, k, pn, span(sn), rt..rt + 1, next.as_mut_slice());
                    }
                }
                if let Some(&(pn, sn)) = items.get(i + 1) {
                    convert(w, k, pn, span(sn), tiles_r..KC_STEPS, next.as_mut_slice());
                }
            }
            for (at, to, len) in tile_rows {
                let src = &acc[at..at + len];
                // SAFETY: as above; a whole tile row (16 values) is one fixed-size copy
                // rather than a call.
                unsafe {
                    if len == 16 {
                        std::ptr::copy_nonoverlapping(src.as_ptr(), y.at(to), 16);
                    } else {
                        std::ptr::copy_nonoverlapping(src.as_ptr(), y.at(to), len);
                    }
                }
            }
            // SAFETY: releases this thread's tile state (AMX is available).
            unsafe { asm!("tilerelease", options(nostack, nomem)) };
        });
    }

    /// One 32×32 accumulator: load it from `c` (four 16×16 tiles), add steps
    /// `s0..s0 + ns` of activation blocks `rb`, `rb + 1` (each part: hi, mid, lo) times the
    /// converted weights `b`, store it back.
    ///
    /// # Safety
    /// Tiles configured by [`config`]; `c` valid for 1,024 values; `b` holds `ns` steps of
    /// the layout [`convert`] writes.
    #[inline(always)]
    unsafe fn pass(c: *mut f32, a: &SplitRows, rb: usize, s0: usize, ns: usize, b: *const u8) {
        let cs = 64usize;
        // SAFETY: per the caller.
        unsafe {
            asm!(
                "tileloadd tmm0, [{c} + {cs}]",
                "tileloadd tmm1, [{c} + {cs} + 1024]",
                "tileloadd tmm2, [{c} + {cs} + 2048]",
                "tileloadd tmm3, [{c} + {cs} + 3072]",
                c = in(reg) c, cs = in(reg) cs,
                options(nostack, readonly),
            );
        }
        for s in 0..ns {
            let (a0, a1) = (a.at(rb, s0 + s), a.at(rb + 1, s0 + s));
            let b = b.wrapping_add(s * 2 * TILE);
            // SAFETY: per the caller; a's tiles are in its buffer (rows 192 bytes apart).
            unsafe {
                asm!(
                    "tileloadd tmm6, [{b} + {sb}]",
                    "tileloadd tmm7, [{b} + {sb} + 1024]",
                    "tileloadd tmm4, [{a0} + {sa}]",
                    "tileloadd tmm5, [{a1} + {sa}]",
                    "tdpbf16ps tmm0, tmm4, tmm6",
                    "tdpbf16ps tmm1, tmm4, tmm7",
                    "tdpbf16ps tmm2, tmm5, tmm6",
                    "tdpbf16ps tmm3, tmm5, tmm7",
                    "tileloadd tmm4, [{a0} + {sa} + 64]",
                    "tileloadd tmm5, [{a1} + {sa} + 64]",
                    "tdpbf16ps tmm0, tmm4, tmm6",
                    "tdpbf16ps tmm1, tmm4, tmm7",
                    "tdpbf16ps tmm2, tmm5, tmm6",
                    "tdpbf16ps tmm3, tmm5, tmm7",
                    "tileloadd tmm4, [{a0} + {sa} + 128]",
                    "tileloadd tmm5, [{a1} + {sa} + 128]",
                    "tdpbf16ps tmm0, tmm4, tmm6",
                    "tdpbf16ps tmm1, tmm4, tmm7",
                    "tdpbf16ps tmm2, tmm5, tmm6",
                    "tdpbf16ps tmm3, tmm5, tmm7",
                    a0 = in(reg) a0, a1 = in(reg) a1, sa = in(reg) 192usize,
                    b = in(reg) b, sb = in(reg) 64usize,
                    options(nostack, readonly),
                );
            }
        }
        // SAFETY: per the caller.
        unsafe {
            asm!(
                "tilestored [{c} + {cs}], tmm0",
                "tilestored [{c} + {cs} + 1024], tmm1",
                "tilestored [{c} + {cs} + 2048], tmm2",
                "tilestored [{c} + {cs} + 3072], tmm3",
                c = in(reg) c, cs = in(reg) cs,
                options(nostack),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::allowed_by;

    #[test]
    fn the_amx_switch_takes_on_and_off_words_and_refuses_anything_else() {
        for on in [
            None,
            Some(""),
            Some("1"),
            Some(" on "),
            Some("TRUE"),
            Some("yes"),
        ] {
            assert_eq!(allowed_by(on), Ok(true), "{on:?}");
        }
        for off in ["0", "off", "False", " no"] {
            assert_eq!(allowed_by(Some(off)), Ok(false), "{off:?}");
        }
        for bad in ["2", "maybe", "0x0", "o"] {
            let e = allowed_by(Some(bad)).unwrap_err();
            assert!(e.starts_with("VLM_EVAL_CPU_AMX=") && e.contains(bad), "{e}");
            assert!(!e.contains('\n'), "one line: {e}");
        }
    }
}
