//! Scopes: spawn any number of tasks that may borrow from the enclosing stack frame; the scope
//! returns once all of them have finished.

use std::any::Any;
use std::fmt;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Arc;

use crate::broadcast::BroadcastContext;
use crate::job::{ArcJob, HeapJob, JobFifo, JobRef};
use crate::latch::{CountLatch, Latch};
use crate::registry::{global_registry, in_worker, Registry, WorkerThread};
use crate::unwind;

/// A scope for spawning tasks that may borrow data living at least as long as `'scope`.
/// Created by [`scope`] or [`in_place_scope`].
pub struct Scope<'scope> {
    base: ScopeBase<'scope>,
}

/// Like [`Scope`], but tasks spawned by one thread start in FIFO order.
/// Created by [`scope_fifo`] or [`in_place_scope_fifo`].
pub struct ScopeFifo<'scope> {
    base: ScopeBase<'scope>,
    fifos: Vec<JobFifo>,
}

struct ScopeBase<'scope> {
    registry: Arc<Registry>,
    /// The first panic of a task, re-raised when the scope ends.
    panic: AtomicPtr<Box<dyn Any + Send + 'static>>,
    /// One count for the scope's own closure plus one per task still to finish.
    job_completed_latch: CountLatch,
    /// Invariant in `'scope` (see rayon-core's reasoning: spawned closures may both read and
    /// write data of lifetime `'scope`).
    #[allow(clippy::type_complexity)]
    marker: PhantomData<Box<dyn FnOnce(&Scope<'scope>) + Send + Sync + 'scope>>,
}

/// Creates a scope for spawning tasks that borrow from the caller's stack. `op` runs in a
/// worker of the current pool (the global one from outside); the call returns when `op` and
/// every task spawned in the scope have finished. A panic in `op` or in any task is re-raised
/// after all of them have finished.
///
/// ```
/// let mut v = vec![1, 2, 3];
/// let mut sum = 0;
/// partita_runtime::scope(|s| {
///     s.spawn(|_| v.push(4));
///     s.spawn(|_| sum = 10);
/// });
/// assert_eq!(v.len(), 4);
/// assert_eq!(sum, 10);
/// ```
pub fn scope<'scope, OP, R>(op: OP) -> R
where
    OP: FnOnce(&Scope<'scope>) -> R + Send,
    R: Send,
{
    in_worker(|owner, _| {
        let scope = Scope::<'scope>::new(Some(owner), None);
        scope.base.complete(Some(owner), || op(&scope))
    })
}

/// Like [`scope`], but tasks spawned with [`ScopeFifo::spawn_fifo`] by one thread start in
/// the order they were spawned.
///
/// ```
/// use std::sync::Mutex;
/// let order = Mutex::new(Vec::new());
/// partita_runtime::ThreadPoolBuilder::new().num_threads(1).build().unwrap()
///     .scope_fifo(|s| { for i in 0..4 { let o = &order; s.spawn_fifo(move |_| o.lock().unwrap().push(i)); } });
/// assert_eq!(order.into_inner().unwrap(), vec![0, 1, 2, 3]);
/// ```
pub fn scope_fifo<'scope, OP, R>(op: OP) -> R
where
    OP: FnOnce(&ScopeFifo<'scope>) -> R + Send,
    R: Send,
{
    in_worker(|owner, _| {
        let scope = ScopeFifo::<'scope>::new(Some(owner), None);
        scope.base.complete(Some(owner), || op(&scope))
    })
}

/// Like [`scope`], but `op` runs on the calling thread (not moved into the pool), so it need
/// not be `Send`; tasks still run in the current pool (the global one from outside).
///
/// ```
/// let rc = std::rc::Rc::new(5); // not Send: fine, `op` stays on this thread
/// let mut x = 0;
/// partita_runtime::in_place_scope(|s| { let _ = *rc; s.spawn(|_| x = 1); });
/// assert_eq!(x, 1);
/// ```
pub fn in_place_scope<'scope, OP, R>(op: OP) -> R
where
    OP: FnOnce(&Scope<'scope>) -> R,
{
    do_in_place_scope(None, op)
}

pub(crate) fn do_in_place_scope<'scope, OP, R>(registry: Option<&Arc<Registry>>, op: OP) -> R
where
    OP: FnOnce(&Scope<'scope>) -> R,
{
    let thread = WorkerThread::current_ref();
    let scope = Scope::<'scope>::new(thread, registry);
    scope.base.complete(thread, || op(&scope))
}

/// Like [`scope_fifo`], but `op` runs on the calling thread.
///
/// ```
/// let mut x = 0;
/// partita_runtime::in_place_scope_fifo(|s| s.spawn_fifo(|_| x = 2));
/// assert_eq!(x, 2);
/// ```
pub fn in_place_scope_fifo<'scope, OP, R>(op: OP) -> R
where
    OP: FnOnce(&ScopeFifo<'scope>) -> R,
{
    do_in_place_scope_fifo(None, op)
}

pub(crate) fn do_in_place_scope_fifo<'scope, OP, R>(registry: Option<&Arc<Registry>>, op: OP) -> R
where
    OP: FnOnce(&ScopeFifo<'scope>) -> R,
{
    let thread = WorkerThread::current_ref();
    let scope = ScopeFifo::<'scope>::new(thread, registry);
    scope.base.complete(thread, || op(&scope))
}

impl<'scope> Scope<'scope> {
    pub(crate) fn new(owner: Option<&WorkerThread>, registry: Option<&Arc<Registry>>) -> Self {
        Scope {
            base: ScopeBase::new(owner, registry),
        }
    }

    /// Spawns a task into the scope; it may borrow anything that outlives the scope and
    /// receives the scope so it can spawn more. The scope waits for it; a panic in it is
    /// re-raised when the scope ends.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// let n = AtomicUsize::new(0);
    /// partita_runtime::scope(|s| {
    ///     s.spawn(|s| { n.fetch_add(1, Ordering::Relaxed); s.spawn(|_| { n.fetch_add(1, Ordering::Relaxed); }); });
    /// });
    /// assert_eq!(n.into_inner(), 2);
    /// ```
    pub fn spawn<BODY>(&self, body: BODY)
    where
        BODY: FnOnce(&Scope<'scope>) + Send + 'scope,
    {
        let scope_ptr = ScopePtr(self);
        let job = HeapJob::new(move || {
            // SAFETY: the scope outlives its tasks (it waits for its latch).
            let scope = unsafe { scope_ptr.as_ref() };
            ScopeBase::execute_job(&scope.base, move || body(scope))
        });
        let job_ref = self.base.heap_job_ref(job);
        self.base.registry.inject_or_push(job_ref);
    }

    /// Spawns a task on every worker of the pool (suspended ones included), inside the scope.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// let pool = partita_runtime::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    /// let n = AtomicUsize::new(0);
    /// pool.scope(|s| s.spawn_broadcast(|_, _ctx| { n.fetch_add(1, Ordering::Relaxed); }));
    /// assert_eq!(n.into_inner(), 2);
    /// ```
    pub fn spawn_broadcast<BODY>(&self, body: BODY)
    where
        BODY: Fn(&Scope<'scope>, BroadcastContext<'_>) + Send + Sync + 'scope,
    {
        let scope_ptr = ScopePtr(self);
        let job = ArcJob::new(move || {
            // SAFETY: the scope outlives its tasks (it waits for its latch).
            let scope = unsafe { scope_ptr.as_ref() };
            let body = &body;
            let func = move || BroadcastContext::with(move |ctx| body(scope, ctx));
            ScopeBase::execute_job(&scope.base, func)
        });
        self.base.inject_broadcast(job)
    }
}

impl<'scope> ScopeFifo<'scope> {
    fn new(owner: Option<&WorkerThread>, registry: Option<&Arc<Registry>>) -> Self {
        let base = ScopeBase::new(owner, registry);
        let num_threads = base.registry.num_threads();
        let fifos = (0..num_threads).map(|_| JobFifo::new()).collect();
        ScopeFifo { base, fifos }
    }

    /// Spawns a task into the scope; tasks spawned by the same thread start in FIFO order
    /// (relative to each other).
    ///
    /// ```
    /// let mut x = 0;
    /// partita_runtime::scope_fifo(|s| s.spawn_fifo(|_| x += 1));
    /// assert_eq!(x, 1);
    /// ```
    pub fn spawn_fifo<BODY>(&self, body: BODY)
    where
        BODY: FnOnce(&ScopeFifo<'scope>) + Send + 'scope,
    {
        let scope_ptr = ScopePtr(self);
        let job = HeapJob::new(move || {
            // SAFETY: the scope outlives its tasks (it waits for its latch).
            let scope = unsafe { scope_ptr.as_ref() };
            ScopeBase::execute_job(&scope.base, move || body(scope))
        });
        let job_ref = self.base.heap_job_ref(job);
        match self.base.registry.current_thread() {
            Some(worker) => {
                let fifo = &self.fifos[worker.index()];
                // SAFETY: the fifo lives in the scope, which outlives its tasks.
                worker.push(unsafe { fifo.push(job_ref) });
            }
            None => self.base.registry.inject(job_ref),
        }
    }

    /// Spawns a task on every worker of the pool, inside the scope.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// let pool = partita_runtime::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    /// let n = AtomicUsize::new(0);
    /// pool.scope_fifo(|s| s.spawn_broadcast(|_, _| { n.fetch_add(1, Ordering::Relaxed); }));
    /// assert_eq!(n.into_inner(), 2);
    /// ```
    pub fn spawn_broadcast<BODY>(&self, body: BODY)
    where
        BODY: Fn(&ScopeFifo<'scope>, BroadcastContext<'_>) + Send + Sync + 'scope,
    {
        let scope_ptr = ScopePtr(self);
        let job = ArcJob::new(move || {
            // SAFETY: the scope outlives its tasks (it waits for its latch).
            let scope = unsafe { scope_ptr.as_ref() };
            let body = &body;
            let func = move || BroadcastContext::with(move |ctx| body(scope, ctx));
            ScopeBase::execute_job(&scope.base, func)
        });
        self.base.inject_broadcast(job)
    }
}

impl<'scope> ScopeBase<'scope> {
    fn new(owner: Option<&WorkerThread>, registry: Option<&Arc<Registry>>) -> Self {
        let registry = registry.unwrap_or_else(|| match owner {
            Some(owner) => owner.registry(),
            None => global_registry(),
        });
        ScopeBase {
            registry: Arc::clone(registry),
            panic: AtomicPtr::new(ptr::null_mut()),
            job_completed_latch: CountLatch::new(owner),
            marker: PhantomData,
        }
    }

    fn heap_job_ref<FUNC>(&self, job: Box<HeapJob<FUNC>>) -> JobRef
    where
        FUNC: FnOnce() + Send + 'scope,
    {
        self.job_completed_latch.increment();
        // SAFETY: the scope waits for the latch count, so borrowed data outlives the job.
        unsafe { job.into_job_ref() }
    }

    fn inject_broadcast<FUNC>(&self, job: Arc<ArcJob<FUNC>>)
    where
        FUNC: Fn() + Send + Sync + 'scope,
    {
        let n = self.registry.num_threads();
        let refs = (0..n).map(|_| {
            self.job_completed_latch.increment();
            // SAFETY: as for heap jobs: the scope waits for every copy.
            unsafe { ArcJob::as_job_ref(&job) }
        });
        self.registry.inject_broadcast(refs);
    }

    /// Run the scope's own closure, wait for every task, then re-raise the first panic.
    fn complete<FUNC, R>(&self, owner: Option<&WorkerThread>, func: FUNC) -> R
    where
        FUNC: FnOnce() -> R,
    {
        let result = Self::execute_job_closure(self, func);
        self.job_completed_latch.wait(owner);
        self.maybe_propagate_panic();
        // Only None if `func` panicked, which was just re-raised.
        result.expect("scope closure panicked but the panic was not propagated")
    }

    fn execute_job<FUNC: FnOnce()>(this: *const Self, func: FUNC) {
        let _: Option<()> = Self::execute_job_closure(this, func);
    }

    fn execute_job_closure<FUNC, R>(this: *const Self, func: FUNC) -> Option<R>
    where
        FUNC: FnOnce() -> R,
    {
        let result = match unwind::halt_unwinding(func) {
            Ok(r) => Some(r),
            Err(err) => {
                // SAFETY: the scope is alive until its latch count reaches zero, which
                // happens only in the `set` below.
                unsafe { (*this).job_panicked(err) };
                None
            }
        };
        // SAFETY: as above; after this call we no longer touch the scope.
        unsafe { Latch::set(&(*this).job_completed_latch) };
        result
    }

    fn job_panicked(&self, err: Box<dyn Any + Send + 'static>) {
        // Keep the first panic, drop the others.
        if self.panic.load(Ordering::Relaxed).is_null() {
            let mut err = ManuallyDrop::new(Box::new(err));
            let err_ptr: *mut Box<dyn Any + Send + 'static> = &mut **err;
            if self
                .panic
                .compare_exchange(
                    ptr::null_mut(),
                    err_ptr,
                    Ordering::Release,
                    Ordering::Relaxed,
                )
                .is_err()
            {
                let _: Box<Box<_>> = ManuallyDrop::into_inner(err);
            }
        }
    }

    fn maybe_propagate_panic(&self) {
        // Every task has finished, so relaxed is enough.
        let panic = self.panic.swap(ptr::null_mut(), Ordering::Relaxed);
        if !panic.is_null() {
            // SAFETY: the pointer came from the leaked box in `job_panicked`, taken once.
            let value = unsafe { Box::from_raw(panic) };
            unwind::resume_unwinding(*value);
        }
    }
}

impl fmt::Debug for Scope<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scope")
            .field("pool_id", &self.base.registry.id())
            .field("job_completed_latch", &self.base.job_completed_latch)
            .finish()
    }
}

impl fmt::Debug for ScopeFifo<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScopeFifo")
            .field("num_fifos", &self.fifos.len())
            .field("pool_id", &self.base.registry.id())
            .field("job_completed_latch", &self.base.job_completed_latch)
            .finish()
    }
}

/// A pointer to a scope that tasks carry across threads.
struct ScopePtr<T>(*const T);

// SAFETY: raw pointers are !Send only as a lint; the scope is Sync and outlives its tasks.
unsafe impl<T: Sync> Send for ScopePtr<T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Sync for ScopePtr<T> {}

impl<T> ScopePtr<T> {
    /// # Safety
    /// The scope must still be alive (tasks run before the scope's latch reaches zero).
    unsafe fn as_ref(&self) -> &T {
        // SAFETY: forwarded contract.
        unsafe { &*self.0 }
    }
}
