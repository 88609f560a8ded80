//! `broadcast`: run a closure once on every worker of a pool.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use crate::job::{ArcJob, StackJob};
use crate::latch::{CountLatch, LatchRef};
use crate::registry::{Registry, WorkerThread};
use crate::thread_builder::PoolId;

/// Runs `op` on every worker of the current pool (the global one from outside) — suspended
/// workers are woken for it and suspend again afterwards — and returns the results in worker
/// index order. A panic in any copy is re-raised after all copies have finished.
///
/// ```
/// let pool = partita_runtime::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
/// let v = pool.install(|| partita_runtime::broadcast(|ctx| ctx.index()));
/// assert_eq!(v, vec![0, 1, 2]);
/// ```
pub fn broadcast<OP, R>(op: OP) -> Vec<R>
where
    OP: Fn(BroadcastContext<'_>) -> R + Sync,
    R: Send,
{
    broadcast_in(op, &Registry::current())
}

/// Spawns `op` on every worker of the current pool and returns at once. Panics go to the
/// panic handler (or abort), as for [`spawn`](crate::spawn).
///
/// ```
/// use std::sync::mpsc::channel;
/// let pool = partita_runtime::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
/// let (tx, rx) = channel();
/// pool.spawn_broadcast(move |ctx| tx.send(ctx.index()).unwrap());
/// let mut got: Vec<usize> = rx.iter().take(2).collect();
/// got.sort();
/// assert_eq!(got, vec![0, 1]);
/// ```
pub fn spawn_broadcast<OP>(op: OP)
where
    OP: Fn(BroadcastContext<'_>) + Send + Sync + 'static,
{
    spawn_broadcast_in(op, &Registry::current())
}

/// Where a broadcast copy runs.
pub struct BroadcastContext<'a> {
    worker: &'a WorkerThread,
    /// Not Send or Sync: describes the current thread.
    _marker: PhantomData<&'a mut dyn Fn()>,
}

impl<'a> BroadcastContext<'a> {
    pub(crate) fn with<R>(f: impl FnOnce(BroadcastContext<'_>) -> R) -> R {
        let worker =
            WorkerThread::current_ref().expect("broadcast jobs run only on worker threads");
        f(BroadcastContext {
            worker,
            _marker: PhantomData,
        })
    }

    /// The index of the worker running this copy (same as `current_thread_index()`).
    ///
    /// ```
    /// let pool = partita_runtime::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    /// let v = pool.broadcast(|ctx| ctx.index());
    /// assert_eq!(v, vec![0, 1]);
    /// ```
    #[inline]
    pub fn index(&self) -> usize {
        self.worker.index()
    }

    /// The number of workers the broadcast reaches (the pool size).
    ///
    /// ```
    /// let pool = partita_runtime::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    /// assert_eq!(pool.broadcast(|ctx| ctx.num_threads()), vec![2, 2]);
    /// ```
    #[inline]
    pub fn num_threads(&self) -> usize {
        self.worker.registry().num_threads()
    }
}

impl fmt::Debug for BroadcastContext<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BroadcastContext")
            .field("index", &self.index())
            .field("num_threads", &self.num_threads())
            .field("pool_id", &PoolId(self.worker.registry().id()))
            .finish()
    }
}

pub(crate) fn broadcast_in<OP, R>(op: OP, registry: &Arc<Registry>) -> Vec<R>
where
    OP: Fn(BroadcastContext<'_>) -> R + Sync,
    R: Send,
{
    let f = move |injected: bool| {
        debug_assert!(injected);
        BroadcastContext::with(&op)
    };
    let n = registry.num_threads();
    // A worker of any pool (this one or another) waits by running its own pool's jobs, as in
    // rayon-core: blocking it could deadlock two pools broadcasting into each other, since
    // each broadcast needs every worker of its pool.
    let current = WorkerThread::current_ref();
    let latch = CountLatch::with_count(n, current);
    let jobs: Vec<_> = (0..n)
        .map(|_| StackJob::new(&f, LatchRef::new(&latch)))
        .collect();
    // SAFETY: the jobs live in `jobs` until the count latch (one count per job) is set.
    let refs = jobs.iter().map(|job| unsafe { job.as_job_ref() });
    registry.inject_broadcast(refs);
    latch.wait(current);
    // SAFETY: every job has run (the latch counted them all).
    jobs.into_iter()
        .map(|job| unsafe { job.into_result() })
        .collect()
}

pub(crate) fn spawn_broadcast_in<OP>(op: OP, registry: &Arc<Registry>)
where
    OP: Fn(BroadcastContext<'_>) + Send + Sync + 'static,
{
    let job = ArcJob::new({
        let registry = Arc::clone(registry);
        move || {
            registry.catch_unwind(|| BroadcastContext::with(&op));
            registry.terminate();
        }
    });
    let n = registry.num_threads();
    let refs = (0..n).map(|_| {
        // Each copy keeps the pool alive until it has run.
        registry.increment_terminate_count();
        // SAFETY: `op` is 'static and each ref holds a count on the Arc.
        unsafe { ArcJob::as_job_ref(&job) }
    });
    registry.inject_broadcast(refs);
}
