//! Applying a plan (the effects): pages published, lowered targets first, then affinities
//! and uncontrolled CPU sets, then departed processes' affinities restored; outside the
//! registry's lock, by the round in flight only.

use crate::enforce::Enforcer;
use crate::proc_ref::ProcRef;
use partita_protocol::hop;
use partita_protocol::page::PageMap;
use partita_protocol::CpuSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A plan's effects resolved to what applying them needs, built under the registry's lock.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    /// Pages to publish `(target, cpus)` to, with the page's `quantum_end` (the bandwidth
    /// policy's deadline of a zero quantum, else 0).
    pub publish: Vec<(Arc<PageMap>, u32, CpuSet, u64)>,
    /// Processes whose threads get this affinity (pidfd-backed: never a reused pid).
    pub affinity: Vec<(ProcRef, CpuSet)>,
    /// Partitions (name, tracked processes) whose uncontrolled processes get this CPU set.
    pub uncontrolled: Vec<(String, Vec<ProcRef>, CpuSet)>,
    /// Departed applications' processes: restore their affinity if they still run.
    pub restore: Vec<ProcRef>,
    /// When the next round must run even if none is requested: a hand-over deadline
    /// (monotonic ns).
    pub recheck_at: Option<u64>,
}

/// Apply a batch outside the registry's lock. Errors are logged: a process that exited or
/// refuses a new affinity does not stop the others.
pub(crate) fn apply(batch: Batch, enforcer: &mut Enforcer) {
    if !batch.publish.is_empty() {
        // Before the writes: a woken client may run before this thread stamps again.
        hop!("publish", pages = batch.publish.len());
    }
    // Only this thread publishes, so a page's current target is what it was last sent.
    let changes: Vec<(u32, u32)> = batch
        .publish
        .iter()
        .map(|(page, target, _, _)| (page.manager.read().target, *target))
        .collect();
    for i in revocations_first(&changes) {
        let (page, target, cpus, quantum_end) = &batch.publish[i];
        publish(page, *target, cpus, *quantum_end);
    }
    for (proc, cpus) in &batch.affinity {
        if let Err(e) = enforcer.confine_process(proc, cpus, false) {
            tracing::debug!(pid = proc.pid(), error = %e, "affinity not applied");
        }
    }
    for (name, procs, cpus) in &batch.uncontrolled {
        if let Err(e) = enforcer.update_uncontrolled(name, procs, cpus) {
            tracing::debug!(partition = %name, error = %e, "confinement not updated");
        }
    }
    for proc in batch.restore {
        if proc.alive() {
            enforcer.restore_process(&proc);
        } else {
            enforcer.forget_dead();
        }
    }
}

/// Publish `(target, cpus)` with its `quantum_end`, in the order that never leaves a zero
/// target without its deadline: a client resumes on its own from a zero target only once
/// `quantum_end` has passed, so a manager stopped between the two writes (SIGSTOP, a stall)
/// must not leave the page at target 0 with the 0 of an application already selected again:
/// the deadline goes first when the target drops to 0, and is cleared only after a target
/// above 0 is out. `tests/bandwidth.rs` caught a parked application that never resumed with
/// the manager stopped, in 1 of 20 quiet workspace runs, when `quantum_end` was cleared at
/// the quantum's selection, before the round published the target.
fn publish(page: &PageMap, target: u32, cpus: &CpuSet, quantum_end: u64) {
    let end = &page.manager.quantum_end;
    if target == 0 {
        end.store(quantum_end, Ordering::Release);
        page.manager.publish(target, cpus);
    } else {
        page.manager.publish(target, cpus);
        end.store(quantum_end, Ordering::Release);
    }
}

/// The order in which to publish `(before, after)` targets: lowered targets first, then the
/// rest, each group in its given order. A client that must park workers is woken before
/// the ones that may grow: until its workers park, the CPUs it gives up are contested, and
/// each wake-up on the way (the page's futex, then the worker's safe point) may wait for a
/// CPU; the grantees' wake-ups follow a few microseconds later.
pub(crate) fn revocations_first(changes: &[(u32, u32)]) -> Vec<usize> {
    let (mut first, rest): (Vec<usize>, Vec<usize>) =
        (0..changes.len()).partition(|&i| changes[i].1 < changes[i].0);
    first.extend(rest);
    first
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn revocations_are_published_first() {
        // (before, after): a grant, a revocation, an unchanged target, another revocation.
        let order = revocations_first(&[(1, 2), (2, 1), (1, 1), (3, 0)]);
        assert_eq!(order, vec![1, 3, 0, 2]);
    }

    proptest! {
        /// Every page is published exactly once, and no raised or kept target goes before a
        /// lowered one.
        #[test]
        fn publish_order_is_a_permutation_with_revocations_first(
            changes in prop::collection::vec((0u32..5, 0u32..5), 0..20),
        ) {
            let order = revocations_first(&changes);
            let mut sorted = order.clone();
            sorted.sort_unstable();
            prop_assert_eq!(sorted, (0..changes.len()).collect::<Vec<_>>());
            let lowered = |i: usize| changes[i].1 < changes[i].0;
            let first_other = order.iter().position(|&i| !lowered(i)).unwrap_or(order.len());
            prop_assert!(order[first_other..].iter().all(|&i| !lowered(i)));
        }
    }
}
