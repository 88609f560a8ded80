//! The portable build's traffic measurement: none. perf-event counters exist on Linux only
//! (`measured.rs`); here a worker opens no counter and the control page (Linux only too)
//! carries nothing, so [`super::published_bytes`] is what the program reports.

/// A worker's counter: nothing to open.
pub(crate) struct WorkerCounter;

impl WorkerCounter {
    /// Opens nothing (no perf events on this platform or build).
    pub(crate) fn open() -> WorkerCounter {
        WorkerCounter
    }
}

/// Bytes measured by the workers: none.
pub(crate) fn measured_bytes() -> u64 {
    0
}
