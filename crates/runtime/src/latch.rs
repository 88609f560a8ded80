//! Latches: one-shot "this happened" signals that a waiting thread observes.
//!
//! A worker that waits on a latch keeps running other jobs (see
//! `WorkerThread::wait_until`); before it goes to sleep it marks the latch `SLEEPING`, and
//! whoever sets a latch in that state wakes exactly that worker. Threads outside the pool
//! block on a [`LockLatch`] (mutex + condvar) instead.

use std::marker::PhantomData;
use std::ops::Deref;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};

use crate::sync::AtomicUsize;

use crate::registry::{Registry, WorkerThread};

/// Something that can be set once.
pub(crate) trait Latch {
    /// Set the latch, waking its waiter if needed.
    ///
    /// # Safety
    /// `this` must be valid on entry; it may be freed by the waiter as soon as the latch is
    /// observed set, so implementations must not touch `*this` after the store that sets it
    /// (they copy out what they need first).
    unsafe fn set(this: *const Self);
}

/// Latches a worker can wait on while stealing.
pub(crate) trait AsCoreLatch {
    fn as_core_latch(&self) -> &CoreLatch;
}

const UNSET: usize = 0;
const SLEEPING: usize = 1;
const SET: usize = 2;

/// The state word of latches that workers wait on.
#[derive(Debug)]
pub(crate) struct CoreLatch {
    state: AtomicUsize,
}

impl CoreLatch {
    // Not `const`: under loom the state is loom's atomic (the sleep protocol's models use
    // the real latch).
    pub(crate) fn new() -> Self {
        CoreLatch {
            state: AtomicUsize::new(UNSET),
        }
    }

    /// The waiter is about to sleep: from now on a setter must wake it. False if already set.
    pub(crate) fn get_sleepy(&self) -> bool {
        self.state
            .compare_exchange(UNSET, SLEEPING, Ordering::SeqCst, Ordering::Relaxed)
            .is_ok()
    }

    /// The waiter is awake again (no effect if the latch was set meanwhile).
    pub(crate) fn wake_up(&self) {
        let _ = self
            .state
            .compare_exchange(SLEEPING, UNSET, Ordering::SeqCst, Ordering::Relaxed);
    }

    /// Set; returns true if the waiter may be asleep and must be woken.
    ///
    /// # Safety
    /// `this` valid on entry (see [`Latch::set`]).
    pub(crate) unsafe fn set(this: *const Self) -> bool {
        // SAFETY: valid on entry by contract; we do not touch it after the swap.
        let old = unsafe { (*this).state.swap(SET, Ordering::AcqRel) };
        old == SLEEPING
    }

    #[inline]
    pub(crate) fn probe(&self) -> bool {
        self.state.load(Ordering::Acquire) == SET
    }
}

impl AsCoreLatch for CoreLatch {
    fn as_core_latch(&self) -> &CoreLatch {
        self
    }
}

/// A latch owned by a worker of `registry` (index `target_worker_index`) that waits by
/// stealing. `cross` latches are set from another pool, which may be the last owner of the
/// registry: they keep it alive while they wake the waiter.
pub(crate) struct SpinLatch<'r> {
    core_latch: CoreLatch,
    registry: &'r Arc<Registry>,
    target_worker_index: usize,
    cross: bool,
}

impl<'r> SpinLatch<'r> {
    pub(crate) fn new(thread: &'r WorkerThread) -> SpinLatch<'r> {
        SpinLatch {
            core_latch: CoreLatch::new(),
            registry: thread.registry(),
            target_worker_index: thread.index(),
            cross: false,
        }
    }

    pub(crate) fn cross(thread: &'r WorkerThread) -> SpinLatch<'r> {
        SpinLatch {
            cross: true,
            ..SpinLatch::new(thread)
        }
    }

    #[inline]
    pub(crate) fn probe(&self) -> bool {
        self.core_latch.probe()
    }
}

impl AsCoreLatch for SpinLatch<'_> {
    fn as_core_latch(&self) -> &CoreLatch {
        &self.core_latch
    }
}

impl Latch for SpinLatch<'_> {
    unsafe fn set(this: *const Self) {
        // SAFETY: `this` is valid until the core latch is set; we copy the registry (cloning
        // the Arc for cross latches, whose waiter may free everything once it sees the set)
        // and the index before setting.
        unsafe {
            let cross_registry;
            let registry: &Registry = if (*this).cross {
                cross_registry = Arc::clone((*this).registry);
                &cross_registry
            } else {
                (*this).registry
            };
            let target = (*this).target_worker_index;
            if CoreLatch::set(&(*this).core_latch) {
                registry.notify_worker_latch_is_set(target);
            }
        }
    }
}

/// A latch for threads outside the pool: blocks on a condition variable.
#[derive(Debug)]
pub(crate) struct LockLatch {
    m: Mutex<bool>,
    v: Condvar,
}

impl LockLatch {
    pub(crate) const fn new() -> LockLatch {
        LockLatch {
            m: Mutex::new(false),
            v: Condvar::new(),
        }
    }

    /// Block until set, then reset so the latch can be reused (thread-local latches).
    pub(crate) fn wait_and_reset(&self) {
        let mut g = self.m.lock().unwrap_or_else(|p| p.into_inner());
        while !*g {
            g = self.v.wait(g).unwrap_or_else(|p| p.into_inner());
        }
        *g = false;
    }

    /// Block until set.
    pub(crate) fn wait(&self) {
        let mut g = self.m.lock().unwrap_or_else(|p| p.into_inner());
        while !*g {
            g = self.v.wait(g).unwrap_or_else(|p| p.into_inner());
        }
    }
}

impl Latch for LockLatch {
    unsafe fn set(this: *const Self) {
        // SAFETY: valid on entry; the waiter cannot observe the flag (and free the latch)
        // before we release the mutex, and we touch nothing after the guard drops.
        unsafe {
            let mut g = (*this).m.lock().unwrap_or_else(|p| p.into_inner());
            *g = true;
            (*this).v.notify_all();
        }
    }
}

/// A latch set once by the registry (termination), waking one specific worker.
#[derive(Debug)]
pub(crate) struct OnceLatch {
    core_latch: CoreLatch,
}

impl OnceLatch {
    pub(crate) fn new() -> OnceLatch {
        OnceLatch {
            core_latch: CoreLatch::new(),
        }
    }

    /// Set and wake worker `index` of `registry` if it sleeps on this latch.
    ///
    /// # Safety
    /// `this` valid on entry.
    pub(crate) unsafe fn set_and_tickle(this: *const Self, registry: &Registry, index: usize) {
        // SAFETY: forwarded contract.
        if unsafe { CoreLatch::set(&(*this).core_latch) } {
            registry.notify_worker_latch_is_set(index);
        }
    }

    pub(crate) fn probe(&self) -> bool {
        self.core_latch.probe()
    }
}

impl AsCoreLatch for OnceLatch {
    fn as_core_latch(&self) -> &CoreLatch {
        &self.core_latch
    }
}

/// Counts outstanding jobs of a scope (or a broadcast); set when the count reaches zero.
#[derive(Debug)]
pub(crate) struct CountLatch {
    counter: AtomicUsize,
    kind: CountLatchKind,
}

#[derive(Debug)]
enum CountLatchKind {
    /// The owner is a worker and waits by stealing.
    Stealing {
        latch: CoreLatch,
        registry: Arc<Registry>,
        worker_index: usize,
    },
    /// The owner is outside the pool and blocks.
    Blocking { latch: LockLatch },
}

impl CountLatch {
    pub(crate) fn new(owner: Option<&WorkerThread>) -> Self {
        Self::with_count(1, owner)
    }

    pub(crate) fn with_count(count: usize, owner: Option<&WorkerThread>) -> Self {
        CountLatch {
            counter: AtomicUsize::new(count),
            kind: match owner {
                Some(owner) => CountLatchKind::Stealing {
                    latch: CoreLatch::new(),
                    registry: Arc::clone(owner.registry()),
                    worker_index: owner.index(),
                },
                None => CountLatchKind::Blocking {
                    latch: LockLatch::new(),
                },
            },
        }
    }

    pub(crate) fn increment(&self) {
        let old = self.counter.fetch_add(1, Ordering::Relaxed);
        debug_assert!(old != 0, "CountLatch incremented after completion");
    }

    /// Wait until the count reaches zero; `owner` must be the worker given at creation.
    pub(crate) fn wait(&self, owner: Option<&WorkerThread>) {
        match &self.kind {
            CountLatchKind::Stealing { latch, .. } => {
                // A Stealing latch is only created with `Some(owner)`, and its owner is the
                // one who waits (scopes wait on the thread that created them).
                let owner = owner.expect("CountLatch::wait: stealing latch without its owner");
                owner.wait_until(latch);
            }
            CountLatchKind::Blocking { latch } => latch.wait(),
        }
    }
}

impl Latch for CountLatch {
    unsafe fn set(this: *const Self) {
        // SAFETY: valid on entry; once the count hits zero the waiter may return, so for the
        // Stealing kind we clone the registry before setting the core latch.
        unsafe {
            if (*this).counter.fetch_sub(1, Ordering::SeqCst) == 1 {
                match &(*this).kind {
                    CountLatchKind::Stealing {
                        latch,
                        registry,
                        worker_index,
                    } => {
                        let registry = Arc::clone(registry);
                        let index = *worker_index;
                        if CoreLatch::set(latch) {
                            registry.notify_worker_latch_is_set(index);
                        }
                    }
                    CountLatchKind::Blocking { latch } => LockLatch::set(latch),
                }
            }
        }
    }
}

/// A borrowed latch usable as a job's latch.
pub(crate) struct LatchRef<'a, L> {
    inner: *const L,
    marker: PhantomData<&'a L>,
}

impl<L> LatchRef<'_, L> {
    pub(crate) fn new(inner: &L) -> LatchRef<'_, L> {
        LatchRef {
            inner,
            marker: PhantomData,
        }
    }
}

// SAFETY: a LatchRef is just a `&L` stored as a pointer (so that `set` may run while the
// referent is being freed by its waiter); `&L` is Sync when `L` is.
unsafe impl<L: Sync> Sync for LatchRef<'_, L> {}

impl<L> Deref for LatchRef<'_, L> {
    type Target = L;
    fn deref(&self) -> &L {
        // SAFETY: the pointer came from a reference that outlives 'a.
        unsafe { &*self.inner }
    }
}

impl<L: Latch> Latch for LatchRef<'_, L> {
    unsafe fn set(this: *const Self) {
        // SAFETY: forwarded contract.
        unsafe { L::set((*this).inner) }
    }
}
