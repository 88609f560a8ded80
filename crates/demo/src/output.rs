//! What the demo leaves behind: results.json, report.md and the SVG charts.

use crate::machine::{iso8601, Machine};
use crate::{report, svg, BoxError, Mode, ModeRun, Setup};
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

/// Write results.json, report.md and the charts; returns what was written, for the user.
pub(crate) fn write_outputs(
    s: &Setup,
    title: &str,
    runs: &[ModeRun],
    summaries: &[report::ModeSummary],
    extra_md: &str,
    took: Duration,
) -> Result<String, BoxError> {
    let out = &s.out;
    let machine = Machine::this();
    let date = iso8601(s.started);
    std::fs::write(
        out.join("results.json"),
        serde_json::to_string_pretty(&serde_json::json!({
            "title": title,
            "command": s.command,
            "date": date,
            "took_s": took.as_secs_f64(),
            "machine": machine,
            "summaries": summaries,
            "runs": runs,
        }))?,
    )?;
    let charts = write_charts(out, title, runs, summaries)?;
    let mut md = String::new();
    let _ = writeln!(md, "# partita demo: {title}\n");
    let _ = writeln!(md, "- command: `{}`", s.command);
    let _ = writeln!(md, "- machine: {machine}");
    let _ = writeln!(
        md,
        "- date: {date} (UTC); the demo took {:.1} s",
        took.as_secs_f64()
    );
    let _ = writeln!(
        md,
        "- time: each application's wall time from its start to its exit; CPU and context \
         switches: the kernel's counters for the process and its reaped children (`wait4`, the \
         same counters as `/proc/<pid>/task/*/status`); CPU share = CPU seconds / (makespan × CPUs)\n"
    );
    md.push_str(extra_md);
    if !summaries.is_empty() {
        md.push_str("\n## Results\n\n");
        md.push_str(&report::to_markdown(summaries));
        md.push_str("\n![makespan per mode](makespan.svg)\n");
    }
    for (m, name) in &charts {
        let _ = writeln!(md, "\n### Timeline: {m}\n\n![{m} timeline]({name})");
    }
    std::fs::write(out.join("report.md"), md)?;
    Ok(format!(
        "{}/report.md, results.json, makespan.svg and {} timeline SVGs",
        out.display(),
        charts.len()
    ))
}

/// The timeline of the last run of each mode but batch, and the makespans; returns the
/// timelines written.
fn write_charts(
    out: &Path,
    title: &str,
    runs: &[ModeRun],
    summaries: &[report::ModeSummary],
) -> Result<Vec<(Mode, String)>, BoxError> {
    let mut charts = Vec::new();
    for m in Mode::ALL {
        if m == Mode::Batch {
            continue;
        }
        if let Some(r) = runs.iter().rev().find(|r| r.mode == m) {
            let name = format!("timeline-{}.svg", m.name());
            std::fs::write(out.join(&name), svg::timeline(r, &format!("{m}: {title}")))?;
            charts.push((m, name));
        }
    }
    if !summaries.is_empty() {
        std::fs::write(
            out.join("makespan.svg"),
            svg::makespans(summaries, &format!("Makespan per mode: {title}")),
        )?;
    }
    Ok(charts)
}
