//! Keeping the build's processes on the CPUs the manager gave it.
//!
//! The manager sets the affinity of the registered process (the server) only; the jobs are its
//! descendants. The server sets the affinity of every thread in the build's tree when the CPU
//! set changes; processes forked later inherit it from their (already confined) parent. The
//! calls are partita-protocol's (`sys::get_affinity`, `sys::set_affinity`).

use partita_protocol::sys::{get_affinity, set_affinity};
use partita_protocol::CpuSet;

/// This process's affinity (to restore when the manager goes away).
pub fn own_affinity() -> Option<CpuSet> {
    get_affinity(0).ok()
}

/// Number of CPUs this process may run on (at least 1).
pub fn available_cpus() -> u32 {
    own_affinity().map_or(1, |s| s.len() as u32).max(1)
}

/// Set the affinity of every thread of `root` and its descendants; returns threads changed.
/// Threads that exit meanwhile are skipped.
pub fn confine_tree(root: i32, set: &CpuSet) -> usize {
    let mut n = 0;
    for pid in crate::procscan::tree(root) {
        for tid in crate::procscan::tasks(pid) {
            if set_affinity(tid, set).is_ok() {
                n += 1;
            }
        }
    }
    n
}
