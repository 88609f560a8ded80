//! The registry: one pool's shared state (workers' stealers, ready queues, sleep and
//! process-control state, handlers), the worker threads' main loop, and the thread-local
//! "which worker am I" pointer.
//!
//! # A worker's life
//!
//! ```text
//! main loop:  broadcast job for me? ─ run it
//!             terminated?           ─ exit
//!             safe point: CPU set changed? re-pin.  index ≥ target? ─ suspend (deque → ready queues)
//!             find work: own deque → own broadcasts → steal (random victim) → ready queues
//!             nothing: search (bounded), then sleep          (see sleep.rs)
//! ```
//!
//! A job that waits (`join`, `scope`, `install` from another pool) calls
//! [`WorkerThread::wait_until`], which runs other jobs and sleeps like the main loop but never
//! suspends: only the main loop is a safe point, so a suspended worker holds no unfinished
//! job and every task it owned is in the ready queues.

use std::cell::Cell;
use std::collections::hash_map::DefaultHasher;
use std::hash::Hasher;
use std::mem;
use std::ptr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_deque::{Steal, Stealer, Worker};
use crossbeam_utils::CachePadded;

use crate::builder::{ErrorKind, ThreadPoolBuildError, ThreadPoolBuilder};
use crate::client::ClientGuard;
#[cfg(not(loom))]
use crate::client::{self, Controlled};
use crate::control::{self, Need, ProcessControl};
use crate::job::{JobFifo, JobRef, StackJob};
use crate::latch::{AsCoreLatch, CoreLatch, Latch, LatchRef, LockLatch, OnceLatch, SpinLatch};
use crate::ready::{ReadyQueues, WorkerQueues};
use crate::sleep::{Sleep, Slept, SPIN_ROUNDS};
use crate::stats::PoolStats;
use crate::thread_builder::{ThreadBuilder, ThreadSpawn};
use crate::unwind;
use crate::Yield;

type PanicHandler = dyn Fn(Box<dyn std::any::Any + Send>) + Send + Sync;
type StartHandler = dyn Fn(usize) + Send + Sync;
type ExitHandler = dyn Fn(usize) + Send + Sync;

/// Per-worker counters; each is written only by its worker (load + store, no RMW).
#[derive(Default)]
struct WorkerCounters {
    tasks_run: AtomicU64,
    steals: AtomicU64,
    sleeps: AtomicU64,
    parks: AtomicU64,
    unparks: AtomicU64,
    idle_ns: AtomicU64,
    suspended_ns: AtomicU64,
}

#[inline]
fn bump(c: &AtomicU64, by: u64) {
    c.store(
        c.load(Ordering::Relaxed).wrapping_add(by),
        Ordering::Relaxed,
    );
}

struct ThreadInfo {
    /// Set once the worker has started (its thread-local is in place).
    primed: LockLatch,
    /// Set when the worker has left its main loop.
    stopped: LockLatch,
    /// Set when the registry terminates.
    terminate: OnceLatch,
    stealer: Stealer<JobRef>,
}

/// Process-control state of one pool.
struct Control {
    mode: ProcessControl,
    /// Workers with index < target should be active.
    target: CachePadded<AtomicUsize>,
    active: AtomicUsize,
    /// Serialises target changes (so unpark/wake decisions see a consistent old/new pair).
    change: Mutex<()>,
    cpus: Mutex<Option<Vec<usize>>>,
    cpus_epoch: AtomicU64,
    need: Mutex<Need>,
    smoothed_demand: Mutex<f64>,
}

/// One pool's shared state.
pub(crate) struct Registry {
    thread_infos: Vec<ThreadInfo>,
    pub(crate) sleep: Sleep,
    ready: ReadyQueues,
    broadcasts: Mutex<Vec<Worker<JobRef>>>,
    panic_handler: Option<Box<PanicHandler>>,
    start_handler: Option<Box<StartHandler>>,
    exit_handler: Option<Box<ExitHandler>>,
    /// Owners keeping the pool alive (pool handles, spawned jobs); workers exit at zero.
    terminate_count: AtomicUsize,
    control: Control,
    counters: Box<[CachePadded<WorkerCounters>]>,
    /// Worker 0 is a user thread (`use_current_thread`): it never runs the main loop.
    borrowed_thread0: bool,
    /// When each worker was last suspended (ns since `started`), for `suspended_time`.
    suspended_at: Box<[AtomicU64]>,
    started: Instant,
}

// ---------------------------------------------------------------------------------------------
// The global pool

static THE_REGISTRY: OnceLock<Arc<Registry>> = OnceLock::new();

/// The global pool, built with the default configuration on first use.
pub(crate) fn global_registry() -> &'static Arc<Registry> {
    if let Some(r) = THE_REGISTRY.get() {
        return r;
    }
    // Racing first uses are fine: `init_global_registry` lets exactly one build win and the
    // losers read the winner's registry.
    let built = init_global_registry(ThreadPoolBuilder::new()).or_else(|e| {
        // As rayon-core: where threads are unsupported, the current thread alone is the pool.
        if !e.is_unsupported() || !WorkerThread::current().is_null() {
            return Err(e);
        }
        let one = ThreadPoolBuilder::new().num_threads(1).use_current_thread();
        init_global_registry(one).map_err(|_| e)
    });
    match built {
        Ok(r) => r,
        Err(e) => THE_REGISTRY.get().unwrap_or_else(|| {
            // The default global pool could not start threads: nothing can run.
            panic!("The global thread pool has not been initialized.: {e}")
        }),
    }
}

/// Build the global pool with `builder`; fails if it already exists.
pub(crate) fn init_global_registry<S: ThreadSpawn>(
    builder: ThreadPoolBuilder<S>,
) -> Result<&'static Arc<Registry>, ThreadPoolBuildError> {
    static BUILD: Mutex<()> = Mutex::new(());
    let _g = BUILD.lock().unwrap_or_else(|p| p.into_inner());
    if THE_REGISTRY.get().is_some() {
        return Err(ThreadPoolBuildError::new(
            ErrorKind::GlobalPoolAlreadyInitialized,
        ));
    }
    let (registry, guard) = Registry::new(builder)?;
    // The global pool lives as long as the process, and so does its manager connection.
    static GLOBAL_CLIENT: Mutex<Option<ClientGuard>> = Mutex::new(None);
    *GLOBAL_CLIENT.lock().unwrap_or_else(|p| p.into_inner()) = guard;
    let _ = THE_REGISTRY.set(registry);
    Ok(THE_REGISTRY
        .get()
        .expect("set just above under the build lock"))
}

/// Stops the workers if `Registry::new` fails halfway.
struct Terminator<'a>(&'a Arc<Registry>);

impl Drop for Terminator<'_> {
    fn drop(&mut self) {
        self.0.terminate()
    }
}

impl Registry {
    /// Start the workers of a new pool, and attach it to a manager if the mode asks for it.
    pub(crate) fn new<S: ThreadSpawn>(
        mut builder: ThreadPoolBuilder<S>,
    ) -> Result<(Arc<Registry>, Option<ClientGuard>), ThreadPoolBuildError> {
        let n = builder
            .get_num_threads()
            .min(crate::max_num_threads())
            .max(1);
        let breadth_first = builder.breadth_first;
        let (workers, stealers): (Vec<_>, Vec<_>) = (0..n)
            .map(|_| {
                let w = if breadth_first {
                    Worker::new_fifo()
                } else {
                    Worker::new_lifo()
                };
                let s = w.stealer();
                (w, s)
            })
            .unzip();
        let (broadcasts, broadcast_stealers): (Vec<_>, Vec<_>) = (0..n)
            .map(|_| {
                let w = Worker::new_fifo();
                let s = w.stealer();
                (w, s)
            })
            .unzip();

        let ready = ReadyQueues::new(n, builder.policies_for(n))
            .map_err(|e| ThreadPoolBuildError::new(ErrorKind::ReadyQueues(e)))?;
        if builder.process_control != ProcessControl::Standalone
            && builder.policies_for(n).dequeue == partita_queues::DequeuePolicy::Static
            && n > 1
        {
            return Err(ThreadPoolBuildError::new(ErrorKind::StaticNeedsStandalone));
        }
        let registry = Arc::new(Registry {
            thread_infos: stealers
                .into_iter()
                .map(|stealer| ThreadInfo {
                    primed: LockLatch::new(),
                    stopped: LockLatch::new(),
                    terminate: OnceLatch::new(),
                    stealer,
                })
                .collect(),
            sleep: Sleep::new(n),
            ready,
            broadcasts: Mutex::new(broadcasts),
            panic_handler: builder.panic_handler.take(),
            start_handler: builder.start_handler.take(),
            exit_handler: builder.exit_handler.take(),
            terminate_count: AtomicUsize::new(1),
            control: Control {
                mode: builder.process_control,
                target: CachePadded::new(AtomicUsize::new(n)),
                active: AtomicUsize::new(n),
                change: Mutex::new(()),
                cpus: Mutex::new(None),
                cpus_epoch: AtomicU64::new(0),
                need: Mutex::new(Need::Unlimited),
                smoothed_demand: Mutex::new(0.0),
            },
            counters: (0..n).map(|_| CachePadded::default()).collect(),
            borrowed_thread0: builder.use_current_thread,
            suspended_at: (0..n).map(|_| AtomicU64::new(0)).collect(),
            started: Instant::now(),
        });

        let t1000 = Terminator(&registry);
        for (index, (worker, broadcast)) in workers.into_iter().zip(broadcast_stealers).enumerate()
        {
            let seed = WorkerSeed {
                registry: Arc::clone(&registry),
                worker,
                broadcast,
                index,
            };
            let name = builder.get_thread_name(index);
            if index == 0 && builder.use_current_thread {
                if !WorkerThread::current().is_null() {
                    return Err(ThreadPoolBuildError::new(
                        ErrorKind::CurrentThreadAlreadyInPool,
                    ));
                }
                // The current thread becomes worker 0 without running the main loop; the
                // WorkerThread is leaked (it must outlive every use of the thread-local).
                let wt: &'static WorkerThread = Box::leak(Box::new(WorkerThread::from(seed)));
                WorkerThread::set_current(wt);
                // SAFETY: the latch lives in the registry, which we hold.
                unsafe { Latch::set(&registry.thread_infos[0].primed) };
                continue;
            }
            let (id, stack_size) = (registry.id(), builder.stack_size);
            let thread = ThreadBuilder::new(index, id, name, stack_size, move || main_loop(seed));
            if let Err(e) = builder.spawn_handler.spawn(thread) {
                return Err(ThreadPoolBuildError::new(ErrorKind::IOError(e)));
            }
        }
        mem::forget(t1000);

        let guard = Self::attach_manager(&registry, &builder);
        Ok((registry, guard))
    }

    /// Connect to a manager when the mode asks for it and `PARTITA` is not `off`.
    #[cfg(not(loom))]
    fn attach_manager<S>(
        registry: &Arc<Registry>,
        builder: &ThreadPoolBuilder<S>,
    ) -> Option<ClientGuard> {
        if builder.process_control == ProcessControl::Manager
            && std::env::var("PARTITA").map(|v| v != "off").unwrap_or(true)
        {
            let weak: std::sync::Weak<dyn Controlled> =
                Arc::downgrade(registry) as std::sync::Weak<dyn Controlled>;
            client::attach(weak, &builder.manager_name())
        } else {
            None
        }
    }

    #[cfg(loom)]
    fn attach_manager<S>(_: &Arc<Registry>, _: &ThreadPoolBuilder<S>) -> Option<ClientGuard> {
        None
    }

    /// The registry of the current worker, or the global one.
    pub(crate) fn current() -> Arc<Registry> {
        match WorkerThread::current_ref() {
            Some(w) => Arc::clone(&w.registry),
            None => Arc::clone(global_registry()),
        }
    }

    pub(crate) fn current_num_threads() -> usize {
        match WorkerThread::current_ref() {
            Some(w) => w.registry.num_threads(),
            None => global_registry().num_threads(),
        }
    }

    /// The current thread, if it is a worker of this registry.
    pub(crate) fn current_thread(&self) -> Option<&WorkerThread> {
        let w = WorkerThread::current_ref()?;
        if ptr::eq(&*w.registry, self) {
            Some(w)
        } else {
            None
        }
    }

    pub(crate) fn id(&self) -> usize {
        self as *const Self as usize
    }

    pub(crate) fn num_threads(&self) -> usize {
        self.thread_infos.len()
    }

    /// Run `f`, sending a panic to the panic handler, or aborting without one.
    pub(crate) fn catch_unwind(&self, f: impl FnOnce()) {
        if let Err(err) = unwind::halt_unwinding(f) {
            let abort_guard = unwind::AbortIfPanic;
            if let Some(ref handler) = self.panic_handler {
                handler(err);
                mem::forget(abort_guard);
            }
        }
    }

    pub(crate) fn wait_until_primed(&self) {
        for info in &self.thread_infos {
            info.primed.wait();
        }
    }

    /// Block until every worker thread has left its main loop (after termination).
    #[cfg(test)]
    pub(crate) fn wait_until_stopped(&self) {
        for (i, info) in self.thread_infos.iter().enumerate() {
            if i == 0 && self.borrowed_thread0 {
                continue;
            }
            info.stopped.wait();
        }
    }

    /// Push to the current worker's deque if it belongs to this pool, else inject.
    pub(crate) fn inject_or_push(&self, job: JobRef) {
        match self.current_thread() {
            Some(w) => w.push(job),
            None => self.inject(job),
        }
    }

    /// Post a job from outside the pool (or from another pool) into the ready queues.
    pub(crate) fn inject(&self, job: JobRef) {
        debug_assert_ne!(self.terminate_count.load(Ordering::Acquire), 0);
        self.ready.post_external(job);
        self.sleep.new_jobs(true);
    }

    /// Push one job per worker onto the workers' broadcast queues and wake every worker,
    /// suspended ones included.
    pub(crate) fn inject_broadcast(&self, jobs: impl ExactSizeIterator<Item = JobRef>) {
        assert_eq!(self.num_threads(), jobs.len());
        {
            let broadcasts = self.broadcasts.lock().unwrap_or_else(|p| p.into_inner());
            for (w, job) in broadcasts.iter().zip(jobs) {
                w.push(job);
            }
        }
        for i in 0..self.num_threads() {
            self.sleep.notify_worker(i);
        }
    }

    /// Run `op` on a worker of this pool: here if we are one, else by injecting and waiting.
    pub(crate) fn in_worker<OP, R>(&self, op: OP) -> R
    where
        OP: FnOnce(&WorkerThread, bool) -> R + Send,
        R: Send,
    {
        match WorkerThread::current_ref() {
            None => self.in_worker_cold(op),
            Some(w) if !ptr::eq(&*w.registry, self) => self.in_worker_cross(w, op),
            Some(w) => op(w, false),
        }
    }

    #[cold]
    fn in_worker_cold<OP, R>(&self, op: OP) -> R
    where
        OP: FnOnce(&WorkerThread, bool) -> R + Send,
        R: Send,
    {
        thread_local!(static LOCK_LATCH: LockLatch = const { LockLatch::new() });
        LOCK_LATCH.with(|l| {
            let job = StackJob::new(
                |injected| {
                    let w =
                        WorkerThread::current_ref().expect("injected job runs on a worker thread");
                    op(w, injected)
                },
                LatchRef::new(l),
            );
            // SAFETY: `job` lives on this stack until its latch is set, which we wait for.
            self.inject(unsafe { job.as_job_ref() });
            job.latch.wait_and_reset();
            // SAFETY: the latch is set, so the job has run.
            unsafe { job.into_result() }
        })
    }

    #[cold]
    fn in_worker_cross<OP, R>(&self, current: &WorkerThread, op: OP) -> R
    where
        OP: FnOnce(&WorkerThread, bool) -> R + Send,
        R: Send,
    {
        let latch = SpinLatch::cross(current);
        let job = StackJob::new(
            |injected| {
                let w = WorkerThread::current_ref().expect("injected job runs on a worker thread");
                op(w, injected)
            },
            latch,
        );
        // SAFETY: `job` lives on this stack until its latch is set, which we wait for.
        self.inject(unsafe { job.as_job_ref() });
        current.wait_until(&job.latch);
        // SAFETY: the latch is set, so the job has run.
        unsafe { job.into_result() }
    }

    pub(crate) fn increment_terminate_count(&self) {
        let previous = self.terminate_count.fetch_add(1, Ordering::AcqRel);
        debug_assert!(previous != 0, "registry ref count incremented from zero");
        assert!(previous != usize::MAX, "overflow in registry ref count");
    }

    /// Drop one owner; the last one tells every worker to exit once out of work.
    pub(crate) fn terminate(&self) {
        if self.terminate_count.fetch_sub(1, Ordering::AcqRel) == 1 {
            for (i, info) in self.thread_infos.iter().enumerate() {
                // SAFETY: the latch lives in the registry, which `self` keeps alive.
                unsafe { OnceLatch::set_and_tickle(&info.terminate, self, i) };
                // Suspended workers re-check their predicate (which includes termination).
                self.sleep.notify_worker(i);
            }
        }
    }

    pub(crate) fn notify_worker_latch_is_set(&self, index: usize) {
        self.sleep.notify_worker(index);
    }

    /// Any task in a deque that `w` could steal, or in a ready queue `w` may serve (a hint).
    fn has_shared_work(&self, w: &WorkerQueues) -> bool {
        self.thread_infos.iter().any(|t| !t.stealer.is_empty()) || self.ready.has_work_for(w)
    }

    // ---- process control ----------------------------------------------------------------

    /// Set the target number of active workers. `allow_zero` only for a manager's granted zero
    /// quantum. Growing unparks at once (lowest index first); shrinking is noticed by workers
    /// at their next safe point (sleeping ones are woken to notice it now).
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
        let old = self.control.target.swap(t, Ordering::SeqCst);
        if t > old {
            for i in old..t {
                self.sleep.notify_worker(i);
            }
        } else if t < old {
            for i in t..n {
                if self.sleep.suspend_sleeper(i) {
                    self.suspended(i);
                }
            }
        }
    }

    /// Bookkeeping of worker `index` leaving the active set (its deque is empty).
    fn suspended(&self, index: usize) {
        self.suspended_at[index].store(self.started.elapsed().as_nanos() as u64, Ordering::Relaxed);
        self.control.active.fetch_sub(1, Ordering::SeqCst);
        self.ready.set_active(index, false);
        // Its ready queue now belongs to an active worker: make sure one is awake if it (or
        // the tasks just handed over) holds anything.
        if self.ready.len() > 0 {
            self.sleep.new_jobs(true);
        }
    }

    pub(crate) fn target(&self) -> usize {
        self.control.target.load(Ordering::SeqCst)
    }

    pub(crate) fn active(&self) -> usize {
        self.control.active.load(Ordering::SeqCst)
    }

    pub(crate) fn mode(&self) -> ProcessControl {
        self.control.mode
    }

    pub(crate) fn set_need(&self, need: Need) {
        *self.control.need.lock().unwrap_or_else(|p| p.into_inner()) = need;
    }

    pub(crate) fn set_cpu_set(&self, cpus: Option<Vec<usize>>) {
        *self.control.cpus.lock().unwrap_or_else(|p| p.into_inner()) = cpus;
        self.control.cpus_epoch.fetch_add(1, Ordering::Release);
    }

    /// Runnable work observed now: busy workers plus queued tasks.
    fn observed_runnable(&self) -> usize {
        let (sleepers, searchers) = self.sleep.snapshot();
        let busy = self.active().saturating_sub(sleepers + searchers);
        let queued: usize = self.ready.len()
            + self
                .thread_infos
                .iter()
                .map(|t| t.stealer.len())
                .sum::<usize>();
        busy + queued
    }

    pub(crate) fn demand_now(&self) -> u32 {
        let n = self.num_threads();
        let limit = control::need_limit(
            *self.control.need.lock().unwrap_or_else(|p| p.into_inner()),
            n,
        );
        let mut s = self
            .control
            .smoothed_demand
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let (d, new) = control::next_demand(self.observed_runnable(), *s, limit, n);
        *s = new;
        d
    }

    pub(crate) fn stats(&self) -> PoolStats {
        let sum = |f: fn(&WorkerCounters) -> &AtomicU64| -> u64 {
            self.counters
                .iter()
                .map(|c| f(c).load(Ordering::Relaxed))
                .sum()
        };
        PoolStats {
            num_threads: self.num_threads(),
            target_workers: self.target(),
            active_workers: self.active(),
            tasks_run: sum(|c| &c.tasks_run),
            steals: sum(|c| &c.steals),
            sleeps: sum(|c| &c.sleeps),
            parks: sum(|c| &c.parks),
            unparks: sum(|c| &c.unparks),
            idle_time: Duration::from_nanos(sum(|c| &c.idle_ns)),
            suspended_time: Duration::from_nanos(sum(|c| &c.suspended_ns)),
        }
    }
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("id", &self.id())
            .field("num_threads", &self.num_threads())
            .finish_non_exhaustive()
    }
}

#[cfg(not(loom))]
impl Controlled for Registry {
    fn pool_size(&self) -> usize {
        self.num_threads()
    }
    fn set_target_workers(&self, n: usize) {
        self.set_target(n, true);
    }
    fn target_workers(&self) -> usize {
        self.target()
    }
    fn active_workers(&self) -> usize {
        self.active()
    }
    fn set_cpus(&self, cpus: Option<Vec<usize>>) {
        self.set_cpu_set(cpus);
    }
    fn demand(&self) -> u32 {
        self.demand_now()
    }
    fn tasks_run(&self) -> u64 {
        self.stats().tasks_run
    }
    fn idle_ns(&self) -> u64 {
        self.stats().idle_time.as_nanos() as u64
    }
}

// ---------------------------------------------------------------------------------------------
// Worker threads

/// What a new worker thread needs to start.
struct WorkerSeed {
    registry: Arc<Registry>,
    worker: Worker<JobRef>,
    broadcast: Stealer<JobRef>,
    index: usize,
}

/// The per-thread state of a worker.
pub(crate) struct WorkerThread {
    worker: Worker<JobRef>,
    broadcast: Stealer<JobRef>,
    fifo: JobFifo,
    index: usize,
    rng: XorShift64Star,
    registry: Arc<Registry>,
    cpus_epoch: Cell<u64>,
    queues: WorkerQueues,
}

thread_local! {
    static WORKER_THREAD_STATE: Cell<*const WorkerThread> = const { Cell::new(ptr::null()) };
}

impl From<WorkerSeed> for WorkerThread {
    fn from(seed: WorkerSeed) -> Self {
        WorkerThread {
            worker: seed.worker,
            broadcast: seed.broadcast,
            fifo: JobFifo::new(),
            index: seed.index,
            rng: XorShift64Star::new(),
            queues: seed.registry.ready.worker(seed.index),
            registry: seed.registry,
            cpus_epoch: Cell::new(0),
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

    fn set_current(thread: *const WorkerThread) {
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
    fn counters(&self) -> &WorkerCounters {
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

    #[inline]
    pub(crate) fn local_deque_is_empty(&self) -> bool {
        self.worker.is_empty()
    }

    /// Pop from the local deque, then from this worker's broadcast queue.
    #[inline]
    pub(crate) fn take_local_job(&self) -> Option<JobRef> {
        if let Some(job) = self.worker.pop() {
            return Some(job);
        }
        self.take_broadcast()
    }

    fn take_broadcast(&self) -> Option<JobRef> {
        // `is_empty` is two loads; `steal` pins an epoch: check first on this hot path.
        if self.broadcast.is_empty() {
            return None;
        }
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

    /// Execute a job and count it.
    #[inline]
    pub(crate) fn execute(&self, job: JobRef) {
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
            let start = self.rng.next_usize(n);
            let job = (start..n)
                .chain(0..start)
                .filter(|&i| i != self.index && !infos[i].stealer.is_empty())
                .find_map(|victim| match infos[victim].stealer.steal() {
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
        match self.find_work() {
            Some(job) => {
                self.execute(job);
                Yield::Executed
            }
            None => Yield::Idle,
        }
    }

    pub(crate) fn yield_local(&self) -> Yield {
        match self.take_local_job() {
            Some(job) => {
                self.execute(job);
                Yield::Executed
            }
            None => Yield::Idle,
        }
    }

    /// Run jobs until `latch` is set. Never suspends (this is not a safe point).
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
        while !latch.probe() {
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

    /// The worker should leave its idle loop without work: for a nested wait, its latch is
    /// set; at a safe point also termination, a broadcast job or a target below its index.
    fn idle_should_stop(&self, latch: &CoreLatch, safe_point: bool) -> bool {
        latch.probe() || (safe_point && self.should_suspend())
    }

    #[inline]
    fn should_suspend(&self) -> bool {
        !(self.index == 0 && self.registry.borrowed_thread0)
            && self.index >= self.registry.control.target.load(Ordering::Relaxed)
    }

    /// Search (bounded), then sleep, until work is found (returned) or the idle loop should
    /// stop (None). See `sleep.rs` for the protocol.
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
            started.get_or_insert_with(Instant::now);
            if searching && rounds < SPIN_ROUNDS {
                rounds += 1;
                thread::yield_now();
                continue;
            }
            if !latch.get_sleepy() {
                continue; // the latch was set meanwhile
            }
            bump(&self.counters().sleeps, 1);
            let slept = sleep.sleep(self.index, searching, safe_point, || {
                self.idle_should_stop(latch, safe_point) || self.has_visible_work()
            });
            latch.wake_up();
            match slept {
                Slept::Declined => {
                    searching = sleep.start_searching();
                }
                Slept::Woken => searching = true,
                Slept::Suspended => {
                    // Suspended in place by a target change; wait until resumed.
                    suspended += self.wait_suspended();
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
            let idle = (started.elapsed().as_nanos() as u64).saturating_sub(suspended);
            bump(&self.counters().idle_ns, idle);
        }
        found
    }

    /// Safe point: re-pin to the allocated CPU set if it changed.
    fn maybe_repin(&self) {
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
        if let Err(e) = crate::affinity::pin_current_thread(cpus.as_deref()) {
            tracing::warn!(worker = self.index, error = %e, "could not re-pin worker");
        }
    }

    /// Safe point: leave the active set until the target includes us again (or a broadcast
    /// job or termination needs us). Our deque is handed to the ready queues first, so no task
    /// waits on a suspended worker.
    fn suspend(&self) {
        let reg = &*self.registry;
        while let Some(job) = self.worker.pop() {
            reg.ready.post_from(&self.queues, job);
        }
        reg.suspended(self.index);
        self.wait_suspended();
    }

    /// Second half of a suspension (ours, or one done in place while we slept): park until
    /// the target includes us again, a broadcast job is for us, or the pool terminates.
    /// Returns the nanoseconds spent suspended.
    fn wait_suspended(&self) -> u64 {
        let reg = &*self.registry;
        bump(&self.counters().parks, 1);
        let terminate = &reg.thread_infos[self.index].terminate;
        reg.sleep.suspend(self.index, || {
            terminate.probe() || !self.broadcast.is_empty() || !self.should_suspend()
        });
        reg.control.active.fetch_add(1, Ordering::SeqCst);
        reg.ready.set_active(self.index, true);
        let since = reg.suspended_at[self.index].load(Ordering::Relaxed);
        let now = reg.started.elapsed().as_nanos() as u64;
        let spent = now.saturating_sub(since);
        bump(&self.counters().suspended_ns, spent);
        if !self.should_suspend() {
            bump(&self.counters().unparks, 1);
        }
        spent
    }
}

fn main_loop(seed: WorkerSeed) {
    let worker_thread = WorkerThread::from(seed);
    WorkerThread::set_current(&worker_thread);
    let wt = &worker_thread;
    let registry = &*wt.registry;
    let index = wt.index;
    let info = &registry.thread_infos[index];
    // SAFETY: the latch lives in the registry, which `wt` keeps alive.
    unsafe { Latch::set(&info.primed) };

    // Panics in jobs are caught where they run; one escaping here is a bug: abort.
    let abort_guard = unwind::AbortIfPanic;
    if let Some(ref handler) = registry.start_handler {
        registry.catch_unwind(|| handler(index));
    }
    let terminate = info.terminate.as_core_latch();
    loop {
        if let Some(job) = wt.take_broadcast() {
            wt.execute(job);
            continue;
        }
        if terminate.probe() {
            break;
        }
        // Safe point: between two tasks, nothing of ours is in flight.
        wt.maybe_repin();
        if wt.should_suspend() {
            wt.suspend();
            continue;
        }
        if let Some(job) = wt.find_work() {
            wt.execute(job);
            continue;
        }
        if let Some(job) = wt.idle(terminate, true) {
            wt.execute(job);
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

/// Run `op` on the current worker, or inject it into the global pool.
pub(crate) fn in_worker<OP, R>(op: OP) -> R
where
    OP: FnOnce(&WorkerThread, bool) -> R + Send,
    R: Send,
{
    match WorkerThread::current_ref() {
        Some(w) => op(w, false),
        None => global_registry().in_worker(op),
    }
}

/// Cheap per-worker random numbers for victim selection.
struct XorShift64Star {
    state: Cell<u64>,
}

impl XorShift64Star {
    fn new() -> Self {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let mut seed = 0;
        while seed == 0 {
            let mut h = DefaultHasher::new();
            h.write_usize(COUNTER.fetch_add(1, Ordering::Relaxed));
            seed = h.finish();
        }
        XorShift64Star {
            state: Cell::new(seed),
        }
    }

    fn next(&self) -> u64 {
        let mut x = self.state.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.state.set(x);
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn next_usize(&self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}
