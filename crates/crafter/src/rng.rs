//! Bit-exact twin of numpy's legacy `np.random.RandomState` (MT19937).
//!
//! Seeding is the reference `init_genrand` (numpy `mt19937_seed`), block
//! regeneration and tempering are the reference MT19937, `next_double` is
//! numpy's 53-bit `random_sample`, and `randint` follows numpy's masked
//! rejection sampler (`random_bounded_uint64_fill` with `use_masked=True`).
//! Only the scalar calls crafter makes are modelled; no Gaussian cache.

/// Number of 32-bit words in the MT19937 state.
const N: usize = 624;
/// MT19937 middle-word offset.
const M: usize = 397;
/// MT19937 twist matrix constant.
const MATRIX_A: u32 = 0x9908_B0DF;
/// Most significant bit of a state word.
const UPPER_MASK: u32 = 0x8000_0000;
/// Lower 31 bits of a state word.
const LOWER_MASK: u32 = 0x7FFF_FFFF;

/// numpy legacy `RandomState`: MT19937 state words plus read position.
#[derive(Clone)]
pub struct RandomState {
    /// MT19937 state words (numpy `get_state()[1]`).
    key: [u32; N],
    /// Index of the next word to temper; `N` means the block must be regenerated.
    pos: usize,
}

impl std::fmt::Debug for RandomState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RandomState")
            .field("pos", &self.pos)
            .field("key[0]", &self.key[0])
            .finish_non_exhaustive()
    }
}

/// One MT19937 twist step combining words `cur`, `next` and `far`.
#[inline(always)]
fn twist(cur: u32, next: u32, far: u32) -> u32 {
    let y = (cur & UPPER_MASK) | (next & LOWER_MASK);
    far ^ (y >> 1) ^ (0u32.wrapping_sub(y & 1) & MATRIX_A)
}

/// MT19937 output tempering.
#[inline(always)]
fn temper(mut y: u32) -> u32 {
    y ^= y >> 11;
    y ^= (y << 7) & 0x9D2C_5680;
    y ^= (y << 15) & 0xEFC6_0000;
    y ^ (y >> 18)
}

/// The MT19937 block regeneration over all 624 words (integer operations only, so the AVX2
/// build gives the same words).
#[inline(always)]
fn regenerate_words(k: &mut [u32; N]) {
    // i in 0..N-M: reads k[i], k[i+1], k[i+M], all still old values.
    for i in 0..N - M {
        k[i] = twist(k[i], k[i + 1], k[i + M]);
    }
    // i in N-M..N-1: reads k[i+M-N], already regenerated above.
    for i in N - M..N - 1 {
        k[i] = twist(k[i], k[i + 1], k[i + M - N]);
    }
    k[N - 1] = twist(k[N - 1], k[0], k[M - 1]);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn regenerate_avx2(k: &mut [u32; N]) {
    regenerate_words(k);
}

/// `fill_uniform`'s inner loop over whole pairs of words: `out[i] = low + range * d`, `d` the
/// 53-bit double from words `2i` and `2i+1`.
#[inline(always)]
fn uniform_pairs(low: f64, range: f64, words: &[u32], out: &mut [f64]) {
    for (slot, w) in out.iter_mut().zip(words.chunks_exact(2)) {
        // Both shifted words fit in an i32, so the signed conversion is exact (and vectorises).
        let a = (temper(w[0]) >> 5) as i32;
        let b = (temper(w[1]) >> 6) as i32;
        let d = (f64::from(a) * 67_108_864.0 + f64::from(b)) / 9_007_199_254_740_992.0;
        *slot = low + range * d;
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn uniform_pairs_avx2(low: f64, range: f64, words: &[u32], out: &mut [f64]) {
    uniform_pairs(low, range, words, out);
}

/// [`uniform_pairs`] eight pairs at a time with AVX-512 F+DQ: the 16 words of a register are
/// tempered as 32-bit lanes, then read as eight 64-bit lanes whose low half is word `2i` and high
/// half word `2i+1`, so `(a >> 5) << 26 | (b >> 6)` is the 53-bit integer the scalar path builds
/// as `a * 67108864.0 + b` (exact: it is below 2^53), converted exactly and scaled by 2^-53 (the
/// scalar path's exact division). `low + range * d` is a multiply then an add, as in the scalar
/// path (no fused multiply-add), so every double has the same bits. The tail goes through the
/// scalar loop.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn uniform_pairs_x8(low: f64, range: f64, words: &[u32], out: &mut [f64]) {
    use std::arch::x86_64::*;
    let n = out.len().min(words.len() / 2);
    let full = n / 8 * 8;
    let (lowv, rangev) = (_mm512_set1_pd(low), _mm512_set1_pd(range));
    let scale = _mm512_set1_pd(1.0 / 9_007_199_254_740_992.0);
    let (mask_b, mask_c) = (
        _mm512_set1_epi32(0x9D2C_5680u32 as i32),
        _mm512_set1_epi32(0xEFC6_0000u32 as i32),
    );
    let low32 = _mm512_set1_epi64(0xFFFF_FFFF);
    let mut k = 0;
    while k < full {
        // SAFETY: k + 8 <= n, so words[2k..2k + 16] and out[k..k + 8] are in bounds.
        let mut y = unsafe { _mm512_loadu_si512(words.as_ptr().add(2 * k).cast()) };
        y = _mm512_xor_si512(y, _mm512_srli_epi32::<11>(y));
        y = _mm512_xor_si512(y, _mm512_and_si512(_mm512_slli_epi32::<7>(y), mask_b));
        y = _mm512_xor_si512(y, _mm512_and_si512(_mm512_slli_epi32::<15>(y), mask_c));
        y = _mm512_xor_si512(y, _mm512_srli_epi32::<18>(y));
        let a = _mm512_srli_epi64::<5>(_mm512_and_si512(y, low32));
        let b = _mm512_srli_epi64::<38>(y);
        let v = _mm512_or_si512(_mm512_slli_epi64::<26>(a), b);
        let d = _mm512_mul_pd(_mm512_cvtepi64_pd(v), scale);
        let r = _mm512_add_pd(lowv, _mm512_mul_pd(rangev, d));
        unsafe { _mm512_storeu_pd(out.as_mut_ptr().add(k), r) };
        k += 8;
    }
    uniform_pairs(low, range, &words[2 * full..], &mut out[full..]);
}

/// Whether [`uniform_pairs_x8`] can run on this CPU.
#[cfg(target_arch = "x86_64")]
fn has_uniform_x8() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512dq")
}

impl RandomState {
    /// `np.random.RandomState(seed)` for an integer seed (reference `init_genrand`).
    pub fn new(seed: u32) -> Self {
        let mut key = [0u32; N];
        let mut s = seed;
        for (i, k) in key.iter_mut().enumerate() {
            *k = s;
            s = 1_812_433_253u32
                .wrapping_mul(s ^ (s >> 30))
                .wrapping_add(i as u32 + 1);
        }
        RandomState { key, pos: N }
    }

    /// Regenerate the whole 624-word block (numpy `mt19937_gen`) and reset `pos` to 0.
    #[inline(never)]
    fn regenerate(&mut self) {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked just above).
            unsafe { regenerate_avx2(&mut self.key) };
            self.pos = 0;
            return;
        }
        regenerate_words(&mut self.key);
        self.pos = 0;
    }

    /// Next raw tempered 32-bit output (numpy `mt19937_next32`).
    #[inline]
    pub fn next_u32(&mut self) -> u32 {
        if self.pos == N {
            self.regenerate();
        }
        let y = self.key[self.pos];
        self.pos += 1;
        temper(y)
    }

    /// numpy `random_sample` / `uniform()`: `((a>>5) * 67108864 + (b>>6)) / 2^53`.
    #[inline]
    pub fn next_double(&mut self) -> f64 {
        let a = self.next_u32() >> 5;
        let b = self.next_u32() >> 6;
        (f64::from(a) * 67_108_864.0 + f64::from(b)) / 9_007_199_254_740_992.0
    }

    /// numpy `uniform(low, high, size)`: fill `out` in order, as `out.len()` calls of
    /// `uniform(low, high)` would (with a tighter loop over whole pairs of words).
    pub fn fill_uniform(&mut self, low: f64, high: f64, out: &mut [f64]) {
        let range = high - low;
        #[cfg(target_arch = "x86_64")]
        let avx2 = std::arch::is_x86_feature_detected!("avx2");
        #[cfg(target_arch = "x86_64")]
        let x8 = has_uniform_x8();
        let mut i = 0;
        while i < out.len() {
            if self.pos + 2 > N {
                out[i] = low + range * self.next_double();
                i += 1;
                continue;
            }
            let pairs = ((N - self.pos) / 2).min(out.len() - i);
            let words = &self.key[self.pos..self.pos + 2 * pairs];
            let slots = &mut out[i..i + pairs];
            #[cfg(target_arch = "x86_64")]
            if x8 {
                // SAFETY: the CPU supports AVX-512 F and DQ (checked before the loop).
                unsafe { uniform_pairs_x8(low, range, words, slots) };
            } else if avx2 {
                // SAFETY: the CPU supports AVX2 (checked before the loop).
                unsafe { uniform_pairs_avx2(low, range, words, slots) };
            } else {
                uniform_pairs(low, range, words, slots);
            }
            #[cfg(not(target_arch = "x86_64"))]
            uniform_pairs(low, range, words, slots);
            self.pos += 2 * pairs;
            i += pairs;
        }
    }

    /// numpy `uniform(low, high)`: `low + (high - low) * next_double()`.
    #[inline]
    pub fn uniform(&mut self, low: f64, high: f64) -> f64 {
        let rng = high - low;
        low + rng * self.next_double()
    }

    /// numpy `randint(low, high)` (masked rejection; returns `low` without drawing if `high - low <= 1`).
    pub fn randint(&mut self, low: i64, high: i64) -> i64 {
        if high <= low {
            return low;
        }
        // Inclusive range, computed modulo 2^64 so that extreme i64 bounds work.
        let rng = (high as u64).wrapping_sub(1).wrapping_sub(low as u64);
        if rng == 0 {
            return low;
        }
        let mut mask = rng;
        mask |= mask >> 1;
        mask |= mask >> 2;
        mask |= mask >> 4;
        mask |= mask >> 8;
        mask |= mask >> 16;
        mask |= mask >> 32;
        if rng <= 0xFFFF_FFFF {
            let (rng32, mask32) = (rng as u32, mask as u32);
            loop {
                let v = self.next_u32() & mask32;
                if v <= rng32 {
                    return low.wrapping_add(i64::from(v));
                }
            }
        }
        loop {
            let hi = u64::from(self.next_u32());
            let lo = u64::from(self.next_u32());
            let v = ((hi << 32) | lo) & mask;
            if v <= rng {
                return low.wrapping_add(v as i64);
            }
        }
    }

    /// Advance by `n` doubles (`2n` raw outputs) exactly as `n` calls to `next_double` would.
    pub fn skip_doubles(&mut self, n: usize) {
        let mut remaining = n.saturating_mul(2);
        let avail = N - self.pos;
        if remaining <= avail {
            self.pos += remaining;
            return;
        }
        remaining -= avail;
        // Every further full block is regenerated and fully consumed.
        while remaining > N {
            self.regenerate();
            remaining -= N;
        }
        // 1..=N outputs left: regenerate once and consume them (pos may end at N).
        self.regenerate();
        self.pos = remaining;
    }

    /// numpy `get_state()` key (624 LE u32 words) followed by `pos` as an LE i32.
    pub fn state_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(N * 4 + 4);
        for w in &self.key {
            out.extend_from_slice(&w.to_le_bytes());
        }
        out.extend_from_slice(&(self.pos as i32).to_le_bytes());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_uniform_matches_repeated_uniform() {
        for start in [0usize, 1, 311, 622, 623, 624] {
            for n in [0usize, 1, 5, 311, 312, 313, 3087, 5000] {
                let mut a = RandomState::new(99);
                for _ in 0..start {
                    a.next_u32();
                }
                let mut b = a.clone();
                let mut out = vec![0.0; n];
                a.fill_uniform(32.0, 127.0, &mut out);
                for (k, v) in out.iter().enumerate() {
                    assert_eq!(
                        v.to_bits(),
                        b.uniform(32.0, 127.0).to_bits(),
                        "start {start} n {n} k {k}"
                    );
                }
                assert_eq!(a.state_bytes(), b.state_bytes());
            }
        }
    }

    /// The AVX-512 kernel against the scalar loop on arbitrary words (every bit pattern the
    /// tempering can meet, not only MT outputs), at every tail length.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn uniform_pairs_x8_matches_scalar() {
        if !has_uniform_x8() {
            eprintln!("skipped: this CPU has no AVX-512 F+DQ");
            return;
        }
        let mut r = RandomState::new(7);
        let mut words: Vec<u32> = (0..2 * 1000).map(|_| r.next_u32()).collect();
        words[..8].copy_from_slice(&[0, u32::MAX, 1, 0x8000_0000, 0x7FFF_FFFF, 31, 63, 64]);
        for (low, high) in [(32.0, 127.0), (0.0, 1.0), (-3.5, 1e6)] {
            for n in [0usize, 1, 7, 8, 9, 15, 16, 17, 311, 1000] {
                let (mut a, mut b) = (vec![0.0; n], vec![0.0; n]);
                uniform_pairs(low, high - low, &words[..2 * n], &mut a);
                // SAFETY: checked above.
                unsafe { uniform_pairs_x8(low, high - low, &words[..2 * n], &mut b) };
                let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&a), bits(&b), "n {n} low {low} high {high}");
            }
        }
    }

    /// 64-bit multiplicative fold used by the pinned numpy stream checksums.
    fn fold(h: u64, v: u64) -> u64 {
        h.wrapping_mul(1_000_003).wrapping_add(v)
    }

    #[test]
    fn uniform_seed0() {
        let mut r = RandomState::new(0);
        let got: Vec<f64> = (0..3).map(|_| r.uniform(0.0, 1.0)).collect();
        assert_eq!(
            got,
            [0.5488135039273248, 0.7151893663724195, 0.6027633760716439]
        );
    }

    #[test]
    fn randint_big_seed0() {
        let mut r = RandomState::new(0);
        let got: Vec<i64> = (0..3).map(|_| r.randint(0, (1 << 31) - 1)).collect();
        assert_eq!(got, [209652396, 398764591, 924231285]);
    }

    #[test]
    fn randint_4_seed0() {
        let mut r = RandomState::new(0);
        let got: Vec<i64> = (0..8).map(|_| r.randint(0, 4)).collect();
        assert_eq!(got, [0, 3, 1, 0, 3, 3, 3, 3]);
    }

    #[test]
    fn raw_next32_seed0() {
        let mut r = RandomState::new(0);
        let got: Vec<u32> = (0..3).map(|_| r.next_u32()).collect();
        assert_eq!(got, [2357136044, 2546248239, 3071714933]);
    }

    #[test]
    fn simplex_seed_of_world_seed() {
        let mut r = RandomState::new(1256191933);
        assert_eq!(r.randint(0, (1 << 31) - 1), 487388145);
    }

    #[test]
    fn randint_no_draw_cases() {
        let mut r = RandomState::new(5);
        let before = r.state_bytes();
        assert_eq!(r.randint(3, 4), 3);
        assert_eq!(r.randint(7, 7), 7);
        assert_eq!(r.randint(7, -3), 7);
        assert_eq!(r.state_bytes(), before);
    }

    #[test]
    fn randint_64bit_path_matches_numpy() {
        // np.random.RandomState(0).randint(0, 2**40) == 741280623151 (hi word first).
        let mut r = RandomState::new(0);
        assert_eq!(r.randint(0, 1 << 40), 741280623151);
        // Full i64 range must not panic.
        let mut r = RandomState::new(1);
        let _ = r.randint(i64::MIN, i64::MAX);
    }

    #[test]
    fn skip_equals_draws() {
        let ns = [
            0usize, 1, 2, 311, 312, 313, 624, 625, 1000, 1247, 1248, 1249, 3087, 5103, 100_000,
        ];
        for &pre in &[0usize, 1, 100, 311, 312, 623] {
            for &n in &ns {
                let mut a = RandomState::new(12345);
                for _ in 0..pre {
                    a.next_u32();
                }
                let mut b = a.clone();
                for _ in 0..n {
                    a.next_double();
                }
                b.skip_doubles(n);
                assert_eq!(a.state_bytes(), b.state_bytes(), "pre={pre} n={n}");
                assert_eq!(a.next_u32(), b.next_u32());
            }
        }
    }

    #[test]
    fn state_bytes_layout() {
        let r = RandomState::new(0xDEAD_BEEF);
        let b = r.state_bytes();
        assert_eq!(b.len(), 624 * 4 + 4);
        assert_eq!(&b[0..4], &0xDEAD_BEEFu32.to_le_bytes());
        assert_eq!(&b[2496..], &624i32.to_le_bytes());
        // numpy: RandomState(7); random_sample(5) -> pos 10, key[0..2], key[623].
        let mut r = RandomState::new(7);
        r.skip_doubles(5);
        let b = r.state_bytes();
        let word = |i: usize| u32::from_le_bytes(b[i * 4..i * 4 + 4].try_into().unwrap());
        assert_eq!(word(0), 2022286329);
        assert_eq!(word(1), 1444425037);
        assert_eq!(word(623), 4033246365);
        assert_eq!(i32::from_le_bytes(b[2496..].try_into().unwrap()), 10);
    }

    /// Mirror of `gen/rng_vectors.py`: a 20 000-op mixed stream checked against numpy.
    #[test]
    fn long_mixed_stream_matches_numpy() {
        // (seed, fold checksum, value at op 9999, value at op 19998, pos, key[0..3], key[623], key checksum)
        type Case = (u32, u64, u64, u64, i32, [u32; 3], u32, u64);
        let cases: [Case; 4] = [
            (
                0,
                0x1f5cdd3f7a14ae73,
                4601266319189229654,
                4585629988892756832,
                296,
                [3961059206, 2590039615, 3191888001],
                2779885060,
                0x18acff38f9cf1,
            ),
            (
                42,
                0xbdae7a80dda1f812,
                4604328732514179424,
                4596367291272166692,
                166,
                [2522383184, 2830585260, 2141921998],
                4220677406,
                0x18c0b92d76d5a,
            ),
            (
                1256191933,
                0xf2e54d35b0453db7,
                4599601421258604590,
                4599358034480406954,
                19,
                [3317112006, 3340160694, 915145061],
                90405941,
                0x171907b9c5a92,
            ),
            (
                4294967295,
                0x839a2c481724e72e,
                4606633516777951827,
                4606215438971371515,
                90,
                [4051839422, 2702198396, 1770654349],
                2015590886,
                0x17ca63ef47066,
            ),
        ];
        for (seed, want_h, want_9999, want_19998, want_pos, want_k, want_k623, want_cs) in cases {
            let mut r = RandomState::new(seed);
            let mut h = 0u64;
            let (mut at_9999, mut at_19998) = (0, 0);
            for k in 0..20000i64 {
                let v: u64 = match k % 9 {
                    0 => r.uniform(0.0, 1.0).to_bits(),
                    1 => r.randint(0, 4) as u64,
                    2 => r.randint(0, (1 << 31) - 1) as u64,
                    3 => r.randint(0, 1) as u64,
                    4 => r.randint(0, 1 + k % 97) as u64,
                    5 => r.uniform(32.0, 127.0).to_bits(),
                    6 => r.randint(-5, 1 << 40) as u64,
                    7 => r.randint(-10, 10) as u64,
                    _ => {
                        r.skip_doubles((k % 1500) as usize);
                        0
                    }
                };
                h = fold(h, v);
                if k == 9999 {
                    at_9999 = v;
                }
                if k == 19998 {
                    at_19998 = v;
                }
            }
            assert_eq!(h, want_h, "seed {seed}");
            assert_eq!(at_9999, want_9999, "seed {seed}");
            assert_eq!(at_19998, want_19998, "seed {seed}");
            let b = r.state_bytes();
            let word = |i: usize| u32::from_le_bytes(b[i * 4..i * 4 + 4].try_into().unwrap());
            assert_eq!(i32::from_le_bytes(b[2496..].try_into().unwrap()), want_pos);
            assert_eq!([word(0), word(1), word(2)], want_k);
            assert_eq!(word(623), want_k623);
            let cs = (0..624).fold(0u64, |acc, i| {
                acc.wrapping_add(u64::from(word(i)) * (i as u64 + 1))
            });
            assert_eq!(cs, want_cs, "seed {seed}");
        }
    }
}
