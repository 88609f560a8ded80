//! Following the manager from a worker's safe point.
//!
//! The manager publishes a new allocation into the control page and wakes the pool's client
//! thread, which applies it (`set_target_workers`, `set_cpus`). On a machine whose CPUs are
//! all taken by workers, that thread's wake-up can wait for a CPU (p99 240–530 µs, hop "B
//! notices" of `cargo run --release --example reaction -- 300`, docs/bench/manager.md §2)
//! while the worker that must park is running anyway. So a worker also looks at the page at
//! each safe point of its main loop: one relaxed load of the page's seqlock epoch (a line the
//! manager writes only when the allocation changes) compared with the epoch this worker saw
//! last. When it moved, the worker applies the page itself, exactly as the client would
//! ([`Watch::catch_up`], the client's code), and then parks at once if the new target
//! excludes it. The client thread still wakes and finds the change applied.
//!
//! Who applies is serialised by the session (one lock, taken with `try_lock` by workers, so a
//! safe point never blocks); whatever applies re-reads the page under it, so an older
//! allocation is never applied after a newer one, and none after the session ended (the
//! client then reverts the pool to standalone). The pool holds the live session's [`Watch`]
//! ([`WatchSlot`]); each worker keeps its own reference ([`Follower`]), refreshed when the
//! slot's generation moves, so the page stays mapped while a worker may read it.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::registry::Registry;
use crate::worker::WorkerThread;

/// The manager's allocation as a worker sees it: set by the client while a session is live.
pub(crate) trait Watch: Send + Sync {
    /// A word that changes whenever the allocation changes (the page's seqlock epoch).
    fn word(&self) -> &AtomicU64;
    /// Apply the page's allocation to the pool if it was not applied yet. Never blocks:
    /// `false` if another thread is applying one right now (the caller tries again later).
    fn catch_up(&self) -> bool;
}

/// The pool's live watch (part of `Control`).
#[derive(Default)]
pub(crate) struct WatchSlot {
    /// Bumped at every change of `watch`; workers compare it with their copy.
    generation: AtomicU64,
    watch: Mutex<Option<Arc<dyn Watch>>>,
}

impl WatchSlot {
    /// Install (`Some`) or remove the session's watch.
    pub(crate) fn set(&self, watch: Option<Arc<dyn Watch>>) {
        let mut w = self.watch.lock().unwrap_or_else(|p| p.into_inner());
        *w = watch;
        // Under the lock: a worker that sees the new generation reads the new watch.
        self.generation.fetch_add(1, Ordering::Release);
    }
}

/// A worker's copy of the pool's watch (only its worker touches it).
pub(crate) struct Follower {
    /// The `WatchSlot` generation `watch` was taken at.
    generation: Cell<u64>,
    /// Keeps `word` valid.
    watch: RefCell<Option<Arc<dyn Watch>>>,
    /// `watch`'s word (null: no session).
    word: Cell<*const AtomicU64>,
    /// The word's value when this worker last caught up (or found nothing to do).
    seen: Cell<u64>,
}

impl Default for Follower {
    fn default() -> Self {
        Follower {
            generation: Cell::new(0),
            watch: RefCell::new(None),
            word: Cell::new(std::ptr::null()),
            seen: Cell::new(u64::MAX),
        }
    }
}

impl WorkerThread {
    /// Safe point: apply an allocation the manager published and the client thread has not
    /// applied yet. Two relaxed loads and two compares when nothing changed.
    #[inline]
    pub(crate) fn follow_manager(&self) {
        let f = &self.follow;
        if self
            .registry
            .control
            .watch
            .generation
            .load(Ordering::Relaxed)
            != f.generation.get()
        {
            self.refresh_watch();
        }
        let word = f.word.get();
        if word.is_null() {
            return;
        }
        // SAFETY: `word` points into the watch held by `f.watch`, and both are replaced only
        // together, by this thread (`refresh_watch`); the watch lives while it is held.
        let now = unsafe { &*word }.load(Ordering::Relaxed);
        if now != f.seen.get() {
            self.catch_up(now);
        }
    }

    #[cold]
    fn refresh_watch(&self) {
        let slot = &self.registry.control.watch;
        let (generation, w) = {
            let w = slot.watch.lock().unwrap_or_else(|p| p.into_inner());
            // Under the lock, as its writer bumps it: the pair is consistent.
            (slot.generation.load(Ordering::Relaxed), w.clone())
        };
        let f = &self.follow;
        f.generation.set(generation);
        f.word.set(
            w.as_ref()
                .map_or(std::ptr::null(), |w| w.word() as *const _),
        );
        *f.watch.borrow_mut() = w;
        f.seen.set(u64::MAX);
    }

    #[cold]
    fn catch_up(&self, now: u64) {
        let f = &self.follow;
        let applied = f.watch.borrow().as_ref().is_none_or(|w| w.catch_up());
        if applied {
            f.seen.set(now);
        }
    }
}

impl Registry {
    /// Install (`Some`) or remove the live session's watch.
    pub(crate) fn set_watch(&self, watch: Option<Arc<dyn Watch>>) {
        self.control.watch.set(watch);
    }
}
