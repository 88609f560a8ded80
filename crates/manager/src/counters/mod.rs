//! Memory-traffic counters for the bandwidth policy: several sources behind one interface
//! ([`CounterSource`]), tried in order by a [`Chain`] that records why each one was skipped.
//!
//! | name | what it reads | available when |
//! |---|---|---|
//! | `perf-event` | LLC misses × the LLC line size (sysfs; 64 if unknown), every thread of the application (inherited) | the CPU has a PMU the kernel exposes |
//! | `resctrl` | `mbm_total_bytes` of one monitoring group per application | `/sys/fs/resctrl` is mounted with MBM |
//! | `self-report` | bytes the application reports in its control page | always |
//! | `none` | nothing: the policy degrades to equipartition | every configured source was skipped |
//!
//! Every source reports a cumulative byte count per application; [`Chain::sample`] turns two
//! successive readings into a rate (bytes per second). A source that fails mid-run is dropped
//! and the next one takes over (logged, and shown by `partita status`).

mod perf;
mod resctrl;
mod selfreport;

pub use perf::{PerfSource, TrafficEvent};
pub use resctrl::ResctrlSource;
pub use selfreport::SelfReport;

use crate::alloc::AppId;
use std::collections::BTreeMap;
use std::fmt;

/// Names of the sources a configuration may list, in the default order (defined with the
/// configuration, which this module depends on and not the other way round).
pub use crate::config::COUNTER_SOURCES as SOURCE_NAMES;

/// Name shown when no source is usable.
pub const NONE: &str = "none";

/// What a source needs to know about an application.
///
/// ```
/// let a = partita_manager::counters::AppRef { id: 1, pid: 42, reported_bytes: 0 };
/// assert_eq!(a.pid, 42);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppRef {
    /// Manager-assigned id.
    pub id: AppId,
    /// Process id.
    pub pid: i32,
    /// Cumulative bytes the application reported in its control page.
    pub reported_bytes: u64,
}

/// Why a source could not be used or stopped working.
///
/// ```
/// let e = partita_manager::counters::CounterError::Unavailable("no PMU".into());
/// assert!(e.to_string().contains("no PMU"));
/// ```
#[derive(Debug, thiserror::Error)]
pub enum CounterError {
    /// The source does not exist on this machine (checked once, at start).
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// A system call or file operation failed.
    #[error("{call}: {source}")]
    Io {
        /// The call or file.
        call: String,
        /// The OS error.
        source: std::io::Error,
    },
}

impl CounterError {
    pub(crate) fn io(call: impl Into<String>) -> impl FnOnce(std::io::Error) -> CounterError {
        let call = call.into();
        move |source| CounterError::Io { call, source }
    }
}

/// One way of measuring an application's memory traffic.
pub trait CounterSource: Send + fmt::Debug {
    /// `perf-event`, `resctrl` or `self-report`.
    fn name(&self) -> &'static str;
    /// Start counting for an application (called once, before its first `read`).
    fn attach(&mut self, app: &AppRef) -> Result<(), CounterError>;
    /// Cumulative bytes (or the event's unit) moved by the application since `attach`.
    fn read(&mut self, app: &AppRef) -> Result<u64, CounterError>;
    /// Stop counting (the application left); releases descriptors and groups.
    fn detach(&mut self, id: AppId);
}

/// A source that was not used, and why.
///
/// ```
/// let s = partita_manager::counters::Skipped { name: "resctrl".into(), reason: "not mounted".into() };
/// assert_eq!(s.to_string(), "resctrl: not mounted");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Skipped {
    /// Source name.
    pub name: String,
    /// Why.
    pub reason: String,
}

impl fmt::Display for Skipped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.name, self.reason)
    }
}

/// Build the source named `name` as it exists on this machine.
///
/// ```
/// assert!(partita_manager::counters::open_source("self-report").is_ok());
/// assert!(partita_manager::counters::open_source("pmu").is_err());
/// ```
pub fn open_source(name: &str) -> Result<Box<dyn CounterSource>, CounterError> {
    match name {
        "perf-event" => Ok(Box::new(PerfSource::hardware()?)),
        "resctrl" => Ok(Box::new(ResctrlSource::system()?)),
        "self-report" => Ok(Box::new(SelfReport)),
        other => Err(CounterError::Unavailable(format!(
            "unknown counter source {other:?}"
        ))),
    }
}

/// The sources in order, the one in use, and the skipped ones with their reasons.
#[derive(Debug)]
pub struct Chain {
    sources: Vec<Box<dyn CounterSource>>,
    skipped: Vec<Skipped>,
    attached: BTreeMap<AppId, Reading>,
}

#[derive(Debug, Clone, Copy)]
struct Reading {
    value: Option<u64>,
    at_ns: u64,
}

impl Chain {
    /// Open the named sources in order; those that cannot be opened are recorded as skipped.
    ///
    /// ```
    /// let c = partita_manager::counters::Chain::detect(&["self-report".to_string()]);
    /// assert_eq!(c.source(), "self-report");
    /// ```
    pub fn detect(names: &[String]) -> Chain {
        let mut sources = Vec::new();
        let mut skipped = Vec::new();
        for name in names {
            match open_source(name) {
                Ok(s) => sources.push(s),
                Err(e) => {
                    tracing::info!(source = %name, reason = %e, "counter source skipped");
                    skipped.push(Skipped {
                        name: name.clone(),
                        reason: e.to_string(),
                    });
                }
            }
        }
        Chain::from_sources(sources, skipped)
    }

    /// A chain over already-built sources (tests, or a caller with its own probing).
    ///
    /// ```
    /// let c = partita_manager::counters::Chain::from_sources(vec![], vec![]);
    /// assert_eq!(c.source(), "none");
    /// ```
    pub fn from_sources(sources: Vec<Box<dyn CounterSource>>, skipped: Vec<Skipped>) -> Chain {
        Chain {
            sources,
            skipped,
            attached: BTreeMap::new(),
        }
    }

    /// The source in use (`none` when every one was skipped).
    pub fn source(&self) -> &'static str {
        self.sources.first().map_or(NONE, |s| s.name())
    }

    /// Sources not used, with the reasons, in the order they were tried.
    pub fn skipped(&self) -> &[Skipped] {
        &self.skipped
    }

    /// Read every application once (one quantum): attaches new ones, detaches those gone, and
    /// returns each application's rate in bytes per second over the time since its previous
    /// reading (absent on its first reading). When the source in use fails it is dropped, the
    /// reason recorded, and the next source takes over from the next quantum.
    pub fn sample(&mut self, apps: &[AppRef], now_ns: u64) -> BTreeMap<AppId, f64> {
        let gone: Vec<AppId> = self
            .attached
            .keys()
            .filter(|id| !apps.iter().any(|a| a.id == **id))
            .copied()
            .collect();
        for id in gone {
            self.attached.remove(&id);
            if let Some(s) = self.sources.first_mut() {
                s.detach(id);
            }
        }
        let mut rates = BTreeMap::new();
        let Some(src) = self.sources.first_mut() else {
            return rates;
        };
        let mut failure = None;
        for app in apps {
            match read_one(src.as_mut(), &mut self.attached, app, now_ns) {
                Ok(Some(rate)) => {
                    rates.insert(app.id, rate);
                }
                Ok(None) => {}
                Err(e) if failure.is_none() => failure = Some(e),
                Err(_) => {}
            }
        }
        if let Some(e) = failure {
            self.fail(e);
            return BTreeMap::new();
        }
        rates
    }

    /// Drop the source in use after a failure; the next one starts afresh.
    fn fail(&mut self, e: CounterError) {
        let mut failed = self.sources.remove(0);
        for id in self.attached.keys() {
            failed.detach(*id);
        }
        self.attached.clear();
        let next = self.source();
        tracing::warn!(source = failed.name(), error = %e, next, "counter source failed; falling back");
        self.skipped.push(Skipped {
            name: failed.name().to_string(),
            reason: format!("failed while running: {e}"),
        });
    }
}

fn read_one(
    src: &mut dyn CounterSource,
    attached: &mut BTreeMap<AppId, Reading>,
    app: &AppRef,
    now_ns: u64,
) -> Result<Option<f64>, CounterError> {
    if let std::collections::btree_map::Entry::Vacant(e) = attached.entry(app.id) {
        src.attach(app)?;
        e.insert(Reading {
            value: None,
            at_ns: now_ns,
        });
    }
    let value = src.read(app)?;
    // `attached` holds the id: inserted just above when missing.
    let r = attached.get_mut(&app.id).expect("attached above");
    let rate = match r.value {
        Some(before) if now_ns > r.at_ns => {
            Some(value.saturating_sub(before) as f64 * 1e9 / (now_ns - r.at_ns) as f64)
        }
        _ => None,
    };
    *r = Reading {
        value: Some(value),
        at_ns: now_ns,
    };
    Ok(rate)
}

#[cfg(test)]
mod tests;
