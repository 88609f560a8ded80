//! The portable build's pool memory: no NUMA placement. Node policies, page migration and the
//! follower thread are Linux syscalls (`numa/`, partita-numa), compiled on Linux only, and so
//! is the public NUMA API (`ThreadPool::node_vec`, `PoolVec`, `WorkerHome`, ...). What the
//! pool itself needs of that module is kept here: the page-aligned per-worker slots, the
//! per-pool state (nothing to track) and a worker's home (nothing to register).

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use crate::registry::Registry;

/// One value alone in its page(s), as on Linux (`numa/home.rs`): no two workers' counters
/// share a page or a cache line, whatever the platform.
#[repr(C, align(4096))]
#[derive(Default)]
pub(crate) struct PageAligned<T>(pub(crate) T);

impl<T> Deref for PageAligned<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> DerefMut for PageAligned<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

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
