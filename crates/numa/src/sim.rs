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

use crate::policy::{Action, CopySet, CounterTable, NodeId, PageState, Params, decide};
use std::collections::BTreeMap;
use std::fmt::Write as _;

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

#[derive(Clone, Debug)]
struct Page {
    copies: CopySet,
    last_migration_ns: Option<u64>,
    /// The version each node's copy holds (index = node); checked by `check_invariants`.
    versions: Vec<u64>,
    last_write: u64,
}

const MASTER: u8 = u8::MAX;

/// A simulation in progress (exposed so tests can check invariants after every step).
///
/// ```
/// use partita_numa::sim::{Access, SimConfig, Simulator};
/// let mut s = Simulator::new(2, 1, &[0], SimConfig::default());
/// s.step(&Access { time_ns: 0, process: 0, node: 1, page: 0, write: false });
/// assert_eq!(s.report().misses, 1);
/// s.check_invariants().unwrap();
/// ```
#[derive(Clone, Debug)]
pub struct Simulator {
    config: SimConfig,
    nodes: usize,
    pages: Vec<Page>,
    counters: CounterTable,
    /// `maps[process * pages + page]`: the node of the copy this process maps, or MASTER.
    maps: Vec<u8>,
    processes: usize,
    report: Report,
}

impl Simulator {
    /// A machine of `nodes` nodes (≤ 64) running `processes` processes over pages whose initial
    /// homes are `initial_home` (clamped to the machine).
    ///
    /// # Panics
    ///
    /// If `nodes` is 0 or more than 64. [`Simulator::step`] panics if an access names a page or
    /// process outside the trace.
    ///
    /// ```
    /// let s = partita_numa::sim::Simulator::new(4, 2, &[0, 1, 2], Default::default());
    /// assert_eq!(s.copies(2).master(), 2);
    /// ```
    pub fn new(nodes: usize, processes: usize, initial_home: &[NodeId], config: SimConfig) -> Self {
        assert!((1..=64).contains(&nodes), "simulator supports 1..=64 nodes");
        let pages = initial_home
            .iter()
            .map(|&h| Page {
                copies: CopySet::new(h.min(nodes - 1)),
                last_migration_ns: None,
                versions: vec![0; nodes],
                last_write: 0,
            })
            .collect::<Vec<_>>();
        Simulator {
            config,
            nodes,
            counters: CounterTable::new(pages.len(), nodes, config.params.reset_interval_ns),
            maps: vec![MASTER; processes * pages.len()],
            pages,
            processes,
            report: Report::default(),
        }
    }

    /// The copy set of `page`.
    ///
    /// ```
    /// let s = partita_numa::sim::Simulator::new(1, 1, &[0], Default::default());
    /// assert!(s.copies(0).writable());
    /// ```
    pub fn copies(&self, page: usize) -> CopySet {
        self.pages[page].copies
    }

    /// The measurements so far.
    ///
    /// ```
    /// let s = partita_numa::sim::Simulator::new(1, 1, &[0], Default::default());
    /// assert_eq!(s.report().misses, 0);
    /// ```
    pub fn report(&self) -> &Report {
        &self.report
    }

    /// The node of the copy `process` reaches for `page`.
    fn mapped_node(&self, process: usize, page: usize) -> NodeId {
        let m = self.maps[process * self.pages.len() + page];
        let copies = self.pages[page].copies;
        if m != MASTER && copies.has_replica_on(m as usize) {
            m as usize
        } else {
            copies.master()
        }
    }

    fn set_map(&mut self, process: usize, page: usize, node: NodeId) {
        let n = self.pages.len();
        self.maps[process * n + page] = node as u8;
    }

    fn unmap_all(&mut self, page: usize) {
        let n = self.pages.len();
        for p in 0..self.processes {
            self.maps[p * n + page] = MASTER;
        }
    }

    /// Simulates one miss.
    ///
    /// ```
    /// use partita_numa::sim::{Access, Simulator};
    /// let mut s = Simulator::new(2, 1, &[0], Default::default());
    /// for t in 0..200 {
    ///     s.step(&Access { time_ns: t * 1000, process: 0, node: 1, page: 0, write: false });
    /// }
    /// assert_eq!(s.copies(0).master(), 1); // migrated after 128 misses
    /// assert_eq!(s.report().migrations, 1);
    /// ```
    pub fn step(&mut self, a: &Access) {
        let cfg = self.config;
        let node = a.node.min(self.nodes - 1);
        // A write to a replicated page collapses it to the master first.
        if a.write && !self.pages[a.page].copies.writable() {
            self.pages[a.page].copies.collapse();
            self.unmap_all(a.page);
            self.report.collapses += 1;
            self.report.overhead_ns += cfg.collapse_ns;
        }
        let served_by = self.mapped_node(a.process, a.page);
        self.report.misses += 1;
        if served_by == node {
            self.report.local_misses += 1;
            self.report.stall_ns += cfg.local_ns;
        } else {
            self.report.stall_ns += cfg.remote_ns;
        }
        if a.write {
            let page = &mut self.pages[a.page];
            page.last_write += 1;
            let v = page.last_write;
            page.versions[page.copies.master()] = v;
        }
        if cfg.kind == PolicyKind::Static {
            return;
        }
        let count = self.counters.record(a.page, node, a.write, a.time_ns);
        if count < cfg.params.trigger {
            return;
        }
        // The process already reaches a local copy: only remote misses are counted as hot.
        if served_by == node {
            self.counters.clear_page(a.page);
            return;
        }
        let mut params = cfg.params;
        if cfg.kind == PolicyKind::MigrateOnly {
            params.sharing = u32::MAX;
        }
        let page = &self.pages[a.page];
        let mut state = PageState::new(page.copies, a.time_ns);
        state.last_migration_ns = page.last_migration_ns;
        let action = decide(&self.counters.counters(a.page, node), &params, &state);
        if cfg.kind == PolicyKind::ReplicateOnly && matches!(action, Action::Migrate { .. }) {
            *self
                .report
                .no_action
                .entry("migration disabled".into())
                .or_default() += 1;
            self.report.overhead_ns += cfg.decision_ns;
            self.counters.clear_page(a.page);
            return;
        }
        self.report.overhead_ns += cfg.decision_ns;
        match action {
            Action::None(reason) => {
                *self
                    .report
                    .no_action
                    .entry(format!("{reason:?}"))
                    .or_default() += 1;
                // Forget this node's count only: other nodes' counts keep telling "shared".
                self.counters.clear_node(a.page, node);
            }
            Action::Rearrange { to } => {
                self.set_map(a.process, a.page, to);
                self.report.rearranges += 1;
                self.report.overhead_ns += cfg.rearrange_ns;
                self.counters.clear_page(a.page);
            }
            Action::Replicate { on } => {
                let page = &mut self.pages[a.page];
                page.copies.replicate(on);
                let master = page.copies.master();
                page.versions[on] = page.versions[master];
                self.set_map(a.process, a.page, on);
                self.report.replications += 1;
                self.report.overhead_ns += cfg.move_ns;
                self.counters.clear_page(a.page);
            }
            Action::Migrate { to } => {
                let page = &mut self.pages[a.page];
                let master = page.copies.master();
                page.versions[to] = page.versions[master];
                page.copies.migrate(to);
                page.last_migration_ns = Some(a.time_ns);
                self.report.migrations += 1;
                self.report.overhead_ns += cfg.move_ns;
                self.counters.clear_page(a.page);
            }
        }
    }

    /// Checks the copy-set invariant for every page: one master; at most one copy per node
    /// (by construction of [`CopySet`]); a written page has a single copy; every copy holds
    /// the last write.
    ///
    /// ```
    /// let s = partita_numa::sim::Simulator::new(2, 1, &[0, 1], Default::default());
    /// assert!(s.check_invariants().is_ok());
    /// ```
    pub fn check_invariants(&self) -> Result<(), String> {
        for (i, p) in self.pages.iter().enumerate() {
            let nodes = p.copies.nodes();
            if nodes[0] >= self.nodes || nodes.iter().any(|n| *n >= self.nodes) {
                return Err(format!(
                    "page {i}: copy outside the machine: {:?}",
                    p.copies
                ));
            }
            let mut sorted = nodes.clone();
            sorted.sort_unstable();
            sorted.dedup();
            if sorted.len() != nodes.len() {
                return Err(format!("page {i}: two copies on one node: {:?}", p.copies));
            }
            for n in nodes {
                if p.versions[n] != p.last_write {
                    return Err(format!(
                        "page {i}: copy on node {n} holds version {} but the last write is {}",
                        p.versions[n], p.last_write
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Runs `trace` under `config` and returns the report.
///
/// ```
/// use partita_numa::sim::{simulate, traces, SimConfig, TraceConfig};
/// let t = traces::ocean(&TraceConfig::small());
/// let r = simulate(&t, &SimConfig::default());
/// assert_eq!(r.misses as usize, t.accesses.len());
/// ```
pub fn simulate(trace: &Trace, config: &SimConfig) -> Report {
    let mut s = Simulator::new(trace.nodes, trace.processes, &trace.initial_home, *config);
    for a in &trace.accesses {
        s.step(a);
    }
    s.report
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

/// Synthetic workloads (numa.md §Simulator).
///
/// ```
/// let c = partita_numa::sim::TraceConfig::small();
/// for t in partita_numa::sim::traces::all(&c) {
///     println!("{}: {} pages, {} misses", t.name, t.initial_home.len(), t.accesses.len());
/// }
/// ```
pub mod traces {
    use super::{Access, Trace, TraceConfig};

    /// SplitMix64: small, deterministic, good enough for traces.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n.max(1) as u64) as usize
        }
        fn chance(&mut self, percent: u64) -> bool {
            self.next() % 100 < percent
        }
    }

    /// Generates one miss per node every `miss_interval_ns`, asking `pick(rng, time, node)`
    /// for `(process, page, write)`.
    fn generate(
        c: &TraceConfig,
        mut pick: impl FnMut(&mut Rng, u64, usize) -> (usize, usize, bool),
        salt: u64,
    ) -> Vec<Access> {
        let mut rng = Rng(c.seed ^ salt);
        let mut out = Vec::new();
        let step = (c.miss_interval_ns / c.nodes as u64).max(1);
        let mut t = 0;
        let mut node = 0;
        while t < c.duration_ns {
            let (process, page, write) = pick(&mut rng, t, node);
            out.push(Access {
                time_ns: t,
                process,
                node,
                page,
                write,
            });
            node = (node + 1) % c.nodes;
            t += step;
        }
        out
    }

    /// A sequential process per node, each with a private working set (first-touched on its
    /// starting node), moved to another node every 300 ms by the scheduler; 20% of misses go
    /// to read-only shared code pages on node 0.
    ///
    /// ```
    /// let t = partita_numa::sim::traces::sequential(&partita_numa::sim::TraceConfig::small());
    /// assert_eq!(t.processes, 4);
    /// ```
    pub fn sequential(c: &TraceConfig) -> Trace {
        const PRIVATE: usize = 32;
        const CODE: usize = 16;
        const PHASE_NS: u64 = 300_000_000;
        let n = c.nodes;
        let mut initial_home = vec![0; CODE];
        for p in 0..n {
            initial_home.extend(std::iter::repeat_n(p, PRIVATE));
        }
        let accesses = generate(
            c,
            |rng, t, node| {
                // The process on `node` during phase k is the one that started on node - k.
                let phase = (t / PHASE_NS) as usize;
                let process = (node + n - phase % n) % n;
                if rng.chance(20) {
                    (process, rng.below(CODE), false)
                } else {
                    (
                        process,
                        CODE + process * PRIVATE + rng.below(PRIVATE),
                        rng.chance(30),
                    )
                }
            },
            1,
        );
        Trace {
            name: "sequential",
            nodes: n,
            processes: n,
            initial_home,
            accesses,
        }
    }

    /// Raytrace: a read-only scene initialised by node 0 and read by everyone (80% of
    /// misses), plus per-node image tiles that are written (first-touched on node 0 too).
    ///
    /// ```
    /// let t = partita_numa::sim::traces::raytrace(&partita_numa::sim::TraceConfig::small());
    /// assert!(t.initial_home.iter().all(|h| *h == 0));
    /// ```
    pub fn raytrace(c: &TraceConfig) -> Trace {
        const SCENE: usize = 48;
        const TILE: usize = 8;
        let n = c.nodes;
        let accesses = generate(
            c,
            |rng, _, node| {
                if rng.chance(80) {
                    (node, rng.below(SCENE), false)
                } else {
                    (node, SCENE + node * TILE + rng.below(TILE), rng.chance(50))
                }
            },
            2,
        );
        Trace {
            name: "raytrace",
            nodes: n,
            processes: n,
            initial_home: vec![0; SCENE + n * TILE],
            accesses,
        }
    }

    /// Ocean: a grid partitioned by node (initialised by node 0); each node reads and writes
    /// its own partition and, 6% of the time, the boundary page of its neighbours.
    ///
    /// ```
    /// let t = partita_numa::sim::traces::ocean(&partita_numa::sim::TraceConfig::small());
    /// assert_eq!(t.initial_home.len(), 4 * 32);
    /// ```
    pub fn ocean(c: &TraceConfig) -> Trace {
        const PART: usize = 32;
        const BOUNDARY: usize = 1;
        let n = c.nodes;
        let accesses = generate(
            c,
            |rng, _, node| {
                let write = rng.chance(40);
                if rng.chance(6) {
                    let nb = if rng.chance(50) {
                        (node + 1) % n
                    } else {
                        (node + n - 1) % n
                    };
                    let off = if nb == (node + 1) % n {
                        rng.below(BOUNDARY)
                    } else {
                        PART - 1 - rng.below(BOUNDARY)
                    };
                    (node, nb * PART + off, write)
                } else {
                    (node, node * PART + rng.below(PART), write)
                }
            },
            3,
        );
        Trace {
            name: "ocean",
            nodes: n,
            processes: n,
            initial_home: vec![0; n * PART],
            accesses,
        }
    }

    /// Database: fine-grain read-write shared synchronisation pages, read and written by every
    /// node (30% writes), spread round-robin over the nodes.
    ///
    /// ```
    /// let t = partita_numa::sim::traces::database(&partita_numa::sim::TraceConfig::small());
    /// assert!(t.accesses.iter().any(|a| a.write));
    /// ```
    pub fn database(c: &TraceConfig) -> Trace {
        const SHARED: usize = 32;
        let n = c.nodes;
        let accesses = generate(
            c,
            |rng, _, node| (node, rng.below(SHARED), rng.chance(30)),
            4,
        );
        Trace {
            name: "database",
            nodes: n,
            processes: n,
            initial_home: (0..SHARED).map(|p| p % n).collect(),
            accesses,
        }
    }

    /// The four workloads.
    ///
    /// ```
    /// assert_eq!(partita_numa::sim::traces::all(&partita_numa::sim::TraceConfig::small()).len(), 4);
    /// ```
    pub fn all(c: &TraceConfig) -> Vec<Trace> {
        vec![sequential(c), raytrace(c), ocean(c), database(c)]
    }
}

/// Every trace under every policy: `(trace name, policy, report)`.
///
/// ```
/// use partita_numa::sim::{run_table, SimConfig, TraceConfig};
/// let rows = run_table(&TraceConfig::small(), &SimConfig::default());
/// assert_eq!(rows.len(), 16);
/// ```
pub fn run_table(tc: &TraceConfig, base: &SimConfig) -> Vec<(&'static str, PolicyKind, Report)> {
    let mut rows = Vec::new();
    for t in traces::all(tc) {
        for kind in PolicyKind::ALL {
            let cfg = SimConfig { kind, ..*base };
            rows.push((t.name, kind, simulate(&t, &cfg)));
        }
    }
    rows
}

/// Mig/Rep over every trace for each trigger (sharing = trigger / 4): `(trigger, trace,
/// report)`.
///
/// ```
/// use partita_numa::sim::{trigger_sweep, SimConfig, TraceConfig};
/// let rows = trigger_sweep(&TraceConfig::small(), &SimConfig::default(), &[64, 128]);
/// assert_eq!(rows.len(), 8);
/// ```
pub fn trigger_sweep(
    tc: &TraceConfig,
    base: &SimConfig,
    triggers: &[u32],
) -> Vec<(u32, &'static str, Report)> {
    let traces = traces::all(tc);
    let mut rows = Vec::new();
    for &trigger in triggers {
        for t in &traces {
            let cfg = SimConfig {
                kind: PolicyKind::MigRep,
                params: Params {
                    trigger,
                    sharing: (trigger / 4).max(1),
                    ..base.params
                },
                ..*base
            };
            rows.push((trigger, t.name, simulate(t, &cfg)));
        }
    }
    rows
}

/// Formats [`run_table`] output like the thesis' Table 10: per workload and policy, locality,
/// stall and overhead, time saved against static placement, and the moves by kind.
///
/// ```
/// use partita_numa::sim::{format_table, run_table, SimConfig, TraceConfig};
/// let s = format_table(&run_table(&TraceConfig::small(), &SimConfig::default()));
/// assert!(s.contains("Mig/Rep") && s.contains("database"));
/// ```
pub fn format_table(rows: &[(&'static str, PolicyKind, Report)]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<11} {:<15} {:>8} {:>10} {:>10} {:>8} {:>7} {:>7} {:>7} {:>7} {:>9}",
        "workload",
        "policy",
        "local%",
        "stall ms",
        "ovhd ms",
        "saved%",
        "migr",
        "repl",
        "rearr",
        "coll",
        "no-action"
    );
    for (name, kind, r) in rows {
        let base = rows
            .iter()
            .find(|(n, k, _)| n == name && *k == PolicyKind::Static)
            .map(|(_, _, b)| b.total_ns())
            .unwrap_or(r.total_ns());
        let saved = 100.0 * (base as f64 - r.total_ns() as f64) / base.max(1) as f64;
        let _ = writeln!(
            s,
            "{:<11} {:<15} {:>8.1} {:>10.1} {:>10.1} {:>8.1} {:>7} {:>7} {:>7} {:>7} {:>9}",
            name,
            kind.name(),
            r.locality_percent(),
            r.stall_ns as f64 / 1e6,
            r.overhead_ns as f64 / 1e6,
            saved,
            r.migrations,
            r.replications,
            r.rearranges,
            r.collapses,
            r.no_action.values().sum::<u64>()
        );
    }
    s
}

/// Formats the Fig. 23 shape: for Mig/Rep, what fraction of hot-page decisions became each
/// action (migrate, replicate, rearrange, or each reason for doing nothing).
///
/// ```
/// use partita_numa::sim::{format_decisions, run_table, SimConfig, TraceConfig};
/// let s = format_decisions(&run_table(&TraceConfig::small(), &SimConfig::default()));
/// assert!(s.contains("migrate%"));
/// ```
pub fn format_decisions(rows: &[(&'static str, PolicyKind, Report)]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<11} {:>9} {:>9} {:>10} {:>10} {:>9} {:>8}",
        "workload", "decisions", "migrate%", "replicate%", "rearrange%", "none%", "(why)"
    );
    for (name, kind, r) in rows.iter().filter(|(_, k, _)| *k == PolicyKind::MigRep) {
        let _ = kind;
        let d = r.decisions().max(1) as f64;
        let why = r
            .no_action
            .iter()
            .map(|(k, v)| format!("{k}:{v}"))
            .collect::<Vec<_>>()
            .join(" ");
        let _ = writeln!(
            s,
            "{:<11} {:>9} {:>9.1} {:>10.1} {:>10.1} {:>9.1} {}",
            name,
            r.decisions(),
            100.0 * r.migrations as f64 / d,
            100.0 * r.replications as f64 / d,
            100.0 * r.rearranges as f64 / d,
            100.0 * r.no_action.values().sum::<u64>() as f64 / d,
            why
        );
    }
    s
}

/// Formats [`trigger_sweep`] output: per trigger, locality and overhead summed over the
/// workloads.
///
/// ```
/// use partita_numa::sim::{format_sweep, trigger_sweep, SimConfig, TraceConfig};
/// let s = format_sweep(&trigger_sweep(&TraceConfig::small(), &SimConfig::default(), &[128]));
/// assert!(s.contains("128"));
/// ```
pub fn format_sweep(rows: &[(u32, &'static str, Report)]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:>7} {:>8} {:>8} {:>10} {:>10} {:>10}",
        "trigger", "local%", "moves", "stall ms", "ovhd ms", "total ms"
    );
    let mut triggers: Vec<u32> = rows.iter().map(|r| r.0).collect();
    triggers.dedup();
    for t in triggers {
        let sel: Vec<&Report> = rows.iter().filter(|r| r.0 == t).map(|r| &r.2).collect();
        let misses: u64 = sel.iter().map(|r| r.misses).sum();
        let local: u64 = sel.iter().map(|r| r.local_misses).sum();
        let stall: u64 = sel.iter().map(|r| r.stall_ns).sum();
        let ovhd: u64 = sel.iter().map(|r| r.overhead_ns).sum();
        let moves: u64 = sel.iter().map(|r| r.moves()).sum();
        let _ = writeln!(
            s,
            "{:>7} {:>8.1} {:>8} {:>10.1} {:>10.1} {:>10.1}",
            t,
            100.0 * local as f64 / misses.max(1) as f64,
            moves,
            stall as f64 / 1e6,
            ovhd as f64 / 1e6,
            (stall + ovhd) as f64 / 1e6
        );
    }
    s
}
