//! Next-token choice: greedy, or temperature / top-k / top-p sampling (applied in that order,
//! as transformers does) with a seeded RNG so runs repeat exactly.

/// How to pick tokens.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SamplingParams {
    /// 0 (or below) means greedy.
    pub temperature: f32,
    /// Nucleus mass in (0, 1]; 1 disables.
    pub top_p: f32,
    /// Keep the k most likely; 0 disables.
    pub top_k: usize,
    /// RNG seed.
    pub seed: u64,
}

impl SamplingParams {
    /// Greedy decoding.
    pub fn greedy() -> SamplingParams {
        SamplingParams {
            temperature: 0.0,
            top_p: 1.0,
            top_k: 0,
            seed: 0,
        }
    }
}

/// SplitMix64: tiny, seedable, good enough for sampling.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Per-sequence sampler.
#[derive(Clone, Debug)]
pub struct Sampler {
    params: SamplingParams,
    rng: Rng,
}

/// Index of the largest value (first one on ties, like `torch.argmax`).
pub fn argmax(x: &[f32]) -> usize {
    let mut best = 0;
    for (i, &v) in x.iter().enumerate() {
        if v > x[best] {
            best = i;
        }
    }
    best
}

impl Sampler {
    /// A sampler with its own RNG.
    pub fn new(params: SamplingParams) -> Sampler {
        Sampler {
            rng: Rng::new(params.seed),
            params,
        }
    }

    /// Pick a token from `logits`, never one at or beyond `vocab_len`.
    pub fn sample(&mut self, logits: &[f32], vocab_len: usize) -> u32 {
        let logits = &logits[..vocab_len.min(logits.len())];
        let p = self.params;
        if p.temperature <= 0.0 {
            return argmax(logits) as u32;
        }
        let mut cand: Vec<(usize, f32)> = logits
            .iter()
            .enumerate()
            .map(|(i, &l)| (i, l / p.temperature))
            .collect();
        cand.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        if p.top_k > 0 && p.top_k < cand.len() {
            // Ties with the k-th value are kept, as transformers' TopKLogitsWarper does.
            let kth = cand[p.top_k - 1].1;
            cand.retain(|c| c.1 >= kth);
        }
        let max = cand[0].1;
        let mut probs: Vec<f64> = cand.iter().map(|c| ((c.1 - max) as f64).exp()).collect();
        let total: f64 = probs.iter().sum();
        probs.iter_mut().for_each(|x| *x /= total);
        if p.top_p < 1.0 {
            // Keep the smallest prefix whose mass reaches top_p (at least one token).
            let mut acc = 0.0;
            let mut keep = probs.len();
            for (i, q) in probs.iter().enumerate() {
                acc += q;
                if acc >= p.top_p as f64 {
                    keep = i + 1;
                    break;
                }
            }
            probs.truncate(keep);
            let t: f64 = probs.iter().sum();
            probs.iter_mut().for_each(|x| *x /= t);
        }
        let u = self.rng.next_f64();
        let mut acc = 0.0;
        for (i, q) in probs.iter().enumerate() {
            acc += q;
            if u < acc {
                return cand[i].0 as u32;
            }
        }
        cand[probs.len() - 1].0 as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_takes_first_max_and_masks_extra_ids() {
        let mut s = Sampler::new(SamplingParams::greedy());
        assert_eq!(s.sample(&[0.1, 3.0, 3.0, 9.0], 3), 1);
    }

    #[test]
    fn top_k_one_is_greedy_and_seeds_repeat() {
        let logits = [0.5, 2.0, 1.0, 1.9];
        let p = SamplingParams {
            temperature: 1.0,
            top_p: 1.0,
            top_k: 1,
            seed: 3,
        };
        let mut s = Sampler::new(p);
        assert!((0..20).all(|_| s.sample(&logits, 4) == 1));
        let p = SamplingParams {
            temperature: 1.0,
            top_p: 1.0,
            top_k: 0,
            seed: 42,
        };
        let a: Vec<u32> = {
            let mut s = Sampler::new(p);
            (0..50).map(|_| s.sample(&logits, 4)).collect()
        };
        let b: Vec<u32> = {
            let mut s = Sampler::new(p);
            (0..50).map(|_| s.sample(&logits, 4)).collect()
        };
        assert_eq!(a, b);
        assert!(a.iter().collect::<std::collections::HashSet<_>>().len() > 1);
    }

    #[test]
    fn top_p_keeps_the_nucleus() {
        // Probabilities ∝ e^[3,2,0]: 0.705, 0.259, 0.035 -> top_p 0.9 keeps ids 0 and 1 only.
        let p = SamplingParams {
            temperature: 1.0,
            top_p: 0.9,
            top_k: 0,
            seed: 7,
        };
        let mut s = Sampler::new(p);
        let seen: std::collections::HashSet<u32> =
            (0..400).map(|_| s.sample(&[3.0, 2.0, 0.0], 3)).collect();
        assert_eq!(seen, [0, 1].into_iter().collect());
    }
}
