//! Whether the application's runtime measures its own memory traffic, and if not why: a
//! compact code the runtime writes into its half of the control page
//! ([`AppSide::traffic_status`](crate::page::AppSide::traffic_status)) and `partita status`
//! shows beside the counter source (`self-report (runtime: measured-skip no-pmu)`).
//!
//! A code, not text: the page holds atomics only, and the manager must render a fixed set of
//! names it can document. The runtime logs the full reason (the failing call and its errno)
//! itself. 0 is "not reported" (a client that does not measure, such as a jobserver build,
//! or a runtime older than the field), so a zeroed page means nothing was said; a code
//! this side does not know (a newer runtime) is shown as `code N`, never refused.

use std::fmt;

/// The runtime's own traffic measurement, as carried by the page.
///
/// ```
/// use partita_protocol::traffic::TrafficStatus;
/// let s = TrafficStatus::SkipNoPmu;
/// assert_eq!(TrafficStatus::from_code(s.code()), Some(s));
/// assert_eq!(s.to_string(), "measured-skip no-pmu");
/// assert_eq!(TrafficStatus::from_code(0), Some(TrafficStatus::NotReported));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum TrafficStatus {
    /// Nothing said (0: a zeroed page).
    NotReported = 0,
    /// Every worker counts last-level-cache misses.
    CountingLlcMisses = 1,
    /// Every worker counts page faults (the software stand-in used by tests).
    CountingPageFaults = 2,
    /// Skipped: the CPU exposes no PMU for the hardware event (a VM without passthrough).
    SkipNoPmu = 16,
    /// Skipped: perf events are not permitted (`perf_event_paranoid`, seccomp, capabilities).
    SkipNotPermitted = 17,
    /// Skipped: turned off (`PARTITA_TRAFFIC_EVENT=off`).
    SkipOff = 18,
    /// Skipped: the event setting is invalid (unknown name, not UTF-8).
    SkipBadConfig = 19,
    /// Skipped: `perf_event_open` failed for another reason.
    SkipError = 20,
}

impl TrafficStatus {
    /// Every status, in code order.
    pub const ALL: [TrafficStatus; 8] = [
        TrafficStatus::NotReported,
        TrafficStatus::CountingLlcMisses,
        TrafficStatus::CountingPageFaults,
        TrafficStatus::SkipNoPmu,
        TrafficStatus::SkipNotPermitted,
        TrafficStatus::SkipOff,
        TrafficStatus::SkipBadConfig,
        TrafficStatus::SkipError,
    ];

    /// The page's value.
    pub fn code(self) -> u32 {
        self as u32
    }

    /// The status of a page value; `None` for a code this side does not know.
    pub fn from_code(code: u32) -> Option<TrafficStatus> {
        TrafficStatus::ALL.into_iter().find(|s| s.code() == code)
    }

    /// Whether the runtime measures (the manager's `self-report` then carries measured bytes).
    pub fn is_counting(self) -> bool {
        matches!(
            self,
            TrafficStatus::CountingLlcMisses | TrafficStatus::CountingPageFaults
        )
    }

    /// The name `partita status` shows: `measured EVENT`, `measured-skip REASON`, or
    /// `not-reported`.
    pub fn name(self) -> &'static str {
        match self {
            TrafficStatus::NotReported => "not-reported",
            TrafficStatus::CountingLlcMisses => "measured llc-misses",
            TrafficStatus::CountingPageFaults => "measured page-faults",
            TrafficStatus::SkipNoPmu => "measured-skip no-pmu",
            TrafficStatus::SkipNotPermitted => "measured-skip not-permitted",
            TrafficStatus::SkipOff => "measured-skip off",
            TrafficStatus::SkipBadConfig => "measured-skip bad-config",
            TrafficStatus::SkipError => "measured-skip error",
        }
    }
}

impl fmt::Display for TrafficStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The name of a page value, including codes this side does not know (`code N`).
///
/// ```
/// use partita_protocol::traffic::describe;
/// assert_eq!(describe(16), "measured-skip no-pmu");
/// assert_eq!(describe(999), "code 999");
/// ```
pub fn describe(code: u32) -> String {
    TrafficStatus::from_code(code).map_or_else(|| format!("code {code}"), |s| s.name().into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn codes_and_names_are_distinct() {
        let codes: std::collections::BTreeSet<u32> =
            TrafficStatus::ALL.iter().map(|s| s.code()).collect();
        let names: std::collections::BTreeSet<&str> =
            TrafficStatus::ALL.iter().map(|s| s.name()).collect();
        assert_eq!(codes.len(), TrafficStatus::ALL.len());
        assert_eq!(names.len(), TrafficStatus::ALL.len());
    }

    proptest! {
        /// Every page value decodes to its own status or to `code N`; none is refused.
        #[test]
        fn every_code_round_trips_or_is_named(code in any::<u32>()) {
            match TrafficStatus::from_code(code) {
                Some(s) => {
                    prop_assert_eq!(s.code(), code);
                    prop_assert_eq!(describe(code), s.name());
                }
                None => prop_assert_eq!(describe(code), format!("code {code}")),
            }
        }
    }
}
