//! Process control applied to a pool: the target and the active count, suspension and
//! resumption at safe points, re-pinning to the allocated CPUs, and the demand a pool reports.
//! The numbers come from the pure policies in the parent module; the protocol that makes a
//! target change safe (no task stranded, no wake-up lost) is in `../sleep/README.md`.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use crossbeam_utils::CachePadded;

use super::report::{Event, Reporting};
use super::slots::Slots;
use crate::control::{self, Need, ProcessControl};
use crate::latch::CoreLatch;
use crate::registry::Registry;
use crate::worker::{bump, WorkerThread};

/// The target word: the target (low 32 bits) and how many times it changed (high 32).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Targeted(pub(crate) u64);

impl Targeted {
    fn first(n: usize) -> Targeted {
        Targeted(n as u64)
    }

    #[inline]
    pub(crate) fn target(self) -> usize {
        // Truncation intended: pools have at most `sleep::THREADS_MAX` workers.
        self.0 as u32 as usize
    }

    pub(crate) fn changes(self) -> u64 {
        self.0 >> 32
    }

    fn changed_to(self, t: usize) -> Targeted {
        Targeted(((self.changes() + 1) << 32) | t as u32 as u64)
    }
}

/// Process-control state of one pool (built by `Registry::new`).
pub(crate) struct Control {
    pub(crate) mode: ProcessControl,
    /// How many workers should be active (those whose place in `slots` is below it): the
    /// target in the low 32 bits, the number of changes so far above it ([`Targeted`]). One word, so a parker reads a
    /// target and the change that set it together: the hand-over ring goes once per change,
    /// however often a worker parked inside a job bounces (`note_parked`).
    pub(crate) target: CachePadded<AtomicU64>,
    /// The workers' places in the order the target counts, and who is between jobs
    /// (`slots.rs`: who parks when the target excludes a worker holding a job).
    pub(crate) slots: Slots,
    /// Workers not suspended (decremented by `suspended`, incremented on resumption).
    pub(crate) active: AtomicUsize,
    /// Serialises target changes (so unpark/wake decisions see a consistent old/new pair).
    pub(crate) change: Mutex<()>,
    /// The allocated CPU set (`None`: no confinement); workers re-pin when `cpus_epoch` moves.
    pub(crate) cpus: Mutex<Option<Vec<usize>>>,
    pub(crate) cpus_epoch: AtomicU64,
    /// The CPUs the pool may use at all (its starting affinity): manager sets are
    /// intersected with it, and "no confinement" means exactly this set.
    pub(crate) allowed: Vec<usize>,
    /// The application's own limit (`set_demand`).
    pub(crate) need: Mutex<Need>,
    /// The demand estimate and where it is reported (`report.rs`).
    pub(crate) report: Reporting,
    /// The live manager session's page, which workers apply at safe points (`page.rs`).
    pub(crate) page: super::page::PageSlot,
}

impl Control {
    /// A pool of `n` workers, all active, following `mode`.
    pub(crate) fn new(mode: ProcessControl, n: usize) -> Control {
        Control {
            mode,
            target: CachePadded::new(AtomicU64::new(Targeted::first(n).0)),
            slots: Slots::new(n),
            active: AtomicUsize::new(n),
            change: Mutex::new(()),
            cpus: Mutex::new(None),
            cpus_epoch: AtomicU64::new(0),
            allowed: crate::affinity::allowed_cpus(),
            need: Mutex::new(Need::Unlimited),
            report: Reporting::new(n),
            page: Default::default(),
        }
    }
}

impl Registry {
    /// Set the target number of active workers. `allow_zero` only for a manager's granted zero
    /// quantum. Growing unparks at once (lowest index first); shrinking is noticed by workers
    /// at their next safe point or wait (sleeping ones are suspended where they sleep).
    pub(crate) fn set_target(&self, requested: usize, allow_zero: bool) {
        let n = self.num_threads();
        let mut t = control::clamp_target(requested, n, allow_zero);
        if self.borrowed_thread0 && t == 1 && n > 1 {
            // Worker 0 is a user thread that runs pool tasks only while it waits inside the
            // pool: keep one main-loop worker active too, or spawned work could wait forever.
            t = 2;
        }
        let _g = self
            .control
            .change
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        // SeqCst, under `change`: workers read the target (Relaxed) at safe points and in
        // their resume predicate under their own mutex, which `notify_worker` then takes
        // (README §4, §7 "resume vs suspend").
        // Only target changes write the word, all under `change`: load, then store.
        let cur = Targeted(self.control.target.load(Ordering::SeqCst));
        let old = cur.target();
        if t != old {
            self.control
                .target
                .store(cur.changed_to(t).0, Ordering::SeqCst);
        }
        if t > old {
            for i in self.control.slots.workers_at(old..t) {
                self.sleep.notify_worker(i);
            }
        } else if t < old {
            for i in self.control.slots.workers_at(t..n) {
                self.suspend_if_asleep(i);
            }
        }
    }

    /// Worker `i` is excluded now: suspend it where it sleeps; running, it suspends itself
    /// at its next safe point or wait. Under a manager whose page suspended workers watch,
    /// wake it so that it waits there (README §5); otherwise leave it asleep.
    fn suspend_if_asleep(&self, i: usize) {
        if self.sleep.suspend_sleeper(i, self.control.page.watched()) {
            self.suspended(i);
        }
    }

    /// Worker `index`, excluded by the target, is about to park inside a job (its stack holds
    /// one that others may wait for): take the place of an included worker between top-level
    /// jobs, which suspends instead (`slots.rs`). Returns whether `index` is included now.
    pub(crate) fn take_place(&self, index: usize, resumed: bool) -> bool {
        let _g = self
            .control
            .change
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let t = self.target();
        if self.control.slots.place(index) < t {
            return true; // the target rose meanwhile
        }
        let fixed = self.borrowed_thread0.then_some(0);
        let Some(j) = self
            .control
            .slots
            .trade(index, t, fixed, resumed, |w| self.broadcast_waits_for(w))
        else {
            return false;
        };
        control::hop!("trade", worker = index, with = j);
        self.suspend_if_asleep(j);
        true
    }

    /// Bookkeeping of worker `index` leaving the active set (its deque is empty).
    pub(crate) fn suspended(&self, index: usize) {
        // Relaxed: read back only by this worker when it resumes (a statistic).
        self.suspended_at[index].store(self.started.elapsed().as_nanos() as u64, Ordering::Relaxed);
        // `active` is reported, never used to decide a wake or a suspension.
        let active = self.control.active.fetch_sub(1, Ordering::SeqCst) - 1;
        control::hop!("park", worker = index);
        self.note_parked(active);
        self.ready.set_active(index, false);
        // Its ready queue now belongs to an active worker: make sure one is awake if it (or
        // the tasks just handed over) holds anything.
        if self.ready.len() > 0 {
            self.sleep.new_jobs(true);
        }
    }

    pub(crate) fn target(&self) -> usize {
        Targeted(self.control.target.load(Ordering::SeqCst)).target()
    }

    /// How many times the target changed.
    pub(crate) fn target_changes(&self) -> u64 {
        Targeted(self.control.target.load(Ordering::Relaxed)).changes()
    }

    pub(crate) fn active(&self) -> usize {
        self.control.active.load(Ordering::SeqCst)
    }

    pub(crate) fn mode(&self) -> ProcessControl {
        self.control.mode
    }

    /// The application's own limit on its demand; a manager hears of it at once.
    pub(crate) fn set_need(&self, need: Need) {
        *self.control.need.lock().unwrap_or_else(|p| p.into_inner()) = need;
        self.demand_event(Event::NeedChanged);
    }

    /// The manager went away: the whole pool, no CPU confinement.
    pub(crate) fn revert_to_standalone(&self) {
        self.set_target(self.num_threads(), true);
        self.set_cpu_set(None);
    }

    /// Confine the workers to `cpus` (`None`: no confinement); they re-pin themselves at their
    /// next safe point.
    pub(crate) fn set_cpu_set(&self, cpus: Option<Vec<usize>>) {
        *self.control.cpus.lock().unwrap_or_else(|p| p.into_inner()) = cpus;
        // Release after the set is stored: a worker that sees the new epoch (Acquire, at its
        // safe point) then reads the new set under the mutex anyway.
        self.control.cpus_epoch.fetch_add(1, Ordering::Release);
    }
}

impl WorkerThread {
    /// Our place is at or above the target (worker 0 of a `use_current_thread` pool never
    /// suspends: it is the user's thread).
    #[inline]
    pub(crate) fn should_suspend(&self) -> bool {
        // Relaxed: a late read only delays the suspension to the next safe point or wait;
        // the resume predicate re-reads it under the worker's mutex (README §5). The target
        // first: it is the one test on `join`'s fast path, and a pool at its full size (the
        // common case) reads nothing else.
        let t = Targeted(self.registry.control.target.load(Ordering::Relaxed)).target();
        t < self.registry.num_threads()
            && self.registry.control.slots.place(self.index) >= t
            && !(self.index == 0 && self.registry.borrowed_thread0)
    }

    /// At a wait inside a job: park here, unless an included worker between top-level jobs
    /// takes our exclusion instead ([`Registry::take_place`]), or we are not excluded.
    #[inline]
    pub(crate) fn must_park_in_wait(&self) -> bool {
        self.should_park_in_wait() && !self.registry.take_place(self.index, false)
    }

    /// A top-level job starts (`false`) or ends (`true`) on this worker.
    #[inline]
    pub(crate) fn set_between(&self, between: bool) {
        self.registry.control.slots.set_between(self.index, between);
    }

    /// Safe point: re-pin to the allocated CPU set if it changed.
    pub(crate) fn maybe_repin(&self) {
        let epoch = self.registry.control.cpus_epoch.load(Ordering::Acquire);
        if epoch == self.cpus_epoch.get() {
            return;
        }
        self.cpus_epoch.set(epoch);
        let cpus = self
            .registry
            .control
            .cpus
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let Err(e) =
            crate::affinity::pin_current_thread(cpus.as_deref(), &self.registry.control.allowed)
        {
            tracing::warn!(worker = self.index, error = %e, "could not re-pin worker");
        }
    }

    /// Inside a wait (`wait_until`): the target excludes us and no broadcast job is for us
    /// (one is run first: its caller may be what our latch waits for). The terminate latch
    /// is never set while a job is in flight, so it needs no check here.
    #[inline]
    pub(crate) fn should_park_in_wait(&self) -> bool {
        self.should_suspend() && self.broadcast.is_empty()
    }

    /// Leave the active set: at a safe point (`waiting_on` = None) until the target includes
    /// us again (or a broadcast job or termination needs us); inside a job until that, or
    /// until the latch the job waits for is set. Our deque is handed to the ready queues
    /// first, so no task waits on a parked worker.
    pub(crate) fn park(&self, waiting_on: Option<&CoreLatch>) {
        let reg = &*self.registry;
        while let Some(job) = self.worker.pop() {
            reg.ready.post_from(&self.queues, job);
        }
        self.busy_edge(false);
        reg.suspended(self.index);
        self.wait_suspended(waiting_on);
        // Resumed to continue our own job while the target still excludes us: take an
        // included worker's place (it parks at its next safe point) instead of parking
        // again at our next wait, once per step of the job (`slots.rs`).
        if waiting_on.is_some_and(|l| l.probe()) && self.should_suspend() {
            reg.take_place(self.index, true);
        }
        self.busy_edge(true);
    }

    /// Second half of a suspension (ours, or one done in place while we slept): park until
    /// the target includes us again, a broadcast job is for us, the pool terminates, or
    /// `waiting_on` (the latch of the job our stack waits in) is set. Returns the
    /// nanoseconds spent suspended.
    pub(crate) fn wait_suspended(&self, waiting_on: Option<&CoreLatch>) -> u64 {
        let reg = &*self.registry;
        bump(&self.counters().parks, 1);
        let terminate = &reg.thread_infos[self.index].terminate;
        // Marked sleepy, the latch's setter notifies us (README §7, latch vs suspended
        // wait); if it is already set, the predicate below is true at once.
        if let Some(latch) = waiting_on {
            latch.get_sleepy();
        }
        let latch_set = || waiting_on.is_some_and(|l| l.probe());
        reg.sleep.suspend(
            self.index,
            || {
                terminate.probe()
                    || !self.broadcast.is_empty()
                    || !self.should_suspend()
                    || latch_set()
            },
            // Between waits: apply a page change, and watch the page's futex word too, so a
            // manager's grow resumes us without the client thread (`page.rs`).
            || self.page_while_suspended(),
        );
        if let Some(latch) = waiting_on {
            latch.wake_up();
        }
        let since = reg.suspended_at[self.index].load(Ordering::Relaxed);
        let now = reg.started.elapsed().as_nanos() as u64;
        let spent = now.saturating_sub(since);
        bump(&self.counters().suspended_ns, spent);
        if !self.should_suspend() || latch_set() {
            bump(&self.counters().unparks, 1);
        }
        // The statistics first: whoever sees us counted active (SeqCst) then sees them too.
        reg.control.active.fetch_add(1, Ordering::SeqCst);
        control::hop!("resume", worker = self.index);
        reg.ready.set_active(self.index, true);
        self.note_resumed();
        spent
    }
}
