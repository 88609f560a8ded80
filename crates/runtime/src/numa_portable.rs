//! The portable build's pool memory: no NUMA placement. Node policies, page migration and the
//! follower thread are Linux syscalls (`numa/`, partita-numa), compiled on Linux only, and so
//! is the public NUMA API (`ThreadPool::node_vec`, `PoolVec`, `WorkerHome`, ...). What the
//! pool itself needs of that module is kept here: the per-pool state (nothing to track) and a
//! worker's home (nothing to register).

use std::sync::Arc;

use crate::registry::Registry;

/// Per-pool NUMA state: none to keep (no memory is registered, no follower runs).
pub(crate) struct PoolNuma;

impl PoolNuma {
    /// `follow` (the builder's `numa_follow`) has nothing to follow here.
    pub(crate) fn new(_follow: bool) -> PoolNuma {
        PoolNuma
    }
}

/// What a worker holds while it runs: no registered home.
pub(crate) struct HomeGuard;

/// A worker starts: no pages to register as its home.
pub(crate) fn enter_worker_home(_registry: &Arc<Registry>, _index: usize) -> HomeGuard {
    HomeGuard
}
