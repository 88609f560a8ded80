//! `perf-event`: one counter per thread of the application, inherited by the threads (and
//! processes) those create, read once per quantum, closed when the application leaves.
//!
//! Built on the `perf-event2` crate, the maintained fork of `perf-event` (same API family;
//! releases through 2025 with newer kernels' event types, `observe_pid` + `inherit` on one
//! builder, and `read_full` giving enabled/running times for multiplexed counters; the original
//! crate's last release is from 2022).
//!
//! Why one counter per existing thread: an inherited counter covers the thread it was opened
//! on and every thread created after that, but not threads that existed already. Opening on
//! each task in `/proc/PID/task` at attach time covers the threads present then; those created
//! later descend from one of them and are counted by inheritance (reading a parent counter sums
//! its live and exited inherited children). The manager attaches after the application's hello,
//! when its pool's workers exist; a counter opened on a process that is still starting up
//! (before its runtime created its threads) was seen to miss threads that process created
//! right after, so the tests attach only once the child has said it is running.

use super::{AppRef, CounterError, CounterSource};
use crate::alloc::AppId;
use perf_event::events::{Event, Hardware, Software};
use perf_event::{Builder, Counter};
use std::collections::BTreeMap;

/// Which event the source counts.
///
/// ```
/// use partita_manager::counters::PerfEvent;
/// assert!(PerfEvent::LlcMisses.bytes_per_event().is_power_of_two());
/// assert_eq!(PerfEvent::TaskClock.bytes_per_event(), 1);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PerfEvent {
    /// Last-level-cache misses (`PERF_COUNT_HW_CACHE_MISSES`), one LLC line each (the line
    /// size from sysfs, as the runtime's own counters use it; 64 when sysfs does not say):
    /// the memory traffic the policy schedules on. Needs a PMU.
    LlcMisses,
    /// Software: nanoseconds on CPU. Exists on every kernel; used to test the plumbing.
    TaskClock,
    /// Software: page faults. Exists on every kernel; used to test the plumbing.
    PageFaults,
}

impl PerfEvent {
    /// Multiplier from the event's count to bytes (1: the count is the unit itself).
    pub fn bytes_per_event(self) -> u64 {
        match self {
            PerfEvent::LlcMisses => partita_numa::triad::llc_line_bytes().unwrap_or(64),
            PerfEvent::TaskClock | PerfEvent::PageFaults => 1,
        }
    }

    fn builder(self) -> Builder<'static> {
        fn b(e: impl Event) -> Builder<'static> {
            Builder::new(e)
        }
        match self {
            PerfEvent::LlcMisses => b(Hardware::CACHE_MISSES),
            PerfEvent::TaskClock => b(Software::TASK_CLOCK),
            PerfEvent::PageFaults => b(Software::PAGE_FAULTS),
        }
    }
}

/// The `perf-event` counter source.
#[derive(Debug)]
pub struct PerfSource {
    event: PerfEvent,
    apps: BTreeMap<AppId, Vec<Counter>>,
}

impl PerfSource {
    /// The production source: LLC misses. Fails (with the reason) when the event cannot be
    /// opened on this process, e.g. on a virtual machine without a PMU.
    ///
    /// ```
    /// match partita_manager::counters::PerfSource::hardware() {
    ///     Ok(_) => println!("PMU present"),
    ///     Err(e) => println!("perf-event skipped: {e}"),
    /// }
    /// ```
    pub fn hardware() -> Result<PerfSource, CounterError> {
        PerfSource::with_event(PerfEvent::LlcMisses)
    }

    /// A source counting `event`; checks once that the event can be opened on this process.
    ///
    /// ```
    /// let s = partita_manager::counters::PerfSource::with_event(partita_manager::counters::PerfEvent::TaskClock);
    /// assert!(s.is_ok() || std::fs::metadata("/proc/sys/kernel/perf_event_paranoid").is_err());
    /// ```
    pub fn with_event(event: PerfEvent) -> Result<PerfSource, CounterError> {
        event.builder().observe_self().build().map_err(|e| {
            let hint = match (event, e.raw_os_error()) {
                (PerfEvent::LlcMisses, Some(libc::ENOENT | libc::EOPNOTSUPP | libc::ENODEV)) => {
                    " (no hardware PMU exposed: a virtual machine without PMU passthrough?)"
                }
                (_, Some(libc::EACCES | libc::EPERM)) => {
                    " (not permitted: see /proc/sys/kernel/perf_event_paranoid)"
                }
                _ => "",
            };
            CounterError::Unavailable(format!("perf_event_open({event:?}): {e}{hint}"))
        })?;
        Ok(PerfSource {
            event,
            apps: BTreeMap::new(),
        })
    }

    /// Counters open for an application (one per thread present at attach).
    pub fn counters_of(&self, id: AppId) -> usize {
        self.apps.get(&id).map_or(0, Vec::len)
    }
}

fn tasks_of(pid: i32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return vec![pid];
    };
    let mut tids: Vec<i32> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    tids.sort_unstable();
    tids
}

impl CounterSource for PerfSource {
    fn name(&self) -> &'static str {
        "perf-event"
    }

    fn attach(&mut self, app: &AppRef) -> Result<(), CounterError> {
        let mut counters = Vec::new();
        for tid in tasks_of(app.pid) {
            match self
                .event
                .builder()
                .observe_pid(tid)
                .inherit(true)
                .enabled(true)
                .build()
            {
                Ok(c) => counters.push(c),
                // The thread exited between listing and opening: nothing to count.
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
                Err(e) => {
                    return Err(CounterError::Io {
                        call: format!("perf_event_open(pid {tid}, {:?})", self.event),
                        source: e,
                    })
                }
            }
        }
        self.apps.insert(app.id, counters);
        Ok(())
    }

    fn read(&mut self, app: &AppRef) -> Result<u64, CounterError> {
        let Some(counters) = self.apps.get_mut(&app.id) else {
            return Ok(0);
        };
        let mut sum = 0u64;
        for c in counters.iter_mut() {
            sum = sum.saturating_add(c.read().map_err(CounterError::io("read(perf counter)"))?);
        }
        Ok(sum.saturating_mul(self.event.bytes_per_event()))
    }

    fn detach(&mut self, id: AppId) {
        // Dropping the counters closes their descriptors.
        self.apps.remove(&id);
    }
}
