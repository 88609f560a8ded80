//! What the demo reads from `/proc` about the processes it started: CPU time (all threads,
//! plus children already reaped) and runnable threads, sampled during a run; and the context
//! switch counters of every thread. Parsers are plain functions over the files' text.

use std::path::Path;

/// Clock ticks per second for the times in `/proc/<pid>/stat`.
///
/// ```
/// assert!(partita_manager::demo::procfs::clock_ticks() >= 1.0);
/// ```
pub fn clock_ticks() -> f64 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// Fields of `/proc/<pid>/stat` after the command name (which may contain spaces and
/// parentheses, so it is skipped up to the last `)`). Field 3 (state) is index 0.
fn stat_fields(text: &str) -> Option<Vec<&str>> {
    let close = text.rfind(')')?;
    Some(text[close + 1..].split_whitespace().collect())
}

/// `(state, utime + stime + cutime + cstime)` in clock ticks from the text of
/// `/proc/<pid>/stat`.
///
/// ```
/// # use partita_manager::demo::procfs::parse_stat;
/// let s = "42 (my (odd) name) R 1 2 3 4 5 6 7 8 9 10 100 20 3 4 20 0 1 0";
/// assert_eq!(parse_stat(s), Some(('R', 127)));
/// assert_eq!(parse_stat("garbage"), None);
/// ```
pub fn parse_stat(text: &str) -> Option<(char, u64)> {
    let f = stat_fields(text)?;
    let state = f.first()?.chars().next()?;
    // utime, stime, cutime, cstime are fields 14..=17, i.e. indices 11..=14 here.
    let mut total = 0u64;
    for i in 11..=14 {
        let v: i64 = f.get(i)?.parse().ok()?;
        total = total.saturating_add(v.max(0) as u64);
    }
    Some((state, total))
}

/// `(voluntary, involuntary)` context switches from the text of `/proc/<pid>/status`.
///
/// ```
/// # use partita_manager::demo::procfs::parse_ctxt;
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
/// let s = partita_manager::demo::procfs::sample(std::process::id() as i32).unwrap();
/// assert!(s.runnable >= 1 && s.cpu_s >= 0.0);
/// ```
pub fn sample(pid: i32) -> Option<ProcSample> {
    let base = format!("/proc/{pid}");
    let stat = std::fs::read_to_string(format!("{base}/stat")).ok()?;
    let (_, ticks) = parse_stat(&stat)?;
    let mut s = ProcSample {
        cpu_s: ticks as f64 / clock_ticks(),
        ..ProcSample::default()
    };
    let Ok(tasks) = std::fs::read_dir(format!("{base}/task")) else {
        return Some(s);
    };
    for task in tasks.flatten() {
        let dir = task.path();
        if let Some((state, _)) = read(&dir.join("stat")).as_deref().and_then(parse_stat) {
            if state == 'R' {
                s.runnable += 1;
            }
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
    fn stat_of_this_process_parses() {
        // The calling thread is running while it reads its own stat, so its state is R; the
        // process-level /proc/self/stat shows the main thread, which may be asleep.
        let text = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
        let (state, _) = parse_stat(&text).unwrap();
        assert_eq!(state, 'R');
    }

    #[test]
    fn truncated_stat_is_rejected() {
        assert_eq!(parse_stat("1 (x) R 1 2 3"), None);
        assert_eq!(parse_stat("1 (x) R 1 2 3 4 5 6 7 8 9 10 x 20 3 4"), None);
    }

    #[test]
    fn missing_ctxt_lines_are_rejected() {
        assert_eq!(parse_ctxt("voluntary_ctxt_switches: 1\n"), None);
    }
}
