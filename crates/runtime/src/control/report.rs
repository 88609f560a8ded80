//! Reporting demand: the plumbing around the pure estimate in [`super::demand`].
//!
//! - Workers keep an exact account of their busy time ([`BusyClock`]), updated only where
//!   they already read the clock: at the edges of an idle episode and of a suspension.
//! - The manager client samples the pool at every tick ([`Registry::demand_now`]).
//! - Events where the pool can tell at once that its demand may have moved sample it too and
//!   ring the manager if the report changed, without waiting for the client's
//!   tick ([`Registry::demand_event`]): `set_demand`, work injected into a pool that reports
//!   less than its size, a worker going to sleep while the pool reports a demand. Events
//!   are rate-bounded ([`MIN_EVENT_NS`]) and cost one relaxed load when no manager listens.
//! - A worker that parks writes the active count into the page at once, and the last one to
//!   park for a lowered target rings ([`Registry::note_parked`]): the manager hands the CPU
//!   it gave up to its new owner then, not at its next tick.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::demand::{DemandEstimate, Sample};
use super::need_limit;
use super::ManagerPage;
use crate::registry::Registry;

/// Events sample the demand at most this often (ns); ticks are not bounded by it.
pub(crate) const MIN_EVENT_NS: u64 = 500_000;

/// A worker's cumulative busy time, readable by other threads at any instant.
///
/// One word: `acc << 1 | busy`, where the busy time at `now` is `acc + now` while busy and
/// `acc` otherwise (`acc` may be negative: busy time so far minus the start of the current
/// busy interval). One writer (the worker), so updates are a load and a store; a reader sees
/// either the state before or after an edge, never a mix.
#[derive(Debug, Default)]
pub(crate) struct BusyClock(AtomicU64);

impl BusyClock {
    fn decode(v: u64) -> (i64, bool) {
        ((v as i64) >> 1, v & 1 == 1)
    }

    fn encode(acc: i64, busy: bool) -> u64 {
        ((acc << 1) as u64) | u64::from(busy)
    }

    /// The worker starts being busy at `now_ns` (no effect if it already is).
    #[inline]
    pub(crate) fn begin(&self, now_ns: u64) {
        // Relaxed: only this worker writes; readers want a recent value, not an ordering.
        let (acc, busy) = Self::decode(self.0.load(Ordering::Relaxed));
        if !busy {
            self.0
                .store(Self::encode(acc - now_ns as i64, true), Ordering::Relaxed);
        }
    }

    /// The worker stops being busy at `now_ns` (no effect if it is not).
    #[inline]
    pub(crate) fn end(&self, now_ns: u64) {
        let (acc, busy) = Self::decode(self.0.load(Ordering::Relaxed));
        if busy {
            self.0
                .store(Self::encode(acc + now_ns as i64, false), Ordering::Relaxed);
        }
    }

    /// Busy nanoseconds up to `now_ns`.
    pub(crate) fn read(&self, now_ns: u64) -> u64 {
        let (acc, busy) = Self::decode(self.0.load(Ordering::Relaxed));
        let v = if busy { acc + now_ns as i64 } else { acc };
        v.max(0) as u64
    }
}

/// The demand-reporting state of one pool (part of `Control`).
pub(crate) struct Reporting {
    estimate: Mutex<DemandEstimate>,
    /// The last demand computed (after the `Need`), for the events' cheap checks.
    reported: AtomicU32,
    /// A manager session is live: events may ring. Read (Relaxed) on hot paths.
    live: AtomicBool,
    /// The live session's page (`manager_page.rs`), where reports go.
    page: Mutex<Option<Arc<ManagerPage>>>,
    /// When an event last sampled (ns since the pool started), for the rate bound.
    last_event_ns: AtomicU64,
    /// The target change (`Targeted::changes`) the last hand-over ring was for.
    rang_for: AtomicU64,
}

impl Reporting {
    /// The reporting state of a new pool of `size` workers (its demand starts at its size,
    /// `DemandEstimate::starting_full`).
    pub(crate) fn new(size: usize) -> Self {
        Reporting {
            estimate: Mutex::new(DemandEstimate::starting_full(size)),
            reported: AtomicU32::new(size as u32),
            live: AtomicBool::new(false),
            page: Mutex::new(None),
            last_event_ns: AtomicU64::new(0),
            rang_for: AtomicU64::new(u64::MAX),
        }
    }
}

/// Why the pool samples its demand outside the client's tick.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Event {
    /// The application changed its `Need`: never rate-bounded.
    NeedChanged,
    /// Work arrived from outside the pool.
    Injected,
    /// A worker is going to sleep.
    WorkerIdle,
}

impl Registry {
    /// Nanoseconds since the pool started (the clock of busy times and samples).
    #[inline]
    pub(crate) fn now_ns(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.started).as_nanos() as u64
    }

    fn sample(&self, now: Instant) -> Sample {
        let at_ns = self.now_ns(now);
        let busy_ns = self.counters.iter().map(|c| c.busy.read(at_ns)).sum();
        let queued = self.ready.len()
            + self.queued_broadcasts()
            + self
                .thread_infos
                .iter()
                .map(|t| t.stealer().map_or(0, |s| s.len()))
                .sum::<usize>();
        Sample {
            at_ns,
            busy_ns,
            queued,
        }
    }

    fn observe(&self, estimate: &mut DemandEstimate, now: Instant) -> u32 {
        let n = self.num_threads();
        let limit = need_limit(
            *self.control.need.lock().unwrap_or_else(|p| p.into_inner()),
            n,
        );
        let d = estimate.observe(self.sample(now), n, limit);
        self.control.report.reported.store(d, Ordering::Relaxed);
        d
    }

    /// Hand `d` to the session's page, if a session is live (it rings). Called with the
    /// estimate locked, so the page sees the reports in the order they were computed.
    fn publish(&self, d: u32) {
        let page = self
            .control
            .report
            .page
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let Some(page) = page {
            page.publish(d);
        }
    }

    /// The demand to report now (the client's tick): sample, update the estimate, publish
    /// it (it is rung if it changed, or if an earlier change is still unrung).
    pub(crate) fn demand_now(&self) -> u32 {
        let mut est = self
            .control
            .report
            .estimate
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let d = self.observe(&mut est, Instant::now());
        self.publish(d);
        d
    }

    /// Send reports to the live session's page (`Some`), or stop (`None`); part of
    /// `Registry::set_manager_page`.
    pub(super) fn set_report_page(&self, page: Option<Arc<ManagerPage>>) {
        let r = &self.control.report;
        r.live.store(page.is_some(), Ordering::Relaxed);
        *r.page.lock().unwrap_or_else(|p| p.into_inner()) = page;
    }

    /// A worker left the active set, `active` remain: tell the manager's page at once, and
    /// ring when the pool is down to its target (once per target change however many
    /// workers park, or how often; costs one relaxed load when no manager listens).
    pub(crate) fn note_parked(&self, active: usize) {
        let r = &self.control.report;
        if !r.live.load(Ordering::Relaxed) {
            return;
        }
        let page = r.page.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some(page) = page {
            // A worker parked inside a job may resume for its latch and park again many
            // times under one target; the manager needs one ring per change. The target and
            // its change count are one word, read together.
            let now = super::target::Targeted(self.control.target.load(Ordering::SeqCst));
            let change = now.changes();
            let ring =
                active <= now.target() && r.rang_for.swap(change, Ordering::Relaxed) != change;
            page.parked(&|| self.active() as u32, ring);
        }
    }

    /// Work was injected: if a manager listens and the pool reports less than its size,
    /// the demand may have risen — sample now.
    #[inline]
    pub(crate) fn note_injected(&self) {
        let r = &self.control.report;
        if r.live.load(Ordering::Relaxed)
            && (r.reported.load(Ordering::Relaxed) as usize) < self.num_threads()
        {
            self.demand_event(Event::Injected);
        }
    }

    /// A worker is about to sleep: if a manager listens and the pool reports a demand, it
    /// may be falling — sample now.
    #[inline]
    pub(crate) fn note_worker_idle(&self) {
        let r = &self.control.report;
        if r.live.load(Ordering::Relaxed) && r.reported.load(Ordering::Relaxed) > 0 {
            self.demand_event(Event::WorkerIdle);
        }
    }

    /// Sample outside the tick and publish the demand if it changed. Never blocks on the
    /// estimate (a concurrent sampler is doing the same work).
    #[cold]
    pub(crate) fn demand_event(&self, why: Event) {
        let r = &self.control.report;
        if !r.live.load(Ordering::Relaxed) {
            return;
        }
        let now = Instant::now();
        if why != Event::NeedChanged {
            let t = self.now_ns(now);
            let last = r.last_event_ns.load(Ordering::Relaxed);
            // One event per interval: the CAS picks the one sampler.
            if t < last + MIN_EVENT_NS
                || r.last_event_ns
                    .compare_exchange(last, t, Ordering::Relaxed, Ordering::Relaxed)
                    .is_err()
            {
                return;
            }
        }
        let mut est = match r.estimate.try_lock() {
            Ok(est) => est,
            // A user's `set_demand` waits its turn: the value must reach the manager.
            Err(_) if why == Event::NeedChanged => {
                r.estimate.lock().unwrap_or_else(|p| p.into_inner())
            }
            Err(_) => return,
        };
        let old = r.reported.load(Ordering::Relaxed);
        let d = self.observe(&mut est, now);
        if d != old {
            self.publish(d);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The hand-over ring goes once per target change: a worker parked inside a job that
    /// resumes for its latch and parks again (here: more parks at the same target) does not
    /// ring again; the next change does.
    #[cfg(all(not(loom), partita_linux))] // a session's page: Linux only
    #[test]
    fn one_hand_over_ring_per_target_change() {
        use crate::{ProcessControl, ThreadPoolBuilder};
        let pool = ThreadPoolBuilder::new()
            .num_threads(2)
            .process_control(ProcessControl::Manual)
            .build()
            .unwrap();
        let (page, _manager_end) = ManagerPage::for_test(&pool.registry);
        // The reports only: no worker applies this page (its "all workers" would undo the
        // targets below).
        pool.registry.set_report_page(Some(page.clone()));
        let handovers = || page.ring().handovers.load(Ordering::SeqCst);
        // The parker counts itself out of `active` before it rings: wait for the ring.
        let rung_at_least = |n: usize| {
            let start = std::time::Instant::now();
            while handovers() < n {
                assert!(start.elapsed().as_secs() < 20, "ring {n} never came");
                std::thread::yield_now();
            }
            handovers()
        };
        pool.set_target_workers(1);
        assert_eq!(rung_at_least(1), 1);
        for _ in 0..3 {
            pool.registry.note_parked(1);
        }
        assert_eq!(
            rung_at_least(1),
            1,
            "a bounce at the same target rang again"
        );
        pool.set_target_workers(2);
        let start = std::time::Instant::now();
        while pool.active_workers() != 2 {
            assert!(start.elapsed().as_secs() < 20, "worker 1 did not resume");
            std::thread::yield_now();
        }
        pool.set_target_workers(1);
        assert_eq!(
            rung_at_least(2),
            2,
            "the next lowered target rang more than once"
        );
        pool.registry.set_report_page(None);
    }

    proptest! {
        /// The clock's reading is the sum of its busy intervals, at every instant.
        #[test]
        fn busy_clock_sums_busy_intervals(edges in prop::collection::vec(1u64..1_000_000_000, 0..40)) {
            let c = BusyClock::default();
            let (mut t, mut busy, mut total) = (1u64, false, 0u64);
            for dt in edges {
                if busy { c.end(t) } else { c.begin(t) }
                busy = !busy;
                t += dt;
                if busy { total += dt; }
                prop_assert_eq!(c.read(t), total);
            }
        }
    }
}
