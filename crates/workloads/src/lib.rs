//! # partita-workloads
//!
//! The synthetic applications of the multiprogramming experiment (`docs/design/experiments.md`,
//! after Tucker 1993 ch. 7 and the NANOS paper's workloads):
//!
//! | app | shape | parallelism |
//! |---|---|---|
//! | [`App::Ocean`] | red-black SOR on a grid between L2 and LLC size | elastic team, a spin-then-block barrier per half sweep |
//! | [`App::Mp3d`] | particles streamed over ~2× the LLC, no reuse | elastic team, a barrier per chunk |
//! | [`App::Cholesky`] | tiled Cholesky factorisation: a DAG of tiny dependent tasks | tasks spawned as their inputs complete |
//! | [`App::Water`] | pairwise forces on molecules that fit in L2 | one fork-join region per time step |
//! | [`App::Locus`] | independent routing tasks updating a shared table under a lock | one task per wire |
//! | [`App::Pmake`] | separate processes alternating file I/O and CPU bursts | uncontrolled processes, `make -jN` style |
//!
//! plus two helpers for the demo's scenarios: [`App::Hog`] (an uncontrolled CPU-bound loop) and
//! [`App::Sleeper`] (measures its wake-up latency).
//!
//! Every application computes a checksum of its result that does not depend on how many
//! workers took part; [`reference()`] computes it with a plain sequential run, so a fast wrong
//! answer is caught.
//!
//! ```
//! use partita_workloads::{App, Params};
//! let params = Params { threads: 2, scale: 0.01, ..Params::default() };
//! let out = partita_workloads::run(App::Water, &params, None).unwrap();
//! assert_eq!(Some(out.checksum), partita_workloads::reference(App::Water, &params).unwrap());
//! ```

#![warn(missing_docs)]
use std::fmt;
use std::path::Path;
use std::process::Command;
use std::str::FromStr;
use std::time::{Duration, Instant};

mod checksum;
pub mod cholesky;
pub mod hog;
pub mod locus;
pub mod mp3d;
pub mod ocean;
pub mod pmake;
pub mod pool;
pub mod sleeper;
pub mod team;
pub mod water;

pub use checksum::Checksum;

/// Errors of a workload run.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// The task pool could not be built.
    #[error("building the task pool: {0}")]
    Pool(String),
    /// A file or process operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A pmake unit process failed or printed something unexpected.
    #[error("pmake unit {unit}: {reason}")]
    Unit {
        /// The unit index.
        unit: usize,
        /// What went wrong.
        reason: String,
    },
    /// An application name that does not exist.
    #[error("unknown application `{0}` (expected one of: {names})", names = App::NAMES.join(", "))]
    UnknownApp(String),
    /// pmake was asked to run without a way to start its unit processes.
    #[error("pmake needs a unit launcher (run it through `partita workload pmake`)")]
    NoLauncher,
    /// A parameter out of range.
    #[error("invalid parameter `{name}`: {reason}")]
    Param {
        /// The parameter.
        name: &'static str,
        /// Why it is invalid.
        reason: String,
    },
}

/// The applications.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum App {
    /// Grid stencil (red-black SOR), barrier per half sweep.
    Ocean,
    /// Particle streaming over far more data than the LLC, barrier per chunk.
    Mp3d,
    /// Tiled Cholesky: a DAG of tiny dependent tasks.
    Cholesky,
    /// Cache-resident pairwise forces, a fork-join region per time step.
    Water,
    /// Independent tasks updating a shared table under a lock.
    Locus,
    /// Uncontrolled processes alternating file I/O and CPU bursts.
    Pmake,
    /// An uncontrolled CPU-bound loop (scenario helper).
    Hog,
    /// A sleeper measuring its wake-up latency (scenario helper).
    Sleeper,
}

impl App {
    /// Every application, in a fixed order.
    pub const ALL: [App; 8] = [
        App::Ocean,
        App::Mp3d,
        App::Cholesky,
        App::Water,
        App::Locus,
        App::Pmake,
        App::Hog,
        App::Sleeper,
    ];
    /// Names accepted by [`App::from_str`], in the order of [`App::ALL`].
    pub const NAMES: [&'static str; 8] = [
        "ocean", "mp3d", "cholesky", "water", "locus", "pmake", "hog", "sleeper",
    ];

    /// The application's name.
    ///
    /// ```
    /// assert_eq!(partita_workloads::App::Mp3d.name(), "mp3d");
    /// ```
    pub fn name(self) -> &'static str {
        let i = App::ALL.iter().position(|&a| a == self).unwrap_or(0);
        App::NAMES[i]
    }

    /// Whether the application runs on partita-runtime (and so follows process control).
    ///
    /// ```
    /// use partita_workloads::App;
    /// assert!(App::Ocean.is_controlled());
    /// assert!(!App::Pmake.is_controlled());
    /// ```
    pub fn is_controlled(self) -> bool {
        !matches!(self, App::Pmake | App::Hog | App::Sleeper)
    }

    /// Whether the application synchronises with barriers between phases (an elastic team).
    ///
    /// ```
    /// assert!(partita_workloads::App::Ocean.uses_barriers());
    /// ```
    pub fn uses_barriers(self) -> bool {
        matches!(self, App::Ocean | App::Mp3d)
    }
}

impl fmt::Display for App {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for App {
    type Err = WorkloadError;

    /// ```
    /// let a: partita_workloads::App = "cholesky".parse().unwrap();
    /// assert_eq!(a, partita_workloads::App::Cholesky);
    /// assert!("nope".parse::<partita_workloads::App>().is_err());
    /// ```
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim().to_ascii_lowercase();
        let s = s.strip_suffix("-like").unwrap_or(&s);
        App::NAMES
            .iter()
            .position(|&n| n == s)
            .map(|i| App::ALL[i])
            .ok_or_else(|| WorkloadError::UnknownApp(s.to_string()))
    }
}

/// How to run an application.
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    /// Pool size (workers), or concurrent jobs for pmake.
    pub threads: usize,
    /// Problem-size multiplier: 1.0 takes roughly half a second alone on two 2.5 GHz CPUs.
    pub scale: f64,
    /// How long a barrier spins before it blocks.
    pub spin: Duration,
    /// Run time of the time-bound helpers (hog, sleeper).
    pub duration: Duration,
}

impl Default for Params {
    /// Two threads (or the machine's CPU count), scale 1, 2 ms spin, 2 s for the helpers.
    fn default() -> Self {
        Params {
            threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
            scale: 1.0,
            spin: Duration::from_millis(2),
            duration: Duration::from_secs(2),
        }
    }
}

impl Params {
    /// Check the parameters, naming the first invalid one.
    ///
    /// ```
    /// let mut p = partita_workloads::Params::default();
    /// assert!(p.validate().is_ok());
    /// p.scale = -1.0;
    /// assert!(p.validate().is_err());
    /// ```
    pub fn validate(&self) -> Result<(), WorkloadError> {
        if self.threads == 0 || self.threads > 1024 {
            return Err(WorkloadError::Param {
                name: "threads",
                reason: format!("{} is not in 1..=1024", self.threads),
            });
        }
        if !(self.scale.is_finite() && self.scale > 0.0 && self.scale <= 1000.0) {
            return Err(WorkloadError::Param {
                name: "scale",
                reason: format!("{} is not in (0, 1000]", self.scale),
            });
        }
        Ok(())
    }

    /// `base × scale`, rounded, at least `min`.
    pub(crate) fn scaled(&self, base: f64, min: usize) -> usize {
        ((base * self.scale).round() as usize).max(min)
    }
}

/// What one run produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The application.
    pub app: App,
    /// Checksum of the result (compare with [`reference()`]).
    pub checksum: u64,
    /// Time of the computation proper (without building the pool and the input).
    pub compute: Duration,
    /// Application-specific measurements, `(name, value)`.
    pub metrics: Vec<(&'static str, f64)>,
}

/// Starts one pmake unit as a separate process: given the unit index and the scratch
/// directory, returns the command to run. The process must print the unit's checksum
/// ([`pmake::run_unit`]) as a decimal number on stdout.
pub type UnitLauncher<'a> = &'a dyn Fn(usize, &Path) -> Command;

/// Run `app` with `params` in this process (pmake also starts unit processes through
/// `launcher`).
pub fn run(
    app: App,
    params: &Params,
    launcher: Option<UnitLauncher<'_>>,
) -> Result<Outcome, WorkloadError> {
    params.validate()?;
    let mut metrics = Vec::new();
    let (checksum, compute) = match app {
        App::Pmake => {
            let launcher = launcher.ok_or(WorkloadError::NoLauncher)?;
            let start = Instant::now();
            let sum = pmake::run(params, launcher)?;
            (sum, start.elapsed())
        }
        App::Hog => {
            let start = Instant::now();
            let iterations = hog::run(params.duration);
            metrics.push(("iterations", iterations as f64));
            (0, start.elapsed())
        }
        App::Sleeper => {
            let start = Instant::now();
            let lat = sleeper::run(params.duration, sleeper::PERIOD);
            metrics.extend(lat.metrics());
            (0, start.elapsed())
        }
        _ => {
            let pool = pool::build(params.threads, app.name())?;
            let start;
            let sum;
            match app {
                App::Ocean => {
                    let mut g = ocean::Grid::new(ocean::size(params));
                    start = Instant::now();
                    let stats = ocean::run(&pool, params, &mut g);
                    sum = g.checksum();
                    metrics.extend(team_metrics(&stats));
                }
                App::Mp3d => {
                    let mut s = mp3d::Space::new(mp3d::size(params));
                    start = Instant::now();
                    let stats = mp3d::run(&pool, params, &mut s);
                    sum = s.checksum();
                    metrics.extend(team_metrics(&stats));
                }
                App::Cholesky => {
                    let size = cholesky::size(params);
                    start = Instant::now();
                    sum = cholesky::run(&pool, size);
                }
                App::Water => {
                    let size = water::size(params);
                    start = Instant::now();
                    sum = water::run(&pool, size);
                }
                App::Locus => {
                    let size = locus::size(params);
                    start = Instant::now();
                    sum = locus::run(&pool, size);
                }
                App::Pmake | App::Hog | App::Sleeper => unreachable!("handled above"),
            }
            (sum, start.elapsed())
        }
    };
    Ok(Outcome {
        app,
        checksum,
        compute,
        metrics,
    })
}

fn team_metrics(s: &team::TeamStats) -> [(&'static str, f64); 3] {
    [
        ("resizes", s.resizes as f64),
        ("blocked_waits", s.blocked_waits as f64),
        ("participant_phases", s.participant_phases as f64),
    ]
}

/// The checksum a correct run of `app` with `params` produces, computed by a plain
/// sequential run in the calling thread (no pool, no processes). `None` for the helpers
/// (hog, sleeper), whose output is a measurement rather than a result.
///
/// ```
/// use partita_workloads::{App, Params};
/// let p = Params { scale: 0.01, ..Params::default() };
/// assert!(partita_workloads::reference(App::Locus, &p).unwrap().is_some());
/// assert!(partita_workloads::reference(App::Hog, &p).unwrap().is_none());
/// ```
pub fn reference(app: App, params: &Params) -> Result<Option<u64>, WorkloadError> {
    params.validate()?;
    Ok(match app {
        App::Ocean => Some(ocean::reference(params)),
        App::Mp3d => Some(mp3d::reference(params)),
        App::Cholesky => Some(cholesky::reference(cholesky::size(params))),
        App::Water => Some(water::reference(water::size(params))),
        App::Locus => Some(locus::reference(locus::size(params))),
        App::Pmake => Some(pmake::reference(params)),
        App::Hog | App::Sleeper => None,
    })
}

/// A small, fast, deterministic generator (SplitMix64) for inputs.
pub(crate) fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// A deterministic value in `[0, 1)` from `seed`.
pub(crate) fn unit_f64(seed: u64) -> f64 {
    (splitmix(seed) >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for app in App::ALL {
            assert_eq!(app.name().parse::<App>().unwrap(), app);
            assert_eq!(format!("{app}-like").parse::<App>().unwrap(), app);
        }
    }

    #[test]
    fn bad_params_name_the_parameter() {
        let p = Params {
            threads: 0,
            ..Params::default()
        };
        let e = p.validate().unwrap_err().to_string();
        assert!(e.contains("threads"), "{e}");
    }

    #[test]
    fn unit_values_are_in_range() {
        for s in 0..1000 {
            let v = unit_f64(s);
            assert!((0.0..1.0).contains(&v));
        }
    }
}
