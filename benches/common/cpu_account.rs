//! Where a run's CPU time went: the machine's idle time, the CPU time of the children the run
//! waited for, and this process's own (the manager, a `partita serve` child reaped only after
//! the run, is read separately: `serve.rs`). On a machine that runs nothing else,
//! `CPUs × makespan ≈ children + self + manager + idle`, so a mode that
//! is slower than another shows whether it lost the time to idle CPUs (a late handover, a
//! tail) or to work done on them (management, spinning, cache misses).

use nix::sys::resource::{getrusage, UsageWho};
use std::time::Duration;

/// Cumulative counters at one instant; subtract two to account for the time between.
#[derive(Debug, Clone, Copy)]
pub struct Snapshot {
    idle: Duration,
    children: Duration,
    own: Duration,
}

/// What a run used, from two snapshots.
#[derive(Debug, Clone, Copy, Default)]
pub struct Usage {
    /// Idle time summed over the CPUs.
    pub idle: Duration,
    /// User and system time of the children reaped meanwhile.
    pub children: Duration,
    /// User and system time of this process (the benchmark's own loop; the manager is a
    /// child, `serve.rs`).
    #[allow(dead_code)] // not every benchmark prints it
    pub own: Duration,
}

impl Snapshot {
    pub fn take() -> Snapshot {
        Snapshot {
            idle: idle_time(),
            children: cpu_time(UsageWho::RUSAGE_CHILDREN),
            own: cpu_time(UsageWho::RUSAGE_SELF),
        }
    }

    pub fn until(self, later: Snapshot) -> Usage {
        Usage {
            idle: later.idle.saturating_sub(self.idle),
            children: later.children.saturating_sub(self.children),
            own: later.own.saturating_sub(self.own),
        }
    }
}

fn cpu_time(who: UsageWho) -> Duration {
    // getrusage fails only on an invalid `who`; a zero would show as no CPU time used.
    getrusage(who).map_or(Duration::ZERO, |u| {
        let us = |t: nix::sys::time::TimeVal| {
            Duration::from_secs(t.tv_sec().max(0) as u64)
                + Duration::from_micros(t.tv_usec().max(0) as u64)
        };
        us(u.user_time()) + us(u.system_time())
    })
}

/// Idle time over all CPUs: cpuidle's per-state residency (µs) where the kernel has a cpuidle
/// driver, else `/proc/stat`'s idle + iowait (in clock ticks:
/// `partita_manager::sys::ticks_per_second`).
fn idle_time() -> Duration {
    cpuidle_time().unwrap_or_else(proc_stat_idle)
}

fn cpuidle_time() -> Option<Duration> {
    let mut us = 0u64;
    let mut found = false;
    for cpu in std::fs::read_dir("/sys/devices/system/cpu").ok()?.flatten() {
        let name = cpu.file_name();
        let name = name.to_string_lossy();
        let Some(n) = name.strip_prefix("cpu") else {
            continue;
        };
        if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(states) = std::fs::read_dir(cpu.path().join("cpuidle")) else {
            continue;
        };
        for state in states.flatten() {
            if let Ok(t) = std::fs::read_to_string(state.path().join("time")) {
                us += t.trim().parse::<u64>().unwrap_or(0);
                found = true;
            }
        }
    }
    found.then(|| Duration::from_micros(us))
}

fn proc_stat_idle() -> Duration {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let ticks: u64 = stat
        .lines()
        .find(|l| l.starts_with("cpu "))
        .map(|l| {
            let f: Vec<u64> = l
                .split_whitespace()
                .skip(1)
                .filter_map(|x| x.parse().ok())
                .collect();
            f.get(3).copied().unwrap_or(0) + f.get(4).copied().unwrap_or(0)
        })
        .unwrap_or(0);
    Duration::from_secs_f64(ticks as f64 / partita_manager::sys::ticks_per_second() as f64)
}
