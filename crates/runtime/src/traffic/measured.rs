//! Traffic the runtime measures itself: every worker thread opens a perf-event counter on
//! itself when it starts (with the `perf-event2` crate, as partita-manager's `perf-event`
//! counter source does) and hands it to a process-wide list; the manager client sums the list
//! each time it publishes (at least once per quantum). A worker that exits adds its final count
//! to a retired total, so the published value never goes backwards.
//!
//! The event: last-level-cache misses, each one line of the LLC moved (the line size from
//! sysfs), where the CPU exposes a PMU. Where it does not (virtual machines without PMU
//! passthrough), nothing is counted and [`measured_traffic`] says why. `page-faults` (one page
//! each) exists on every kernel and stands in for the hardware event in tests, through the same
//! code path. The event is chosen once per process: by [`measure_traffic_with`] before the
//! first worker starts, else by the environment variable `PARTITA_TRAFFIC_EVENT`
//! (`llc-misses`, the default; `page-faults`; `off`). The events and what one is worth in
//! bytes are partita-numa's [`TrafficEvent`], which the manager's `perf-event` counter
//! source counts too.

use partita_numa::traffic_event::OpenFailure;
use partita_numa::traffic_event::TrafficEvent as Event;
use partita_protocol::traffic::TrafficStatus;
use perf_event::Counter;
use std::sync::{Mutex, MutexGuard, OnceLock};

/// The event the workers count, partita-runtime's name for partita-numa's
/// [`partita_numa::traffic_event::TrafficEvent`]: what each event is and how many bytes it
/// stands for are defined there, once, for the runtime and the manager's `perf-event` source.
/// The runtime keeps its own type (converting both ways) so that its public API is its own:
/// `cargo-semver-checks` cannot follow a re-export of another crate's type, and reported this
/// one removed (`scripts/test.d/68-semver.sh`).
///
/// ```
/// use partita_runtime::TrafficEvent;
/// assert_eq!(TrafficEvent::parse("page-faults"), Ok(TrafficEvent::PageFaults));
/// assert!(TrafficEvent::parse("cycles").unwrap_err().contains("llc-misses"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrafficEvent {
    /// Last-level-cache misses (`PERF_COUNT_HW_CACHE_MISSES`), one LLC line each. Needs a PMU.
    LlcMisses,
    /// Page faults (software event, every kernel), one page each: the test stand-in.
    PageFaults,
}

impl From<Event> for TrafficEvent {
    fn from(e: Event) -> Self {
        match e {
            Event::LlcMisses => TrafficEvent::LlcMisses,
            Event::PageFaults => TrafficEvent::PageFaults,
        }
    }
}

impl From<TrafficEvent> for Event {
    fn from(e: TrafficEvent) -> Self {
        match e {
            TrafficEvent::LlcMisses => Event::LlcMisses,
            TrafficEvent::PageFaults => Event::PageFaults,
        }
    }
}

impl std::fmt::Display for TrafficEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        Event::from(*self).fmt(f)
    }
}

impl TrafficEvent {
    /// Parse a `PARTITA_TRAFFIC_EVENT` value (`off` is handled by the caller); the error names
    /// the variable and the accepted values.
    pub fn parse(s: &str) -> Result<TrafficEvent, String> {
        Event::parse(s)
            .map(TrafficEvent::from)
            .map_err(|e| format!("{ENV}: {e}"))
    }

    /// Bytes one event stands for: the LLC line size, or the page size.
    pub fn bytes_per_event(self) -> u64 {
        Event::from(self).bytes_per_event()
    }

    fn builder(self) -> perf_event::Builder<'static> {
        Event::from(self).builder()
    }

    fn open_failure(self, errno: Option<i32>) -> (OpenFailure, &'static str) {
        Event::from(self).open_failure(errno)
    }
}

/// The environment variable that chooses the event.
const ENV: &str = "PARTITA_TRAFFIC_EVENT";

/// Whether the runtime measures traffic, and how; or why not.
///
/// ```
/// match partita_runtime::measured_traffic() {
///     partita_runtime::MeasuredTraffic::Counting { event, bytes_per_event } => {
///         println!("counting {event}, {bytes_per_event} bytes each")
///     }
///     partita_runtime::MeasuredTraffic::Skipped(why) => println!("not measured: {why}"),
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MeasuredTraffic {
    /// Every worker counts `event`; each one is `bytes_per_event` bytes.
    Counting {
        /// The event.
        event: TrafficEvent,
        /// Bytes per event.
        bytes_per_event: u64,
    },
    /// Nothing is measured, for this reason.
    Skipped(String),
}

/// The choice, with the compact code the control page carries (`partita status` shows it
/// beside the counter source; the text stays in this process's log).
static CHOICE: OnceLock<(MeasuredTraffic, TrafficStatus)> = OnceLock::new();

/// Choose the event before any worker has started (tests; programs that know better than the
/// environment). Returns the choice in force: `event`'s, or the one made earlier (by an
/// earlier call or by the first worker of the process, from `PARTITA_TRAFFIC_EVENT`).
pub fn measure_traffic_with(event: TrafficEvent) -> MeasuredTraffic {
    CHOICE.get_or_init(|| probe(event)).0.clone()
}

/// What the runtime measures in this process (decided when its first worker starts, or now).
pub fn measured_traffic() -> MeasuredTraffic {
    choice().clone()
}

/// [`measured_traffic`] as the code the control page carries (`AppSide::traffic_status`).
///
/// ```
/// let s = partita_runtime::measured_traffic_status();
/// assert_eq!(
///     s.is_counting(),
///     matches!(partita_runtime::measured_traffic(), partita_runtime::MeasuredTraffic::Counting { .. })
/// );
/// ```
pub fn measured_traffic_status() -> TrafficStatus {
    chosen().1
}

fn choice() -> &'static MeasuredTraffic {
    &chosen().0
}

fn chosen() -> &'static (MeasuredTraffic, TrafficStatus) {
    CHOICE.get_or_init(|| {
        let skip = |status, why: String| (MeasuredTraffic::Skipped(why), status);
        let m = match std::env::var(ENV) {
            Err(std::env::VarError::NotPresent) => probe(TrafficEvent::LlcMisses),
            Err(std::env::VarError::NotUnicode(v)) => skip(
                TrafficStatus::SkipBadConfig,
                format!("{ENV}={v:?}: not UTF-8"),
            ),
            Ok(v) if v == "off" => skip(TrafficStatus::SkipOff, format!("{ENV}=off")),
            Ok(v) => match TrafficEvent::parse(&v) {
                Ok(e) => probe(e),
                Err(_) => skip(TrafficStatus::SkipBadConfig, unknown_event(&v)),
            },
        };
        if let MeasuredTraffic::Skipped(why) = &m.0 {
            tracing::info!("partita-runtime measures no memory traffic: {why}");
        }
        m
    })
}

/// Can `event` be opened on this thread? The reason names the call and, for the usual
/// errors, the likely cause; the code classifies it the same way.
fn probe(event: TrafficEvent) -> (MeasuredTraffic, TrafficStatus) {
    match event.builder().build() {
        Ok(_) => (
            MeasuredTraffic::Counting {
                event,
                bytes_per_event: event.bytes_per_event(),
            },
            match event {
                TrafficEvent::LlcMisses => TrafficStatus::CountingLlcMisses,
                TrafficEvent::PageFaults => TrafficStatus::CountingPageFaults,
            },
        ),
        Err(e) => {
            let (status, hint) = skip_reason(event, e.raw_os_error());
            (
                MeasuredTraffic::Skipped(format!("perf_event_open({event}): {e}{hint}")),
                status,
            )
        }
    }
}

/// The reason an unknown `PARTITA_TRAFFIC_EVENT` value gives: the variable and the choices.
fn unknown_event(value: &str) -> String {
    format!("{ENV}={value:?}: unknown event (llc-misses, page-faults, off)")
}

/// Why `perf_event_open(event)` failed with `errno`: the page's code and a hint for the log.
fn skip_reason(event: TrafficEvent, errno: Option<i32>) -> (TrafficStatus, &'static str) {
    let (why, hint) = event.open_failure(errno);
    let status = match why {
        OpenFailure::NoPmu => TrafficStatus::SkipNoPmu,
        OpenFailure::NotPermitted => TrafficStatus::SkipNotPermitted,
        OpenFailure::Other => TrafficStatus::SkipError,
    };
    (status, hint)
}

/// The open counters (a slot per live worker that could open one; `last` keeps the latest
/// good reading in case a read fails) and the counts of workers that exited.
struct Counters {
    slots: Vec<Option<(Counter, u64)>>,
    retired: u64,
}

static COUNTERS: Mutex<Counters> = Mutex::new(Counters {
    slots: Vec::new(),
    retired: 0,
});

fn counters() -> MutexGuard<'static, Counters> {
    // The list stays consistent even if a holder panicked (every update is one assignment).
    COUNTERS.lock().unwrap_or_else(|e| e.into_inner())
}

/// A worker's counter, open while the worker runs (held by its main loop).
pub(crate) struct WorkerCounter {
    slot: Option<usize>,
}

impl WorkerCounter {
    /// Open a counter on the calling thread, if the process measures traffic. A failure here
    /// (say, out of descriptors) loses this worker's traffic, not the worker.
    pub(crate) fn open() -> WorkerCounter {
        let MeasuredTraffic::Counting { event, .. } = *choice() else {
            return WorkerCounter { slot: None };
        };
        let counter = match event.builder().enabled(true).build() {
            Ok(c) => c,
            Err(e) => {
                tracing::debug!("perf_event_open({event}) for a worker: {e}");
                return WorkerCounter { slot: None };
            }
        };
        let mut list = counters();
        let slot = match list.slots.iter().position(Option::is_none) {
            Some(i) => i,
            None => {
                list.slots.push(None);
                list.slots.len() - 1
            }
        };
        list.slots[slot] = Some((counter, 0));
        WorkerCounter { slot: Some(slot) }
    }
}

impl Drop for WorkerCounter {
    fn drop(&mut self) {
        let Some(slot) = self.slot else { return };
        let mut list = counters();
        if let Some((mut c, last)) = list.slots.get_mut(slot).and_then(Option::take) {
            let last_count = c.read().unwrap_or(last).max(last);
            list.retired = list.retired.saturating_add(last_count);
        }
    }
}

/// Bytes the workers' counters have seen since the process started (0 when nothing is
/// measured). One `read` per live worker.
pub fn measured_bytes() -> u64 {
    let MeasuredTraffic::Counting {
        bytes_per_event, ..
    } = *choice()
    else {
        return 0;
    };
    let mut list = counters();
    let mut events = list.retired;
    for (c, last) in list.slots.iter_mut().flatten() {
        *last = c.read().unwrap_or(*last).max(*last);
        events = events.saturating_add(*last);
    }
    events.saturating_mul(bytes_per_event)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hardware_event_counts_or_says_why() {
        match probe(TrafficEvent::LlcMisses) {
            (
                MeasuredTraffic::Counting {
                    bytes_per_event, ..
                },
                status,
            ) => {
                assert!(bytes_per_event.is_power_of_two());
                assert_eq!(status, TrafficStatus::CountingLlcMisses);
            }
            (MeasuredTraffic::Skipped(why), status) => {
                assert!(why.starts_with("perf_event_open(llc-misses)"), "{why}");
                assert!(!status.is_counting(), "{status}");
                // The code and the text agree on the cause.
                let pmu = why.contains("no hardware PMU");
                assert_eq!(pmu, status == TrafficStatus::SkipNoPmu, "{why} vs {status}");
            }
        }
    }

    #[test]
    fn errnos_map_to_their_codes() {
        use TrafficEvent::*;
        let code = |e, errno| skip_reason(e, Some(errno)).0;
        for errno in [libc::ENOENT, libc::EOPNOTSUPP, libc::ENODEV] {
            assert_eq!(code(LlcMisses, errno), TrafficStatus::SkipNoPmu);
            // A software event missing is not a missing PMU.
            assert_eq!(code(PageFaults, errno), TrafficStatus::SkipError);
        }
        for e in [LlcMisses, PageFaults] {
            assert_eq!(code(e, libc::EACCES), TrafficStatus::SkipNotPermitted);
            assert_eq!(code(e, libc::EPERM), TrafficStatus::SkipNotPermitted);
            assert_eq!(code(e, libc::EMFILE), TrafficStatus::SkipError);
            assert_eq!(skip_reason(e, None).0, TrafficStatus::SkipError);
        }
    }

    #[test]
    fn unknown_event_names_the_variable_and_the_choices() {
        let e = unknown_event("");
        assert!(
            e.contains(ENV) && e.contains("page-faults") && e.contains("off"),
            "{e}"
        );
    }
}
