//! What the demo leaves behind: results.json, report.md and the SVG charts.

use crate::{mode, report, svg, BoxError, Mode, ModeRun, Setup};
use std::fmt::Write as _;
use std::time::Duration;

/// Describe this machine in one line.
fn machine() -> String {
    let cpus = mode::available_cpus();
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    format!("{cpus} CPUs ({model}), Linux {kernel}")
}

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
    std::fs::write(
        out.join("results.json"),
        serde_json::to_string_pretty(&serde_json::json!({
            "title": title,
            "command": s.command,
            "machine": machine(),
            "summaries": summaries,
            "runs": runs,
        }))?,
    )?;
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
    let mut md = String::new();
    let _ = writeln!(md, "# partita demo: {title}\n");
    let _ = writeln!(md, "- command: `{}`", s.command);
    let _ = writeln!(md, "- machine: {}", machine());
    let _ = writeln!(
        md,
        "- date: {} (seconds since the epoch); the demo took {:.1} s",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
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
