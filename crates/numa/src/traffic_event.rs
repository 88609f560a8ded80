//! The perf events that measure a program's memory traffic, and the bytes one event stands
//! for: the one definition behind both counters of it, the runtime's own (every worker counts
//! itself, `PARTITA_TRAFFIC_EVENT`) and the manager's `perf-event` counter source (it counts
//! an application's threads from outside). Both report bytes to the bandwidth policy, which
//! adds and compares them with the machine's calibrated bandwidth (`partita calibrate`), so
//! they must agree on what an event is worth.
//!
//! Why here: the conversion needs the last-level cache's line size, which this crate reads
//! from sysfs ([`crate::triad::llc_line_bytes`]), and both counters' crates already depend on
//! this one (partita-protocol, below it, is also built for other platforms, where neither
//! perf events nor sysfs exist).

use perf_event::Builder;
use perf_event::events::{Hardware, Software};
use std::fmt;

/// What a traffic counter counts.
///
/// ```
/// use partita_numa::traffic_event::TrafficEvent;
/// assert_eq!(TrafficEvent::parse("page-faults"), Ok(TrafficEvent::PageFaults));
/// assert!(TrafficEvent::parse("cycles").unwrap_err().contains("llc-misses"));
/// assert!(TrafficEvent::LlcMisses.bytes_per_event().is_power_of_two());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrafficEvent {
    /// Last-level-cache misses (`PERF_COUNT_HW_CACHE_MISSES`), one LLC line each: the traffic
    /// the bandwidth policy schedules on. Needs a PMU.
    LlcMisses,
    /// Page faults (software event, every kernel), one page each: the stand-in tests use for
    /// the hardware event, through the same code paths.
    PageFaults,
}

impl TrafficEvent {
    /// Parse an event name (`llc-misses`, `page-faults`); the error names the accepted values.
    pub fn parse(s: &str) -> Result<TrafficEvent, String> {
        match s {
            "llc-misses" => Ok(TrafficEvent::LlcMisses),
            "page-faults" => Ok(TrafficEvent::PageFaults),
            other => Err(format!(
                "{other:?}: unknown event (llc-misses, page-faults)"
            )),
        }
    }

    /// Bytes one event stands for. A miss moves one line of the last-level cache (64 where
    /// sysfs does not say: the line of every current x86 and most ARM cores). A fault maps one
    /// page, which the kernel zero-fills or reads in: at least a page of memory written, so a
    /// page's bytes — not 1, which made the manager's count of a program 4096 times smaller
    /// than the same program's own report of the same event.
    pub fn bytes_per_event(self) -> u64 {
        match self {
            TrafficEvent::LlcMisses => crate::triad::llc_line_bytes().unwrap_or(64),
            TrafficEvent::PageFaults => crate::page_size() as u64,
        }
    }

    /// A perf-event builder for this event (the caller chooses whom it observes).
    pub fn builder(self) -> Builder<'static> {
        match self {
            TrafficEvent::LlcMisses => Builder::new(Hardware::CACHE_MISSES),
            TrafficEvent::PageFaults => Builder::new(Software::PAGE_FAULTS),
        }
    }

    /// Why `perf_event_open` of this event failed with `errno`, for a log line: the likely
    /// cause of the usual answers (`""` for the others).
    ///
    /// ```
    /// use partita_numa::traffic_event::{OpenFailure, TrafficEvent};
    /// let (why, hint) = TrafficEvent::LlcMisses.open_failure(Some(libc::ENOENT));
    /// assert_eq!(why, OpenFailure::NoPmu);
    /// assert!(hint.contains("PMU"));
    /// // A software event missing is not a missing PMU.
    /// assert_eq!(TrafficEvent::PageFaults.open_failure(Some(libc::ENOENT)).0, OpenFailure::Other);
    /// ```
    pub fn open_failure(self, errno: Option<i32>) -> (OpenFailure, &'static str) {
        match (self, errno) {
            (TrafficEvent::LlcMisses, Some(libc::ENOENT | libc::EOPNOTSUPP | libc::ENODEV)) => (
                OpenFailure::NoPmu,
                " (no hardware PMU exposed: a virtual machine without PMU passthrough?)",
            ),
            (_, Some(libc::EACCES | libc::EPERM)) => (
                OpenFailure::NotPermitted,
                " (not permitted: see /proc/sys/kernel/perf_event_paranoid)",
            ),
            _ => (OpenFailure::Other, ""),
        }
    }
}

/// Why a traffic event could not be opened ([`TrafficEvent::open_failure`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenFailure {
    /// The CPU exposes no PMU for the hardware event (a VM without passthrough).
    NoPmu,
    /// Perf events are not permitted (`perf_event_paranoid`, seccomp, capabilities).
    NotPermitted,
    /// Another reason (out of descriptors, ...).
    Other,
}

impl fmt::Display for TrafficEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TrafficEvent::LlcMisses => "llc-misses",
            TrafficEvent::PageFaults => "page-faults",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back() {
        for e in [TrafficEvent::LlcMisses, TrafficEvent::PageFaults] {
            assert_eq!(TrafficEvent::parse(&e.to_string()), Ok(e));
        }
    }

    #[test]
    fn errnos_map_to_their_causes() {
        use TrafficEvent::*;
        let why = |e: TrafficEvent, errno| e.open_failure(Some(errno)).0;
        for errno in [libc::ENOENT, libc::EOPNOTSUPP, libc::ENODEV] {
            assert_eq!(why(LlcMisses, errno), OpenFailure::NoPmu);
            assert_eq!(why(PageFaults, errno), OpenFailure::Other);
        }
        for e in [LlcMisses, PageFaults] {
            assert_eq!(why(e, libc::EACCES), OpenFailure::NotPermitted);
            assert_eq!(why(e, libc::EPERM), OpenFailure::NotPermitted);
            assert_eq!(why(e, libc::EMFILE), OpenFailure::Other);
            assert_eq!(e.open_failure(None).0, OpenFailure::Other);
        }
    }

    #[test]
    fn line_and_page_sizes_are_sane() {
        let line = TrafficEvent::LlcMisses.bytes_per_event();
        assert!(
            (16..=512).contains(&line) && line.is_power_of_two(),
            "{line}"
        );
        assert!(TrafficEvent::PageFaults.bytes_per_event() >= 4096);
    }
}
