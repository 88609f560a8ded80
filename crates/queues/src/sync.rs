//! Synchronisation primitives, switched to loom's model-checked versions under `--cfg loom`.
//!
//! Everything in the concurrency core (the queue implementations) imports its atomics, mutexes
//! and cells from here, so the loom suite (`tests/loom.rs`, run by
//! `scripts/test.d/20-queues.sh`) explores the same code that ships.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU64, AtomicUsize};
#[cfg(loom)]
pub(crate) use loom::sync::Mutex;

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU64, AtomicUsize};
#[cfg(not(loom))]
pub(crate) use std::sync::Mutex;

pub(crate) use std::sync::atomic::Ordering;

/// An `UnsafeCell` with loom's closure-based access API, so the same code compiles with and
/// without loom.
#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;

/// An `UnsafeCell` with loom's closure-based access API, so the same code compiles with and
/// without loom.
#[cfg(not(loom))]
#[derive(Debug)]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    pub(crate) const fn new(value: T) -> Self {
        Self(std::cell::UnsafeCell::new(value))
    }

    /// Gives `f` the raw pointer; the caller upholds the aliasing rules.
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

/// Locks a mutex, ignoring poisoning: every critical section in this crate is a plain data
/// move that cannot leave the protected value inconsistent, so a panic elsewhere while the
/// lock was held does not invalidate it.
pub(crate) fn lock<T>(m: &Mutex<T>) -> impl std::ops::DerefMut<Target = T> + '_ {
    match m.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}
