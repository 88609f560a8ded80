//! The applications of the experiments: two-thread parallel applications spanning the
//! paper's range of solo bus rates (0.48 to 23.31 transactions/µs for two threads; the
//! endpoints and BBMA/nBBMA are the paper's, the rates in between are illustrative values
//! for the named applications, sorted as in its Fig. 1), and the two microbenchmarks.

/// One application type.
///
/// ```
/// assert_eq!(partita_sim::workload::APPS.len(), 11);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AppSpec {
    /// Name.
    pub name: &'static str,
    /// Threads (each needs a CPU; gangs are scheduled together).
    pub threads: u32,
    /// Solo bus rate of the whole application (transactions/µs).
    pub rate: f64,
    /// Bursty: the rate of a quantum is 0.25× (p = 0.7) or 2.75× (p = 0.3) the mean.
    pub bursty: bool,
}

const fn app(name: &'static str, rate: f64, bursty: bool) -> AppSpec {
    AppSpec {
        name,
        threads: 2,
        rate,
        bursty,
    }
}

/// The applications, in increasing order of solo rate.
pub const APPS: [AppSpec; 11] = [
    app("Water-nsqr", 0.48, false),
    app("LU CB", 1.5, false),
    app("Barnes", 3.0, false),
    app("Volrend", 5.0, false),
    app("FMM", 7.0, false),
    app("BT", 10.0, false),
    app("LU", 12.0, false),
    app("SP", 16.0, false),
    app("MG", 18.5, false),
    app("Raytrace", 20.0, true),
    app("CG", 23.31, false),
];

/// The bandwidth-hungry microbenchmark: one thread, column-wise writes over an array twice
/// the cache, ~0 % hit rate (23.6 tx/µs).
pub const BBMA: AppSpec = AppSpec {
    name: "BBMA",
    threads: 1,
    rate: 23.6,
    bursty: false,
};

/// The cache-resident microbenchmark: one thread, row-wise over half the cache (0.0037 tx/µs).
pub const NBBMA: AppSpec = AppSpec {
    name: "nBBMA",
    threads: 1,
    rate: 0.0037,
    bursty: false,
};

/// The paper's three workload sets: two instances of the application with four
/// microbenchmark instances.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkloadSet {
    /// A: + 4 BBMA.
    A,
    /// B: + 4 nBBMA.
    B,
    /// C: + 2 BBMA + 2 nBBMA.
    C,
}

impl WorkloadSet {
    /// All three.
    pub const ALL: [WorkloadSet; 3] = [WorkloadSet::A, WorkloadSet::B, WorkloadSet::C];

    /// The microbenchmarks of the set.
    pub fn microbenchmarks(self) -> [AppSpec; 4] {
        match self {
            WorkloadSet::A => [BBMA; 4],
            WorkloadSet::B => [NBBMA; 4],
            WorkloadSet::C => [BBMA, BBMA, NBBMA, NBBMA],
        }
    }

    /// Label.
    pub fn label(self) -> &'static str {
        match self {
            WorkloadSet::A => "A (+4 BBMA)",
            WorkloadSet::B => "B (+4 nBBMA)",
            WorkloadSet::C => "C (+2 BBMA +2 nBBMA)",
        }
    }
}
