//! A trace-driven simulator of Verghese's migrate/replicate policy on an N-node machine with
//! fixed local/remote miss latencies and a fixed page-move cost (thesis ch. 6).
//!
//! A trace is a time-ordered list of cache misses `(time, process, node, page, write)`. For
//! every miss the simulator charges the local or remote latency depending on which copy the
//! process maps, updates the page's counters, and — once the requesting node's counter
//! reaches the trigger — asks [`crate::policy::decide`] what to do and applies it. Processes
//! map copies individually, so a second process on a node where a replica already exists is
//! *rearranged* onto it, as in the thesis.
//!
//! [`traces`] builds the four synthetic workloads of numa.md; [`run_table`] and
//! [`trigger_sweep`] produce the thesis' Table 10 / Fig. 23 shapes.
//!
//! ```
//! use partita_numa::sim::{simulate, traces, PolicyKind, SimConfig, TraceConfig};
//! let t = traces::raytrace(&TraceConfig::small());
//! let fixed = simulate(&t, &SimConfig { kind: PolicyKind::Static, ..SimConfig::default() });
//! let migrep = simulate(&t, &SimConfig::default());
//! assert!(migrep.locality_percent() > fixed.locality_percent());
//! ```
//!
//! The module is split by concern: the data types live here, the simulator in
//! `simulator.rs`, the synthetic workloads in `traces.rs`, and the tables in `table.rs`.

mod simulator;
mod table;
pub mod traces;

pub use simulator::{Simulator, simulate};
pub use table::{format_decisions, format_sweep, format_table, run_table, trigger_sweep};

use crate::policy::{NodeId, Params};
use std::collections::BTreeMap;

/// One cache miss in a trace.
///
/// ```
/// let a = partita_numa::sim::Access { time_ns: 0, process: 0, node: 1, page: 2, write: false };
/// assert_eq!(a.page, 2);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    /// When it happened (ns since the start; non-decreasing along a trace).
    pub time_ns: u64,
    /// The process that missed (each process maps copies individually).
    pub process: usize,
    /// The node that process was running on.
    pub node: NodeId,
    /// The page.
    pub page: usize,
    /// Whether the miss was a write.
    pub write: bool,
}

/// A workload: pages with their initial home nodes and the misses.
///
/// ```
/// let t = partita_numa::sim::traces::database(&partita_numa::sim::TraceConfig::small());
/// assert_eq!(t.name, "database");
/// assert!(t.accesses.windows(2).all(|w| w[0].time_ns <= w[1].time_ns));
/// ```
#[derive(Clone, Debug)]
pub struct Trace {
    /// Short name.
    pub name: &'static str,
    /// Number of nodes.
    pub nodes: usize,
    /// Number of processes.
    pub processes: usize,
    /// Initial node of every page.
    pub initial_home: Vec<NodeId>,
    /// The misses, in time order.
    pub accesses: Vec<Access>,
}

/// Which actions the policy may take.
///
/// ```
/// assert_eq!(partita_numa::sim::PolicyKind::ALL.len(), 4);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PolicyKind {
    /// Static placement: never move anything (the baseline).
    Static,
    /// Migration only: pages are never treated as shared, so hot pages follow the latest
    /// hot node (subject to the cool-down).
    MigrateOnly,
    /// Replication only: shared read pages are replicated, nothing is migrated.
    ReplicateOnly,
    /// Verghese's combined policy.
    MigRep,
}

impl PolicyKind {
    /// All four, baseline first.
    ///
    /// ```
    /// assert_eq!(partita_numa::sim::PolicyKind::ALL[0], partita_numa::sim::PolicyKind::Static);
    /// ```
    pub const ALL: [PolicyKind; 4] = [
        PolicyKind::Static,
        PolicyKind::MigrateOnly,
        PolicyKind::ReplicateOnly,
        PolicyKind::MigRep,
    ];

    /// Display name.
    ///
    /// ```
    /// assert_eq!(partita_numa::sim::PolicyKind::MigRep.name(), "Mig/Rep");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            PolicyKind::Static => "static",
            PolicyKind::MigrateOnly => "migrate-only",
            PolicyKind::ReplicateOnly => "replicate-only",
            PolicyKind::MigRep => "Mig/Rep",
        }
    }
}

/// Machine and policy parameters of a simulation. Defaults: 8 nodes, 300 ns local, 1200 ns
/// remote, 200 µs per page move, the thesis' policy parameters.
///
/// ```
/// let c = partita_numa::sim::SimConfig::default();
/// assert_eq!((c.local_ns, c.remote_ns, c.move_ns), (300, 1200, 200_000));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimConfig {
    /// Latency of a miss served by the local node.
    pub local_ns: u64,
    /// Latency of a miss served by a remote node.
    pub remote_ns: u64,
    /// Cost of copying a page (migrate or replicate).
    pub move_ns: u64,
    /// Cost of remapping a process onto an existing local replica.
    pub rearrange_ns: u64,
    /// Cost of collapsing a replicated page on a write (TLB shootdown, freeing replicas).
    pub collapse_ns: u64,
    /// Cost of one policy decision that was reached (counter at trigger: the interrupt).
    pub decision_ns: u64,
    /// The policy's parameters.
    pub params: Params,
    /// Which actions are allowed.
    pub kind: PolicyKind,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            local_ns: 300,
            remote_ns: 1200,
            move_ns: 200_000,
            rearrange_ns: 20_000,
            collapse_ns: 50_000,
            decision_ns: 5_000,
            params: Params::default(),
            kind: PolicyKind::MigRep,
        }
    }
}

/// What a simulation measured.
///
/// ```
/// let r = partita_numa::sim::Report::default();
/// assert_eq!(r.locality_percent(), 0.0);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Misses simulated.
    pub misses: u64,
    /// Misses served locally.
    pub local_misses: u64,
    /// Total miss stall (ns).
    pub stall_ns: u64,
    /// Time spent moving, remapping, collapsing and deciding (ns).
    pub overhead_ns: u64,
    /// Migrations.
    pub migrations: u64,
    /// Replications.
    pub replications: u64,
    /// Rearrangements onto existing replicas.
    pub rearranges: u64,
    /// Collapses of replicated pages on writes.
    pub collapses: u64,
    /// Decisions that did nothing, by reason.
    pub no_action: BTreeMap<String, u64>,
}

impl Report {
    /// Percentage of misses served locally.
    ///
    /// ```
    /// let r = partita_numa::sim::Report { misses: 4, local_misses: 1, ..Default::default() };
    /// assert_eq!(r.locality_percent(), 25.0);
    /// ```
    pub fn locality_percent(&self) -> f64 {
        if self.misses == 0 {
            0.0
        } else {
            100.0 * self.local_misses as f64 / self.misses as f64
        }
    }

    /// Page copies made (migrations + replications).
    ///
    /// ```
    /// let r = partita_numa::sim::Report { migrations: 2, replications: 3, ..Default::default() };
    /// assert_eq!(r.moves(), 5);
    /// ```
    pub fn moves(&self) -> u64 {
        self.migrations + self.replications
    }

    /// Decisions reached (counter at trigger), whatever their outcome.
    ///
    /// ```
    /// let r = partita_numa::sim::Report { rearranges: 1, ..Default::default() };
    /// assert_eq!(r.decisions(), 1);
    /// ```
    pub fn decisions(&self) -> u64 {
        self.migrations + self.replications + self.rearranges + self.no_action.values().sum::<u64>()
    }

    /// Stall plus overhead: the time the policy's outcome costs (ns).
    ///
    /// ```
    /// let r = partita_numa::sim::Report { stall_ns: 5, overhead_ns: 2, ..Default::default() };
    /// assert_eq!(r.total_ns(), 7);
    /// ```
    pub fn total_ns(&self) -> u64 {
        self.stall_ns + self.overhead_ns
    }
}

/// Size and speed of the synthetic traces.
///
/// ```
/// let c = partita_numa::sim::TraceConfig::default();
/// assert_eq!(c.nodes, 8);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceConfig {
    /// Nodes of the simulated machine.
    pub nodes: usize,
    /// Length of the trace (ns).
    pub duration_ns: u64,
    /// Time between two misses of one node (ns).
    pub miss_interval_ns: u64,
    /// Seed of the deterministic generator.
    pub seed: u64,
}

impl Default for TraceConfig {
    fn default() -> Self {
        TraceConfig {
            nodes: 8,
            duration_ns: 1_000_000_000,
            miss_interval_ns: 5_000,
            seed: 1998,
        }
    }
}

impl TraceConfig {
    /// A shorter trace for tests (4 nodes, 400 ms): same shape, runs in well under a second in
    /// a debug build.
    ///
    /// ```
    /// assert_eq!(partita_numa::sim::TraceConfig::small().nodes, 4);
    /// ```
    pub fn small() -> TraceConfig {
        TraceConfig {
            nodes: 4,
            duration_ns: 400_000_000,
            miss_interval_ns: 5_000,
            seed: 1998,
        }
    }
}
