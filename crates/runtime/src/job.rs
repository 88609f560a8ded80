//! Jobs: type-erased units of work that sit in deques and ready queues.
//!
//! A [`JobRef`] is a raw pointer to some job plus the function that knows how to run it. The
//! three owners of jobs are:
//! - [`StackJob`]: lives on the stack of a thread that waits (on a latch) until the job has
//!   run — `join`'s second half, `install` from outside the pool, `broadcast`;
//! - [`HeapJob`]: boxed, runs once and frees itself — `spawn`, `Scope::spawn`;
//! - [`ArcJob`]: shared by the N copies of one `spawn_broadcast`.

use std::any::Any;
use std::cell::UnsafeCell;
use std::sync::Arc;

use crossbeam_deque::{Injector, Steal};

use crate::latch::Latch;
use crate::unwind;

/// Something a worker can execute through a [`JobRef`].
pub(crate) trait Job {
    /// # Safety
    /// `this` must point to a live job of this type, and each job is executed at most once
    /// (or, for [`ArcJob`], once per reference created).
    unsafe fn execute(this: *const ()) -> bool;
}

/// A type-erased pointer to a job. Copying it does not copy the job: exactly one copy is
/// executed (the deques and queues guarantee each pushed ref is taken once).
#[derive(Copy, Clone, Debug)]
pub(crate) struct JobRef {
    pointer: *const (),
    execute_fn: unsafe fn(*const ()) -> bool,
}

// SAFETY: a JobRef is only a handle; the jobs it points to are `Send` (their closures are
// required to be `Send` by every public constructor), and ownership passes with the ref.
unsafe impl Send for JobRef {}
// SAFETY: as above; a shared JobRef is never executed twice (queues hand each ref out once).
unsafe impl Sync for JobRef {}

impl JobRef {
    /// # Safety
    /// The caller keeps `data` alive until the ref has been executed.
    pub(crate) unsafe fn new<T: Job>(data: *const T) -> JobRef {
        JobRef {
            pointer: data as *const (),
            execute_fn: <T as Job>::execute,
        }
    }

    /// An identity for comparing "is this the job I pushed?".
    #[inline]
    pub(crate) fn id(&self) -> impl Eq + use<> {
        (self.pointer, self.execute_fn as usize)
    }

    /// Runs the job. Returns `true` if it was a real task (counts towards `tasks_run`), `false`
    /// for bookkeeping jobs (the FIFO indirection).
    ///
    /// # Safety
    /// Each ref is executed at most once and its job is still alive (see [`JobRef::new`]).
    #[inline]
    pub(crate) unsafe fn execute(self) -> bool {
        // SAFETY: forwarded from this function's contract.
        unsafe { (self.execute_fn)(self.pointer) }
    }
}

impl crate::deque::Item for JobRef {
    #[inline]
    fn into_words(self) -> [*mut (); 2] {
        [self.pointer.cast_mut(), self.execute_fn as *mut ()]
    }

    #[inline]
    unsafe fn from_words(w: [*mut (); 2]) -> Self {
        JobRef {
            pointer: w[0],
            // SAFETY: by the contract `w[1]` is `into_words`' cast of an
            // `unsafe fn(*const ()) -> bool`; casting it back restores that pointer.
            execute_fn: unsafe {
                std::mem::transmute::<*mut (), unsafe fn(*const ()) -> bool>(w[1])
            },
        }
    }
}

/// The outcome of a job that someone waits for.
pub(crate) enum JobResult<T> {
    None,
    Ok(T),
    Panic(Box<dyn Any + Send>),
}

impl<T> JobResult<T> {
    fn call(func: impl FnOnce(bool) -> T) -> Self {
        match unwind::halt_unwinding(|| func(true)) {
            Ok(x) => JobResult::Ok(x),
            Err(x) => JobResult::Panic(x),
        }
    }

    /// The value, or re-raise the job's panic on this thread.
    pub(crate) fn into_return_value(self) -> T {
        match self {
            JobResult::None => unreachable!("job result read before the job ran"),
            JobResult::Ok(x) => x,
            JobResult::Panic(x) => unwind::resume_unwinding(x),
        }
    }
}

/// A job on the stack of a thread that will wait for its latch before reading the result.
pub(crate) struct StackJob<L, F, R> {
    pub(crate) latch: L,
    func: UnsafeCell<Option<F>>,
    result: UnsafeCell<JobResult<R>>,
}

impl<L: Latch + Sync, F: FnOnce(bool) -> R + Send, R: Send> StackJob<L, F, R> {
    pub(crate) fn new(func: F, latch: L) -> Self {
        StackJob {
            latch,
            func: UnsafeCell::new(Some(func)),
            result: UnsafeCell::new(JobResult::None),
        }
    }

    /// # Safety
    /// The job must outlive the ref's execution (the owner waits on the latch).
    pub(crate) unsafe fn as_job_ref(&self) -> JobRef {
        // SAFETY: forwarded from this function's contract.
        unsafe { JobRef::new(self) }
    }

    /// Run the closure here, on the owning thread, when it popped its own job back.
    pub(crate) fn run_inline(self, migrated: bool) -> R {
        // The closure is present: nobody else took the job (we popped it ourselves).
        let func = self
            .func
            .into_inner()
            .expect("StackJob run inline after being executed");
        func(migrated)
    }

    /// # Safety
    /// Only after the latch has been observed set.
    pub(crate) unsafe fn into_result(self) -> R {
        self.result.into_inner().into_return_value()
    }
}

impl<L: Latch + Sync, F: FnOnce(bool) -> R + Send, R: Send> Job for StackJob<L, F, R> {
    unsafe fn execute(this: *const ()) -> bool {
        // SAFETY: `this` came from `as_job_ref` on a live StackJob of this type; the ref is
        // executed once, so we have exclusive access to `func` and `result` until the latch
        // is set, after which we no longer touch the job.
        unsafe {
            let this = &*(this as *const Self);
            let func = (*this.func.get()).take().expect("StackJob executed twice");
            *this.result.get() = JobResult::call(func);
            Latch::set(&this.latch);
        }
        true
    }
}

/// A boxed job that frees itself after running.
pub(crate) struct HeapJob<BODY> {
    job: BODY,
}

impl<BODY: FnOnce() + Send> HeapJob<BODY> {
    pub(crate) fn new(job: BODY) -> Box<Self> {
        Box::new(HeapJob { job })
    }

    /// Leak the box into a ref; executing the ref frees it.
    ///
    /// # Safety
    /// Everything `BODY` borrows must outlive the execution (scopes and `'static` ensure it).
    pub(crate) unsafe fn into_job_ref(self: Box<Self>) -> JobRef {
        // SAFETY: the box is leaked here and reclaimed exactly once in `execute`.
        unsafe { JobRef::new(Box::into_raw(self)) }
    }
}

impl<BODY: FnOnce() + Send> Job for HeapJob<BODY> {
    unsafe fn execute(this: *const ()) -> bool {
        // SAFETY: `this` is the pointer leaked by `into_job_ref`, executed once.
        let this = unsafe { Box::from_raw(this as *mut Self) };
        (this.job)();
        true
    }
}

/// A job shared by several refs (one per worker, for `spawn_broadcast`).
pub(crate) struct ArcJob<BODY> {
    job: BODY,
}

impl<BODY: Fn() + Send + Sync> ArcJob<BODY> {
    pub(crate) fn new(job: BODY) -> Arc<Self> {
        Arc::new(ArcJob { job })
    }

    /// Each call leaks one strong count, reclaimed when that ref executes.
    ///
    /// # Safety
    /// Everything `BODY` borrows must outlive every execution.
    pub(crate) unsafe fn as_job_ref(this: &Arc<Self>) -> JobRef {
        // SAFETY: the leaked count keeps the job alive until `execute` drops it.
        unsafe { JobRef::new(Arc::into_raw(Arc::clone(this))) }
    }
}

impl<BODY: Fn() + Send + Sync> Job for ArcJob<BODY> {
    unsafe fn execute(this: *const ()) -> bool {
        // SAFETY: `this` is a pointer from `Arc::into_raw` in `as_job_ref`, executed once.
        let this = unsafe { Arc::from_raw(this as *const Self) };
        (this.job)();
        true
    }
}

/// Per-(worker, scope) FIFO used by `spawn_fifo`: the deque gets a ref to this queue, and
/// running that ref pops the oldest job, so jobs spawned by one thread start in FIFO order
/// even though the deque is LIFO.
pub(crate) struct JobFifo {
    inner: Injector<JobRef>,
}

impl JobFifo {
    pub(crate) fn new() -> Self {
        JobFifo {
            inner: Injector::new(),
        }
    }

    /// # Safety
    /// The fifo must outlive the returned ref (it lives in the scope or the worker).
    pub(crate) unsafe fn push(&self, job_ref: JobRef) -> JobRef {
        self.inner.push(job_ref);
        // SAFETY: forwarded from this function's contract.
        unsafe { JobRef::new(self) }
    }
}

impl Job for JobFifo {
    unsafe fn execute(this: *const ()) -> bool {
        // SAFETY: `this` points to a live JobFifo (see `push`).
        let this = unsafe { &*(this as *const Self) };
        loop {
            match this.inner.steal() {
                // SAFETY: every indirection ref corresponds to exactly one pushed job, so
                // the queue is non-empty here and the popped ref is executed once.
                Steal::Success(job_ref) => return unsafe { job_ref.execute() },
                Steal::Empty => panic!("FIFO is empty"),
                Steal::Retry => {}
            }
        }
    }
}
