//! Inference for comparing runs: seeded resampling (percentile bootstrap, sign-flip
//! permutation test) and a normal approximation for summary-only inputs.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

pub use crate::results::metrics::{
    crafter_score, mean, percentile, percentile_sorted, standard_error,
};

/// Default number of bootstrap / Monte Carlo resamples.
pub const DEFAULT_RESAMPLES: usize = 10_000;

/// Largest sample for which the sign-flip test enumerates all `2^n` sign patterns.
pub const EXACT_SIGN_FLIP_MAX_N: usize = 20;

/// A two-sided interval.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Interval {
    /// Lower bound.
    pub lo: f64,
    /// Upper bound.
    pub hi: f64,
}

/// The bootstrap distribution of a statistic, sorted ascending.
///
/// Each resample draws `n` indices uniformly with replacement (ChaCha8 seeded with `seed`,
/// `random_range(0..n)` in order) and passes them to `stat`. Same inputs and seed, same result.
pub fn bootstrap_distribution(
    n: usize,
    resamples: usize,
    seed: u32,
    mut stat: impl FnMut(&[usize]) -> f64,
) -> Vec<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(u64::from(seed));
    let mut idx = vec![0usize; n];
    let mut out = Vec::with_capacity(resamples);
    for _ in 0..resamples {
        for slot in idx.iter_mut() {
            *slot = rng.random_range(0..n);
        }
        out.push(stat(&idx));
    }
    out.sort_by(f64::total_cmp);
    out
}

/// The bootstrap distribution of a two-sample statistic (the samples resampled independently),
/// sorted ascending. Per resample: `n_a` draws for the first sample, then `n_b` for the second.
pub fn bootstrap_two_sample_distribution(
    n_a: usize,
    n_b: usize,
    resamples: usize,
    seed: u32,
    mut stat: impl FnMut(&[usize], &[usize]) -> f64,
) -> Vec<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(u64::from(seed));
    let (mut ia, mut ib) = (vec![0usize; n_a], vec![0usize; n_b]);
    let mut out = Vec::with_capacity(resamples);
    for _ in 0..resamples {
        for slot in ia.iter_mut() {
            *slot = rng.random_range(0..n_a);
        }
        for slot in ib.iter_mut() {
            *slot = rng.random_range(0..n_b);
        }
        out.push(stat(&ia, &ib));
    }
    out.sort_by(f64::total_cmp);
    out
}

/// Percentile-method two-sided interval at `level` (e.g. 0.95) from a sorted distribution.
pub fn percentile_interval(sorted: &[f64], level: f64) -> Interval {
    let tail = (1.0 - level) / 2.0;
    Interval {
        lo: percentile_sorted(sorted, tail),
        hi: percentile_sorted(sorted, 1.0 - tail),
    }
}

fn mean_at(xs: &[f64], idx: &[usize]) -> f64 {
    if idx.is_empty() {
        return 0.0;
    }
    idx.iter().map(|&i| xs[i]).sum::<f64>() / idx.len() as f64
}

/// Percentile bootstrap interval of the mean of `xs` at `level`.
pub fn bootstrap_mean_ci(xs: &[f64], level: f64, resamples: usize, seed: u32) -> Interval {
    let dist = bootstrap_distribution(xs.len(), resamples, seed, |idx| mean_at(xs, idx));
    percentile_interval(&dist, level)
}

/// Per-pair differences `b[i] − a[i]` (pairs beyond the shorter slice are ignored).
pub fn paired_deltas(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter().zip(b).map(|(x, y)| y - x).collect()
}

/// Percentile bootstrap interval of the paired mean difference `mean(b − a)` at `level`
/// (pairs resampled together).
pub fn paired_bootstrap_ci(
    a: &[f64],
    b: &[f64],
    level: f64,
    resamples: usize,
    seed: u32,
) -> Interval {
    bootstrap_mean_ci(&paired_deltas(a, b), level, resamples, seed)
}

/// Percentile bootstrap interval of `mean(b) − mean(a)` for independent samples (each resampled
/// separately, so unequal sizes and variances are fine: a Welch-type bootstrap).
pub fn unpaired_bootstrap_ci(
    a: &[f64],
    b: &[f64],
    level: f64,
    resamples: usize,
    seed: u32,
) -> Interval {
    let dist = bootstrap_two_sample_distribution(a.len(), b.len(), resamples, seed, |ia, ib| {
        mean_at(b, ib) - mean_at(a, ia)
    });
    percentile_interval(&dist, level)
}

/// A p-value and how it was obtained.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PValue {
    /// The p-value.
    pub p: f64,
    /// True when every sign pattern was enumerated (no Monte Carlo error).
    pub exact: bool,
}

/// Two-sided sign-flip permutation p-value for paired differences (H0: the differences are
/// symmetric around 0): the share of sign patterns whose |sum| is at least the observed |sum|.
/// Exact enumeration for `n ≤ 20`; above, `resamples` seeded random patterns with the usual
/// `(1 + hits) / (1 + resamples)`. An empty input gives p = 1.
pub fn sign_flip_p_value(deltas: &[f64], resamples: usize, seed: u32) -> PValue {
    let n = deltas.len();
    if n == 0 {
        return PValue {
            p: 1.0,
            exact: true,
        };
    }
    let observed = deltas.iter().sum::<f64>().abs();
    let scale = deltas.iter().map(|d| d.abs()).sum::<f64>().max(1.0);
    let threshold = observed - 1e-9 * scale;
    if n <= EXACT_SIGN_FLIP_MAX_N {
        let patterns = 1u64 << n;
        return PValue {
            p: exact_sign_flip_hits(deltas, threshold) as f64 / patterns as f64,
            exact: true,
        };
    }
    let mut rng = ChaCha8Rng::seed_from_u64(u64::from(seed));
    let mut hits = 0usize;
    for _ in 0..resamples {
        let s: f64 = deltas
            .iter()
            .map(|d| if rng.random::<bool>() { -d } else { *d })
            .sum();
        if s.abs() >= threshold {
            hits += 1;
        }
    }
    PValue {
        p: (1 + hits) as f64 / (1 + resamples) as f64,
        exact: false,
    }
}

/// Sign patterns of `deltas` whose |sum| is at least `threshold`, all `2^n` counted exactly by
/// meeting in the middle: the signed sums of each half are listed (`2^(n/2)` each), one list
/// sorted, and for each sum of the other half the partners with `a + b >= threshold` or
/// `a + b <= -threshold` are counted by binary search (O(2^(n/2) log) instead of O(n 2^n)).
fn exact_sign_flip_hits(deltas: &[f64], threshold: f64) -> u64 {
    let n = deltas.len();
    if threshold <= 0.0 {
        return 1u64 << n;
    }
    let sums = |part: &[f64]| -> Vec<f64> {
        (0..1u64 << part.len())
            .map(|mask| {
                part.iter()
                    .enumerate()
                    .map(|(i, d)| if mask >> i & 1 == 1 { -d } else { *d })
                    .sum()
            })
            .collect()
    };
    let (left, right) = deltas.split_at(n / 2);
    let a = sums(left);
    let mut b = sums(right);
    b.sort_by(f64::total_cmp);
    a.iter()
        .map(|&x| {
            let high = b.len() - b.partition_point(|&y| x + y < threshold);
            let low = b.partition_point(|&y| x + y <= -threshold);
            (high + low) as u64
        })
        .sum()
}

/// Complementary error function (Numerical Recipes `erfcc`, fractional error < 1.2e-7).
pub fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * poly.exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

/// Standard normal cumulative distribution function.
pub fn normal_cdf(x: f64) -> f64 {
    0.5 * erfc(-x / std::f64::consts::SQRT_2)
}

/// Standard normal quantile (Acklam's rational approximation refined by one Newton step);
/// `p` is clamped to (0, 1).
pub fn normal_quantile(p: f64) -> f64 {
    let p = p.clamp(1e-300, 1.0 - 1e-16);
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    let tail = |q: f64| {
        let q = (-2.0 * q.ln()).sqrt();
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    let x = if p < 0.02425 {
        tail(p)
    } else if p > 1.0 - 0.02425 {
        -tail(1.0 - p)
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    };
    // One Newton step on Φ(x) = p.
    let density = (-0.5 * x * x).exp() / (2.0 * std::f64::consts::PI).sqrt();
    if density > 1e-300 {
        x - (normal_cdf(x) - p) / density
    } else {
        x
    }
}

/// Normal-approximation comparison of two independent means given only mean and SE each.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NormalDiff {
    /// `mean_b − mean_a`.
    pub delta: f64,
    /// Standard error of the difference, `sqrt(se_a² + se_b²)`.
    pub se: f64,
    /// Two-sided interval at the level asked for.
    pub ci: Interval,
    /// Upper one-sided bound at the level asked for.
    pub upper: f64,
    /// Two-sided p-value of H0: no difference (1 when the SE is 0 and the means are equal).
    pub p: f64,
}

/// Compare `b` with `a` from means and standard errors (z approximation).
pub fn normal_diff(mean_a: f64, se_a: f64, mean_b: f64, se_b: f64, level: f64) -> NormalDiff {
    let delta = mean_b - mean_a;
    let se = (se_a * se_a + se_b * se_b).sqrt();
    let z2 = normal_quantile(0.5 + level / 2.0);
    let z1 = normal_quantile(level);
    let p = if se > 0.0 {
        (2.0 * (1.0 - normal_cdf((delta / se).abs()))).min(1.0)
    } else if delta == 0.0 {
        1.0
    } else {
        0.0
    };
    NormalDiff {
        delta,
        se,
        ci: Interval {
            lo: delta - z2 * se,
            hi: delta + z2 * se,
        },
        upper: delta + z1 * se,
        p,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binomial(n: u64, k: u64) -> f64 {
        (0..k).fold(1.0, |acc, i| acc * (n - i) as f64 / (i + 1) as f64)
    }

    #[test]
    fn sign_flip_exact_known_cases() {
        // [1,2,3,4]: only all-plus and all-minus reach |sum| = 10 → 2 of 16 patterns.
        let p = sign_flip_p_value(&[1.0, 2.0, 3.0, 4.0], 0, 0);
        assert_eq!(
            p,
            PValue {
                p: 2.0 / 16.0,
                exact: true
            }
        );
        // [2,1,1]: sums ±4, ±2 (twice each sign), 0 (twice) → |s| ≥ 4 in 2 of 8.
        assert_eq!(sign_flip_p_value(&[2.0, 1.0, 1.0], 0, 0).p, 0.25);
        // [3,1]: sums 4, 2, −2, −4 → 2 of 4.
        assert_eq!(sign_flip_p_value(&[3.0, 1.0], 0, 0).p, 0.5);
        // Identical runs: every pattern ties the observed 0.
        assert_eq!(sign_flip_p_value(&[0.0; 10], 0, 0).p, 1.0);
        assert_eq!(sign_flip_p_value(&[], 0, 0).p, 1.0);
        // Sums that are equal in exact arithmetic but not in floating point still tie.
        // (exact rational enumeration gives 32 of 32 here; naive float comparison gives 30).
        let d = [-0.6, 0.6, -0.9, 0.3, 0.4];
        assert_eq!(sign_flip_p_value(&d, 0, 0).p, 1.0);
    }

    #[test]
    fn meet_in_the_middle_counts_as_brute_force() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for n in 1..=14usize {
            for ties in [false, true] {
                let d: Vec<f64> = (0..n)
                    .map(|_| {
                        if ties {
                            100.0 / 22.0 * rng.random_range(-3i32..=3) as f64
                        } else {
                            rng.random_range(-10.0..10.0)
                        }
                    })
                    .collect();
                let observed = d.iter().sum::<f64>().abs();
                let scale = d.iter().map(|x| x.abs()).sum::<f64>().max(1.0);
                let t = observed - 1e-9 * scale;
                let brute = (0..1u64 << n)
                    .filter(|mask| {
                        let s: f64 = d
                            .iter()
                            .enumerate()
                            .map(|(i, x)| if mask >> i & 1 == 1 { -x } else { *x })
                            .sum();
                        s.abs() >= t
                    })
                    .count() as u64;
                assert_eq!(
                    exact_sign_flip_hits(&d, t),
                    brute,
                    "n={n} ties={ties} {d:?}"
                );
            }
        }
    }

    #[test]
    fn sign_flip_monte_carlo_matches_binomial() {
        // 13 × (+1) and 11 × (−1): observed |sum| = 2; under flips sum = 24 − 2k with
        // k ~ Bin(24, ½), so P(|S| ≥ 2) = 1 − C(24,12) / 2^24.
        let mut d = vec![1.0; 13];
        d.extend([-1.0; 11]);
        let want = 1.0 - binomial(24, 12) / 2f64.powi(24);
        let got = sign_flip_p_value(&d, 20_000, 7);
        assert!(!got.exact);
        assert!((got.p - want).abs() < 0.015, "{} vs {want}", got.p);
        assert_eq!(got, sign_flip_p_value(&d, 20_000, 7), "seeded: same result");
    }

    #[test]
    fn bootstrap_tiny_case_by_hand() {
        // Resampled means of [0, 1] are 0, ½, 1 with probabilities ¼, ½, ¼.
        let ci = bootstrap_mean_ci(&[0.0, 1.0], 0.95, 10_000, 1);
        assert_eq!((ci.lo, ci.hi), (0.0, 1.0));
        // The 30% and 70% points both fall inside the mass at ½.
        let ci = bootstrap_mean_ci(&[0.0, 1.0], 0.4, 10_000, 1);
        assert_eq!((ci.lo, ci.hi), (0.5, 0.5));
        let ci = bootstrap_mean_ci(&[3.0; 5], 0.95, 1000, 1);
        assert_eq!((ci.lo, ci.hi), (3.0, 3.0));
    }

    #[test]
    fn bootstrap_distribution_has_the_plug_in_variance() {
        // Var*(mean) = plug-in variance / n = (70.8 / 5) / 5 = 2.832 for these values.
        let xs = [0.0, 1.0, 3.0, 7.0, 10.0];
        let dist = bootstrap_distribution(5, 40_000, 3, |idx| mean_at(&xs, idx));
        let m = mean(&dist);
        let var = dist.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / dist.len() as f64;
        assert!((m - 4.2).abs() < 0.05, "{m}");
        assert!((var / 2.832 - 1.0).abs() < 0.05, "{var}");
        assert_eq!(
            dist,
            bootstrap_distribution(5, 40_000, 3, |idx| mean_at(&xs, idx))
        );
        assert_ne!(
            dist,
            bootstrap_distribution(5, 40_000, 4, |idx| mean_at(&xs, idx))
        );
    }

    #[test]
    fn bootstrap_ci_matches_normal_theory_on_a_large_sample() {
        let xs: Vec<f64> = (0..400).map(|i| ((i * 37) % 101) as f64).collect();
        let (m, se) = (mean(&xs), standard_error(&xs));
        let ci = bootstrap_mean_ci(&xs, 0.95, 10_000, 11);
        let z = 1.959_963_985;
        assert!((ci.lo - (m - z * se)).abs() < 0.1 * se, "{ci:?} {m} {se}");
        assert!((ci.hi - (m + z * se)).abs() < 0.1 * se, "{ci:?} {m} {se}");
        // Two independent samples: the Welch-type bootstrap agrees with the z interval.
        let ys: Vec<f64> = (0..250).map(|i| ((i * 53) % 89) as f64 + 5.0).collect();
        let ci = unpaired_bootstrap_ci(&xs, &ys, 0.9, 10_000, 5);
        let nd = normal_diff(m, se, mean(&ys), standard_error(&ys), 0.9);
        assert!((ci.lo - nd.ci.lo).abs() < 0.1 * nd.se, "{ci:?} {nd:?}");
        assert!((ci.hi - nd.ci.hi).abs() < 0.1 * nd.se, "{ci:?} {nd:?}");
    }

    #[test]
    fn pairing_removes_between_seed_variance() {
        let a: Vec<f64> = (0..12).map(|i| 10.0 * i as f64).collect();
        let b: Vec<f64> = a
            .iter()
            .enumerate()
            .map(|(i, x)| x + 1.0 + if i % 2 == 0 { 0.5 } else { -0.5 })
            .collect();
        let paired = paired_bootstrap_ci(&a, &b, 0.95, 5000, 2);
        let unpaired = unpaired_bootstrap_ci(&a, &b, 0.95, 5000, 2);
        assert!(paired.lo > 0.5 && paired.hi < 1.5, "{paired:?}");
        assert!(unpaired.lo < -20.0 && unpaired.hi > 20.0, "{unpaired:?}");
        assert_eq!(paired_deltas(&a, &b)[1], 0.5);
    }

    #[test]
    fn normal_helpers_known_values() {
        assert!((normal_quantile(0.975) - 1.959_963_985).abs() < 1e-6);
        assert!((normal_quantile(0.95) - 1.644_853_627).abs() < 1e-6);
        assert!(normal_quantile(0.5).abs() < 1e-7);
        assert!((normal_quantile(0.001) + 3.090_232_306).abs() < 1e-5);
        assert!((normal_cdf(1.959_963_985) - 0.975).abs() < 1e-6);
        assert!((erfc(0.0) - 1.0).abs() < 1e-7);
        // Δ = 26 − 30 = −4, SE = √(3² + 4²) = 5; p = 2(1 − Φ(0.8)) = 0.4237108.
        let d = normal_diff(30.0, 3.0, 26.0, 4.0, 0.95);
        assert_eq!((d.delta, d.se), (-4.0, 5.0));
        assert!((d.ci.lo + 4.0 + 9.799_82).abs() < 1e-4, "{d:?}");
        assert!((d.ci.hi + 4.0 - 9.799_82).abs() < 1e-4, "{d:?}");
        assert!(
            (d.upper - (-4.0 + 5.0 * 1.644_853_627)).abs() < 1e-5,
            "{d:?}"
        );
        assert!((d.p - 0.423_710_8).abs() < 1e-6, "{d:?}");
        assert_eq!(normal_diff(1.0, 0.0, 1.0, 0.0, 0.95).p, 1.0);
    }
}
