//! Counters a pool exposes through `ThreadPool::stats`.

use std::time::Duration;

/// A snapshot of a pool's counters (summed over workers since the pool started).
///
/// ```
/// let pool = partita_runtime::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
/// pool.install(|| ());
/// pool.install(|| ()); // the only worker counted the first job before taking this one
/// let s = pool.stats();
/// assert!(s.tasks_run >= 1);
/// assert_eq!(s.num_threads, 1);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Worker threads in the pool.
    pub num_threads: usize,
    /// The target number of active workers when the snapshot was taken.
    pub target_workers: usize,
    /// Workers not suspended by process control when the snapshot was taken.
    pub active_workers: usize,
    /// Jobs executed from a queue (stolen join halves, spawns, injected jobs, broadcast
    /// copies); a join half that its own worker pops back and runs inline is not counted.
    pub tasks_run: u64,
    /// Jobs taken from another worker's deque.
    pub steals: u64,
    /// Times an idle worker went to sleep (blocked waiting for work).
    pub sleeps: u64,
    /// Times a worker suspended (itself, or in place where it slept) because the target
    /// excluded it.
    pub parks: u64,
    /// Times a suspended worker was resumed because the target included it again (or the
    /// job it waited in finished).
    pub unparks: u64,
    /// Times the target changed (each allocation a manager published that changed it, or a
    /// `set_target_workers` call): what the parks are to be compared with.
    pub target_changes: u64,
    /// Time workers spent idle: searching for work or sleeping.
    pub idle_time: Duration,
    /// Time workers spent suspended by process control.
    pub suspended_time: Duration,
}
