//! The thesis' tables over every trace and policy: Table 10, Fig. 23 and the trigger sweep.

use super::{PolicyKind, Report, SimConfig, TraceConfig, simulate, traces};
use crate::policy::Params;
use std::fmt::Write as _;

/// Every trace under every policy: `(trace name, policy, report)`.
///
/// ```
/// use partita_numa::sim::{run_table, SimConfig, TraceConfig};
/// let rows = run_table(&TraceConfig::small(), &SimConfig::default());
/// assert_eq!(rows.len(), 16);
/// ```
pub fn run_table(tc: &TraceConfig, base: &SimConfig) -> Vec<(&'static str, PolicyKind, Report)> {
    let mut rows = Vec::new();
    for t in traces::all(tc) {
        for kind in PolicyKind::ALL {
            let cfg = SimConfig { kind, ..*base };
            rows.push((t.name, kind, simulate(&t, &cfg)));
        }
    }
    rows
}

/// Mig/Rep over every trace for each trigger (sharing = trigger / 4): `(trigger, trace,
/// report)`.
///
/// ```
/// use partita_numa::sim::{trigger_sweep, SimConfig, TraceConfig};
/// let rows = trigger_sweep(&TraceConfig::small(), &SimConfig::default(), &[64, 128]);
/// assert_eq!(rows.len(), 8);
/// ```
pub fn trigger_sweep(
    tc: &TraceConfig,
    base: &SimConfig,
    triggers: &[u32],
) -> Vec<(u32, &'static str, Report)> {
    let traces = traces::all(tc);
    let mut rows = Vec::new();
    for &trigger in triggers {
        for t in &traces {
            let cfg = SimConfig {
                kind: PolicyKind::MigRep,
                params: Params {
                    trigger,
                    sharing: (trigger / 4).max(1),
                    ..base.params
                },
                ..*base
            };
            rows.push((trigger, t.name, simulate(t, &cfg)));
        }
    }
    rows
}

/// Formats [`run_table`] output like the thesis' Table 10: per workload and policy, locality,
/// stall and overhead, time saved against static placement, and the moves by kind.
///
/// ```
/// use partita_numa::sim::{format_table, run_table, SimConfig, TraceConfig};
/// let s = format_table(&run_table(&TraceConfig::small(), &SimConfig::default()));
/// assert!(s.contains("Mig/Rep") && s.contains("database"));
/// ```
pub fn format_table(rows: &[(&'static str, PolicyKind, Report)]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<11} {:<15} {:>8} {:>10} {:>10} {:>8} {:>7} {:>7} {:>7} {:>7} {:>9}",
        "workload",
        "policy",
        "local%",
        "stall ms",
        "ovhd ms",
        "saved%",
        "migr",
        "repl",
        "rearr",
        "coll",
        "no-action"
    );
    for (name, kind, r) in rows {
        let base = rows
            .iter()
            .find(|(n, k, _)| n == name && *k == PolicyKind::Static)
            .map(|(_, _, b)| b.total_ns())
            .unwrap_or(r.total_ns());
        let saved = 100.0 * (base as f64 - r.total_ns() as f64) / base.max(1) as f64;
        let _ = writeln!(
            s,
            "{:<11} {:<15} {:>8.1} {:>10.1} {:>10.1} {:>8.1} {:>7} {:>7} {:>7} {:>7} {:>9}",
            name,
            kind.name(),
            r.locality_percent(),
            r.stall_ns as f64 / 1e6,
            r.overhead_ns as f64 / 1e6,
            saved,
            r.migrations,
            r.replications,
            r.rearranges,
            r.collapses,
            r.no_action.values().sum::<u64>()
        );
    }
    s
}

/// Formats the Fig. 23 shape: for Mig/Rep, what fraction of hot-page decisions became each
/// action (migrate, replicate, rearrange, or each reason for doing nothing).
///
/// ```
/// use partita_numa::sim::{format_decisions, run_table, SimConfig, TraceConfig};
/// let s = format_decisions(&run_table(&TraceConfig::small(), &SimConfig::default()));
/// assert!(s.contains("migrate%"));
/// ```
pub fn format_decisions(rows: &[(&'static str, PolicyKind, Report)]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<11} {:>9} {:>9} {:>10} {:>10} {:>9} {:>8}",
        "workload", "decisions", "migrate%", "replicate%", "rearrange%", "none%", "(why)"
    );
    for (name, kind, r) in rows.iter().filter(|(_, k, _)| *k == PolicyKind::MigRep) {
        let _ = kind;
        let d = r.decisions().max(1) as f64;
        let why = r
            .no_action
            .iter()
            .map(|(k, v)| format!("{k}:{v}"))
            .collect::<Vec<_>>()
            .join(" ");
        let _ = writeln!(
            s,
            "{:<11} {:>9} {:>9.1} {:>10.1} {:>10.1} {:>9.1} {}",
            name,
            r.decisions(),
            100.0 * r.migrations as f64 / d,
            100.0 * r.replications as f64 / d,
            100.0 * r.rearranges as f64 / d,
            100.0 * r.no_action.values().sum::<u64>() as f64 / d,
            why
        );
    }
    s
}

/// Formats [`trigger_sweep`] output: per trigger, locality and overhead summed over the
/// workloads.
///
/// ```
/// use partita_numa::sim::{format_sweep, trigger_sweep, SimConfig, TraceConfig};
/// let s = format_sweep(&trigger_sweep(&TraceConfig::small(), &SimConfig::default(), &[128]));
/// assert!(s.contains("128"));
/// ```
pub fn format_sweep(rows: &[(u32, &'static str, Report)]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:>7} {:>8} {:>8} {:>10} {:>10} {:>10}",
        "trigger", "local%", "moves", "stall ms", "ovhd ms", "total ms"
    );
    let mut triggers: Vec<u32> = rows.iter().map(|r| r.0).collect();
    triggers.dedup();
    for t in triggers {
        let sel: Vec<&Report> = rows.iter().filter(|r| r.0 == t).map(|r| &r.2).collect();
        let misses: u64 = sel.iter().map(|r| r.misses).sum();
        let local: u64 = sel.iter().map(|r| r.local_misses).sum();
        let stall: u64 = sel.iter().map(|r| r.stall_ns).sum();
        let ovhd: u64 = sel.iter().map(|r| r.overhead_ns).sum();
        let moves: u64 = sel.iter().map(|r| r.moves()).sum();
        let _ = writeln!(
            s,
            "{:>7} {:>8.1} {:>8} {:>10.1} {:>10.1} {:>10.1}",
            t,
            100.0 * local as f64 / misses.max(1) as f64,
            moves,
            stall as f64 / 1e6,
            ovhd as f64 / 1e6,
            (stall + ovhd) as f64 / 1e6
        );
    }
    s
}
