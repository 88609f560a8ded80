//! Minimal SVG charts (grouped bars and step lines), written as text: no plotting dependency.

use std::fmt::Write as _;

const PALETTE: [&str; 6] = [
    "#222222", "#777777", "#bbbbbb", "#4a7ab5", "#c0504d", "#9bbb59",
];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The start of a `w` × `h` chart: the `<svg>` element, the title `(text, baseline y, font
/// size)` centred on top, and the zero line at height `zero_y` from `left` to the right margin
/// (20). The caller closes the element.
fn open(w: f64, h: f64, title: (&str, u32, u32), left: f64, zero_y: f64) -> String {
    let (text, title_y, title_size) = title;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="11">"#
    );
    let _ = write!(
        s,
        r#"<text x="{}" y="{title_y}" font-size="{title_size}" text-anchor="middle">{}</text>"#,
        w / 2.0,
        esc(text)
    );
    let _ = write!(
        s,
        r#"<line x1="{left}" y1="{zero_y}" x2="{}" y2="{zero_y}" stroke="black"/>"#,
        w - 20.0
    );
    s
}

/// A grouped bar chart: one group per label, one bar per series.
///
/// ```
/// let svg = partita_sim::svg::bars("t", &["a".into()], &[("s".into(), vec![1.0])], "%");
/// assert!(svg.starts_with("<svg") && svg.contains("<rect"));
/// ```
pub fn bars(title: &str, labels: &[String], series: &[(String, Vec<f64>)], unit: &str) -> String {
    let (w, h, left, bottom, top) = (900.0, 420.0, 60.0, 90.0, 40.0);
    let values = series.iter().flat_map(|s| s.1.iter().copied());
    let max = values.clone().fold(0.0f64, f64::max).max(1e-9);
    let min = values.fold(0.0f64, f64::min);
    let span = max - min;
    let plot_h = h - bottom - top;
    let y = |v: f64| top + (max - v) / span * plot_h;
    let group_w = (w - left - 20.0) / labels.len().max(1) as f64;
    let bar_w = group_w * 0.8 / series.len().max(1) as f64;
    let mut s = open(w, h, (title, 20, 14), left, y(0.0));
    for k in 0..=4 {
        let v = min + span * k as f64 / 4.0;
        let _ = write!(
            s,
            r#"<text x="{}" y="{}" text-anchor="end">{v:.1}{}</text>"#,
            left - 4.0,
            y(v) + 4.0,
            esc(unit)
        );
    }
    for (g, label) in labels.iter().enumerate() {
        let x0 = left + g as f64 * group_w + group_w * 0.1;
        for (k, (_, vals)) in series.iter().enumerate() {
            let v = vals.get(g).copied().unwrap_or(0.0);
            let (y0, y1) = (y(v.max(0.0)), y(v.min(0.0)));
            let _ = write!(
                s,
                r#"<rect x="{:.1}" y="{y0:.1}" width="{bar_w:.1}" height="{:.1}" fill="{}"/>"#,
                x0 + k as f64 * bar_w,
                (y1 - y0).max(0.5),
                PALETTE[k % PALETTE.len()]
            );
        }
        let _ = write!(
            s,
            r#"<text transform="translate({:.1},{:.1}) rotate(-40)" text-anchor="end">{}</text>"#,
            x0 + group_w * 0.4,
            h - bottom + 14.0,
            esc(label)
        );
    }
    for (k, (name, _)) in series.iter().enumerate() {
        let x = left + 10.0 + k as f64 * 170.0;
        let _ = write!(
            s,
            r#"<rect x="{x}" y="28" width="10" height="10" fill="{}"/><text x="{}" y="37">{}</text>"#,
            PALETTE[k % PALETTE.len()],
            x + 14.0,
            esc(name)
        );
    }
    s.push_str("</svg>\n");
    s
}

/// Step lines over time: one line per series, x = time (s), y = CPUs.
///
/// ```
/// let svg = partita_sim::svg::steps("t", &[0.0, 1.0], &[("a".into(), vec![1.0, 2.0])]);
/// assert!(svg.contains("<polyline"));
/// ```
pub fn steps(title: &str, times: &[f64], series: &[(String, Vec<f64>)]) -> String {
    let (w, h, left, bottom, top) = (700.0, 260.0, 40.0, 30.0, 40.0);
    let tmax = times.last().copied().unwrap_or(1.0).max(1e-9);
    let vmax = series
        .iter()
        .flat_map(|s| s.1.iter().copied())
        .fold(1.0f64, f64::max);
    let x = |t: f64| left + t / tmax * (w - left - 20.0);
    let y = |v: f64| top + (vmax - v) / vmax * (h - top - bottom);
    let mut s = open(w, h, (title, 16, 13), left, y(0.0));
    let _ = write!(
        s,
        r#"<text x="{}" y="{}">{vmax:.0} CPUs</text><text x="{}" y="{}" text-anchor="end">{tmax:.0} s</text>"#,
        2,
        top + 4.0,
        w - 20.0,
        h - 8.0
    );
    for (k, (name, vals)) in series.iter().enumerate() {
        let mut pts = String::new();
        for (i, v) in vals.iter().enumerate() {
            let t0 = times[i];
            let t1 = times.get(i + 1).copied().unwrap_or(tmax);
            // Offset each series a little so equal values stay visible.
            let yy = y(*v) - k as f64 * 1.5;
            let _ = write!(pts, "{:.1},{yy:.1} {:.1},{yy:.1} ", x(t0), x(t1));
        }
        let c = PALETTE[(k + 3) % PALETTE.len()];
        let _ = write!(
            s,
            r#"<polyline fill="none" stroke="{c}" stroke-width="2" points="{pts}"/>"#
        );
        let _ = write!(
            s,
            r#"<text x="{}" y="30" fill="{c}">{}</text>"#,
            left + 10.0 + k as f64 * 110.0,
            esc(name)
        );
    }
    s.push_str("</svg>\n");
    s
}
