//! Hand-written SVG charts for the HTML report: the achievement unlock-rate bars and the
//! progression-over-turns line. Every label goes through [`escape`].

use std::fmt::Write;

use super::escape::escape;

/// Fill colour of the unlock-rate bars (the browser test looks for it in screenshots).
pub const BAR_COLOUR: &str = "#2f6fdf";
/// Stroke colour of the mean progression line (the browser test looks for it too).
pub const LINE_COLOUR: &str = "#e8590c";

/// One bar: a label and a value in percent (0..=100).
#[derive(Clone, Debug, PartialEq)]
pub struct Bar {
    /// Achievement name.
    pub label: String,
    /// Unlock rate, percent.
    pub percent: f64,
    /// Hover text (e.g. "3 of 10 episodes").
    pub detail: String,
}

fn fmt_pct(p: f64) -> String {
    if p == 0.0 || p >= 10.0 {
        format!("{p:.0}%")
    } else {
        format!("{p:.1}%")
    }
}

/// A horizontal bar chart of unlock rates, one row per bar, 0–100 % on the x axis.
pub fn bar_chart(bars: &[Bar]) -> String {
    let (label_w, plot_w, row_h, top) = (150.0, 300.0, 19.0, 24.0);
    let width = label_w + plot_w + 56.0;
    let height = top + row_h * bars.len() as f64 + 8.0;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg class="chart bars" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="Achievement unlock rates">"#
    );
    for tick in [0.0, 25.0, 50.0, 75.0, 100.0] {
        let x = label_w + plot_w * tick / 100.0;
        let _ = write!(
            s,
            r##"<line x1="{x}" y1="{y0}" x2="{x}" y2="{y1}" stroke="#d8dde6" stroke-width="1"/><text x="{x}" y="{ty}" text-anchor="middle" class="tick">{tick:.0}%</text>"##,
            y0 = top - 4.0,
            y1 = height - 6.0,
            ty = top - 9.0,
        );
    }
    for (i, bar) in bars.iter().enumerate() {
        let y = top + row_h * i as f64;
        let p = bar.percent.clamp(0.0, 100.0);
        let w = plot_w * p / 100.0;
        let label = escape(&bar.label);
        let _ = write!(
            s,
            r##"<g class="bar-row"><text x="{lx}" y="{ty}" text-anchor="end" class="label">{label}</text><rect class="track" x="{label_w}" y="{by}" width="{plot_w}" height="{bh}" fill="#eef1f6"/><rect class="bar" data-achievement="{label}" data-rate="{rate:.2}" x="{label_w}" y="{by}" width="{w:.2}" height="{bh}" fill="{BAR_COLOUR}"><title>{label}: {pct} ({detail})</title></rect><text x="{vx:.2}" y="{ty}" class="value">{pct}</text></g>"##,
            lx = label_w - 6.0,
            ty = y + row_h * 0.68,
            by = y + 2.0,
            bh = row_h - 4.0,
            rate = p,
            pct = fmt_pct(p),
            detail = escape(&bar.detail),
            vx = label_w + w + 4.0,
        );
    }
    s.push_str("</svg>");
    s
}

/// One line of a line chart: y values at x = 0, 1, 2, …
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// Y values in percent.
    pub values: Vec<f64>,
}

fn nice_ceiling(v: f64) -> f64 {
    let v = v.max(10.0);
    ((v / 10.0).ceil() * 10.0).min(100.0)
}

fn x_ticks(max_x: usize) -> Vec<usize> {
    if max_x == 0 {
        return vec![0];
    }
    let raw = max_x as f64 / 6.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag)
        .max(1.0) as usize;
    (0..=max_x).step_by(step).collect()
}

/// A line chart of the mean (`mean`, drawn bold) over per-episode lines (`others`, faint),
/// x = turn, y = percent.
pub fn line_chart(mean: &Series, others: &[Series], x_label: &str, y_label: &str) -> String {
    let (left, right, top, bottom) = (52.0, 16.0, 14.0, 40.0);
    let (plot_w, plot_h) = (420.0, 300.0);
    let (width, height) = (left + plot_w + right, top + plot_h + bottom);
    let max_x = others
        .iter()
        .chain(std::iter::once(mean))
        .map(|s| s.values.len().saturating_sub(1))
        .max()
        .unwrap_or(0);
    let max_y = nice_ceiling(
        others
            .iter()
            .chain(std::iter::once(mean))
            .flat_map(|s| s.values.iter().copied())
            .fold(0.0, f64::max),
    );
    let px = |i: usize| left + plot_w * i as f64 / max_x.max(1) as f64;
    let py = |v: f64| top + plot_h * (1.0 - v.clamp(0.0, max_y) / max_y);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg class="chart lines" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="Progression over turns">"#
    );
    let y_step = if max_y > 50.0 { 20.0 } else { 10.0 };
    let mut t = 0.0;
    while t <= max_y + 1e-9 {
        let y = py(t);
        let _ = write!(
            s,
            r##"<line x1="{left}" y1="{y:.2}" x2="{x2}" y2="{y:.2}" stroke="#e3e7ee" stroke-width="1"/><text x="{tx}" y="{ty:.2}" text-anchor="end" class="tick">{t:.0}%</text>"##,
            x2 = left + plot_w,
            tx = left - 6.0,
            ty = y + 4.0,
        );
        t += y_step;
    }
    for tick in x_ticks(max_x) {
        let x = px(tick);
        let _ = write!(
            s,
            r##"<line x1="{x:.2}" y1="{y0}" x2="{x:.2}" y2="{y1}" stroke="#9aa3b2" stroke-width="1"/><text x="{x:.2}" y="{ty}" text-anchor="middle" class="tick">{tick}</text>"##,
            y0 = top + plot_h,
            y1 = top + plot_h + 4.0,
            ty = top + plot_h + 17.0,
        );
    }
    let _ = write!(
        s,
        r##"<line x1="{left}" y1="{yb}" x2="{xr}" y2="{yb}" stroke="#9aa3b2" stroke-width="1"/><line x1="{left}" y1="{top}" x2="{left}" y2="{yb}" stroke="#9aa3b2" stroke-width="1"/><text x="{cx}" y="{lx}" text-anchor="middle" class="axis">{xl}</text><text transform="translate(13 {cy}) rotate(-90)" text-anchor="middle" class="axis">{yl}</text>"##,
        yb = top + plot_h,
        xr = left + plot_w,
        cx = left + plot_w / 2.0,
        lx = height - 6.0,
        cy = top + plot_h / 2.0,
        xl = escape(x_label),
        yl = escape(y_label),
    );
    let points = |series: &Series| -> String {
        series
            .values
            .iter()
            .enumerate()
            .map(|(i, v)| format!("{:.2},{:.2}", px(i), py(*v)))
            .collect::<Vec<_>>()
            .join(" ")
    };
    for other in others {
        let _ = write!(
            s,
            r##"<polyline class="episode-line" fill="none" stroke="#b9c2d0" stroke-width="1" points="{}"/>"##,
            points(other)
        );
    }
    let _ = write!(
        s,
        r#"<polyline class="progression-line" data-points="{n}" fill="none" stroke="{LINE_COLOUR}" stroke-width="3" stroke-linejoin="round" points="{p}"/>"#,
        n = mean.values.len(),
        p = points(mean),
    );
    s.push_str("</svg>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bar_widths_are_proportional_and_labels_escaped() {
        let bars = vec![
            Bar {
                label: "a<b".into(),
                percent: 50.0,
                detail: "1 of 2".into(),
            },
            Bar {
                label: "c".into(),
                percent: 0.0,
                detail: "0 of 2".into(),
            },
        ];
        let svg = bar_chart(&bars);
        assert!(svg.contains(r#"data-rate="50.00" x="150" y="26" width="150.00""#));
        assert!(svg.contains(r#"width="0.00""#));
        assert!(svg.contains("a&lt;b") && !svg.contains("a<b"));
        assert_eq!(svg.matches(r#"class="bar""#).count(), 2);
    }

    #[test]
    fn line_chart_maps_points_onto_the_plot() {
        let mean = Series {
            values: vec![0.0, 10.0, 20.0],
        };
        let svg = line_chart(&mean, &[], "turn", "%");
        // x: 52 + 420 * i / 2; y: 14 + 300 * (1 - v / 20) (max_y = 20).
        assert!(
            svg.contains(r#"points="52.00,314.00 262.00,164.00 472.00,14.00""#),
            "{svg}"
        );
        assert!(svg.contains(r#"data-points="3""#));
    }

    #[test]
    fn ticks_are_round_numbers() {
        assert_eq!(x_ticks(0), vec![0]);
        assert_eq!(x_ticks(5), vec![0, 1, 2, 3, 4, 5]);
        assert_eq!(x_ticks(30), vec![0, 5, 10, 15, 20, 25, 30]);
        assert_eq!(nice_ceiling(3.0), 10.0);
        assert_eq!(nice_ceiling(31.8), 40.0);
    }
}
