//! The registry's side of the bandwidth policy ([`crate::quantum`]): what it reads from the
//! pages at each quantum, the top-up between quanta, and the `quantum_end` it writes back.

use super::Registry;
use partita_protocol::page::monotonic_ns;
use std::sync::atomic::Ordering;

impl Registry {
    /// The bandwidth policy's quantum, when a partition uses it.
    pub(crate) fn bandwidth_period_ms(&self) -> Option<u64> {
        self.bandwidth.period_ms()
    }

    /// One quantum of the bandwidth policy: read counters, select, write every page's
    /// `quantum_end` (before the zero targets are published); returns whether the parked set
    /// changed, so that the caller requests a round.
    pub(crate) fn bandwidth_quantum(&mut self) -> bool {
        let (apps, cpus) = self.bandwidth_input();
        let changed = self.bandwidth.tick(&apps, &cpus, monotonic_ns());
        self.store_quantum_ends();
        changed
    }

    /// Between quanta, before a reallocation: CPUs freed by a departure or a demand drop go
    /// to parked applications at once (the bandwidth policy's top-up), not at the quantum's end.
    pub(super) fn bandwidth_top_up(&mut self) {
        if !self.bandwidth.any_parked() {
            return;
        }
        let (apps, cpus) = self.bandwidth_input();
        if self.bandwidth.top_up(&apps, &cpus) {
            self.store_quantum_ends();
        }
    }

    /// What the bandwidth policy reads: every application's demand and reported bytes now,
    /// and each partition's CPUs.
    fn bandwidth_input(&self) -> (Vec<crate::quantum::TickApp>, Vec<u32>) {
        let apps = self
            .apps
            .values()
            .map(|a| crate::quantum::TickApp {
                id: a.id,
                pid: a.pid,
                partition: a.partition,
                demand: a.page.app.demand.load(Ordering::Relaxed),
                reported_bytes: a.page.app.bandwidth.load(Ordering::Relaxed),
            })
            .collect();
        let cpus = (0..self.partitions.len())
            .map(|k| {
                let p = self.last.partitions.get(k).cloned().unwrap_or_default();
                p.entitlement.max(p.allocation)
            })
            .collect();
        (apps, cpus)
    }

    /// Every parked application's page's `quantum_end` (before the zero targets are
    /// published: a new deadline, or a parked one's extended). A selected application's is
    /// cleared only after the round published its target above 0 (`realloc::apply`): cleared
    /// here, a manager stopped before that round left it at target 0 for good.
    fn store_quantum_ends(&self) {
        for a in self.apps.values() {
            let end = self.bandwidth.quantum_end(a.id);
            if end != 0 {
                a.page.manager.quantum_end.store(end, Ordering::Release);
            }
        }
    }
}
