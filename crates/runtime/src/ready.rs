//! The pool's ready-queue set (partita-queues): where tasks injected from outside the pool,
//! and the deque of a worker that suspends, wait for a worker.
//!
//! Each worker is producer and consumer `i` of one shared [`partita_queues::ReadyQueues`]
//! with one queue per worker; threads outside the pool post through a few shared producer
//! states (ids `n..2n`, so their primaries spread over the queues). When process control
//! suspends workers, [`ReadyQueues::set_active`] recomputes which active worker serves each
//! orphaned queue (`extra_queues`), and workers pick up the new assignment at their next poll:
//! no task is stranded in the queue of a suspended worker.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use partita_queues::{Config, ConfigError, ConsumerState, DequeuePolicy, EnqueuePolicy};
use partita_queues::{ProducerState, ReadyQueues as QueueSet};

use crate::job::JobRef;

/// The ready-queue policies of a pool (see `ThreadPoolBuilder::ready_queues`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Policies {
    pub(crate) enqueue: EnqueuePolicy,
    pub(crate) dequeue: DequeuePolicy,
}

/// The default pair: round-robin posting (`Sequential`) spreads injected tasks over the
/// workers' queues; `Sequential` consumers serve their own queue first, then walk the ring,
/// so every consumer reaches every queue (needed for cheap "is there work for me?" checks) and
/// the pair is valid for any pool size. Chosen by `benches/runtime.rs` (see
/// docs/bench/runtime.md).
pub(crate) const DEFAULT_POLICIES: Policies = Policies {
    enqueue: EnqueuePolicy::Sequential,
    dequeue: DequeuePolicy::Sequential,
};

pub(crate) struct ReadyQueues {
    set: QueueSet<JobRef>,
    n: usize,
    dequeue: DequeuePolicy,
    /// Producer states for threads outside the pool.
    external: Box<[Mutex<ProducerState>]>,
    /// Which workers are active (not suspended).
    active: Box<[AtomicBool]>,
    /// Per worker, the queues of suspended workers it must serve too.
    extras: Mutex<Vec<Vec<usize>>>,
    extras_epoch: AtomicU64,
}

/// A worker's private side of the set.
pub(crate) struct WorkerQueues {
    producer: RefCell<ProducerState>,
    consumer: RefCell<ConsumerState>,
    extras_epoch: Cell<u64>,
}

impl ReadyQueues {
    pub(crate) fn new(n_workers: usize, policies: Policies) -> Result<Self, ConfigError> {
        let set = Config::new(n_workers)
            .enqueue(policies.enqueue)
            .dequeue(policies.dequeue)
            .build::<JobRef>()?;
        Ok(ReadyQueues {
            external: (0..n_workers)
                .map(|i| Mutex::new(set.producer(n_workers + i)))
                .collect(),
            set,
            n: n_workers,
            dequeue: policies.dequeue,
            active: (0..n_workers).map(|_| AtomicBool::new(true)).collect(),
            extras: Mutex::new(vec![Vec::new(); n_workers]),
            extras_epoch: AtomicU64::new(0),
        })
    }

    pub(crate) fn worker(&self, index: usize) -> WorkerQueues {
        WorkerQueues {
            producer: RefCell::new(self.set.producer(index)),
            consumer: RefCell::new(self.set.consumer(index)),
            extras_epoch: Cell::new(0),
        }
    }

    /// Post from a thread outside the pool.
    pub(crate) fn post_external(&self, job: JobRef) {
        thread_local!(static SLOT: usize = {
            static NEXT: AtomicUsize = AtomicUsize::new(0);
            NEXT.fetch_add(1, Ordering::Relaxed)
        });
        let slot = SLOT.with(|s| *s) % self.external.len();
        let mut p = self.external[slot]
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        self.set.post(&mut p, job);
    }

    /// Post from worker `w` (its deque when it suspends).
    pub(crate) fn post_from(&self, w: &WorkerQueues, job: JobRef) {
        self.set.post(&mut w.producer.borrow_mut(), job);
    }

    /// Take a task for worker `w` (its own queue, the policy's others, and the queues of
    /// suspended workers assigned to it).
    pub(crate) fn poll(&self, w: &WorkerQueues) -> Option<JobRef> {
        let mut c = w.consumer.borrow_mut();
        let epoch = self.extras_epoch.load(Ordering::Acquire);
        if epoch != w.extras_epoch.get() {
            w.extras_epoch.set(epoch);
            let extras = self.extras.lock().unwrap_or_else(|p| p.into_inner());
            let id = c.id();
            c.set_extra(extras[id].clone());
        }
        self.set.poll(&mut c)
    }

    /// Whether any queue worker `w` may take from holds a task (a hint, used before
    /// sleeping; the argument in `sleep/README.md` needs it to see every post that precedes it).
    pub(crate) fn has_work_for(&self, w: &WorkerQueues) -> bool {
        let c = w.consumer.borrow();
        let home = c.home();
        let reachable = |q: usize| match self.dequeue {
            DequeuePolicy::Static => q == home,
            DequeuePolicy::PrimaryFixed => q == home || q == (home + 1) % self.n,
            _ => true,
        };
        let extras = c.extra();
        (0..self.set.num_queues())
            .any(|q| (reachable(q) || extras.contains(&q)) && self.set.queue_len(q) > 0)
            || (self.extras_epoch.load(Ordering::Acquire) != w.extras_epoch.get()
                && !self.set.is_empty())
    }

    /// Tasks queued (a hint).
    pub(crate) fn len(&self) -> usize {
        self.set.len()
    }

    /// Worker `index` became active or suspended: reassign orphaned queues.
    pub(crate) fn set_active(&self, index: usize, active: bool) {
        self.active[index].store(active, Ordering::SeqCst);
        let flags: Vec<bool> = self
            .active
            .iter()
            .map(|a| a.load(Ordering::SeqCst))
            .collect();
        let mut extras = self.extras.lock().unwrap_or_else(|p| p.into_inner());
        // With nobody active (a granted zero quantum) there is nobody to assign to; the
        // assignment is recomputed when a worker resumes.
        if let Ok(new) = self.set.extra_queues(&flags) {
            *extras = new;
            self.extras_epoch.fetch_add(1, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::{HeapJob, JobRef};

    fn job() -> JobRef {
        // SAFETY: executed exactly once by the tests below (or leaked, which is harmless).
        unsafe { HeapJob::new(|| ()).into_job_ref() }
    }

    #[test]
    fn queue_of_suspended_worker_is_served() {
        for dequeue in [
            DequeuePolicy::Sequential,
            DequeuePolicy::PrimaryFixed,
            DequeuePolicy::PrimarySequential,
        ] {
            let policies = Policies {
                enqueue: EnqueuePolicy::Static,
                dequeue,
            };
            let q = ReadyQueues::new(3, policies).unwrap();
            let workers: Vec<_> = (0..3).map(|i| q.worker(i)).collect();
            // Worker 2 posts to its own queue and suspends; 0 is the only active one.
            q.post_from(&workers[2], job());
            q.set_active(2, false);
            q.set_active(1, false);
            assert!(q.has_work_for(&workers[0]), "{dequeue:?}");
            let j = q
                .poll(&workers[0])
                .expect("task in a suspended worker's queue");
            // SAFETY: taken once from the queue.
            unsafe { j.execute() };
            assert_eq!(q.len(), 0);
        }
    }
}
