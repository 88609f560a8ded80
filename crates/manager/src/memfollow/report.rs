//! The page mover in `partita status`: the counters, each application's line, and its
//! pages per node read from `/proc/<pid>/numa_maps` when the status is taken (only then: the
//! read walks the process's page tables, milliseconds for a few hundred MiB, so neither the
//! mover's rounds nor `/metrics` scrapes pay for it).

use super::Stats;
use crate::status::{MemoryStatus, Status};
use std::sync::atomic::Ordering;

/// Fills `status` with what the mover did; with `read_pages`, each application's pages per
/// node too (done only on machines with several nodes: on one node it says nothing about
/// placement). Runs outside the registry's lock.
///
/// ```
/// let mut s = partita_manager::Status::default();
/// s.applications.push(partita_manager::status::AppStatus { pid: std::process::id() as i32, ..Default::default() });
/// let stats = partita_manager::memfollow::Stats::default();
/// partita_manager::memfollow::annotate(&mut s, &stats, true);
/// assert!(s.applications[0].pages_per_node.values().sum::<u64>() > 0);
/// assert!(!s.memory.running);
/// ```
pub fn annotate(status: &mut Status, stats: &Stats, read_pages: bool) {
    let t = stats.snapshot();
    status.memory = MemoryStatus {
        running: stats.running.load(Ordering::Relaxed),
        nodes: stats.nodes.load(Ordering::Relaxed),
        calls: t.calls,
        moved_bytes: t.moved_bytes,
        migrations: t.migrations,
        deferred: t.deferred,
        errors: t.errors,
    };
    let off = crate::sync::lock(&stats.off_reason).clone();
    for a in &mut status.applications {
        match stats.app(a.id) {
            Some(r) => {
                a.memory_moves = r.moves;
                a.memory_moved_bytes = r.moved_bytes;
                a.memory_migration = r.state;
            }
            None if !off.is_empty() => a.memory_migration = format!("off: {off}"),
            None => {}
        }
        if read_pages && a.pid > 0 {
            if let Ok(p) = partita_numa::numa_maps::pages_per_node(a.pid as u32) {
                a.pages_per_node = p;
            }
        }
    }
}
