//! `ThreadPool`: a handle to a pool of workers, and the "current thread" free functions.

use std::fmt;
use std::sync::Arc;

use crate::broadcast::{self, BroadcastContext};
use crate::builder::{ThreadPoolBuildError, ThreadPoolBuilder};
use crate::client::ClientGuard;
use crate::control::{Need, ProcessControl};
use crate::join;
use crate::registry::{Registry, WorkerThread};
use crate::scope::{do_in_place_scope, do_in_place_scope_fifo, Scope, ScopeFifo};
use crate::spawn;
use crate::stats::PoolStats;
use crate::thread_builder::{PoolId, ThreadSpawn};

/// A pool of worker threads. Dropping the handle lets the workers exit once every task
/// spawned into the pool has run (it does not wait for them).
///
/// ```
/// let pool = partita_runtime::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
/// let sum: u64 = pool.install(|| {
///     let (a, b) = partita_runtime::join(|| (0..500u64).sum::<u64>(), || (500..1000u64).sum::<u64>());
///     a + b
/// });
/// assert_eq!(sum, 499_500);
/// ```
pub struct ThreadPool {
    pub(crate) registry: Arc<Registry>,
    /// The manager connection, when the pool follows one; dropped with the pool.
    _client: Option<ClientGuard>,
}

impl ThreadPool {
    pub(crate) fn build<S: ThreadSpawn>(
        builder: ThreadPoolBuilder<S>,
    ) -> Result<ThreadPool, ThreadPoolBuildError> {
        let (registry, client) = Registry::new(builder)?;
        Ok(ThreadPool {
            registry,
            _client: client,
        })
    }

    /// Runs `op` inside the pool (on a worker) and returns its result; `join`, `scope` and
    /// `spawn` called inside `op` use this pool. A panic in `op` is re-raised here.
    ///
    /// ```
    /// let pool = partita_runtime::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    /// assert_eq!(pool.install(|| partita_runtime::current_num_threads()), 2);
    /// ```
    pub fn install<OP, R>(&self, op: OP) -> R
    where
        OP: FnOnce() -> R + Send,
        R: Send,
    {
        self.registry.in_worker(|_, _| op())
    }

    /// Runs `op` once on every worker and returns the results in index order (see
    /// [`broadcast`](crate::broadcast())).
    ///
    /// ```
    /// let pool = partita_runtime::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    /// assert_eq!(pool.broadcast(|ctx| ctx.index() * 10), vec![0, 10]);
    /// ```
    pub fn broadcast<OP, R>(&self, op: OP) -> Vec<R>
    where
        OP: Fn(BroadcastContext<'_>) -> R + Sync,
        R: Send,
    {
        broadcast::broadcast_in(op, &self.registry)
    }

    /// Spawns `op` on every worker and returns at once (see
    /// [`spawn_broadcast`](crate::spawn_broadcast())).
    ///
    /// ```
    /// let pool = partita_runtime::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// pool.spawn_broadcast(move |_| tx.send(()).unwrap());
    /// assert_eq!(rx.iter().take(2).count(), 2);
    /// ```
    pub fn spawn_broadcast<OP>(&self, op: OP)
    where
        OP: Fn(BroadcastContext<'_>) + Send + Sync + 'static,
    {
        broadcast::spawn_broadcast_in(op, &self.registry)
    }

    /// The number of workers (the pool size; stable even when process control suspends some
    /// of them — see [`ThreadPool::active_workers`]).
    ///
    /// ```
    /// let pool = partita_runtime::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
    /// assert_eq!(pool.current_num_threads(), 3);
    /// ```
    #[inline]
    pub fn current_num_threads(&self) -> usize {
        self.registry.num_threads()
    }

    /// The index of the current thread in this pool, or `None` if it is not one of its
    /// workers.
    ///
    /// ```
    /// let pool = partita_runtime::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    /// assert_eq!(pool.current_thread_index(), None);
    /// assert!(pool.install(|| pool.current_thread_index()).unwrap() < 2);
    /// ```
    #[inline]
    pub fn current_thread_index(&self) -> Option<usize> {
        self.registry.current_thread().map(|w| w.index())
    }

    /// Whether the current worker of this pool has tasks waiting in its own deque (`None`
    /// outside the pool).
    ///
    /// ```
    /// let pool = partita_runtime::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    /// assert_eq!(pool.current_thread_has_pending_tasks(), None);
    /// assert_eq!(pool.install(|| pool.current_thread_has_pending_tasks()), Some(false));
    /// ```
    #[inline]
    pub fn current_thread_has_pending_tasks(&self) -> Option<bool> {
        self.registry
            .current_thread()
            .map(|w| !w.local_deque_is_empty())
    }

    /// [`join`](crate::join()) inside this pool.
    ///
    /// ```
    /// let pool = partita_runtime::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    /// assert_eq!(pool.join(|| 1, || 2), (1, 2));
    /// ```
    pub fn join<A, B, RA, RB>(&self, oper_a: A, oper_b: B) -> (RA, RB)
    where
        A: FnOnce() -> RA + Send,
        B: FnOnce() -> RB + Send,
        RA: Send,
        RB: Send,
    {
        self.install(|| join::join(oper_a, oper_b))
    }

    /// [`scope`](crate::scope()) inside this pool.
    ///
    /// ```
    /// let pool = partita_runtime::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    /// let mut x = 0;
    /// pool.scope(|s| s.spawn(|_| x = 5));
    /// assert_eq!(x, 5);
    /// ```
    pub fn scope<'scope, OP, R>(&self, op: OP) -> R
    where
        OP: FnOnce(&Scope<'scope>) -> R + Send,
        R: Send,
    {
        self.install(|| crate::scope::scope(op))
    }

    /// [`scope_fifo`](crate::scope_fifo()) inside this pool.
    ///
    /// ```
    /// let pool = partita_runtime::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    /// let mut x = 0;
    /// pool.scope_fifo(|s| s.spawn_fifo(|_| x = 5));
    /// assert_eq!(x, 5);
    /// ```
    pub fn scope_fifo<'scope, OP, R>(&self, op: OP) -> R
    where
        OP: FnOnce(&ScopeFifo<'scope>) -> R + Send,
        R: Send,
    {
        self.install(|| crate::scope::scope_fifo(op))
    }

    /// [`in_place_scope`](crate::in_place_scope()) whose tasks go to this pool.
    ///
    /// ```
    /// let pool = partita_runtime::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    /// let mut x = 0;
    /// pool.in_place_scope(|s| s.spawn(|_| x = 5));
    /// assert_eq!(x, 5);
    /// ```
    pub fn in_place_scope<'scope, OP, R>(&self, op: OP) -> R
    where
        OP: FnOnce(&Scope<'scope>) -> R,
    {
        do_in_place_scope(Some(&self.registry), op)
    }

    /// [`in_place_scope_fifo`](crate::in_place_scope_fifo()) whose tasks go to this pool.
    ///
    /// ```
    /// let pool = partita_runtime::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    /// let mut x = 0;
    /// pool.in_place_scope_fifo(|s| s.spawn_fifo(|_| x = 5));
    /// assert_eq!(x, 5);
    /// ```
    pub fn in_place_scope_fifo<'scope, OP, R>(&self, op: OP) -> R
    where
        OP: FnOnce(&ScopeFifo<'scope>) -> R,
    {
        do_in_place_scope_fifo(Some(&self.registry), op)
    }

    /// [`spawn`](crate::spawn()) into this pool.
    ///
    /// ```
    /// let pool = partita_runtime::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// pool.spawn(move || tx.send(1).unwrap());
    /// assert_eq!(rx.recv().unwrap(), 1);
    /// ```
    pub fn spawn<OP>(&self, op: OP)
    where
        OP: FnOnce() + Send + 'static,
    {
        spawn::spawn_in(op, &self.registry)
    }

    /// [`spawn_fifo`](crate::spawn_fifo()) into this pool.
    ///
    /// ```
    /// let pool = partita_runtime::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// pool.spawn_fifo(move || tx.send(1).unwrap());
    /// assert_eq!(rx.recv().unwrap(), 1);
    /// ```
    pub fn spawn_fifo<OP>(&self, op: OP)
    where
        OP: FnOnce() + Send + 'static,
    {
        spawn::spawn_fifo_in(op, &self.registry)
    }

    /// On a worker of this pool, run one pending task from anywhere if there is one (`None`
    /// when the current thread is not a worker of this pool).
    ///
    /// ```
    /// let pool = partita_runtime::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    /// assert_eq!(pool.yield_now(), None);
    /// assert_eq!(pool.install(|| pool.yield_now()), Some(partita_runtime::Yield::Idle));
    /// ```
    pub fn yield_now(&self) -> Option<Yield> {
        self.registry.current_thread().map(WorkerThread::yield_now)
    }

    /// Like [`ThreadPool::yield_now`], but only tasks from the current worker's own deque.
    ///
    /// ```
    /// let pool = partita_runtime::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    /// assert_eq!(pool.install(|| pool.yield_local()), Some(partita_runtime::Yield::Idle));
    /// ```
    pub fn yield_local(&self) -> Option<Yield> {
        self.registry
            .current_thread()
            .map(WorkerThread::yield_local)
    }

    // ---- process control ----------------------------------------------------------------

    /// Sets how many workers should be active (clamped to `1..=pool size`). Raising it
    /// resumes suspended workers at once; lowering it makes workers suspend at their next
    /// safe point or wait (between two tasks, or in a `join` or `scope` waiting for work
    /// done elsewhere), a worker between jobs before one whose stack holds a job. Ignored when the pool
    /// was built with [`ProcessControl::Standalone`]. With a manager attached, the manager's
    /// next change overrides it.
    ///
    /// ```
    /// let pool = partita_runtime::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    /// pool.set_target_workers(1);
    /// assert_eq!(pool.target_workers(), 1);
    /// while pool.active_workers() != 1 { std::thread::yield_now(); }
    /// pool.set_target_workers(2);
    /// while pool.active_workers() != 2 { std::thread::yield_now(); }
    /// ```
    pub fn set_target_workers(&self, n: usize) {
        if self.registry.mode() != ProcessControl::Standalone {
            self.registry.set_target(n, false);
        }
    }

    /// The current target number of active workers.
    ///
    /// ```
    /// let pool = partita_runtime::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    /// assert_eq!(pool.target_workers(), 2);
    /// ```
    pub fn target_workers(&self) -> usize {
        self.registry.target()
    }

    /// Workers not suspended by process control right now (suspension happens at safe points,
    /// so this lags the target until the workers get there).
    ///
    /// ```
    /// let pool = partita_runtime::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    /// assert!(pool.active_workers() <= 2);
    /// ```
    pub fn active_workers(&self) -> usize {
        self.registry.active()
    }

    /// Declares how many workers the application can use (reported to a manager as a cap on
    /// demand; Tucker's `PR_PSETNEED`).
    ///
    /// ```
    /// use partita_runtime::{Need, ThreadPoolBuilder};
    /// let pool = ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    /// pool.set_demand(Need::Absolute(1));
    /// ```
    pub fn set_demand(&self, need: Need) {
        self.registry.set_need(need);
    }

    /// A snapshot of the pool's counters.
    ///
    /// ```
    /// let pool = partita_runtime::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    /// assert_eq!(pool.stats().num_threads, 2);
    /// ```
    pub fn stats(&self) -> PoolStats {
        self.registry.stats()
    }

    /// Blocks until every worker has exited (test support: after the last handle is gone).
    #[cfg(test)]
    pub(crate) fn wait_until_stopped(self) {
        let registry = Arc::clone(&self.registry);
        drop(self);
        registry.wait_until_stopped();
    }
}

impl Drop for ThreadPool {
    fn drop(&mut self) {
        self.registry.terminate();
    }
}

impl fmt::Debug for ThreadPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ThreadPool")
            .field("num_threads", &self.current_num_threads())
            .field("id", &PoolId(self.registry.id()))
            .finish()
    }
}

/// The index of the current thread in its pool, or `None` outside any pool.
///
/// ```
/// assert_eq!(partita_runtime::current_thread_index(), None);
/// let pool = partita_runtime::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
/// assert_eq!(pool.install(partita_runtime::current_thread_index), Some(0));
/// ```
#[inline]
pub fn current_thread_index() -> Option<usize> {
    WorkerThread::current_ref().map(|w| w.index())
}

/// Whether the current worker has tasks in its own deque (`None` outside any pool).
///
/// ```
/// assert_eq!(partita_runtime::current_thread_has_pending_tasks(), None);
/// ```
#[inline]
pub fn current_thread_has_pending_tasks() -> Option<bool> {
    WorkerThread::current_ref().map(|w| !w.local_deque_is_empty())
}

/// On a worker, run one pending task from anywhere in its pool, if any (`None` outside).
///
/// ```
/// assert_eq!(partita_runtime::yield_now(), None);
/// ```
pub fn yield_now() -> Option<Yield> {
    WorkerThread::current_ref().map(WorkerThread::yield_now)
}

/// On a worker, run one pending task from its own deque, if any (`None` outside).
///
/// ```
/// assert_eq!(partita_runtime::yield_local(), None);
/// ```
pub fn yield_local() -> Option<Yield> {
    WorkerThread::current_ref().map(WorkerThread::yield_local)
}

/// Result of [`yield_now`] / [`yield_local`].
///
/// ```
/// let pool = partita_runtime::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
/// assert_eq!(pool.install(partita_runtime::yield_local), Some(partita_runtime::Yield::Idle));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Yield {
    /// A task was run.
    Executed,
    /// No task was available.
    Idle,
}

// ---- process control of the current pool (the free-function flavour) ----------------------

/// [`ThreadPool::set_target_workers`] for the current pool (the global one from outside).
///
/// ```
/// let pool = partita_runtime::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
/// pool.install(|| partita_runtime::set_target_workers(1));
/// assert_eq!(pool.target_workers(), 1);
/// ```
pub fn set_target_workers(n: usize) {
    let r = Registry::current();
    if r.mode() != ProcessControl::Standalone {
        r.set_target(n, false);
    }
}

/// [`ThreadPool::target_workers`] for the current pool.
///
/// ```
/// assert!(partita_runtime::target_workers() >= 1);
/// ```
pub fn target_workers() -> usize {
    Registry::current().target()
}

/// [`ThreadPool::active_workers`] for the current pool.
///
/// ```
/// assert!(partita_runtime::active_workers() <= partita_runtime::current_num_threads());
/// ```
pub fn active_workers() -> usize {
    Registry::current().active()
}

/// [`ThreadPool::set_demand`] for the current pool.
///
/// ```
/// partita_runtime::set_demand(partita_runtime::Need::Unlimited);
/// ```
pub fn set_demand(need: Need) {
    Registry::current().set_need(need)
}

/// [`ThreadPool::stats`] for the current pool.
///
/// ```
/// assert!(partita_runtime::stats().num_threads >= 1);
/// ```
pub fn stats() -> PoolStats {
    Registry::current().stats()
}
