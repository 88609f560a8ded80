//! The futex calls a worker blocks and wakes with: partita-protocol's wrappers (the one set of
//! the workspace, `sys::futex_*`), under the names the sleep protocol (`event.rs`) uses on
//! every platform (`futex_portable.rs` emulates them elsewhere).
//!
//! - A worker's own word is a private futex (`FUTEX_WAIT_PRIVATE` / `FUTEX_WAKE_PRIVATE`).
//! - A suspended worker under a manager also waits on the control page's `wake` word, a
//!   *shared* futex (the page is a `MAP_SHARED` memfd mapping written by the manager, which
//!   `FUTEX_WAKE`s it without the private flag), with `futex_waitv` (Linux ≥ 5.16): one call
//!   that returns when either word changes. Kernels without it answer `ENOSYS`; the first
//!   such answer is remembered ([`waitv_supported`]) and workers then wait on their own word
//!   only (the manager client's thread then wakes them, as before).
//!
//! Callers treat every error as "look again" (`EAGAIN`, `EINTR` are not failures for a caller
//! that loops on its own condition).

use partita_protocol::sys::{futex_wait, futex_waitv, futex_wake, FutexScope};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

pub(crate) use partita_protocol::sys::FutexError;

/// Block while `*word == expected` (a private futex: the word is in this process's memory),
/// until a [`wake_private`] on it, a signal, or a spurious return.
pub(crate) fn wait_private(word: &AtomicU32, expected: u32) -> Result<(), FutexError> {
    futex_wait(word, expected, FutexScope::Private, None)
}

/// Wake up to `n` threads blocked on `word` by [`wait_private`] or [`waitv`] (as the own word).
pub(crate) fn wake_private(word: &AtomicU32, n: i32) -> Result<(), FutexError> {
    futex_wake(word, n, FutexScope::Private)
}

/// Block while `*own == own_seen` (private) and `*shared == shared_seen` (a shared futex, e.g.
/// in a `MAP_SHARED` page another process wakes), until either is woken or differs.
/// `ENOSYS` (a kernel older than 5.16) is remembered: see [`waitv_supported`].
pub(crate) fn waitv(
    own: &AtomicU32,
    own_seen: u32,
    shared: &AtomicU32,
    shared_seen: u32,
) -> Result<(), FutexError> {
    let r = futex_waitv(own, own_seen, shared, shared_seen);
    if r.is_err_and(|e| e.unsupported()) {
        NO_WAITV.store(true, Ordering::Relaxed);
    }
    r
}

/// Set once `futex_waitv` answered `ENOSYS`.
static NO_WAITV: AtomicBool = AtomicBool::new(false);

/// Whether [`waitv`] may work here: false once the kernel answered `ENOSYS`.
pub(crate) fn waitv_supported() -> bool {
    // Relaxed: a stale `true` costs one more ENOSYS answer, which the caller survives.
    !NO_WAITV.load(Ordering::Relaxed)
}
