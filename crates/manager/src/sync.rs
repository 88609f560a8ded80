//! Locking that survives a panicked holder. One per crate layer (partita-queues and
//! partita-runtime have the same `sync::lock`): it is crate-private, the crates share no
//! utility crate below them (partita-queues sits under partita-protocol), and a poisoned-lock
//! policy is no part of the wire protocol's public API.

use std::sync::{Mutex, MutexGuard};

/// Lock a mutex, ignoring poisoning: the manager's mutexes guard state whose every update is
/// complete or not begun when a holder panics (a panic there is a bug in the manager itself),
/// so it keeps serving with the state as it is rather than cascading the panic.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
