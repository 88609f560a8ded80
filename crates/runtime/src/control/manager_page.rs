//! The live manager session's control page as the pool uses it ([`ManagerPage`]): the
//! allocation applied from it, the reports written into it, and the session's ring.
//!
//! The client registers and hands the pool a `ManagerPage` for the session
//! (`Registry::set_manager_page`); from then on whoever notices a new allocation applies it
//! here: the client thread woken by the manager, a worker at a safe point or inside a wait,
//! or a suspended worker woken by the page's futex word (`page.rs`). They are serialised by
//! one lock over [`Applied`] (workers only `try_lock` it: a safe point never blocks), and each
//! re-reads the page under it, so an older allocation is never applied after a newer one;
//! the session's end closes it under that lock before the client reverts the pool to
//! standalone, so nothing is applied after the revert.
//!
//! The reports go the other way: the demand (`report.rs` publishes it here, then rings), the
//! active count (written by a worker that parks or resumes, and by the client's tick), and
//! the counters and heartbeat (the client's tick). The ring itself is the client's
//! ([`Ring`]: the socket).
//!
//! Linux only (the page is a memfd mapping): elsewhere, and under loom, `ManagerPage` is an
//! uninhabited stand-in, since no client ever makes one.

#[cfg(all(not(loom), partita_linux))]
pub(crate) use linux::*;

#[cfg(any(loom, not(partita_linux)))]
pub(crate) use off::ManagerPage;

#[cfg(all(not(loom), partita_linux))]
mod linux {
    use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
    use std::sync::{Mutex, MutexGuard, TryLockError, Weak};

    use partita_protocol::page::{monotonic_ns, PageMap};
    use partita_protocol::CpuSet;

    use crate::client::Ring;
    use crate::registry::Registry;

    /// The live session's page, the allocation applied from it, and the ring.
    pub(crate) struct ManagerPage {
        page: PageMap,
        ring: Ring,
        /// The pool the allocation is applied to.
        pool: Weak<Registry>,
        /// What the pool last took from the page. The client thread locks it; workers only
        /// `try_lock` it (a safe point never blocks).
        applied: Mutex<Applied>,
    }

    /// The allocation in force in the pool, as far as this session is concerned.
    #[derive(Default)]
    struct Applied {
        /// The page epoch last applied (`None`: nothing yet).
        epoch: Option<u64>,
        cpus: CpuSet,
        /// The zero quantum's end had passed when it was applied.
        expired: bool,
        /// The session is over: nothing more is applied (the client reverts the pool to
        /// standalone right after).
        closed: bool,
        /// The session's own threads (the client's and the socket watch's ids): they follow
        /// the allocation with the workers. A thread created after the manager confined the
        /// process inherits its creator's mask, which may be the old one; the manager's
        /// periodic walk would narrow it within a sampling period, this does it at once.
        threads: Vec<i32>,
        /// The threads that applied a change, by name (tests tell workers from the rest).
        #[cfg(test)]
        by: Vec<String>,
    }

    impl ManagerPage {
        pub(crate) fn new(page: PageMap, ring: Ring, pool: Weak<Registry>) -> ManagerPage {
            ManagerPage {
                page,
                ring,
                pool,
                applied: Mutex::new(Applied::default()),
            }
        }

        /// The mapped page (the client waits on its manager half).
        pub(crate) fn page(&self) -> &PageMap {
            &self.page
        }

        /// The session's ring (and socket).
        pub(crate) fn ring(&self) -> &Ring {
            &self.ring
        }

        fn applied(&self) -> MutexGuard<'_, Applied> {
            // Every update of `Applied` is a few plain assignments after the pool calls: a
            // panic in between leaves a state that is at worst re-applied.
            self.applied.lock().unwrap_or_else(|p| p.into_inner())
        }

        /// Apply the page's allocation to `p` if it changed since it was last applied, or a
        /// zero quantum expired (`now`: the time the caller noticed, monotonic ns). The page
        /// is read under `applied`'s lock, so whoever applies last applies the newest
        /// allocation.
        fn apply(&self, p: &Registry, applied: &mut Applied, now: u64, by_worker: bool) {
            if applied.closed {
                return;
            }
            let page = &self.page;
            let a = page.manager.read();
            // A zero quantum whose end passed with no update from the manager: resume on our
            // own (a hung manager cannot starve us); the next update applies as usual.
            let expired = zero_quantum_expired(
                a.target,
                page.manager.quantum_end.load(Ordering::Acquire),
                now,
            );
            if applied.epoch == Some(a.epoch) && expired == applied.expired {
                return;
            }
            let target = if expired {
                p.num_threads()
            } else {
                a.target as usize
            };
            if !a.partition_only && p.target() != target {
                crate::control::hop!(
                    "client_apply",
                    target = target,
                    woke = now,
                    by_worker = u64::from(by_worker)
                );
                p.set_target(target, true);
            }
            if !a.cpus.is_empty() && a.cpus != applied.cpus {
                let cpus = a.cpus.to_vec();
                let allowed = &p.control.allowed;
                for &tid in &applied.threads {
                    pin_session_thread(tid, &cpus, allowed);
                }
                p.set_cpu_set(Some(cpus));
                applied.cpus = a.cpus;
            }
            applied.epoch = Some(a.epoch);
            applied.expired = expired;
            #[cfg(test)]
            applied
                .by
                .push(std::thread::current().name().unwrap_or("?").to_string());
        }

        /// The client thread's look at the page: apply it to `p` if it changed (blocks for
        /// the lock, unlike a worker).
        pub(crate) fn apply_by_client(&self, p: &Registry) {
            self.apply(p, &mut self.applied(), monotonic_ns(), false);
        }

        /// A worker saw the epoch move (at a safe point, inside a wait, or suspended): apply
        /// the page. Never blocks: `false` if another thread is applying it right now (the
        /// worker tries again later).
        pub(crate) fn catch_up(&self) -> bool {
            let mut applied = match self.applied.try_lock() {
                Ok(g) => g,
                Err(TryLockError::Poisoned(p)) => p.into_inner(),
                Err(TryLockError::WouldBlock) => return false,
            };
            // The worker's own registry keeps the pool alive: the upgrade fails only while
            // the pool is being torn down, when there is nothing left to apply.
            if let Some(p) = self.pool.upgrade() {
                self.apply(&p, &mut applied, monotonic_ns(), true);
            }
            true
        }

        /// The session is over: nothing more of this page is applied.
        pub(crate) fn close(&self) {
            self.applied().closed = true;
        }

        /// Thread `tid` of this session follows the allocation from now on: it is pinned to
        /// the one applied (if any) at once, and again at every change.
        pub(crate) fn confine_thread(&self, tid: i32) {
            let mut applied = self.applied();
            if applied.closed {
                return;
            }
            if !applied.cpus.is_empty() {
                if let Some(p) = self.pool.upgrade() {
                    pin_session_thread(tid, &applied.cpus.to_vec(), &p.control.allowed);
                }
            }
            applied.threads.push(tid);
        }

        /// A session's page for `pool` with no manager behind it: a fresh page (the manager's
        /// half says "all workers", as a welcome does) and a ring on a socket pair whose
        /// other end is returned (keep it: rings are written to it).
        #[cfg(test)]
        pub(crate) fn for_test(
            pool: &std::sync::Arc<Registry>,
        ) -> (std::sync::Arc<ManagerPage>, std::os::unix::net::UnixStream) {
            let n = pool.num_threads() as u32;
            let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
            ours.set_nonblocking(true).unwrap();
            let page = ManagerPage::new(
                PageMap::create(1, n).unwrap(),
                Ring::new(ours),
                std::sync::Arc::downgrade(pool),
            );
            (std::sync::Arc::new(page), theirs)
        }

        /// The threads that applied a change so far, by name.
        #[cfg(test)]
        pub(crate) fn applied_by(&self) -> Vec<String> {
            self.applied().by.clone()
        }

        /// A word that changes whenever the allocation changes (the page's seqlock epoch).
        pub(crate) fn word(&self) -> &AtomicU64 {
            &self.page.manager.epoch
        }

        /// The futex word the manager bumps and wakes (shared, not private) after the epoch
        /// moved: the page's `wake`.
        pub(crate) fn futex(&self) -> &AtomicU32 {
            &self.page.manager.wake
        }

        /// The client's tick: the demand (sampled now, and published here by `report.rs`),
        /// and the page's other reports (active workers, tasks, idle time, traffic,
        /// heartbeat). Returns the demand.
        pub(crate) fn write_reports(&self, p: &Registry) -> u32 {
            let demand = p.demand_now();
            let side = &self.page.app;
            store_active(&side.active, &|| p.active() as u32);
            let stats = p.stats();
            side.tasks_run.store(stats.tasks_run, Ordering::Relaxed);
            side.idle_ns
                .store(stats.idle_time.as_nanos() as u64, Ordering::Relaxed);
            side.bandwidth
                .store(crate::traffic::published_bytes(), Ordering::Relaxed);
            side.traffic_status.store(
                crate::traffic::measured_traffic_status().code(),
                Ordering::Relaxed,
            );
            side.heartbeat.store(monotonic_ns(), Ordering::Release);
            demand
        }

        /// The pool's demand is now `demand` (its tick-time sample and its events, with the
        /// estimate locked). The page first: the ring only says "look at the page".
        pub(crate) fn publish(&self, demand: u32) {
            self.page.app.demand.store(demand, Ordering::Relaxed);
            self.ring.demand(demand);
        }

        /// A worker parked (or the thread that parked it in place): `active` reads the
        /// workers that remain (read it at the moment of writing: a count taken earlier may
        /// already be stale). `at_target`: that is the target, so the manager must hear at
        /// once (it hands a revoked CPU to its new owner only when the worker that ran there
        /// has parked, see the manager's hand-over). The page first.
        pub(crate) fn parked(&self, active: &dyn Fn() -> u32, at_target: bool) {
            store_active(&self.page.app.active, active);
            if at_target {
                self.ring.handover();
            }
        }

        /// A worker resumed: write the active count (`active` reads it) into the page.
        pub(crate) fn resumed(&self, active: &dyn Fn() -> u32) {
            store_active(&self.page.app.active, active);
        }
    }

    /// Pin one of the session's threads to `cpus` by the workers' rule; a thread that exited
    /// meanwhile (ESRCH) is nothing to pin.
    fn pin_session_thread(tid: i32, cpus: &[usize], allowed: &[usize]) {
        if let Err(e) = crate::affinity::pin_thread(tid, Some(cpus), allowed) {
            tracing::debug!(tid, error = %e, "partita: could not pin a client thread");
        }
    }

    /// Whether a zero target is a quantum that has ended (`quantum_end` is monotonic ns; 0:
    /// the manager sets no deadline, the zero stands until changed).
    pub(crate) fn zero_quantum_expired(target: u32, quantum_end: u64, now: u64) -> bool {
        target == 0 && quantum_end != 0 && now > quantum_end
    }

    /// Write the pool's active-worker count into the page. Two writers (the client's tick and
    /// a parking worker) each read the count, then store it; the one that read first may
    /// store last. So every writer reads again after storing and stores again if the count
    /// moved: the last store is then always followed by a read that matched it, and the page
    /// ends on the current count (the manager's hand-over waits for it to reach the target).
    fn store_active(slot: &AtomicU32, read: &dyn Fn() -> u32) {
        let mut v = read();
        loop {
            slot.store(v, Ordering::SeqCst);
            let now = read();
            if now == v {
                return;
            }
            v = now;
        }
    }

    #[cfg(test)]
    mod tests {
        use super::{store_active, zero_quantum_expired};
        use std::cell::Cell;
        use std::sync::atomic::{AtomicU32, Ordering};

        #[test]
        fn a_count_that_moves_while_it_is_stored_is_stored_again() {
            // The writer reads 2; another worker parks before its store lands (the count is
            // 1 from the second read on): the page must end on 1, not on the stale 2.
            let reads = Cell::new(0);
            let read = || {
                reads.set(reads.get() + 1);
                if reads.get() == 1 {
                    2
                } else {
                    1
                }
            };
            let slot = AtomicU32::new(2);
            store_active(&slot, &read);
            assert_eq!(slot.load(Ordering::SeqCst), 1);
            assert_eq!(reads.get(), 3, "stored 2, saw 1, stored 1, saw 1");
        }

        #[test]
        fn only_an_ended_zero_quantum_expires() {
            assert!(zero_quantum_expired(0, 100, 101));
            assert!(!zero_quantum_expired(0, 100, 100), "not before its end");
            assert!(
                !zero_quantum_expired(0, 0, u64::MAX),
                "no deadline: stays parked"
            );
            assert!(!zero_quantum_expired(2, 100, 200), "not a zero quantum");
        }
    }
}

/// No page: the portable build and loom have no client to make one.
#[cfg(any(loom, not(partita_linux)))]
mod off {
    use std::sync::atomic::{AtomicU32, AtomicU64};

    /// Uninhabited: nothing ever holds one where there is no manager client.
    pub(crate) enum ManagerPage {}

    impl ManagerPage {
        pub(crate) fn word(&self) -> &AtomicU64 {
            match *self {}
        }
        pub(crate) fn futex(&self) -> &AtomicU32 {
            match *self {}
        }
        pub(crate) fn catch_up(&self) -> bool {
            match *self {}
        }
        pub(crate) fn publish(&self, _: u32) {
            match *self {}
        }
        pub(crate) fn parked(&self, _: &dyn Fn() -> u32, _: bool) {
            match *self {}
        }
        pub(crate) fn resumed(&self, _: &dyn Fn() -> u32) {
            match *self {}
        }
    }
}
