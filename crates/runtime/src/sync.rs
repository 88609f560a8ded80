//! Synchronisation primitives used by the sleep / process-control core and the deque, swapped for loom's
//! model-checked versions under `--cfg loom` (see `scripts/test.d/30-runtime.sh`).

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{
    fence, AtomicBool, AtomicIsize, AtomicPtr, AtomicU64, AtomicUsize,
};
#[cfg(loom)]
pub(crate) use loom::sync::{Condvar, Mutex, MutexGuard};

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{
    fence, AtomicBool, AtomicIsize, AtomicPtr, AtomicU64, AtomicUsize,
};
#[cfg(not(loom))]
pub(crate) use std::sync::{Mutex, MutexGuard};

/// Lock a mutex, ignoring poisoning: the data behind our mutexes is plain state that a
/// panicking holder cannot leave half-updated (every critical section is a few assignments
/// that cannot panic), so a poisoned lock is still consistent.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// Wait on a condition variable, ignoring poisoning (see [`lock`]). Only loom's: outside
/// loom a worker blocks on a futex word (`sleep/event.rs`).
#[cfg(loom)]
pub(crate) fn wait<'a, T>(cv: &Condvar, g: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    match cv.wait(g) {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}
