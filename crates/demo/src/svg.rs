//! Hand-written SVG charts: the timeline of a run (per application: CPUs allocated, active
//! workers, runnable threads and CPU used, over time) and the makespan per mode.

use super::mode::{AppRun, AppSample, ModeRun, Sample};
use super::report::ModeSummary;
use std::fmt::Write as _;

/// Escape text for XML.
///
/// ```
/// assert_eq!(partita_demo::svg::escape("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
/// ```
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

const W: f64 = 960.0;
const LEFT: f64 = 110.0;
const RIGHT: f64 = 20.0;
const LANE: f64 = 80.0;
const GAP: f64 = 14.0;
const TOP: f64 = 50.0;

/// A step series `(t, value)` as an SVG polyline's points.
fn step_points(series: &[(f64, f64)], x: &dyn Fn(f64) -> f64, y: &dyn Fn(f64) -> f64) -> String {
    let mut pts = String::new();
    let mut prev: Option<f64> = None;
    for &(t, v) in series {
        if let Some(p) = prev {
            let _ = write!(pts, "{:.1},{:.1} ", x(t), y(p));
        }
        let _ = write!(pts, "{:.1},{:.1} ", x(t), y(v));
        prev = Some(v);
    }
    pts
}

/// CPUs used by `label` between consecutive samples at least `window` seconds apart.
fn cpu_rate(timeline: &[Sample], label: &str, window: f64) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    let mut last: Option<(f64, f64)> = None;
    for s in timeline {
        let Some(a) = s.apps.iter().find(|a| a.label == label) else {
            continue;
        };
        match last {
            None => last = Some((s.t_s, a.cpu_s)),
            Some((t, c)) if s.t_s - t >= window => {
                out.push((t, ((a.cpu_s - c) / (s.t_s - t)).max(0.0)));
                last = Some((s.t_s, a.cpu_s));
            }
            _ => {}
        }
    }
    out
}

/// The timeline of `run`: one lane per application, and a last lane with the sum of active
/// workers (or runnable threads without a manager) against the CPUs.
///
/// ```
/// use partita_demo::{mode::{AppSample, Sample}, Mode, ModeRun};
/// let smp = |t_s: f64, target| Sample { t_s, apps: vec![AppSample {
///     label: "a<b".into(), cpu_s: t_s, runnable: 1, target: Some(target), active: Some(target),
///     cpus: Some(vec![0]), shared: false }] };
/// let run = ModeRun { mode: Mode::ProcessControl, makespan_s: 1.0, cpus: 2, realloc_ms: 300,
///     apps: vec![], timeline: vec![smp(0.0, 1), smp(0.5, 2)] };
/// let svg = partita_demo::svg::timeline(&run, "t");
/// assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
/// ```
pub fn timeline(run: &ModeRun, title: &str) -> String {
    let end = run
        .apps
        .iter()
        .map(|a| a.end_s)
        .fold(run.makespan_s, f64::max)
        .max(1e-3);
    let lanes = run.apps.len() + 1;
    let h = TOP + lanes as f64 * (LANE + GAP) + 40.0;
    let x = |t: f64| LEFT + (t / end) * (W - LEFT - RIGHT);
    let mut s = String::new();
    timeline_header(&mut s, h, title);
    let managed = run
        .timeline
        .iter()
        .any(|s| s.apps.iter().any(|a| a.target.is_some()));
    let max_y = run
        .timeline
        .iter()
        .flat_map(|s| s.apps.iter())
        .map(|a| {
            let t = a.target.unwrap_or(0).max(a.active.unwrap_or(0));
            t.max(a.runnable) as f64
        })
        .fold(run.cpus as f64, f64::max)
        .max(1.0);
    for (i, app) in run.apps.iter().enumerate() {
        let y0 = TOP + i as f64 * (LANE + GAP);
        app_lane(&mut s, run, app, y0, max_y, managed, &x);
    }
    let y0 = TOP + run.apps.len() as f64 * (LANE + GAP);
    total_lane(&mut s, run, y0, managed, &x);
    time_axis(&mut s, y0 + LANE + 18.0, end, &x);
    s.push_str("</svg>\n");
    s
}

/// The opening tag, background, title and legend.
fn timeline_header(s: &mut String, h: f64, title: &str) {
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{h:.0}" viewBox="0 0 {W} {h:.0}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{LEFT}" y="20" font-size="15" font-weight="bold">{}</text>"#,
        escape(title)
    );
    let _ = writeln!(
        s,
        r##"<text x="{LEFT}" y="38" fill="#555">blue area: CPUs allocated (manager's target) · dark line: active workers · orange: runnable threads · grey: CPUs used (/proc)</text>"##
    );
}

/// One application's lane at `y0`: allocation and active workers (with a manager), runnable
/// threads and CPUs used.
fn app_lane(
    s: &mut String,
    run: &ModeRun,
    app: &AppRun,
    y0: f64,
    max_y: f64,
    managed: bool,
    x: &dyn Fn(f64) -> f64,
) {
    let y = move |v: f64| y0 + LANE - (v / max_y) * LANE;
    lane_frame(s, y0, &app.label, max_y);
    let series = |f: &dyn Fn(&AppSample) -> Option<f64>| -> Vec<(f64, f64)> {
        let mut v: Vec<(f64, f64)> = run
            .timeline
            .iter()
            .filter_map(|smp| {
                smp.apps
                    .iter()
                    .find(|a| a.label == app.label)
                    .and_then(|a| f(a).map(|val| (smp.t_s, val)))
            })
            .collect();
        if let Some(&(_, last)) = v.last() {
            if last != 0.0 {
                v.push((app.end_s, last));
            }
            v.push((app.end_s, 0.0));
        }
        v
    };
    if managed {
        // The allocation is the manager's target (a zero quantum keeps a CPU set).
        let alloc = series(&|a| a.target.map(f64::from));
        if !alloc.is_empty() {
            let mut pts = format!("{:.1},{:.1} ", x(alloc[0].0), y(0.0));
            pts.push_str(&step_points(&alloc, x, &y));
            let _ = writeln!(
                s,
                r##"<polygon points="{pts}" fill="#9cc3ea" fill-opacity="0.7" stroke="none"/>"##
            );
        }
        let active = series(&|a| a.active.map(f64::from));
        let _ = writeln!(
            s,
            r##"<polyline points="{}" fill="none" stroke="#1f3f8f" stroke-width="2"/>"##,
            step_points(&active, x, &y)
        );
    }
    let runnable = series(&|a| Some(f64::from(a.runnable)));
    let _ = writeln!(
        s,
        r##"<polyline points="{}" fill="none" stroke="#e08a1e" stroke-width="1" stroke-opacity="0.8"/>"##,
        step_points(&runnable, x, &y)
    );
    let rate = cpu_rate(&run.timeline, &app.label, 0.1);
    let _ = writeln!(
        s,
        r##"<polyline points="{}" fill="none" stroke="#666" stroke-width="1" stroke-dasharray="3,2"/>"##,
        step_points(&rate, x, &y)
    );
}

/// The last lane: the sum of active workers (runnable threads without a manager) against the
/// CPUs.
fn total_lane(s: &mut String, run: &ModeRun, y0: f64, managed: bool, x: &dyn Fn(f64) -> f64) {
    let total: Vec<(f64, f64)> = run
        .timeline
        .iter()
        .map(|smp| {
            let v = smp
                .apps
                .iter()
                .map(|a| if managed { a.active.unwrap_or(0) } else { a.runnable } as f64)
                .sum();
            (smp.t_s, v)
        })
        .collect();
    let total_max = total
        .iter()
        .map(|&(_, v)| v)
        .fold(run.cpus as f64, f64::max)
        .max(1.0);
    let y = move |v: f64| y0 + LANE - (v / total_max) * LANE;
    lane_frame(
        s,
        y0,
        if managed { "Σ active" } else { "Σ runnable" },
        total_max,
    );
    let _ = writeln!(
        s,
        r##"<polyline points="{}" fill="none" stroke="#1f3f8f" stroke-width="2"/>"##,
        step_points(&total, x, &y)
    );
    let _ = writeln!(
        s,
        r##"<line x1="{LEFT}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="#c00" stroke-dasharray="6,3"/><text x="{:.1}" y="{:.1}" fill="#c00" text-anchor="end">{} CPUs</text>"##,
        W - RIGHT,
        y(run.cpus as f64),
        y(run.cpus as f64),
        W - RIGHT,
        y(run.cpus as f64) - 3.0,
        run.cpus
    );
}

/// Tick labels along the time axis at height `ya`.
fn time_axis(s: &mut String, ya: f64, end: f64, x: &dyn Fn(f64) -> f64) {
    let step = nice_step(end);
    let mut t = 0.0;
    while t <= end + 1e-9 {
        let _ = writeln!(
            s,
            r##"<text x="{:.1}" y="{ya:.1}" text-anchor="middle" fill="#333">{}</text>"##,
            x(t),
            trim(t)
        );
        t += step;
    }
    let _ = writeln!(
        s,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="end" fill="#333">time (s)</text>"##,
        W - RIGHT,
        ya + 16.0
    );
}

fn lane_frame(s: &mut String, y0: f64, label: &str, max_y: f64) {
    let _ = writeln!(
        s,
        r##"<rect x="{LEFT}" y="{y0:.1}" width="{:.1}" height="{LANE}" fill="#f7f7f7" stroke="#ccc"/>"##,
        W - LEFT - RIGHT
    );
    let _ = writeln!(
        s,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="end" font-weight="bold">{}</text>"##,
        LEFT - 8.0,
        y0 + LANE / 2.0 + 4.0,
        escape(label)
    );
    let _ = writeln!(
        s,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="end" fill="#777" font-size="10">{}</text><text x="{:.1}" y="{:.1}" text-anchor="end" fill="#777" font-size="10">0</text>"##,
        LEFT - 2.0,
        y0 + 10.0,
        trim(max_y),
        LEFT - 2.0,
        y0 + LANE
    );
}

fn nice_step(end: f64) -> f64 {
    let raw = end / 8.0;
    let mag = 10f64.powf(raw.log10().floor());
    for m in [1.0, 2.0, 5.0, 10.0] {
        if raw <= m * mag {
            return m * mag;
        }
    }
    10.0 * mag
}

fn trim(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Bars of the median makespan per mode, labelled with the time and the ratio to process
/// control.
///
/// ```
/// use partita_demo::{report::summarize, Mode, ModeRun};
/// let run = |mode, makespan_s| ModeRun { mode, makespan_s, cpus: 2, realloc_ms: 0, apps: vec![], timeline: vec![] };
/// let s = summarize(&[run(Mode::Uncontrolled, 3.0), run(Mode::ProcessControl, 1.0)]);
/// let svg = partita_demo::svg::makespans(&s, "m");
/// assert_eq!(svg.matches("<rect").count(), 1 + 2); // background + two bars
/// assert!(svg.contains("3.00× pc"));
/// ```
pub fn makespans(summaries: &[ModeSummary], title: &str) -> String {
    let h = 320.0;
    let top = 50.0;
    let bottom = 60.0;
    let max = summaries
        .iter()
        .flat_map(|m| m.makespans_s.iter().copied())
        .fold(0.0, f64::max)
        .max(1e-3);
    let n = summaries.len().max(1) as f64;
    let slot = (W - LEFT - RIGHT) / n;
    let bar = slot * 0.55;
    let y = |v: f64| top + (h - top - bottom) * (1.0 - v / max);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{h}" viewBox="0 0 {W} {h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{LEFT}" y="22" font-size="15" font-weight="bold">{}</text>"#,
        escape(title)
    );
    let _ = writeln!(
        s,
        r##"<line x1="{LEFT}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="#333"/>"##,
        W - RIGHT,
        y(0.0),
        y(0.0)
    );
    let _ = writeln!(
        s,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="end" fill="#333">makespan (s)</text>"##,
        LEFT - 8.0,
        top
    );
    for (i, m) in summaries.iter().enumerate() {
        let cx = LEFT + slot * (i as f64 + 0.5);
        let color = match m.mode {
            super::Mode::ProcessControl => "#1f3f8f",
            super::Mode::Batch => "#6a9a4a",
            super::Mode::Partitioned => "#9cc3ea",
            super::Mode::Uncontrolled => "#e08a1e",
        };
        let _ = writeln!(
            s,
            r##"<rect x="{:.1}" y="{:.1}" width="{bar:.1}" height="{:.1}" fill="{color}"/>"##,
            cx - bar / 2.0,
            y(m.makespan_s),
            y(0.0) - y(m.makespan_s)
        );
        for &v in &m.makespans_s {
            let _ = writeln!(
                s,
                r##"<circle cx="{cx:.1}" cy="{:.1}" r="3" fill="#222"/>"##,
                y(v)
            );
        }
        let ratio = m
            .ratio_to_pc
            .map(|r| format!(" ({r:.2}× pc)"))
            .unwrap_or_default();
        let _ = writeln!(
            s,
            r##"<text x="{cx:.1}" y="{:.1}" text-anchor="middle">{:.2} s{}</text>"##,
            y(m.makespan_s) - 6.0,
            m.makespan_s,
            escape(&ratio)
        );
        let _ = writeln!(
            s,
            r##"<text x="{cx:.1}" y="{:.1}" text-anchor="middle" font-weight="bold">{}</text>"##,
            y(0.0) + 18.0,
            m.mode
        );
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_hold_the_previous_value_until_the_change() {
        let pts = step_points(&[(0.0, 1.0), (1.0, 2.0)], &|t| t, &|v| v);
        assert_eq!(pts.trim(), "0.0,1.0 1.0,1.0 1.0,2.0");
    }

    #[test]
    fn nice_steps_divide_the_axis_into_a_few_ticks() {
        for end in [0.3, 1.0, 7.5, 42.0, 300.0] {
            let n = end / nice_step(end);
            assert!((3.0..=9.0).contains(&n), "end {end}: {n} ticks");
        }
    }
}
