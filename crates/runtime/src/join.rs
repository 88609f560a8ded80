//! `join`: run two closures, potentially in parallel.

use std::marker::PhantomData;

use crate::job::StackJob;
use crate::latch::{AsCoreLatch, SpinLatch};
use crate::registry::{self, WorkerThread};
use crate::unwind;

/// Provides context to a closure called by [`join_context`].
#[derive(Debug)]
pub struct FnContext {
    migrated: bool,
    /// Not `Send`/`Sync`: the context describes the current thread.
    _marker: PhantomData<*mut ()>,
}

impl FnContext {
    fn new(migrated: bool) -> Self {
        FnContext {
            migrated,
            _marker: PhantomData,
        }
    }

    /// True if the closure was stolen and runs on a different thread than the one that
    /// called `join_context` (for `oper_a`: the caller was outside the pool).
    ///
    /// ```
    /// let (a, _) = partita_runtime::join_context(|ctx| ctx.migrated(), |_| ());
    /// // oper_a runs where join_context was called; from outside the pool it was injected.
    /// let _ = a;
    /// ```
    #[inline]
    pub fn migrated(&self) -> bool {
        self.migrated
    }
}

/// Takes two closures and *potentially* runs them in parallel; returns both results.
///
/// The second closure is offered to other workers (pushed on this worker's deque) while this
/// thread runs the first; if nobody has stolen it by then, this thread runs it too. Called
/// from outside any pool, the whole `join` runs in the global pool. If either closure panics,
/// `join` waits for the other and then re-raises the panic (the first one's, if both do).
///
/// ```
/// fn fib(n: u32) -> u64 {
///     if n < 2 { return n as u64; }
///     let (a, b) = partita_runtime::join(|| fib(n - 1), || fib(n - 2));
///     a + b
/// }
/// assert_eq!(fib(20), 6765);
/// ```
pub fn join<A, B, RA, RB>(oper_a: A, oper_b: B) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    join_context(|_| oper_a(), |_| oper_b())
}

/// Like [`join`], but each closure receives a [`FnContext`] telling whether it migrated.
///
/// ```
/// let (x, y) = partita_runtime::join_context(|_| 1, |ctx| { let _ = ctx.migrated(); 2 });
/// assert_eq!((x, y), (1, 2));
/// ```
pub fn join_context<A, B, RA, RB>(oper_a: A, oper_b: B) -> (RA, RB)
where
    A: FnOnce(FnContext) -> RA + Send,
    B: FnOnce(FnContext) -> RB + Send,
    RA: Send,
    RB: Send,
{
    registry::in_worker(|worker, injected| {
        let job_b = StackJob::new(
            move |migrated| oper_b(FnContext::new(migrated)),
            SpinLatch::new(worker),
        );
        // SAFETY: `job_b` stays on this stack until its latch is set or we popped it back;
        // every path below waits for one of the two before returning or unwinding.
        let job_b_ref = unsafe { job_b.as_job_ref() };
        let job_b_id = job_b_ref.id();
        worker.push(job_b_ref);

        let result_a = match unwind::halt_unwinding(move || oper_a(FnContext::new(injected))) {
            Ok(v) => v,
            Err(err) => recover_from_panic(worker, &job_b.latch, err),
        };

        while !job_b.latch.probe() {
            if worker.must_park_in_wait() {
                park_until_done(worker, &job_b.latch);
                break;
            }
            match worker.take_local_job() {
                Some(job) if job.id() == job_b_id => {
                    // Nobody stole it: run it here, not migrated.
                    let result_b = job_b.run_inline(injected);
                    return (result_a, result_b);
                }
                Some(job) => worker.execute(job),
                None => {
                    // Stolen: run other work until the thief finishes it.
                    worker.wait_until(&job_b.latch);
                    break;
                }
            }
        }
        // SAFETY: the latch is set, so the thief has stored the result.
        (result_a, unsafe { job_b.into_result() })
    })
}

/// The target excludes us and no worker between jobs took our place: park (our deque,
/// `job_b` included, goes to the ready queues for the active workers), then wait until
/// `job_b` is done. Parked first, not through `wait_until`'s own check: a place taken
/// there would pop `job_b` back and run it here as if it had migrated. Out of line:
/// `join`'s fast path only tests.
#[cold]
#[inline(never)]
fn park_until_done(worker: &WorkerThread, latch: &SpinLatch<'_>) {
    worker.park(Some(latch.as_core_latch()));
    worker.wait_until(latch);
}

/// `oper_a` panicked: wait for `oper_b` (it borrows our stack), then re-raise.
#[cold]
fn recover_from_panic(
    worker: &WorkerThread,
    latch: &SpinLatch<'_>,
    err: Box<dyn std::any::Any + Send>,
) -> ! {
    worker.wait_until(latch);
    unwind::resume_unwinding(err)
}
