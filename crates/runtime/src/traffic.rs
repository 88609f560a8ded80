//! Self-reported memory traffic: an application that knows how many bytes it moves (a
//! streaming kernel, a copy loop) reports them here; the manager client publishes the running
//! total in the control page, where the manager's bandwidth policy reads it when no hardware
//! counter is available (counter source `self-report`).

use std::sync::atomic::{AtomicU64, Ordering};

static REPORTED: AtomicU64 = AtomicU64::new(0);

/// Add `bytes` to the process's reported memory traffic (cheap: one relaxed atomic add; call
/// it per chunk of work, not per element).
///
/// ```
/// let before = partita_runtime::reported_bytes();
/// partita_runtime::report_bytes(4096);
/// assert!(partita_runtime::reported_bytes() >= before + 4096);
/// ```
pub fn report_bytes(bytes: u64) {
    REPORTED.fetch_add(bytes, Ordering::Relaxed);
}

/// Total bytes reported by [`report_bytes`] since the process started.
pub fn reported_bytes() -> u64 {
    REPORTED.load(Ordering::Relaxed)
}
