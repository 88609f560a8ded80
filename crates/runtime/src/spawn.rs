//! `spawn`: fire-and-forget tasks with `'static` lifetime.

use std::sync::Arc;

use crate::job::{HeapJob, JobRef};
use crate::registry::Registry;

/// Puts `func` in the current pool (the global one from outside) and returns at once. There
/// is no way to wait for it: use [`scope`](crate::scope) for that. A panic in `func` goes to
/// the pool's panic handler; without one, the process aborts. The pool stays alive until every
/// spawned task has run.
///
/// ```
/// let (tx, rx) = std::sync::mpsc::channel();
/// partita_runtime::spawn(move || tx.send(42).unwrap());
/// assert_eq!(rx.recv().unwrap(), 42);
/// ```
pub fn spawn<F>(func: F)
where
    F: FnOnce() + Send + 'static,
{
    spawn_in(func, &Registry::current());
}

pub(crate) fn spawn_in<F>(func: F, registry: &Arc<Registry>)
where
    F: FnOnce() + Send + 'static,
{
    let job_ref = spawn_job(func, registry);
    registry.inject_or_push(job_ref);
}

fn spawn_job<F>(func: F, registry: &Arc<Registry>) -> JobRef
where
    F: FnOnce() + Send + 'static,
{
    // The job keeps the pool alive until it has run.
    registry.increment_terminate_count();
    let registry = Arc::clone(registry);
    let job = HeapJob::new(move || {
        registry.catch_unwind(func);
        registry.terminate();
    });
    // SAFETY: `func` is 'static and the job owns its registry handle.
    unsafe { job.into_job_ref() }
}

/// Like [`spawn`], but tasks spawned by one thread start in FIFO order relative to each
/// other (instead of the LIFO order of the worker's own deque).
///
/// ```
/// let (tx, rx) = std::sync::mpsc::channel();
/// partita_runtime::spawn_fifo(move || tx.send(7).unwrap());
/// assert_eq!(rx.recv().unwrap(), 7);
/// ```
pub fn spawn_fifo<F>(func: F)
where
    F: FnOnce() + Send + 'static,
{
    spawn_fifo_in(func, &Registry::current());
}

pub(crate) fn spawn_fifo_in<F>(func: F, registry: &Arc<Registry>)
where
    F: FnOnce() + Send + 'static,
{
    let job_ref = spawn_job(func, registry);
    match registry.current_thread() {
        Some(worker) => worker.push_fifo(job_ref),
        None => registry.inject(job_ref),
    }
}
