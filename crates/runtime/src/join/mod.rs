//! `join`: run two closures, potentially in parallel.
//!
//! The second closure waits on the worker's local list until a heartbeat promotes it to the
//! deque (`heartbeat.rs`; protocol, invariants and proof sketch in `README.md` here).

pub(crate) mod heartbeat;
#[cfg(all(test, loom))]
mod loom_models;

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
/// The second closure is offered to other workers while this thread runs the first: it waits
/// on this worker's local list and is moved to the worker's deque, where others can steal
/// it, when the worker's heartbeat fires (every 100 µs of busy time by default; see
/// [`ThreadPoolBuilder::heartbeat_interval`](crate::ThreadPoolBuilder::heartbeat_interval)).
/// If nobody has stolen it by then, this thread runs it too. Called
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
#[inline(always)]
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
#[inline(always)]
pub fn join_context<A, B, RA, RB>(oper_a: A, oper_b: B) -> (RA, RB)
where
    A: FnOnce(FnContext) -> RA + Send,
    B: FnOnce(FnContext) -> RB + Send,
    RA: Send,
    RB: Send,
{
    // The inline path is small and inlined into the caller: a fine-grained recursion costs
    // little more than its sequential version. Everything else is out of line.
    if let Some(worker) = WorkerThread::current_ref() {
        if worker.join_inline() {
            return join_inline(worker, false, oper_a, oper_b);
        }
        return join_offered(worker, false, oper_a, oper_b);
    }
    registry::in_worker(|worker, injected| join_offered(worker, injected, oper_a, oper_b))
}

/// The join whose second half is offered: on the local list (or the deque), then taken
/// back, or waited for if a thief took it.
#[inline(never)]
fn join_offered<A, B, RA, RB>(
    worker: &WorkerThread,
    injected: bool,
    oper_a: A,
    oper_b: B,
) -> (RA, RB)
where
    A: FnOnce(FnContext) -> RA + Send,
    B: FnOnce(FnContext) -> RB + Send,
    RA: Send,
    RB: Send,
{
    let job_b = StackJob::new(
        move |migrated| oper_b(FnContext::new(migrated)),
        SpinLatch::new(worker),
    );
    // SAFETY: `job_b` stays on this stack until its latch is set or we popped it back;
    // every path below waits for one of the two before returning or unwinding.
    let job_b_ref = unsafe { job_b.as_job_ref() };
    let job_b_id = job_b_ref.id();
    worker.push_join(job_b_ref);

    let result_a = match unwind::halt_unwinding(move || oper_a(FnContext::new(injected))) {
        Ok(v) => v,
        Err(err) => recover_from_panic(worker, &job_b.latch, err),
    };

    while !job_b.latch.probe() {
        if worker.must_park_in_wait() {
            park_until_done(worker, &job_b.latch);
            break;
        }
        if worker.pop_pending(|j| j.id() == job_b_id) {
            // Never promoted: nobody else could see it.
            let result_b = job_b.run_inline(injected);
            return (result_a, result_b);
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
}

/// A join below enough un-promoted ones (`heartbeat.rs`): no heartbeat could promote its
/// second half before the older ones, so it is not offered at all — `oper_a`, then
/// `oper_b`, on this thread, with rayon-core's panic rule (a panic in `oper_a` still runs
/// `oper_b`, then is re-raised). Only a revocation in between makes `oper_b` a job, handed
/// over with the rest of our work when we park.
#[inline(always)]
fn join_inline<A, B, RA, RB>(
    worker: &WorkerThread,
    injected: bool,
    oper_a: A,
    oper_b: B,
) -> (RA, RB)
where
    A: FnOnce(FnContext) -> RA + Send,
    B: FnOnce(FnContext) -> RB + Send,
    RA: Send,
    RB: Send,
{
    let result_a = match unwind::halt_unwinding(|| oper_a(FnContext::new(injected))) {
        Ok(v) => v,
        Err(err) => {
            // As when `oper_b` ran elsewhere: its own panic is dropped, `oper_a`'s wins.
            let _ = unwind::halt_unwinding(|| oper_b(FnContext::new(injected)));
            unwind::resume_unwinding(err)
        }
    };
    if worker.must_park_in_wait() {
        return (result_a, park_with(worker, injected, oper_b));
    }
    (result_a, oper_b(FnContext::new(injected)))
}

/// [`join_inline`] after a revocation: `oper_b` becomes a job on the deque (behind our
/// un-promoted ones), then we park as `join_context` does.
#[cold]
#[inline(never)]
fn park_with<B, RB>(worker: &WorkerThread, injected: bool, oper_b: B) -> RB
where
    B: FnOnce(FnContext) -> RB + Send,
    RB: Send,
{
    let job_b = StackJob::new(
        move |migrated| oper_b(FnContext::new(migrated || injected)),
        SpinLatch::new(worker),
    );
    worker.promote_all();
    // SAFETY: `job_b` stays on this stack until its latch is set, which we wait for below
    // (`park_until_done` returns only then; it does not unwind: `wait_until` aborts on a
    // panic).
    worker.push(unsafe { job_b.as_job_ref() });
    park_until_done(worker, &job_b.latch);
    // SAFETY: the latch is set, so whoever ran the job has stored the result.
    unsafe { job_b.into_result() }
}

/// The target excludes us and no worker between jobs took our place: park (our deque,
/// `job_b` included, goes to the ready queues for the active workers), then wait until
/// `job_b` is done. Parked first, not through `wait_until`'s own check: a place taken
/// there would pop `job_b` back and run it here as if it had migrated. Out of line:
/// `join`'s fast path only tests.
#[cold]
#[inline(never)]
fn park_until_done(worker: &WorkerThread, latch: &SpinLatch<'_>) {
    // `job_b` may still be on the local list: the park hands the deque over, so put it there.
    worker.promote_all();
    worker.park(Some(latch.as_core_latch()));
    worker.wait_until(latch);
}

/// `oper_a` panicked: wait for `oper_b` (it borrows our stack), then re-raise. The wait
/// promotes `oper_b` if it is still on the local list, and runs it like any local job.
#[cold]
fn recover_from_panic(
    worker: &WorkerThread,
    latch: &SpinLatch<'_>,
    err: Box<dyn std::any::Any + Send>,
) -> ! {
    worker.wait_until(latch);
    unwind::resume_unwinding(err)
}
