//! The regression gate (`vlm-eval check`): is a run worse than a baseline beyond a tolerance,
//! with a given confidence? Verdicts as Markdown and JUnit XML.
//!
//! Rule, per metric (higher is better for all but `format_repaired_rate`): Δ = run − baseline.
//! The upper one-sided bound U of Δ at the confidence level c is computed by
//! - a paired percentile bootstrap over the seeds both sides share (≥ 2 shared seeds and
//!   per-episode values on both sides),
//! - else an unpaired (Welch-type, each side resampled separately) percentile bootstrap,
//! - else, when the baseline is a summary.json (mean and SE only), the normal approximation
//!   U = Δ + z_c · sqrt(SE_base² + SE_run²).
//!
//! The run REGRESSED iff U < −max_drop: we are at least c confident that the drop exceeds the
//! tolerance. Otherwise it passes (including when the data are too few to tell). For a
//! lower-is-better metric the mirror rule holds: the lower one-sided bound L of Δ, and
//! REGRESSED iff L > max_drop (a rise beyond the tolerance).

use super::baseline::{
    crafter_score_of, format_rate_of, EpisodePoint, Metric, ResultSet, SourceKind,
};
use super::stats::{
    bootstrap_distribution, bootstrap_two_sample_distribution, normal_diff, percentile_interval,
    percentile_sorted, sign_flip_p_value, Interval,
};

/// Settings of a check.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckOptions {
    /// Largest tolerated drop, in the metric's units (≥ 0).
    pub max_drop: f64,
    /// Confidence level of the one-sided bound, in [0.5, 1).
    pub confidence: f64,
    /// Bootstrap / Monte Carlo resamples.
    pub resamples: usize,
    /// RNG seed of the resampling.
    pub seed: u32,
}

/// How Δ's interval was computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// Paired bootstrap on shared seeds.
    Paired,
    /// Independent-samples bootstrap.
    Unpaired,
    /// Normal approximation from means and standard errors.
    Normal,
}

impl Method {
    /// Short description.
    pub fn describe(self) -> &'static str {
        match self {
            Method::Paired => "paired bootstrap on shared seeds",
            Method::Unpaired => "unpaired bootstrap",
            Method::Normal => "normal approximation from mean ± SE",
        }
    }
}

/// The outcome for one metric.
#[derive(Clone, Debug, PartialEq)]
pub struct MetricVerdict {
    /// The metric.
    pub metric: Metric,
    /// Baseline value on the episodes analysed.
    pub baseline: f64,
    /// Run value on the episodes analysed.
    pub run: f64,
    /// run − baseline.
    pub delta: f64,
    /// Two-sided interval of Δ at the confidence level.
    pub ci: Interval,
    /// One-sided bound of Δ at the confidence level on the worsening side: the upper bound for
    /// a higher-is-better metric, the lower bound for `format_repaired_rate`.
    pub bound: f64,
    /// p-value of H0 "no difference" and how it was computed (None when not defined).
    pub p: Option<(f64, &'static str)>,
    /// Method used.
    pub method: Method,
    /// Shared seeds used (paired), else 0.
    pub shared: usize,
    /// Baseline episodes analysed.
    pub n_baseline: usize,
    /// Run episodes analysed.
    pub n_run: usize,
    /// The tolerance.
    pub max_drop: f64,
    /// True when the run regressed.
    pub regressed: bool,
}

/// Why a metric cannot be checked.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// The baseline is a summary without a spread for this metric.
    #[error("{path} is a summary.json, which has no standard error for '{metric}': pass the baseline run folder or a file from `vlm-eval baseline save`, or check --metric progression")]
    NoSpread {
        /// Baseline path.
        path: String,
        /// Metric name.
        metric: &'static str,
    },
    /// A side has no episodes to analyse.
    #[error("{path} has no finished episodes to compare")]
    Empty {
        /// Path of the empty side.
        path: String,
    },
    /// A side recorded no reply-format counts (runs from before vlm-eval recorded them).
    #[error("{path} has no reply-format counts for '{metric}' (its episodes predate them): rerun it, or check another --metric")]
    NoFormat {
        /// Path of the side without counts.
        path: String,
        /// Metric name.
        metric: &'static str,
    },
}

fn values(points: &[&EpisodePoint], m: Metric) -> Vec<f64> {
    points.iter().filter_map(|p| m.per_episode(p)).collect()
}

/// Per-episode `(count, turns)` of a reply-format metric; an episode without counts has no turns.
fn format_counts(points: &[&EpisodePoint], m: Metric) -> Vec<(u32, u32)> {
    points
        .iter()
        .map(|p| m.format_counts(p).unwrap_or((0, 0)))
        .collect()
}

fn mean_at(xs: &[f64], idx: &[usize]) -> f64 {
    idx.iter().map(|&i| xs[i]).sum::<f64>() / idx.len().max(1) as f64
}

/// Check one metric of `run` against `baseline`.
pub fn check_metric(
    baseline: &ResultSet,
    run: &ResultSet,
    metric: Metric,
    o: &CheckOptions,
) -> Result<MetricVerdict, CheckError> {
    let empty = |side: &ResultSet| CheckError::Empty {
        path: side.path.display().to_string(),
    };
    if run.points.is_empty() {
        return Err(empty(run));
    }
    if baseline.points.is_empty() && baseline.kind != SourceKind::Summary {
        return Err(empty(baseline));
    }
    if matches!(metric, Metric::FormatExact | Metric::FormatRepaired) {
        for side in [run, baseline] {
            if side.kind != SourceKind::Summary
                && side
                    .points
                    .iter()
                    .all(|p| metric.format_counts(p).is_none())
            {
                return Err(CheckError::NoFormat {
                    path: side.path.display().to_string(),
                    metric: metric.name(),
                });
            }
        }
    }
    let higher = metric.higher_is_better();
    let verdict = |baseline_v: f64,
                   run_v: f64,
                   ci: Interval,
                   upper: f64,
                   lower: f64,
                   p,
                   method,
                   shared,
                   n_baseline,
                   n_run| MetricVerdict {
        metric,
        baseline: baseline_v,
        run: run_v,
        delta: run_v - baseline_v,
        ci,
        bound: if higher { upper } else { lower },
        p,
        method,
        shared,
        n_baseline,
        n_run,
        max_drop: o.max_drop,
        regressed: if higher {
            upper < -o.max_drop
        } else {
            lower > o.max_drop
        },
    };
    let level = o.confidence;
    if baseline.kind == SourceKind::Summary {
        let Some((bm, bse)) = metric.from_summary(&baseline.summary) else {
            return Err(CheckError::NoSpread {
                path: baseline.path.display().to_string(),
                metric: metric.name(),
            });
        };
        let pts = run.point_refs();
        let rm = metric.of(&pts);
        let rse = metric.standard_error(&pts).unwrap_or(0.0);
        let nd = normal_diff(bm, bse, rm, rse, level);
        return Ok(verdict(
            bm,
            rm,
            nd.ci,
            nd.upper,
            2.0 * nd.delta - nd.upper,
            Some((nd.p, "normal approx.")),
            Method::Normal,
            0,
            baseline.summary.completed,
            pts.len(),
        ));
    }
    let shared: Vec<(&EpisodePoint, &EpisodePoint)> = baseline
        .points
        .iter()
        .filter_map(|b| run.points.iter().find(|r| r.seed == b.seed).map(|r| (b, r)))
        .collect();
    if shared.len() >= 2 {
        let bp: Vec<&EpisodePoint> = shared.iter().map(|(b, _)| *b).collect();
        let rp: Vec<&EpisodePoint> = shared.iter().map(|(_, r)| *r).collect();
        let (bv, rv) = (metric.of(&bp), metric.of(&rp));
        let (dist, p) = if metric == Metric::CrafterScore {
            let bm: Vec<u32> = bp.iter().map(|p| p.mask()).collect();
            let rm: Vec<u32> = rp.iter().map(|p| p.mask()).collect();
            let dist = bootstrap_distribution(bp.len(), o.resamples, o.seed, |idx| {
                crafter_score_of(&rm, idx) - crafter_score_of(&bm, idx)
            });
            (dist, None)
        } else if metric.is_pooled() {
            let (bc, rc) = (format_counts(&bp, metric), format_counts(&rp, metric));
            let dist = bootstrap_distribution(bp.len(), o.resamples, o.seed, |idx| {
                format_rate_of(&rc, idx).unwrap_or(0.0) - format_rate_of(&bc, idx).unwrap_or(0.0)
            });
            (dist, None)
        } else {
            let deltas: Vec<f64> = values(&rp, metric)
                .iter()
                .zip(values(&bp, metric))
                .map(|(r, b)| r - b)
                .collect();
            let dist = bootstrap_distribution(deltas.len(), o.resamples, o.seed, |idx| {
                mean_at(&deltas, idx)
            });
            let p = sign_flip_p_value(&deltas, o.resamples, o.seed);
            let how = if p.exact {
                "sign-flip, exact"
            } else {
                "sign-flip, Monte Carlo"
            };
            (dist, Some((p.p, how)))
        };
        return Ok(verdict(
            bv,
            rv,
            percentile_interval(&dist, level),
            percentile_sorted(&dist, level),
            percentile_sorted(&dist, 1.0 - level),
            p,
            Method::Paired,
            shared.len(),
            bp.len(),
            rp.len(),
        ));
    }
    let (bp, rp) = (baseline.point_refs(), run.point_refs());
    let (bv, rv) = (metric.of(&bp), metric.of(&rp));
    let (dist, p) = if metric == Metric::CrafterScore {
        let bm: Vec<u32> = bp.iter().map(|p| p.mask()).collect();
        let rm: Vec<u32> = rp.iter().map(|p| p.mask()).collect();
        let dist =
            bootstrap_two_sample_distribution(bm.len(), rm.len(), o.resamples, o.seed, |ib, ir| {
                crafter_score_of(&rm, ir) - crafter_score_of(&bm, ib)
            });
        (dist, None)
    } else if metric.is_pooled() {
        let (bc, rc) = (format_counts(&bp, metric), format_counts(&rp, metric));
        let dist =
            bootstrap_two_sample_distribution(bc.len(), rc.len(), o.resamples, o.seed, |ib, ir| {
                format_rate_of(&rc, ir).unwrap_or(0.0) - format_rate_of(&bc, ib).unwrap_or(0.0)
            });
        (dist, None)
    } else {
        let (bx, rx) = (values(&bp, metric), values(&rp, metric));
        let dist =
            bootstrap_two_sample_distribution(bx.len(), rx.len(), o.resamples, o.seed, |ib, ir| {
                mean_at(&rx, ir) - mean_at(&bx, ib)
            });
        let se = |m: Metric, p: &[&EpisodePoint]| m.standard_error(p).unwrap_or(0.0);
        let nd = normal_diff(bv, se(metric, &bp), rv, se(metric, &rp), level);
        (dist, Some((nd.p, "Welch z approx.")))
    };
    Ok(verdict(
        bv,
        rv,
        percentile_interval(&dist, level),
        percentile_sorted(&dist, level),
        percentile_sorted(&dist, 1.0 - level),
        p,
        Method::Unpaired,
        0,
        bp.len(),
        rp.len(),
    ))
}

fn num(x: f64) -> String {
    let s = format!("{x:.2}");
    if s == "-0.00" {
        "0.00".into()
    } else {
        s
    }
}

/// The one-line statement of the rule for a verdict.
pub fn rule_text(v: &MetricVerdict, confidence: f64) -> String {
    if !v.metric.higher_is_better() {
        return format!(
            "regressed iff {:.0}% lower bound of Δ > {}",
            100.0 * confidence,
            if v.max_drop == 0.0 {
                "0".to_string()
            } else {
                num(v.max_drop)
            }
        );
    }
    let limit = if v.max_drop == 0.0 {
        "0".to_string()
    } else {
        format!("−{}", num(v.max_drop))
    };
    format!(
        "regressed iff {:.0}% upper bound of Δ < {limit}",
        100.0 * confidence
    )
}

/// The Markdown verdict: a heading, one table row per metric, then notes.
pub fn markdown(
    baseline: &ResultSet,
    run: &ResultSet,
    verdicts: &[MetricVerdict],
    o: &CheckOptions,
    notes: &[String],
) -> String {
    let regressed = verdicts.iter().any(|v| v.regressed);
    let pct = format!("{:.0}%", 100.0 * o.confidence);
    let mut s = format!(
        "### vlm-eval check: {}\n\nBaseline `{}` (model `{}`, {}) vs run `{}` (model `{}`, {}).\n\n",
        if regressed { "REGRESSED" } else { "PASS" },
        baseline.name,
        baseline.model,
        baseline.path.display(),
        run.name,
        run.model,
        run.path.display()
    );
    s.push_str(&format!(
        "| metric | baseline | run | Δ (run − baseline) | {pct} CI of Δ | {pct} one-sided bound | p-value | n shared | method | rule | verdict |\n"
    ));
    s.push_str("|---|---:|---:|---:|---|---:|---|---:|---|---|---|\n");
    for v in verdicts {
        let p =
            v.p.map(|(p, how)| {
                if p < 1e-4 {
                    format!("< 0.0001 ({how})")
                } else {
                    format!("{p:.4} ({how})")
                }
            })
            .unwrap_or_else(|| "n/a".into());
        let shared = match v.method {
            Method::Paired => v.shared.to_string(),
            _ => format!("0 ({} vs {} episodes)", v.n_baseline, v.n_run),
        };
        s.push_str(&format!(
            "| {} ({}) | {} | {} | {} | [{}, {}] | {} | {} | {} | {} | {} | **{}** |\n",
            v.metric.name(),
            v.metric.unit(),
            num(v.baseline),
            num(v.run),
            num(v.delta),
            num(v.ci.lo),
            num(v.ci.hi),
            num(v.bound),
            p,
            shared,
            v.method.describe(),
            rule_text(v, o.confidence),
            if v.regressed { "REGRESSED" } else { "pass" }
        ));
    }
    if verdicts.iter().any(|v| v.method != Method::Normal) {
        s.push_str(&format!(
            "\nBootstrap: percentile method, {} resamples, seed {}.",
            o.resamples, o.seed
        ));
    }
    s.push_str(&format!(
        " A pass means the data do not show, with {pct} confidence, a drop larger than the tolerance.\n"
    ));
    for n in notes {
        s.push_str(&format!("\n- {n}"));
    }
    if !notes.is_empty() {
        s.push('\n');
    }
    s
}

/// Escape text for XML attributes and content.
pub fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if (c as u32) < 0x20 && !matches!(c, '\n' | '\t' | '\r') => {}
            c => out.push(c),
        }
    }
    out
}

/// JUnit XML: one `testsuite`, one `testcase` per metric, a `failure` for each regression.
pub fn junit(verdicts: &[MetricVerdict], o: &CheckOptions) -> String {
    let failures = verdicts.iter().filter(|v| v.regressed).count();
    let mut s = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuite name=\"vlm-eval check\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" skipped=\"0\">\n",
        verdicts.len()
    );
    for v in verdicts {
        let detail = format!(
            "{}: baseline {} run {} delta {} CI [{}, {}] one-sided bound {} ({}, {} shared seeds); {}",
            v.metric.name(),
            num(v.baseline),
            num(v.run),
            num(v.delta),
            num(v.ci.lo),
            num(v.ci.hi),
            num(v.bound),
            v.method.describe(),
            v.shared,
            rule_text(v, o.confidence)
        );
        s.push_str(&format!(
            "  <testcase classname=\"vlm-eval.check\" name=\"{}\">\n",
            xml_escape(v.metric.name())
        ));
        if v.regressed {
            s.push_str(&format!(
                "    <failure type=\"regression\" message=\"{} regressed\">{}</failure>\n",
                xml_escape(v.metric.name()),
                xml_escape(&detail)
            ));
        } else {
            s.push_str(&format!(
                "    <system-out>{}</system-out>\n",
                xml_escape(&detail)
            ));
        }
        s.push_str("  </testcase>\n");
    }
    s.push_str("</testsuite>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::formats::{FormatCounts, Termination};
    use crate::results::summary::summarize;

    fn side(repaired: u32) -> ResultSet {
        let points = (0..8)
            .map(|seed| EpisodePoint {
                seed,
                progression: 10.0,
                score: 2,
                episode_return: 1.0,
                steps: 10,
                termination: Termination::TurnBudget,
                unlocked: Vec::new(),
                format: Some(FormatCounts {
                    exact: 10 - repaired,
                    repaired,
                    invalid: 0,
                }),
            })
            .collect();
        ResultSet {
            path: format!("r{repaired}").into(),
            kind: SourceKind::Run,
            name: format!("r{repaired}"),
            model: "m".into(),
            config: serde_json::Value::Null,
            points,
            summary: summarize("m", &[]),
            unfinished: Vec::new(),
            protocol: None,
        }
    }

    #[test]
    fn more_repaired_replies_regress_both_format_metrics() {
        let o = CheckOptions {
            max_drop: 5.0,
            confidence: 0.95,
            resamples: 500,
            seed: 0,
        };
        let (base, worse) = (side(0), side(3));
        let v = check_metric(&base, &worse, Metric::FormatRepaired, &o).unwrap();
        assert_eq!((v.baseline, v.run, v.delta), (0.0, 30.0, 30.0));
        assert!(v.regressed && v.bound > 5.0, "{v:?}");
        assert!(rule_text(&v, 0.95).contains("lower bound of Δ > 5.00"));
        let v = check_metric(&base, &worse, Metric::FormatExact, &o).unwrap();
        assert_eq!((v.baseline, v.run), (100.0, 70.0));
        assert!(v.regressed && v.bound < -5.0, "{v:?}");
        // Fewer repaired replies are an improvement, not a regression.
        let v = check_metric(&worse, &base, Metric::FormatRepaired, &o).unwrap();
        assert!(!v.regressed, "{v:?}");
        // Unpaired (no shared seeds) the same way.
        let mut other = side(3);
        other.points.iter_mut().for_each(|p| p.seed += 100);
        let v = check_metric(&base, &other, Metric::FormatRepaired, &o).unwrap();
        assert!(v.regressed && v.method == Method::Unpaired, "{v:?}");
        // A side without counts cannot be checked on them.
        let mut none = side(0);
        none.points.iter_mut().for_each(|p| p.format = None);
        assert!(matches!(
            check_metric(&none, &worse, Metric::FormatExact, &o),
            Err(CheckError::NoFormat { .. })
        ));
    }
}
