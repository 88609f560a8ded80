//! Summaries of the runs (medians over repetitions, ratios to process control) and their
//! rendering as a terminal table and as Markdown. Plain functions over the run data.

use super::mode::{Mode, ModeRun};
use partita_stats::median;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

/// One application in one mode, medians over the repetitions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppSummary {
    /// Label in the mix.
    pub label: String,
    /// Time from its start to its end, s.
    pub elapsed_s: f64,
    /// CPU seconds.
    pub cpu_s: f64,
    /// Share of the machine during the mode: CPU seconds / (makespan × CPUs).
    pub share: f64,
    /// Voluntary context switches.
    pub vcsw: f64,
    /// Involuntary context switches.
    pub ivcsw: f64,
    /// Correct in every repetition.
    pub ok: bool,
}

/// One mode, medians over the repetitions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModeSummary {
    /// The mode.
    pub mode: Mode,
    /// Repetitions summarised.
    pub runs: usize,
    /// Median makespan, s.
    pub makespan_s: f64,
    /// Makespans of each repetition.
    pub makespans_s: Vec<f64>,
    /// Median makespan / process control's median makespan.
    pub ratio_to_pc: Option<f64>,
    /// Median makespan / the work's bound ([`work_bound_s`]).
    pub ratio_to_bound: Option<f64>,
    /// Per application.
    pub apps: Vec<AppSummary>,
    /// Every result correct in every repetition.
    pub all_ok: bool,
}

/// Summarise `runs` (any number of repetitions of any modes), in [`Mode::ALL`] order.
///
/// ```
/// use partita_demo::{report::summarize, Mode, ModeRun};
/// let run = |mode, makespan_s| ModeRun { mode, makespan_s, cpus: 2, realloc_ms: 0, apps: vec![], timeline: vec![] };
/// let s = summarize(&[run(Mode::Batch, 2.0), run(Mode::ProcessControl, 1.0), run(Mode::ProcessControl, 3.0)]);
/// assert_eq!(s[0].mode, Mode::ProcessControl);
/// assert_eq!(s[0].makespan_s, 2.0);
/// assert_eq!(s[1].ratio_to_pc, Some(1.0));
/// ```
pub fn summarize(runs: &[ModeRun]) -> Vec<ModeSummary> {
    let mut out = Vec::new();
    for mode in Mode::ALL {
        let rs: Vec<&ModeRun> = runs.iter().filter(|r| r.mode == mode).collect();
        let Some(first) = rs.first() else { continue };
        let makespans: Vec<f64> = rs.iter().map(|r| r.makespan_s).collect();
        let apps = first
            .apps
            .iter()
            .map(|a0| {
                let same: Vec<_> = rs
                    .iter()
                    .filter_map(|r| r.apps.iter().find(|a| a.label == a0.label).map(|a| (r, a)))
                    .collect();
                let m = |f: &dyn Fn(&ModeRun, &super::mode::AppRun) -> f64| {
                    median(&same.iter().map(|(r, a)| f(r, a)).collect::<Vec<_>>())
                };
                AppSummary {
                    label: a0.label.clone(),
                    elapsed_s: m(&|_, a| a.elapsed_s),
                    cpu_s: m(&|_, a| a.cpu_s),
                    share: m(&|r, a| {
                        if r.makespan_s > 0.0 {
                            a.cpu_s / (r.makespan_s * r.cpus.max(1) as f64)
                        } else {
                            0.0
                        }
                    }),
                    vcsw: m(&|_, a| a.vcsw as f64),
                    ivcsw: m(&|_, a| a.ivcsw as f64),
                    ok: same.len() == rs.len() && same.iter().all(|(_, a)| a.ok),
                }
            })
            .collect();
        out.push(ModeSummary {
            mode,
            runs: rs.len(),
            makespan_s: median(&makespans),
            makespans_s: makespans,
            ratio_to_pc: None,
            ratio_to_bound: None,
            apps,
            all_ok: rs.iter().all(|r| r.all_ok()),
        });
    }
    let pc = out
        .iter()
        .find(|s| s.mode == Mode::ProcessControl)
        .map(|s| s.makespan_s);
    let cpus = runs.iter().map(|r| r.cpus).max().unwrap_or(1);
    let bound = work_bound_s(&out, cpus);
    for s in &mut out {
        s.ratio_to_pc = pc.filter(|&p| p > 0.0).map(|p| s.makespan_s / p);
        s.ratio_to_bound = bound.map(|b| s.makespan_s / b);
    }
    out
}

/// The work's bound on the makespan, s: every application's least CPU time in any mode,
/// summed, over the CPUs. No mode can finish the mix sooner than its work fits on the
/// machine; how close process control comes says what is left for it to gain, whatever the
/// uncontrolled run loses. `None` without CPU times.
///
/// ```
/// use partita_demo::report::{work_bound_s, AppSummary, ModeSummary};
/// use partita_demo::Mode;
/// let app = |label: &str, cpu_s| AppSummary { label: label.into(), elapsed_s: 1.0, cpu_s, share: 0.0, vcsw: 0.0, ivcsw: 0.0, ok: true };
/// let mode = |mode, apps| ModeSummary { mode, runs: 1, makespan_s: 1.0, makespans_s: vec![1.0], ratio_to_pc: None, ratio_to_bound: None, apps, all_ok: true };
/// let s = [
///     mode(Mode::Uncontrolled, vec![app("a", 3.0), app("b", 1.0)]), // a wasted CPU spinning
///     mode(Mode::Batch, vec![app("a", 1.0), app("b", 1.2)]),
/// ];
/// assert_eq!(work_bound_s(&s, 2), Some(1.0)); // (1.0 + 1.0) / 2
/// ```
pub fn work_bound_s(summaries: &[ModeSummary], cpus: usize) -> Option<f64> {
    let mut least: Vec<(&str, f64)> = Vec::new();
    for a in summaries.iter().flat_map(|m| &m.apps) {
        match least.iter_mut().find(|(l, _)| *l == a.label) {
            Some((_, c)) => *c = c.min(a.cpu_s),
            None => least.push((&a.label, a.cpu_s)),
        }
    }
    let total: f64 = least.iter().map(|(_, c)| c).sum();
    (total > 0.0).then(|| total / cpus.max(1) as f64)
}

fn ratio(r: Option<f64>) -> String {
    r.map_or_else(|| "–".into(), |r| format!("{r:.2}×"))
}

/// The summary as a terminal table: one block per mode, then the makespans side by side.
///
/// ```
/// use partita_demo::{report::{summarize, to_text}, Mode, ModeRun};
/// let run = |mode, makespan_s| ModeRun { mode, makespan_s, cpus: 2, realloc_ms: 0, apps: vec![], timeline: vec![] };
/// let t = to_text(&summarize(&[run(Mode::Batch, 2.0), run(Mode::ProcessControl, 1.0)]));
/// assert!(t.contains("batch") && t.contains("2.00×"));
/// ```
pub fn to_text(summaries: &[ModeSummary]) -> String {
    let mut s = String::new();
    for m in summaries {
        let _ = writeln!(
            s,
            "\n{} — makespan {:.2} s (median of {}), {} process control{}",
            m.mode,
            m.makespan_s,
            m.runs,
            ratio(m.ratio_to_pc),
            if m.all_ok {
                ""
            } else {
                "  ** WRONG RESULTS **"
            }
        );
        let _ = writeln!(
            s,
            "  {:<12} {:>9} {:>9} {:>7} {:>10} {:>10}  result",
            "app", "time s", "CPU s", "share", "vol cs", "invol cs"
        );
        for a in &m.apps {
            let _ = writeln!(
                s,
                "  {:<12} {:>9.2} {:>9.2} {:>6.1}% {:>10.0} {:>10.0}  {}",
                a.label,
                a.elapsed_s,
                a.cpu_s,
                a.share * 100.0,
                a.vcsw,
                a.ivcsw,
                if a.ok { "ok" } else { "WRONG" }
            );
        }
    }
    let _ = writeln!(
        s,
        "\n  {:<16} {:>11} {:>10} {:>14}",
        "mode", "makespan s", "vs pc", "vs work bound"
    );
    for m in summaries {
        let _ = writeln!(
            s,
            "  {:<16} {:>11.2} {:>10} {:>14}",
            m.mode.name(),
            m.makespan_s,
            ratio(m.ratio_to_pc),
            ratio(m.ratio_to_bound)
        );
    }
    s
}

/// The summary as Markdown tables (for `report.md`).
///
/// ```
/// use partita_demo::{report::{summarize, to_markdown}, Mode, ModeRun};
/// let run = |mode, makespan_s| ModeRun { mode, makespan_s, cpus: 2, realloc_ms: 0, apps: vec![], timeline: vec![] };
/// let md = to_markdown(&summarize(&[run(Mode::ProcessControl, 1.0)]));
/// assert!(md.contains("| process-control | 1.00 | 1 | 1.00× | – | yes |"));
/// ```
pub fn to_markdown(summaries: &[ModeSummary]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| mode | makespan (s, median) | runs | vs process control | vs work bound | all results correct |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---|");
    for m in summaries {
        let _ = writeln!(
            s,
            "| {} | {:.2} | {} | {} | {} | {} |",
            m.mode,
            m.makespan_s,
            m.runs,
            ratio(m.ratio_to_pc),
            ratio(m.ratio_to_bound),
            if m.all_ok { "yes" } else { "**no**" }
        );
    }
    let _ = writeln!(
        s,
        "\nWork bound: every application's least CPU time in any mode, summed, over the CPUs \
         (no mode can finish sooner)."
    );
    for m in summaries {
        let _ = writeln!(s, "\n### {}\n", m.mode);
        let _ = writeln!(
            s,
            "| app | time (s) | CPU (s) | CPU share | voluntary cs | involuntary cs | result |"
        );
        let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---|");
        for a in &m.apps {
            let _ = writeln!(
                s,
                "| {} | {:.2} | {:.2} | {:.1}% | {:.0} | {:.0} | {} |",
                a.label,
                a.elapsed_s,
                a.cpu_s,
                a.share * 100.0,
                a.vcsw,
                a.ivcsw,
                if a.ok { "ok" } else { "**wrong**" }
            );
        }
    }
    s
}
