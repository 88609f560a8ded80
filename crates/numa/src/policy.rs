//! Verghese's migrate/replicate decision (thesis §5.2, Table 7, Fig. 15) as a pure function,
//! the per-page counters it reads, and the copy-set bookkeeping shared by
//! [`crate::Replicated`] and the simulator.
//!
//! Nothing here touches memory or the kernel: [`decide`] maps
//! (counters, parameters, page state) to an [`Action`], so property tests and the simulator
//! drive it directly.
//!
//! ```
//! use partita_numa::policy::*;
//! let mut table = CounterTable::new(1, 2, Params::default().reset_interval_ns);
//! let state = PageState::new(CopySet::new(0), 0);
//! let mut action = Action::None(NoAction::BelowTrigger);
//! for t in 0..128 {
//!     table.record(0, 1, false, t);
//!     action = decide(&table.counters(0, 1), &Params::default(), &state);
//! }
//! assert_eq!(action, Action::Migrate { to: 1 });
//! ```

use std::fmt;

/// A node index in the policy's world (`0..nodes`).
pub type NodeId = usize;

/// The policy's tunables. Defaults are the thesis' values.
///
/// Rule of thumb for the trigger: `trigger ≈ move cost / remote-miss penalty` (the thesis'
/// 128 ≈ 200 µs / 1.2 µs, rounded down to a power of two); see [`Params::derived_trigger`].
///
/// ```
/// let p = partita_numa::policy::Params::default();
/// assert_eq!((p.trigger, p.sharing, p.write_threshold, p.batch), (128, 32, 1, 2));
/// assert_eq!(p.cooldown_ns, 100_000_000);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    /// A node's miss count on a page that triggers a decision.
    pub trigger: u32,
    /// Another node's count above which the page counts as shared (trigger / 4).
    pub sharing: u32,
    /// Writes at or above which a shared page is not replicated.
    pub write_threshold: u32,
    /// After a migration the page is frozen for this long (ns).
    pub cooldown_ns: u64,
    /// All counters are zeroed every this many ns.
    pub reset_interval_ns: u64,
    /// Pages moved per operation.
    pub batch: u32,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            trigger: 128,
            sharing: 32,
            write_threshold: 1,
            cooldown_ns: 100_000_000,
            reset_interval_ns: 100_000_000,
            batch: 2,
        }
    }
}

impl Params {
    /// Parameters with this trigger and the thesis' sharing ratio (trigger / 4, at least 1).
    ///
    /// ```
    /// let p = partita_numa::policy::Params::with_trigger(64);
    /// assert_eq!(p.sharing, 16);
    /// ```
    pub fn with_trigger(trigger: u32) -> Params {
        Params {
            trigger: trigger.max(1),
            sharing: (trigger / 4).max(1),
            ..Params::default()
        }
    }

    /// `move cost / remote-miss penalty`, the rule of thumb for the trigger (at least 1).
    ///
    /// ```
    /// let t = partita_numa::policy::Params::derived_trigger(200_000, 1_200);
    /// assert_eq!(t, 166);
    /// ```
    pub fn derived_trigger(move_cost_ns: u64, remote_penalty_ns: u64) -> u32 {
        (move_cost_ns / remote_penalty_ns.max(1)).clamp(1, u32::MAX as u64) as u32
    }
}

/// Which copies of a page exist: one master and a set of read-only replicas (at most one copy
/// per node). Node count is at most 64.
///
/// ```
/// use partita_numa::policy::CopySet;
/// let mut c = CopySet::new(0);
/// c.replicate(2);
/// assert!(c.has_copy_on(2) && !c.writable());
/// c.collapse();
/// assert!(c.writable() && c.copies() == 1);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct CopySet {
    master: NodeId,
    replicas: u64,
}

impl CopySet {
    /// A single (writable) copy on `master`.
    ///
    /// # Panics
    ///
    /// If `master >= 64` (a `CopySet` covers nodes `0..64`).
    ///
    /// ```
    /// assert_eq!(partita_numa::policy::CopySet::new(3).master(), 3);
    /// ```
    pub fn new(master: NodeId) -> CopySet {
        assert!(master < 64, "CopySet supports nodes 0..64");
        CopySet {
            master,
            replicas: 0,
        }
    }

    /// The node holding the master copy.
    ///
    /// ```
    /// assert_eq!(partita_numa::policy::CopySet::new(1).master(), 1);
    /// ```
    pub fn master(&self) -> NodeId {
        self.master
    }

    /// Whether some copy (master or replica) is on `node`.
    ///
    /// ```
    /// assert!(partita_numa::policy::CopySet::new(1).has_copy_on(1));
    /// ```
    pub fn has_copy_on(&self, node: NodeId) -> bool {
        node == self.master || self.has_replica_on(node)
    }

    /// Whether a replica (not the master) is on `node`.
    ///
    /// ```
    /// assert!(!partita_numa::policy::CopySet::new(1).has_replica_on(1));
    /// ```
    pub fn has_replica_on(&self, node: NodeId) -> bool {
        node < 64 && self.replicas & (1 << node) != 0
    }

    /// Number of copies (1 + replicas).
    ///
    /// ```
    /// assert_eq!(partita_numa::policy::CopySet::new(0).copies(), 1);
    /// ```
    pub fn copies(&self) -> usize {
        1 + self.replicas.count_ones() as usize
    }

    /// The page may be written only while it has a single copy.
    ///
    /// ```
    /// assert!(partita_numa::policy::CopySet::new(0).writable());
    /// ```
    pub fn writable(&self) -> bool {
        self.replicas == 0
    }

    /// The nodes holding a copy, master first.
    ///
    /// ```
    /// let mut c = partita_numa::policy::CopySet::new(2);
    /// c.replicate(0);
    /// assert_eq!(c.nodes(), vec![2, 0]);
    /// ```
    pub fn nodes(&self) -> Vec<NodeId> {
        let mut v = vec![self.master];
        v.extend((0..64).filter(|n| self.has_replica_on(*n)));
        v
    }

    /// Adds a replica on `node`; `false` if a copy is already there (or `node >= 64`).
    ///
    /// ```
    /// let mut c = partita_numa::policy::CopySet::new(0);
    /// assert!(c.replicate(1));
    /// assert!(!c.replicate(1));
    /// ```
    pub fn replicate(&mut self, node: NodeId) -> bool {
        if node >= 64 || self.has_copy_on(node) {
            return false;
        }
        self.replicas |= 1 << node;
        true
    }

    /// Moves the master to `node` (dropping a replica that was there, which becomes the
    /// master). `false` if the master is already there.
    ///
    /// ```
    /// let mut c = partita_numa::policy::CopySet::new(0);
    /// assert!(c.migrate(1));
    /// assert_eq!(c.master(), 1);
    /// ```
    pub fn migrate(&mut self, node: NodeId) -> bool {
        if node >= 64 || node == self.master {
            return false;
        }
        self.replicas &= !(1 << node);
        self.master = node;
        true
    }

    /// Removes every replica, keeping the master (what a write to a replicated page does).
    ///
    /// ```
    /// let mut c = partita_numa::policy::CopySet::new(0);
    /// c.replicate(1);
    /// c.collapse();
    /// assert_eq!(c.copies(), 1);
    /// ```
    pub fn collapse(&mut self) {
        self.replicas = 0;
    }

    /// Reclaims the copy on `node` (memory pressure). The last copy is never reclaimed; if the
    /// master is reclaimed while replicas exist, the lowest replica becomes master. Returns
    /// whether a copy was removed.
    ///
    /// ```
    /// let mut c = partita_numa::policy::CopySet::new(0);
    /// assert!(!c.reclaim(0)); // last copy
    /// c.replicate(1);
    /// assert!(c.reclaim(0));
    /// assert_eq!(c.master(), 1);
    /// ```
    pub fn reclaim(&mut self, node: NodeId) -> bool {
        if self.has_replica_on(node) {
            self.replicas &= !(1 << node);
            true
        } else if node == self.master && self.replicas != 0 {
            let new = self.replicas.trailing_zeros() as NodeId;
            self.replicas &= !(1 << new);
            self.master = new;
            true
        } else {
            false
        }
    }
}

impl fmt::Debug for CopySet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "CopySet{{master: {}, copies: {:?}}}",
            self.master,
            self.nodes()
        )
    }
}

/// The counters of one page that [`decide`] reads.
///
/// ```
/// use partita_numa::policy::PageCounters;
/// let c = PageCounters { misses: vec![128, 0], writes: 0, requester: 0 };
/// assert_eq!(c.requester_misses(), 128);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageCounters {
    /// Miss (access) count per node since the last reset.
    pub misses: Vec<u32>,
    /// Write count since the last reset.
    pub writes: u32,
    /// The node whose miss is being considered (the one that just missed).
    pub requester: NodeId,
}

impl PageCounters {
    /// The requester's count (0 if out of range).
    ///
    /// ```
    /// use partita_numa::policy::PageCounters;
    /// assert_eq!(PageCounters { misses: vec![], writes: 0, requester: 3 }.requester_misses(), 0);
    /// ```
    pub fn requester_misses(&self) -> u32 {
        self.misses.get(self.requester).copied().unwrap_or(0)
    }
}

/// The state [`decide`] reads besides the counters: where the copies are, when the page last
/// moved, and whether the system can act now.
///
/// ```
/// use partita_numa::policy::{CopySet, PageState};
/// let s = PageState::new(CopySet::new(0), 0);
/// assert!(s.lock_available && s.target_has_free_page && !s.memory_pressure);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageState {
    /// The page's copies.
    pub copies: CopySet,
    /// Time of the last migration (ns), if any.
    pub last_migration_ns: Option<u64>,
    /// Now (ns).
    pub now_ns: u64,
    /// Memory is short: do not create replicas.
    pub memory_pressure: bool,
    /// The target node has a free page.
    pub target_has_free_page: bool,
    /// The page's lock could be taken without waiting.
    pub lock_available: bool,
}

impl PageState {
    /// A page with these copies, at time `now_ns`, never migrated, on an idle system.
    ///
    /// ```
    /// let s = partita_numa::policy::PageState::new(partita_numa::policy::CopySet::new(1), 5);
    /// assert_eq!(s.now_ns, 5);
    /// ```
    pub fn new(copies: CopySet, now_ns: u64) -> PageState {
        PageState {
            copies,
            last_migration_ns: None,
            now_ns,
            memory_pressure: false,
            target_has_free_page: true,
            lock_available: true,
        }
    }
}

/// Why [`decide`] chose to do nothing.
///
/// ```
/// use partita_numa::policy::NoAction;
/// assert_ne!(NoAction::BelowTrigger, NoAction::CoolDown);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NoAction {
    /// The requester's count has not reached the trigger.
    BelowTrigger,
    /// The master copy is already on the requester's node.
    AlreadyLocal,
    /// Shared, but written: replication would only be collapsed again.
    SharedWritten,
    /// Shared, but memory is short.
    MemoryPressure,
    /// Migrated too recently (the page is frozen).
    CoolDown,
    /// Optimism: the page's lock is busy.
    LockBusy,
    /// Optimism: no free page on the target node.
    NoFreePage,
}

/// What to do with the page.
///
/// ```
/// use partita_numa::policy::Action;
/// assert!(Action::Migrate { to: 1 }.is_move());
/// assert!(!Action::Rearrange { to: 1 }.is_move());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Nothing, and why.
    None(NoAction),
    /// Point the requester's mapping at the replica already on its node.
    Rearrange {
        /// The requester's node.
        to: NodeId,
    },
    /// Create a read-only replica on the requester's node.
    Replicate {
        /// The requester's node.
        on: NodeId,
    },
    /// Move the master copy to the requester's node.
    Migrate {
        /// The requester's node.
        to: NodeId,
    },
}

impl Action {
    /// Whether the action copies a page (migrate or replicate).
    ///
    /// ```
    /// assert!(partita_numa::policy::Action::Replicate { on: 0 }.is_move());
    /// ```
    pub fn is_move(&self) -> bool {
        matches!(self, Action::Migrate { .. } | Action::Replicate { .. })
    }
}

/// Verghese's decision for one page when `counters.requester`'s miss counter has been
/// incremented.
///
/// In order: below trigger → nothing; the master is local → nothing; a replica is local →
/// rearrange; some *other* node's count exceeds `sharing` → shared → replicate unless written
/// (`writes ≥ write_threshold`) or memory is short; otherwise migrate unless within the
/// cool-down. Optimism: if the lock is busy (any action), or the target node has no free page
/// (replicate, migrate), nothing happens.
///
/// ```
/// use partita_numa::policy::{decide, Action, CopySet, PageCounters, PageState, Params};
/// let p = Params::default();
/// let s = PageState::new(CopySet::new(0), 0);
/// let hot_on_1 = PageCounters { misses: vec![0, 128], writes: 0, requester: 1 };
/// assert_eq!(decide(&hot_on_1, &p, &s), Action::Migrate { to: 1 });
/// let shared = PageCounters { misses: vec![40, 128], writes: 0, requester: 1 };
/// assert_eq!(decide(&shared, &p, &s), Action::Replicate { on: 1 });
/// ```
pub fn decide(counters: &PageCounters, params: &Params, state: &PageState) -> Action {
    let node = counters.requester;
    if counters.requester_misses() < params.trigger {
        return Action::None(NoAction::BelowTrigger);
    }
    if state.copies.master() == node {
        return Action::None(NoAction::AlreadyLocal);
    }
    if !state.lock_available {
        return Action::None(NoAction::LockBusy);
    }
    if state.copies.has_replica_on(node) {
        return Action::Rearrange { to: node };
    }
    let shared = counters
        .misses
        .iter()
        .enumerate()
        .any(|(n, &c)| n != node && c > params.sharing);
    if shared {
        if counters.writes >= params.write_threshold {
            return Action::None(NoAction::SharedWritten);
        }
        if state.memory_pressure {
            return Action::None(NoAction::MemoryPressure);
        }
        if !state.target_has_free_page {
            return Action::None(NoAction::NoFreePage);
        }
        return Action::Replicate { on: node };
    }
    if let Some(t) = state.last_migration_ns {
        if state.now_ns.saturating_sub(t) < params.cooldown_ns {
            return Action::None(NoAction::CoolDown);
        }
    }
    if !state.target_has_free_page {
        return Action::None(NoAction::NoFreePage);
    }
    Action::Migrate { to: node }
}

/// Per-page, per-node miss counters plus write counters with a periodic reset — the counter
/// hygiene the policy needs: a page's counters are zeroed when it moves, and all counters at
/// each reset interval.
///
/// ```
/// use partita_numa::policy::CounterTable;
/// let mut t = CounterTable::new(4, 2, 1_000);
/// assert_eq!(t.record(3, 1, false, 10), 1);
/// assert_eq!(t.record(3, 1, true, 20), 2);
/// assert_eq!(t.counters(3, 1).writes, 1);
/// t.record(0, 0, false, 1_500); // crosses the reset interval: everything was zeroed first
/// assert_eq!(t.counters(3, 1).misses, vec![0, 0]);
/// ```
#[derive(Clone, Debug)]
pub struct CounterTable {
    nodes: usize,
    misses: Vec<u32>,
    writes: Vec<u32>,
    reset_interval_ns: u64,
    last_reset_ns: u64,
}

impl CounterTable {
    /// Counters for `pages` pages on `nodes` nodes, zeroed every `reset_interval_ns`.
    ///
    /// ```
    /// let t = partita_numa::policy::CounterTable::new(1, 1, 100);
    /// assert_eq!(t.counters(0, 0).misses, vec![0]);
    /// ```
    pub fn new(pages: usize, nodes: usize, reset_interval_ns: u64) -> CounterTable {
        CounterTable {
            nodes,
            misses: vec![0; pages * nodes],
            writes: vec![0; pages],
            reset_interval_ns,
            last_reset_ns: 0,
        }
    }

    /// Zeroes everything if a reset interval has passed since the last reset.
    ///
    /// ```
    /// let mut t = partita_numa::policy::CounterTable::new(1, 1, 100);
    /// t.record(0, 0, false, 0);
    /// t.tick(100);
    /// assert_eq!(t.counters(0, 0).misses, vec![0]);
    /// ```
    pub fn tick(&mut self, now_ns: u64) {
        if self.reset_interval_ns > 0
            && now_ns.saturating_sub(self.last_reset_ns) >= self.reset_interval_ns
        {
            self.misses.fill(0);
            self.writes.fill(0);
            self.last_reset_ns =
                now_ns - now_ns.saturating_sub(self.last_reset_ns) % self.reset_interval_ns;
        }
    }

    /// Counts one miss by `node` on `page` at `now_ns` (after applying any due reset) and
    /// returns `node`'s count. Counts saturate at `u32::MAX`.
    ///
    /// ```
    /// let mut t = partita_numa::policy::CounterTable::new(2, 2, 0);
    /// assert_eq!(t.record(1, 0, false, 0), 1);
    /// ```
    pub fn record(&mut self, page: usize, node: NodeId, write: bool, now_ns: u64) -> u32 {
        self.tick(now_ns);
        let i = page * self.nodes + node;
        self.misses[i] = self.misses[i].saturating_add(1);
        if write {
            self.writes[page] = self.writes[page].saturating_add(1);
        }
        self.misses[i]
    }

    /// Counts `count` misses by `node` on `page` at once (one sample standing for several
    /// misses, e.g. a sampled page fault); returns `node`'s count. Saturates at `u32::MAX`.
    ///
    /// ```
    /// let mut t = partita_numa::policy::CounterTable::new(1, 2, 0);
    /// assert_eq!(t.record_n(0, 1, false, 64, 0), 64);
    /// assert_eq!(t.counters(0, 1).misses, vec![0, 64]);
    /// ```
    pub fn record_n(
        &mut self,
        page: usize,
        node: NodeId,
        write: bool,
        count: u32,
        now_ns: u64,
    ) -> u32 {
        self.tick(now_ns);
        let i = page * self.nodes + node;
        self.misses[i] = self.misses[i].saturating_add(count);
        if write {
            self.writes[page] = self.writes[page].saturating_add(count);
        }
        self.misses[i]
    }

    /// Zeroes one page's counters (its copies moved: the new page starts from zero).
    ///
    /// ```
    /// let mut t = partita_numa::policy::CounterTable::new(1, 1, 0);
    /// t.record(0, 0, true, 0);
    /// t.clear_page(0);
    /// assert_eq!(t.counters(0, 0).writes, 0);
    /// ```
    pub fn clear_page(&mut self, page: usize) {
        let n = self.nodes;
        self.misses[page * n..(page + 1) * n].fill(0);
        self.writes[page] = 0;
    }

    /// Zeroes every counter now (a caller that decides at its own rounds resets here instead
    /// of on a clock: see the runtime's sampler).
    ///
    /// ```
    /// let mut t = partita_numa::policy::CounterTable::new(2, 2, 0);
    /// t.record(1, 1, true, 5);
    /// t.clear();
    /// assert_eq!((t.counters(1, 1).misses, t.counters(1, 1).writes), (vec![0, 0], 0));
    /// ```
    pub fn clear(&mut self) {
        self.misses.fill(0);
        self.writes.fill(0);
    }

    /// The page's counters, with `requester` as the deciding node.
    ///
    /// ```
    /// let t = partita_numa::policy::CounterTable::new(1, 3, 0);
    /// assert_eq!(t.counters(0, 2).requester, 2);
    /// ```
    pub fn counters(&self, page: usize, requester: NodeId) -> PageCounters {
        let n = self.nodes;
        PageCounters {
            misses: self.misses[page * n..(page + 1) * n].to_vec(),
            writes: self.writes[page],
            requester,
        }
    }

    /// Number of pages.
    ///
    /// ```
    /// assert_eq!(partita_numa::policy::CounterTable::new(3, 2, 0).pages(), 3);
    /// ```
    pub fn pages(&self) -> usize {
        self.writes.len()
    }
}

impl CounterTable {
    /// Zeroes one node's miss count on a page (after a decision that did nothing), keeping the
    /// other nodes' counts and the write count.
    ///
    /// ```
    /// let mut t = partita_numa::policy::CounterTable::new(1, 2, 0);
    /// t.record(0, 0, false, 0);
    /// t.record(0, 1, false, 0);
    /// t.clear_node(0, 0);
    /// assert_eq!(t.counters(0, 0).misses, vec![0, 1]);
    /// ```
    pub fn clear_node(&mut self, page: usize, node: NodeId) {
        self.misses[page * self.nodes + node] = 0;
    }
}
