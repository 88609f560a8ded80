//! The registry: one pool's shared state (workers' stealers, ready queues, sleep and
//! process-control state, handlers), the global pool, starting the workers, and getting work
//! into the pool (injection, broadcasts, running an operation on a worker).
//!
//! Its neighbours: `worker.rs` is a worker thread (main loop, stealing, idling);
//! `control/target.rs` is process control (target, suspension, re-pinning, demand);
//! `sleep/` is the sleep and suspension protocol (`sleep/README.md`).

use std::mem;
use std::ptr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::deque::{Stealer, Worker};

use crate::builder::{ErrorKind, ThreadPoolBuildError, ThreadPoolBuilder};
#[cfg(all(not(loom), partita_linux))]
use crate::client;
use crate::client::ClientGuard;
use crate::control::{Control, ProcessControl};
use crate::job::{JobRef, StackJob};
use crate::latch::{Latch, LatchRef, LockLatch, OnceLatch, SpinLatch};
use crate::ready::{ReadyQueues, WorkerQueues};
use crate::sleep::Sleep;
use crate::stats::PoolStats;
use crate::thread_builder::{ThreadBuilder, ThreadSpawn};
use crate::unwind;
/// Re-exported: the rest of the crate reaches workers through the registry.
pub(crate) use crate::worker::WorkerThread;
use crate::worker::{main_loop, WorkerCounters, WorkerSeed};

type PanicHandler = dyn Fn(Box<dyn std::any::Any + Send>) + Send + Sync;
type StartHandler = dyn Fn(usize) + Send + Sync;
type ExitHandler = dyn Fn(usize) + Send + Sync;

/// The pool's view of one worker.
pub(crate) struct ThreadInfo {
    /// Set once the worker has started (its thread-local is in place).
    pub(crate) primed: LockLatch,
    /// Set when the worker has left its main loop.
    pub(crate) stopped: LockLatch,
    /// Set when the registry terminates.
    pub(crate) terminate: OnceLatch,
    /// The thieves' end of the worker's deque, set by the worker when it starts: the deque
    /// is built on its owner's thread, which touches its pages first (`deque/`). Until then
    /// the worker has nothing to steal.
    pub(crate) stealer: OnceLock<Stealer<JobRef>>,
}

impl ThreadInfo {
    /// The worker's deque (thieves' end), once the worker has started.
    #[inline]
    pub(crate) fn stealer(&self) -> Option<&Stealer<JobRef>> {
        self.stealer.get()
    }
}

/// One pool's shared state.
///
/// Its fields are crate-visible for the worker (`worker.rs`) and process control
/// (`control/target.rs`), which are this pool's other halves.
pub(crate) struct Registry {
    pub(crate) thread_infos: Vec<ThreadInfo>,
    pub(crate) sleep: Sleep,
    pub(crate) ready: ReadyQueues,
    broadcasts: Mutex<Vec<Worker<JobRef>>>,
    panic_handler: Option<Box<PanicHandler>>,
    pub(crate) start_handler: Option<Box<StartHandler>>,
    pub(crate) exit_handler: Option<Box<ExitHandler>>,
    /// Owners keeping the pool alive (pool handles, spawned jobs); workers exit at zero.
    terminate_count: AtomicUsize,
    pub(crate) control: Control,
    /// One page per worker, so each can follow its worker's node (`numa/home.rs`).
    pub(crate) counters: Box<[crate::page_aligned::PageAligned<WorkerCounters>]>,
    /// Worker 0 is a user thread (`use_current_thread`): it never runs the main loop.
    pub(crate) borrowed_thread0: bool,
    /// When each worker was last suspended (ns since `started`), for `suspended_time`.
    pub(crate) suspended_at: Box<[AtomicU64]>,
    pub(crate) started: Instant,
    /// Node-aware memory registered with the pool (`numa`).
    pub(crate) numa: Arc<crate::numa::PoolNuma>,
    /// The workers' heartbeat interval; `None`: every join half is stealable at once.
    pub(crate) heartbeat: Option<Duration>,
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
    // One piece (over 80 lines) on purpose: the workers start only after every fallible step
    // before them succeeded, and a failure while starting them must stop the ones already
    // running (`Terminator`); the thread-spawning loop is also where `ThreadPoolBuilder`'s
    // spawn handler plugs in, so it stays next to the state it hands to each thread.
    /// Start the workers of a new pool, and attach it to a manager if the mode asks for it.
    pub(crate) fn new<S: ThreadSpawn>(
        mut builder: ThreadPoolBuilder<S>,
    ) -> Result<(Arc<Registry>, Option<ClientGuard>), ThreadPoolBuildError> {
        let n = builder
            .get_num_threads()
            .min(crate::max_num_threads())
            .max(1);
        let breadth_first = builder.breadth_first;
        let (broadcasts, broadcast_stealers): (Vec<_>, Vec<_>) = (0..n)
            .map(|_| {
                let w = Worker::new_fifo();
                let s = w.stealer();
                (w, s)
            })
            .unzip();

        let heartbeat = builder.heartbeat_interval_of()?;
        let ready = ReadyQueues::new(n, builder.policies_for(n))
            .map_err(|e| ThreadPoolBuildError::new(ErrorKind::ReadyQueues(e)))?;
        if builder.process_control != ProcessControl::Standalone
            && builder.policies_for(n).dequeue == partita_queues::DequeuePolicy::Static
            && n > 1
        {
            return Err(ThreadPoolBuildError::new(ErrorKind::StaticNeedsStandalone));
        }
        let registry = Arc::new(Registry {
            thread_infos: (0..n)
                .map(|_| ThreadInfo {
                    primed: LockLatch::new(),
                    stopped: LockLatch::new(),
                    terminate: OnceLatch::new(),
                    stealer: OnceLock::new(),
                })
                .collect(),
            sleep: Sleep::new(n),
            ready,
            broadcasts: Mutex::new(broadcasts),
            panic_handler: builder.panic_handler.take(),
            start_handler: builder.start_handler.take(),
            exit_handler: builder.exit_handler.take(),
            terminate_count: AtomicUsize::new(1),
            control: Control::new(builder.process_control, n),
            counters: (0..n).map(|_| Default::default()).collect(),
            borrowed_thread0: builder.use_current_thread,
            suspended_at: (0..n).map(|_| AtomicU64::new(0)).collect(),
            started: Instant::now(),
            numa: Arc::new(crate::numa::PoolNuma::new(
                builder.numa_follow != Some(false),
            )),
            heartbeat,
        });

        let t1000 = Terminator(&registry);
        for (index, broadcast) in broadcast_stealers.into_iter().enumerate() {
            let seed = WorkerSeed {
                registry: Arc::clone(&registry),
                breadth_first,
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
        #[cfg(not(loom))]
        crate::exit_stats::arm(&registry);
        Ok((registry, guard))
    }

    /// Connect to a manager when the mode asks for it and `PARTITA` is not `off`.
    #[cfg(all(not(loom), partita_linux))]
    fn attach_manager<S>(
        registry: &Arc<Registry>,
        builder: &ThreadPoolBuilder<S>,
    ) -> Option<ClientGuard> {
        if builder.process_control == ProcessControl::Manager
            && std::env::var("PARTITA").map(|v| v != "off").unwrap_or(true)
        {
            client::attach(Arc::downgrade(registry), &builder.manager_name())
        } else {
            None
        }
    }

    /// The portable build has no manager client: a pool in `Manager` mode runs at full size
    /// (and follows `set_target_workers`), saying once why a manager it was pointed at is
    /// ignored.
    #[cfg(all(not(loom), not(partita_linux)))]
    fn attach_manager<S>(_: &Arc<Registry>, builder: &ThreadPoolBuilder<S>) -> Option<ClientGuard> {
        if builder.process_control == ProcessControl::Manager {
            crate::client::manager_unsupported();
        }
        None
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
        self.note_injected();
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
        self.note_injected();
    }

    /// A broadcast job waits for worker `w` (it has not taken it yet). Its owner marks itself
    /// not between jobs before it takes one (`WorkerThread::take_broadcast`), so a worker
    /// seen here with an empty queue and between jobs has no broadcast job in hand.
    pub(crate) fn broadcast_waits_for(&self, w: usize) -> bool {
        let broadcasts = self.broadcasts.lock().unwrap_or_else(|p| p.into_inner());
        broadcasts.get(w).is_some_and(|q| !q.is_empty())
    }

    /// Broadcast jobs not yet taken (a hint, for the demand estimate).
    pub(crate) fn queued_broadcasts(&self) -> usize {
        let broadcasts = self.broadcasts.lock().unwrap_or_else(|p| p.into_inner());
        broadcasts.iter().map(|w| w.len()).sum()
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
    pub(crate) fn has_shared_work(&self, w: &WorkerQueues) -> bool {
        self.thread_infos
            .iter()
            .any(|t| t.stealer().is_some_and(|s| !s.is_empty()))
            || self.ready.has_work_for(w)
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
            target_changes: self.target_changes(),
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
