//! A worker thread: its main loop, finding work (own deque, broadcasts, stealing, the ready
//! queues) and idling (bounded search, then sleep).
//!
//! # A worker's life
//!
//! ```text
//! main loop:  broadcast job for me? ─ run it
//!             terminated?           ─ exit
//!             safe point: CPU set changed? re-pin.  index ≥ target? ─ park (deque → ready queues)
//!             find work: own deque → own broadcasts → steal (random victim) → ready queues
//!             nothing: search (bounded), then sleep          (see sleep/README.md)
//! ```
//!
//! A job that waits (`join`, `scope`, `install` from another pool) calls
//! [`WorkerThread::wait_until`], which runs other jobs and sleeps like the main loop. A worker
//! the target excludes parks there too instead of taking new jobs: its deque goes to the
//! ready queues and it resumes when its latch is set, to finish the waiting job, and parks
//! again at its next wait or safe point. So a revoked worker leaves its CPU after the task
//! in hand, not after the region whose job its stack holds (which may be the whole program's
//! root job). The parking itself (re-pinning, suspension) lives in `control/target.rs`.

use std::cell::{Cell, RefCell};
use std::mem;
use std::ptr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Instant;

use partita_queues::XorShift64;

use crate::control::{BusyClock, PageView};
use crate::deque::{Steal, Stealer, Worker};
use crate::job::{JobFifo, JobRef};
use crate::join::heartbeat::Heartbeat;
use crate::latch::{AsCoreLatch, CoreLatch, Latch};
use crate::ready::WorkerQueues;
use crate::registry::Registry;
use crate::sleep::{Slept, SPIN_ROUNDS};
use crate::unwind;
use crate::Yield;

/// Per-worker counters; each is written only by its worker (load + store, no RMW).
#[derive(Default)]
pub(crate) struct WorkerCounters {
    pub(crate) tasks_run: AtomicU64,
    pub(crate) steals: AtomicU64,
    pub(crate) sleeps: AtomicU64,
    pub(crate) parks: AtomicU64,
    pub(crate) unparks: AtomicU64,
    pub(crate) idle_ns: AtomicU64,
    pub(crate) suspended_ns: AtomicU64,
    /// Busy time, for the demand estimate (`control/report.rs`).
    pub(crate) busy: BusyClock,
}

/// Add to a counter that only the calling worker writes.
#[inline]
pub(crate) fn bump(c: &AtomicU64, by: u64) {
    c.store(
        c.load(Ordering::Relaxed).wrapping_add(by),
        Ordering::Relaxed,
    );
}

/// What a new worker thread needs to start (built by `Registry::new`).
pub(crate) struct WorkerSeed {
    pub(crate) registry: Arc<Registry>,
    /// The pool is `breadth_first`: the worker's deque is FIFO for its owner too.
    pub(crate) breadth_first: bool,
    pub(crate) broadcast: Stealer<JobRef>,
    pub(crate) index: usize,
}

/// The per-thread state of a worker. The fields the safe point uses (`control/target.rs`:
/// suspension hands over `worker`, re-pinning tracks `cpus_epoch`) are crate-visible.
pub(crate) struct WorkerThread {
    /// This worker's deque (LIFO for itself, stolen FIFO by others).
    pub(crate) worker: Worker<JobRef>,
    /// Jobs `broadcast` addressed to this worker.
    pub(crate) broadcast: Stealer<JobRef>,
    fifo: JobFifo,
    pub(crate) index: usize,
    /// Victim selection (partita-queues' xorshift; only this thread uses it).
    rng: RefCell<XorShift64>,
    pub(crate) registry: Arc<Registry>,
    /// The `Control::cpus_epoch` this worker last pinned itself for.
    pub(crate) cpus_epoch: Cell<u64>,
    /// This worker's producer and consumer side of the ready queues.
    pub(crate) queues: WorkerQueues,
    /// The manager's page as this worker follows it at safe points (`control/page.rs`).
    pub(crate) page: PageView,
    /// Un-promoted `join` halves and the heartbeat that promotes them (`join/README.md`).
    pub(crate) heartbeat: Heartbeat,
}

thread_local! {
    static WORKER_THREAD_STATE: Cell<*const WorkerThread> = const { Cell::new(ptr::null()) };
}

impl From<WorkerSeed> for WorkerThread {
    /// Called on the worker's own thread: its deque is built (and first touched) here, and its
    /// thieves' end published in the registry.
    fn from(seed: WorkerSeed) -> Self {
        let worker = if seed.breadth_first {
            Worker::new_fifo()
        } else {
            Worker::new_lifo()
        };
        let published = seed.registry.thread_infos[seed.index]
            .stealer
            .set(worker.stealer());
        debug_assert!(published.is_ok(), "worker {} started twice", seed.index);
        // A `breadth_first` owner pops its oldest job first: no local LIFO list there.
        let heartbeat = Heartbeat::new(seed.registry.heartbeat.filter(|_| !seed.breadth_first));
        WorkerThread {
            worker,
            broadcast: seed.broadcast,
            fifo: JobFifo::new(),
            index: seed.index,
            rng: RefCell::new(new_rng()),
            queues: seed.registry.ready.worker(seed.index),
            registry: seed.registry,
            cpus_epoch: Cell::new(0),
            page: PageView::default(),
            heartbeat,
        }
    }
}

impl Drop for WorkerThread {
    fn drop(&mut self) {
        WORKER_THREAD_STATE.with(|t| {
            if ptr::eq(t.get(), self) {
                t.set(ptr::null());
            }
        });
    }
}

impl WorkerThread {
    #[inline]
    pub(crate) fn current() -> *const WorkerThread {
        WORKER_THREAD_STATE.with(Cell::get)
    }

    /// The current worker, if this thread is one.
    #[inline]
    pub(crate) fn current_ref() -> Option<&'static WorkerThread> {
        let p = Self::current();
        // SAFETY: the pointer is set only by `set_current` to a WorkerThread that lives until
        // the thread's main loop returns (or forever, for `use_current_thread`), and it is
        // cleared before that WorkerThread is dropped; only this thread reads it.
        unsafe { p.as_ref() }
    }

    pub(crate) fn set_current(thread: *const WorkerThread) {
        WORKER_THREAD_STATE.with(|t| {
            assert!(t.get().is_null(), "thread is already a worker");
            t.set(thread);
        });
    }

    #[inline]
    pub(crate) fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    #[inline]
    pub(crate) fn index(&self) -> usize {
        self.index
    }

    #[inline]
    pub(crate) fn counters(&self) -> &WorkerCounters {
        &self.registry.counters[self.index]
    }

    /// Push onto the local deque (LIFO for this worker, stolen FIFO by others).
    #[inline]
    pub(crate) fn push(&self, job: JobRef) {
        self.worker.push(job);
        self.registry.sleep.new_jobs(false);
    }

    /// Push through this worker's FIFO so that spawns start in order.
    pub(crate) fn push_fifo(&self, job: JobRef) {
        // SAFETY: the worker's fifo lives as long as the worker thread, which outlives every
        // job (workers exit only after the pool is out of work).
        let r = unsafe { self.fifo.push(job) };
        self.push(r);
    }

    /// No job in the local deque and no un-promoted `join` half.
    #[inline]
    pub(crate) fn local_deque_is_empty(&self) -> bool {
        self.worker.is_empty() && !self.has_pending()
    }

    /// Pop from the local deque, then from this worker's broadcast queue.
    #[inline]
    pub(crate) fn take_local_job(&self) -> Option<JobRef> {
        if let Some(job) = self.worker.pop() {
            return Some(job);
        }
        self.take_broadcast()
    }

    pub(crate) fn take_broadcast(&self) -> Option<JobRef> {
        // `is_empty` is two loads; `steal` pins an epoch: check first on this hot path.
        if self.broadcast.is_empty() {
            return None;
        }
        // Not between jobs from here on (the caller runs the job as a top-level one, which
        // sets it back after, or inside a wait, where it was already false): a trade that
        // sees the queue empty after our steal sees this too (the steal's CAS releases it),
        // so it never picks a worker about to run a broadcast job it must run even excluded.
        self.set_between(false);
        loop {
            match self.broadcast.steal() {
                Steal::Success(job) => return Some(job),
                Steal::Empty => return None,
                Steal::Retry => {}
            }
        }
    }

    fn find_work(&self) -> Option<JobRef> {
        self.take_local_job()
            .or_else(|| self.steal())
            .or_else(|| self.registry.ready.poll(&self.queues))
    }

    fn has_visible_work(&self) -> bool {
        !self.worker.is_empty()
            || !self.broadcast.is_empty()
            || self.registry.has_shared_work(&self.queues)
    }

    /// Run a job from the main loop: while it runs, our stack holds it, so we are not a
    /// worker that may park in the place of one holding a job (`control/slots.rs`).
    #[inline]
    fn execute_top_level(&self, job: JobRef) {
        self.set_between(false);
        self.execute(job);
        self.set_between(true);
    }

    /// Execute a job and count it.
    #[inline]
    pub(crate) fn execute(&self, job: JobRef) {
        self.heartbeat.rearm();
        // SAFETY: every JobRef in our queues was pushed once and is taken once (the deques
        // and ready queues hand each element to exactly one taker); its owner keeps it alive
        // until it has run.
        if unsafe { job.execute() } {
            bump(&self.counters().tasks_run, 1);
        }
    }

    fn steal(&self) -> Option<JobRef> {
        let infos = &self.registry.thread_infos;
        let n = infos.len();
        if n <= 1 {
            return None;
        }
        loop {
            let mut retry = false;
            let start = self.rng.borrow_mut().below(n);
            let job = (start..n)
                .chain(0..start)
                .filter(|&i| i != self.index)
                .filter_map(|i| infos[i].stealer().filter(|s| !s.is_empty()))
                .find_map(|victim| match victim.steal() {
                    Steal::Success(job) => Some(job),
                    Steal::Empty => None,
                    Steal::Retry => {
                        retry = true;
                        None
                    }
                });
            if job.is_some() {
                bump(&self.counters().steals, 1);
                return job;
            }
            if !retry {
                return None;
            }
        }
    }

    pub(crate) fn yield_now(&self) -> Yield {
        self.promote_all();
        match self.find_work() {
            Some(job) => {
                self.execute(job);
                Yield::Executed
            }
            None => Yield::Idle,
        }
    }

    pub(crate) fn yield_local(&self) -> Yield {
        self.promote_all();
        match self.take_local_job() {
            Some(job) => {
                self.execute(job);
                Yield::Executed
            }
            None => Yield::Idle,
        }
    }

    /// Run jobs until `latch` is set; while the target excludes this worker, park instead
    /// (resumed when the latch is set, or when the target includes it again).
    #[inline]
    pub(crate) fn wait_until<L: AsCoreLatch + ?Sized>(&self, latch: &L) {
        let latch = latch.as_core_latch();
        if !latch.probe() {
            self.wait_until_cold(latch);
        }
    }

    #[cold]
    fn wait_until_cold(&self, latch: &CoreLatch) {
        // A panic here would leave the latch's owner waiting on freed memory.
        let abort_guard = unwind::AbortIfPanic;
        // Our un-promoted join halves become stealable (and runnable by this loop), as
        // rayon-core's deque would hold them: a waiting worker exposes all its work.
        self.promote_all();
        while !latch.probe() {
            // Between two jobs: apply a page change (`control/page.rs`), so a revocation's
            // target is set without waiting for the client thread, then park here if it
            // excludes us (sleep/README.md §5).
            self.apply_page();
            // Excluded while our stack holds a job: an included worker between jobs parks in
            // our place if there is one (`control/slots.rs`), else we park here.
            if self.must_park_in_wait() {
                self.park(Some(latch));
                continue;
            }
            if let Some(job) = self.take_local_job() {
                self.execute(job);
                continue;
            }
            if let Some(job) = self.idle(latch, false) {
                self.execute(job);
            }
        }
        mem::forget(abort_guard);
    }

    /// The worker should leave its idle loop without work: its latch is set (at a safe
    /// point: termination), or the target excludes it (at a safe point it suspends; in a
    /// wait it parks unless a broadcast job is for it, which it runs first).
    fn idle_should_stop(&self, latch: &CoreLatch, safe_point: bool) -> bool {
        latch.probe()
            || if safe_point {
                self.should_suspend()
            } else {
                self.should_park_in_wait()
            }
    }

    /// Search (bounded), then sleep, until work is found (returned) or the idle loop should
    /// stop (None). See `sleep/README.md` for the protocol.
    fn idle(&self, latch: &CoreLatch, safe_point: bool) -> Option<JobRef> {
        let sleep = &self.registry.sleep;
        // The clock is read only once the first search fails (the common case of finding
        // work at once stays free of clock reads).
        let mut started: Option<Instant> = None;
        let mut searching = sleep.start_searching();
        let mut rounds = 0;
        let mut suspended = 0u64;
        let found = loop {
            if self.idle_should_stop(latch, safe_point) {
                break None;
            }
            if let Some(job) = self.find_work() {
                break Some(job);
            }
            if started.is_none() {
                let now = Instant::now();
                self.busy_at(now, false);
                started = Some(now);
            }
            if searching && rounds < SPIN_ROUNDS {
                rounds += 1;
                thread::yield_now();
                continue;
            }
            if !latch.get_sleepy() {
                continue; // the latch was set meanwhile
            }
            bump(&self.counters().sleeps, 1);
            self.registry.note_worker_idle();
            let slept = sleep.sleep(self.index, searching, || {
                self.idle_should_stop(latch, safe_point) || self.has_visible_work()
            });
            latch.wake_up();
            match slept {
                Slept::Declined => {
                    searching = sleep.start_searching();
                }
                Slept::Woken => searching = true,
                Slept::Suspended => {
                    // Suspended in place by a target change; wait until resumed (inside a
                    // job, also when the latch it waits for is set).
                    suspended += self.wait_suspended((!safe_point).then_some(latch));
                    searching = false;
                }
            }
            rounds = 0;
        };
        if searching && sleep.stop_searching() && found.is_some() && self.has_visible_work() {
            // We were the last searcher and work remains: hand the search to a sleeper.
            sleep.wake_any();
        }
        if let Some(started) = started {
            let end = Instant::now();
            let idle = (end.saturating_duration_since(started).as_nanos() as u64)
                .saturating_sub(suspended);
            bump(&self.counters().idle_ns, idle);
            self.busy_at(end, true);
        }
        found
    }

    /// This worker is busy (`true`) or not from `now` on, for the demand estimate. Called
    /// where the clock is read anyway (the edges of idle episodes and suspensions). Worker 0
    /// of a `use_current_thread` pool is the user's thread: not accounted.
    #[inline]
    pub(crate) fn busy_at(&self, now: Instant, busy: bool) {
        if self.index == 0 && self.registry.borrowed_thread0 {
            return;
        }
        let t = self.registry.now_ns(now);
        let c = &self.counters().busy;
        if busy {
            c.begin(t)
        } else {
            c.end(t)
        }
    }

    /// [`WorkerThread::busy_at`] now.
    pub(crate) fn busy_edge(&self, busy: bool) {
        self.busy_at(Instant::now(), busy)
    }
}

/// The body of a worker thread: run until the pool terminates (see the module's diagram).
pub(crate) fn main_loop(seed: WorkerSeed) {
    let worker_thread = WorkerThread::from(seed);
    WorkerThread::set_current(&worker_thread);
    let wt = &worker_thread;
    let registry = &*wt.registry;
    let index = wt.index;
    let info = &registry.thread_infos[index];
    // This worker's memory traffic, counted where a PMU exists (closed when the loop is left).
    let _traffic = crate::traffic::WorkerCounter::open();
    // This worker's own pages follow it to its node (unregistered when the loop is left).
    let _home = crate::numa::enter_worker_home(&wt.registry, index);
    // SAFETY: the latch lives in the registry, which `wt` keeps alive.
    unsafe { Latch::set(&info.primed) };

    // Panics in jobs are caught where they run; one escaping here is a bug: abort.
    let abort_guard = unwind::AbortIfPanic;
    if let Some(ref handler) = registry.start_handler {
        registry.catch_unwind(|| handler(index));
    }
    let terminate = info.terminate.as_core_latch();
    wt.busy_edge(true);
    loop {
        if let Some(job) = wt.take_broadcast() {
            wt.execute_top_level(job);
            continue;
        }
        if terminate.probe() {
            break;
        }
        // Safe point: between two tasks, nothing of ours is in flight.
        wt.apply_page();
        if wt.should_suspend() {
            wt.park(None);
            continue;
        }
        // After the park check: a revoked worker that re-pinned first would move itself onto
        // the CPUs its pool keeps, busy with its siblings, and wait there for a slice before
        // it could park (docs/bench/manager.md §10).
        wt.maybe_repin();
        if let Some(job) = wt.find_work() {
            wt.execute_top_level(job);
            continue;
        }
        if let Some(job) = wt.idle(terminate, true) {
            wt.execute_top_level(job);
        }
    }
    debug_assert!(wt.worker.is_empty());
    // SAFETY: the latch lives in the registry, which `wt` keeps alive.
    unsafe { Latch::set(&info.stopped) };
    mem::forget(abort_guard);
    if let Some(ref handler) = registry.exit_handler {
        registry.catch_unwind(|| handler(index));
    }
}

/// A victim-selection generator; each worker of each pool gets its own stream.
fn new_rng() -> XorShift64 {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    XorShift64::new(COUNTER.fetch_add(1, Ordering::Relaxed) as u64)
}
