//! The pool's ready-queue set: where tasks injected from outside the pool, and tasks a worker
//! hands over (overflow, or its deque when it suspends), wait for a worker.
//!
//! A small internal seam so the queue implementation can change without touching the
//! registry: `post` never fails or blocks, `poll` takes one task for a consumer, and every
//! task posted is returned by exactly one `poll`.

use crossbeam_deque::{Injector, Steal};

use crate::job::JobRef;

pub(crate) struct ReadyQueues {
    inner: Injector<JobRef>,
}

impl ReadyQueues {
    pub(crate) fn new(_n_workers: usize) -> Self {
        ReadyQueues {
            inner: Injector::new(),
        }
    }

    /// Post a task; `producer` is the posting worker's index, `None` from outside the pool.
    pub(crate) fn post(&self, job: JobRef, _producer: Option<usize>) {
        self.inner.push(job);
    }

    /// Take a task for worker `consumer`.
    pub(crate) fn poll(&self, _consumer: usize) -> Option<JobRef> {
        loop {
            match self.inner.steal() {
                Steal::Success(job) => return Some(job),
                Steal::Empty => return None,
                Steal::Retry => {}
            }
        }
    }

    /// Nothing is queued (a hint: may be stale by the time it is used).
    pub(crate) fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }

    /// Tasks queued (a hint).
    pub(crate) fn len(&self) -> usize {
        self.inner.len()
    }

    /// The number of active workers changed: queues of suspended workers must be served by
    /// active ones.
    pub(crate) fn set_active(&self, _active: usize) {}
}
