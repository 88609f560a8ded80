//! `self-report`: the cumulative bytes the application publishes in its half of the control
//! page (`AppSide::bandwidth`, written by partita-runtime's client: the bytes the program reports
//! through `partita_runtime::report_bytes` plus what the runtime measures itself, a perf-event
//! counter on each worker for LLC misses where the CPU has a PMU — see
//! `partita_runtime::measured_traffic` for whether it does and why not).

use super::{AppRef, CounterError, CounterSource};
use crate::alloc::AppId;

/// The `self-report` counter source (always available; an application that reports nothing
/// has rate 0).
///
/// ```
/// use partita_manager::counters::{AppRef, CounterSource, SelfReport};
/// let mut s = SelfReport::default();
/// let a = AppRef { id: 1, pid: 1, reported_bytes: 4096 };
/// s.attach(&a).unwrap();
/// assert_eq!(s.read(&a).unwrap(), 4096);
/// ```
#[derive(Debug, Default)]
pub struct SelfReport;

impl CounterSource for SelfReport {
    fn name(&self) -> &'static str {
        "self-report"
    }

    fn attach(&mut self, _app: &AppRef) -> Result<(), CounterError> {
        Ok(())
    }

    fn read(&mut self, app: &AppRef) -> Result<u64, CounterError> {
        Ok(app.reported_bytes)
    }

    fn detach(&mut self, _id: AppId) {}
}
