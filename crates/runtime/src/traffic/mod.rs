//! The application's memory traffic, published in its half of the control page
//! (`AppSide::bandwidth`), where the manager's bandwidth policy reads it when no counter of its
//! own is available (counter source `self-report`). Two estimates of the same bytes:
//!
//! - what the application reports: a program that knows how many bytes it moves (a streaming
//!   kernel, a copy loop) calls [`report_bytes`];
//! - what the runtime measures itself ([`measured`]): a perf-event counter on every worker
//!   thread, last-level-cache misses × line size where the CPU has a PMU, skipped with a
//!   reason ([`measured_traffic`]) where it has none; the page carries the reason's code
//!   ([`measured_traffic_status`], `AppSide::traffic_status`) for `partita status`.
//!
//! The page carries the larger of the two: a program that reports the bytes its workers stream
//! is measured streaming them too, so adding them would count its traffic twice.

// Linux only (perf-event counters); the portable build measures nothing and publishes what
// the program reports.
#[cfg_attr(not(partita_linux), path = "measured_portable.rs")]
mod measured;

#[cfg(not(partita_linux))]
use measured::measured_bytes;
pub(crate) use measured::WorkerCounter;
#[cfg(partita_linux)]
pub use measured::{
    measure_traffic_with, measured_bytes, measured_traffic, measured_traffic_status,
    MeasuredTraffic, TrafficEvent,
};

pub use partita_protocol::traffic::TrafficStatus;
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

/// What the control page carries: the larger of reported and measured bytes, cumulative (never
/// decreasing, also when workers exit, since both parts never decrease).
///
/// ```
/// let before = partita_runtime::published_bytes();
/// partita_runtime::report_bytes(4096);
/// assert!(partita_runtime::published_bytes() >= before + 4096);
/// ```
pub fn published_bytes() -> u64 {
    reported_bytes().max(measured_bytes())
}
