//! Keeping the build's processes on the CPUs the manager gave it.
//!
//! The manager sets the affinity of the registered process (the server) only; the jobs are its
//! descendants. The server sets the affinity of every thread in the build's tree when the CPU
//! set changes; processes forked later inherit it from their (already confined) parent.

use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet as NixCpuSet};
use nix::unistd::Pid;

/// A nix CPU set from a list of CPUs (CPUs beyond nix's limit are skipped).
pub fn to_nix(cpus: impl IntoIterator<Item = usize>) -> NixCpuSet {
    let mut set = NixCpuSet::new();
    for c in cpus {
        let _ = set.set(c);
    }
    set
}

/// This process's affinity (to restore when the manager goes away).
pub fn own_affinity() -> Option<NixCpuSet> {
    sched_getaffinity(Pid::from_raw(0)).ok()
}

/// Number of CPUs this process may run on (at least 1).
pub fn available_cpus() -> u32 {
    own_affinity()
        .map(|s| {
            (0..NixCpuSet::count())
                .filter(|&c| s.is_set(c).unwrap_or(false))
                .count() as u32
        })
        .unwrap_or(1)
        .max(1)
}

/// Set the affinity of every thread of `root` and its descendants; returns threads changed.
/// Threads that exit meanwhile are skipped.
pub fn confine_tree(root: i32, set: &NixCpuSet) -> usize {
    let mut n = 0;
    for pid in crate::procscan::tree(root) {
        for tid in crate::procscan::tasks(pid) {
            if sched_setaffinity(Pid::from_raw(tid), set).is_ok() {
                n += 1;
            }
        }
    }
    n
}
