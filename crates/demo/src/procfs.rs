//! What the demo reads from `/proc` about the processes it started: CPU time (all threads,
//! plus children already reaped) and runnable threads, sampled during a run; and the context
//! switch counters of every thread. Parsers are plain functions over the files' text; the
//! `stat` parser is the manager's ([`partita_manager::sys::parse_proc_stat`]), shared.

use partita_manager::sys::{parse_proc_stat, read_proc_stat};
use std::path::Path;

/// Clock ticks per second for the times in `/proc/<pid>/stat`.
///
/// ```
/// assert!(partita_demo::procfs::clock_ticks() >= 1.0);
/// ```
pub fn clock_ticks() -> f64 {
    partita_manager::sys::ticks_per_second() as f64
}

/// `(voluntary, involuntary)` context switches from the text of `/proc/<pid>/status`.
///
/// ```
/// # use partita_demo::procfs::parse_ctxt;
/// let s = "Name:\tx\nvoluntary_ctxt_switches:\t12\nnonvoluntary_ctxt_switches:\t3\n";
/// assert_eq!(parse_ctxt(s), Some((12, 3)));
/// ```
pub fn parse_ctxt(text: &str) -> Option<(u64, u64)> {
    let mut vol = None;
    let mut invol = None;
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("voluntary_ctxt_switches:") {
            vol = v.trim().parse().ok();
        } else if let Some(v) = line.strip_prefix("nonvoluntary_ctxt_switches:") {
            invol = v.trim().parse().ok();
        }
    }
    Some((vol?, invol?))
}

/// One sample of a process.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProcSample {
    /// CPU seconds of the process (all threads, and children it has reaped).
    pub cpu_s: f64,
    /// Threads in state R (running or runnable).
    pub runnable: u32,
    /// Voluntary context switches summed over its live threads.
    pub vcsw: u64,
    /// Involuntary context switches summed over its live threads.
    pub ivcsw: u64,
}

/// Sample process `pid`; `None` when it is gone.
///
/// ```
/// let s = partita_demo::procfs::sample(std::process::id() as i32).unwrap();
/// assert!(s.runnable >= 1 && s.cpu_s >= 0.0);
/// ```
pub fn sample(pid: i32) -> Option<ProcSample> {
    let base = format!("/proc/{pid}");
    let stat = read_proc_stat(pid, None)?;
    let mut s = ProcSample {
        cpu_s: stat.cpu_ticks as f64 / clock_ticks(),
        ..ProcSample::default()
    };
    let Ok(tasks) = std::fs::read_dir(format!("{base}/task")) else {
        return Some(s);
    };
    for task in tasks.flatten() {
        let dir = task.path();
        let stat = read(&dir.join("stat")).as_deref().and_then(parse_proc_stat);
        if stat.is_some_and(|st| st.state == 'R') {
            s.runnable += 1;
        }
        if let Some((v, i)) = read(&dir.join("status")).as_deref().and_then(parse_ctxt) {
            s.vcsw += v;
            s.ivcsw += i;
        }
    }
    Some(s)
}

fn read(p: &Path) -> Option<String> {
    std::fs::read_to_string(p).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_ctxt_lines_are_rejected() {
        assert_eq!(parse_ctxt("voluntary_ctxt_switches: 1\n"), None);
    }
}
