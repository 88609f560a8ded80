//! The task pool the workloads run on, and the one question they ask it about process control:
//! how many workers should be running right now.
//!
//! Everything pool-specific the workloads use goes through this module, so the applications
//! read like ordinary rayon-core programs.

use crate::WorkloadError;

pub use partita_runtime::{join, Scope, ThreadPool};

/// Build the application's pool of `threads` workers named `NAME-wN`. It follows a manager
/// when one is reachable (`PARTITA_SOCKET`; `PARTITA=off` disables), like every pool.
///
/// ```
/// let pool = partita_workloads::pool::build(2, "doc").unwrap();
/// assert_eq!(pool.current_num_threads(), 2);
/// ```
pub fn build(threads: usize, name: &str) -> Result<ThreadPool, WorkloadError> {
    let prefix = name.to_string();
    partita_runtime::ThreadPoolBuilder::new()
        .num_threads(threads.max(1))
        .thread_name(move |i| format!("{prefix}-w{i}"))
        .build()
        .map_err(|e| WorkloadError::Pool(e.to_string()))
}

/// How many workers the pool should be running now: the allocation under process control,
/// the pool size otherwise. In `0..=pool size`: `0` is a zero quantum granted by the manager
/// (the application should pause until it gets CPUs again).
///
/// ```
/// let pool = partita_workloads::pool::build(2, "doc").unwrap();
/// assert_eq!(partita_workloads::pool::target_workers(&pool), 2);
/// ```
pub fn target_workers(pool: &ThreadPool) -> usize {
    pool.target_workers().min(pool.current_num_threads().max(1))
}
