//! Counters a pool exposes through `ThreadPool::stats`.

use std::time::Duration;

/// A snapshot of a pool's counters (summed over workers since the pool started).
///
/// ```
/// let pool = partita_runtime::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
/// pool.install(|| partita_runtime::join(|| 1, || 2));
/// let s = pool.stats();
/// assert!(s.tasks_run >= 1);
/// assert_eq!(s.num_threads, 2);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Worker threads in the pool.
    pub num_threads: usize,
    /// The target number of active workers when the snapshot was taken.
    pub target_workers: usize,
    /// Workers not suspended by process control when the snapshot was taken.
    pub active_workers: usize,
    /// Jobs executed by workers (join halves that were pushed, spawns, injected jobs,
    /// broadcast copies).
    pub tasks_run: u64,
    /// Jobs taken from another worker's deque.
    pub steals: u64,
    /// Times an idle worker went to sleep (blocked waiting for work).
    pub sleeps: u64,
    /// Times a worker suspended itself because the target dropped below its index.
    pub parks: u64,
    /// Times a suspended worker was resumed because the target rose above its index.
    pub unparks: u64,
    /// Time workers spent idle: searching for work or sleeping.
    pub idle_time: Duration,
    /// Time workers spent suspended by process control.
    pub suspended_time: Duration,
}
