//! The simulator proper: per-page copy sets, per-process mappings, and the policy applied
//! miss by miss.

use super::{Access, PolicyKind, Report, SimConfig, Trace};
use crate::policy::{Action, CopySet, CounterTable, NodeId, PageState, decide};

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
        self.apply(a, node, action);
    }

    /// Applies the policy's decision for a hot page and forgets the counts it acted on.
    fn apply(&mut self, a: &Access, node: NodeId, action: Action) {
        let cfg = self.config;
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
