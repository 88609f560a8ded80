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
//!
//! The events and the bytes one stands for are partita-numa's [`TrafficEvent`], which the
//! runtime's own counters (the `self-report` source's measured bytes) count too.

use super::{AppRef, CounterError, CounterSource};
use crate::alloc::AppId;
pub use partita_numa::traffic_event::TrafficEvent;
use perf_event::Counter;
use std::collections::BTreeMap;

/// The `perf-event` counter source.
#[derive(Debug)]
pub struct PerfSource {
    event: TrafficEvent,
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
        PerfSource::with_event(TrafficEvent::LlcMisses)
    }

    /// A source counting `event`; checks once that the event can be opened on this process.
    ///
    /// ```
    /// use partita_manager::counters::{PerfSource, TrafficEvent};
    /// let s = PerfSource::with_event(TrafficEvent::PageFaults);
    /// assert!(s.is_ok() || std::fs::metadata("/proc/sys/kernel/perf_event_paranoid").is_err());
    /// ```
    pub fn with_event(event: TrafficEvent) -> Result<PerfSource, CounterError> {
        event.builder().observe_self().build().map_err(|e| {
            let (_, hint) = event.open_failure(e.raw_os_error());
            CounterError::Unavailable(format!("perf_event_open({event}): {e}{hint}"))
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
                        call: format!("perf_event_open(pid {tid}, {})", self.event),
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
