//! Descriptive statistics of a run's episodes: mean, standard error, percentiles and the
//! Crafter score. The summary (`summary.json`) is computed with these; `report::stats` adds
//! the inference (bootstrap, permutation tests) on top.

/// Mean (0 for an empty slice).
pub fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        0.0
    } else {
        xs.iter().sum::<f64>() / xs.len() as f64
    }
}

/// Standard error of the mean with the sample standard deviation (n − 1); 0 for n < 2.
pub fn standard_error(xs: &[f64]) -> f64 {
    let n = xs.len();
    if n < 2 {
        return 0.0;
    }
    let m = mean(xs);
    let var = xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (n - 1) as f64;
    (var / n as f64).sqrt()
}

/// Linear-interpolated percentile (`q` in 0..=1) of unsorted values.
pub fn percentile(xs: &[f64], q: f64) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    let mut s = xs.to_vec();
    s.sort_by(f64::total_cmp);
    percentile_sorted(&s, q)
}

/// Crafter score (Hafner 2021): `exp(mean_i ln(1 + s_i)) − 1` over per-achievement success
/// rates `s_i` in percent.
pub fn crafter_score(rates_percent: &[f64]) -> f64 {
    if rates_percent.is_empty() {
        return 0.0;
    }
    let m = rates_percent.iter().map(|s| (1.0 + s).ln()).sum::<f64>() / rates_percent.len() as f64;
    m.exp() - 1.0
}

/// Linear-interpolated percentile (`q` in 0..=1) of values already sorted ascending.
pub fn percentile_sorted(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let pos = q.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        let xs = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0];
        assert_eq!(mean(&xs), 5.0);
        // sample sd = sqrt(32/7); se = sd / sqrt(8)
        assert!((standard_error(&xs) - (32.0f64 / 7.0).sqrt() / 8f64.sqrt()).abs() < 1e-12);
        assert_eq!(standard_error(&[3.0]), 0.0);
        assert_eq!(percentile(&[1.0, 2.0, 3.0, 4.0], 0.5), 2.5);
        assert_eq!(percentile(&[5.0, 1.0, 3.0], 0.95), 4.8);
        // All 22 at 100% → 100; all at 0 → 0; half at 100% → sqrt(101) - 1.
        assert!((crafter_score(&[100.0; 22]) - 100.0).abs() < 1e-9);
        assert_eq!(crafter_score(&[0.0; 22]), 0.0);
        let mut half = vec![100.0; 11];
        half.extend([0.0; 11]);
        assert!((crafter_score(&half) - (101f64.sqrt() - 1.0)).abs() < 1e-9);
    }
}
