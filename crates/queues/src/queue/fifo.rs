//! The FIFO baseline: one lock-protected `VecDeque` (the paper's Global queue, and each queue
//! of Distributed FCFS).

use std::collections::VecDeque;

use super::{Claim, ReadyQueue, Scan};
use crate::error::Full;
use crate::sync::{lock, AtomicUsize, Mutex, Ordering};

/// An unbounded, lock-protected FIFO: serves tasks in post order, one thread at a time.
///
/// ```
/// use partita_queues::{FifoQueue, ReadyQueue, Scan};
/// let q = FifoQueue::new();
/// q.try_post(1).unwrap();
/// q.try_post(2).unwrap();
/// assert_eq!(q.claim(Scan::from_zero()).taken, Some((0, 1)));
/// assert_eq!(q.pop(), Some(2));
/// ```
#[derive(Debug, Default)]
pub struct FifoQueue<T> {
    items: Mutex<VecDeque<T>>,
    /// Mirrors `items.len()` so length hints need no lock.
    len: AtomicUsize,
}

impl<T> FifoQueue<T> {
    /// An empty FIFO.
    ///
    /// ```
    /// assert!(partita_queues::FifoQueue::<u8>::new().pop().is_none());
    /// ```
    pub fn new() -> Self {
        Self {
            items: Mutex::new(VecDeque::new()),
            len: AtomicUsize::new(0),
        }
    }

    /// Appends `task`.
    ///
    /// ```
    /// let q = partita_queues::FifoQueue::new();
    /// q.push(3);
    /// assert_eq!(q.pop(), Some(3));
    /// ```
    pub fn push(&self, task: T) {
        let mut items = lock(&self.items);
        items.push_back(task);
        self.len.store(items.len(), Ordering::Relaxed);
    }

    /// Removes the oldest task. Returns at once, without taking the lock, when the length
    /// hint says the queue is empty.
    ///
    /// ```
    /// let q = partita_queues::FifoQueue::<u8>::new();
    /// assert_eq!(q.pop(), None);
    /// ```
    pub fn pop(&self) -> Option<T> {
        if self.len.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let mut items = lock(&self.items);
        let task = items.pop_front();
        self.len.store(items.len(), Ordering::Relaxed);
        task
    }

    /// Number of queued tasks (a hint under concurrency).
    ///
    /// ```
    /// let q = partita_queues::FifoQueue::new();
    /// q.push(());
    /// assert_eq!(q.count(), 1);
    /// ```
    pub fn count(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }
}

impl<T: Send> ReadyQueue<T> for FifoQueue<T> {
    fn try_post(&self, task: T) -> Result<usize, Full<T>> {
        self.push(task);
        Ok(0)
    }

    fn claim(&self, _scan: Scan) -> Claim<T> {
        Claim {
            taken: self.pop().map(|t| (0, t)),
            lost_races: 0,
        }
    }

    fn len(&self) -> usize {
        self.count()
    }

    fn capacity(&self) -> Option<usize> {
        None
    }
}
