//! The plumbing around [`crate::policy::decide`] for real memory: a [`Migrator`] keeps the
//! per-page state of one region, turns counters into a plan (pure), and carries out the plan's
//! migrations with batched `move_pages`.
//!
//! Linux cannot replicate a page in user space, so `Replicate` and `Rearrange` decisions are
//! reported, not executed; values that should be replicated live in
//! [`crate::Replicated`].

use crate::error::Result;
use crate::pages::{MoveScope, PageStatus, locate, move_pages_to};
use crate::policy::{Action, CopySet, CounterTable, NodeId, PageState, Params, decide};
use crate::range::{PageRange, page_size};

/// What [`Migrator::apply`] did.
///
/// ```
/// let r = partita_numa::driver::Applied::default();
/// assert_eq!(r.migrated + r.failed + r.not_executed, 0);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Applied {
    /// Pages moved to the planned node.
    pub migrated: usize,
    /// Pages the kernel could not move (left where they were; their state is unchanged).
    pub failed: usize,
    /// Replicate / rearrange decisions, which raw pages cannot carry out.
    pub not_executed: usize,
}

/// Runs Verghese's policy over one region of this process's memory.
///
/// ```
/// use partita_numa::driver::Migrator;
/// use partita_numa::policy::{CounterTable, Params};
/// use partita_numa::{NodeVec, Placement};
/// let v = NodeVec::from_fn(4 * partita_numa::page_size(), Placement::FirstTouch, |_| 0u8).unwrap();
/// let mut m = Migrator::new(v.pages().unwrap(), Params::default()).unwrap();
/// let table = CounterTable::new(4, 1, 0); // no counts yet
/// assert!(m.plan(&table, 0, false).is_empty());
/// ```
#[derive(Clone, Debug)]
pub struct Migrator {
    range: PageRange,
    params: Params,
    copies: Vec<CopySet>,
    last_migration_ns: Vec<Option<u64>>,
}

impl Migrator {
    /// Starts managing `range`, reading where its pages are now (pages not yet present count as
    /// being on node 0 until they are placed).
    ///
    /// ```
    /// use partita_numa::{driver::Migrator, policy::Params, NodeVec, Placement};
    /// let v = NodeVec::from_fn(100, Placement::Node(0), |i| i).unwrap();
    /// let m = Migrator::new(v.pages().unwrap(), Params::default()).unwrap();
    /// assert_eq!(m.home(0), 0);
    /// ```
    pub fn new(range: PageRange, params: Params) -> Result<Migrator> {
        let copies = locate(range)?
            .into_iter()
            .map(|s| CopySet::new(s.node().map_or(0, |n| (n as usize).min(63))))
            .collect();
        Ok(Migrator {
            range,
            params,
            last_migration_ns: vec![None; range.pages()],
            copies,
        })
    }

    /// The node a page is on, as far as the migrator knows.
    ///
    /// ```
    /// use partita_numa::{driver::Migrator, policy::Params, NodeVec, Placement};
    /// let v = NodeVec::from_fn(10, Placement::Node(0), |i| i).unwrap();
    /// assert_eq!(Migrator::new(v.pages().unwrap(), Params::default()).unwrap().home(0), 0);
    /// ```
    pub fn home(&self, page: usize) -> NodeId {
        self.copies[page].master()
    }

    /// The decisions for every page and node whose counter has reached the trigger (pure: no
    /// system call). `table` must cover this region's pages (`table.pages()` ≥ region pages).
    ///
    /// ```
    /// use partita_numa::{driver::Migrator, policy::*, NodeVec, Placement};
    /// let v = NodeVec::from_fn(2 * partita_numa::page_size(), Placement::Node(0), |_| 0u8).unwrap();
    /// let m = Migrator::new(v.pages().unwrap(), Params::with_trigger(2)).unwrap();
    /// let mut t = CounterTable::new(2, 2, 0);
    /// t.record(1, 1, false, 0);
    /// t.record(1, 1, false, 0);
    /// assert_eq!(m.plan(&t, 0, false), vec![(1, Action::Migrate { to: 1 })]);
    /// ```
    pub fn plan(
        &self,
        table: &CounterTable,
        now_ns: u64,
        memory_pressure: bool,
    ) -> Vec<(usize, Action)> {
        let mut out = Vec::new();
        for page in 0..self.copies.len().min(table.pages()) {
            let counts = table.counters(page, 0).misses;
            // The hottest node past the trigger speaks for the page.
            let Some((node, _)) = counts
                .iter()
                .enumerate()
                .filter(|(_, c)| **c >= self.params.trigger)
                .max_by_key(|(_, c)| **c)
            else {
                continue;
            };
            let mut state = PageState::new(self.copies[page], now_ns);
            state.last_migration_ns = self.last_migration_ns[page];
            state.memory_pressure = memory_pressure;
            let action = decide(&table.counters(page, node), &self.params, &state);
            if !matches!(action, Action::None(_)) {
                out.push((page, action));
            }
        }
        out
    }

    /// Carries out `plan`: migrations are grouped by target node and moved with `move_pages`,
    /// `params.batch` pages per call; a page's counters are cleared when it moves. Pages the
    /// kernel refuses stay where they are and keep their state (optimism).
    ///
    /// ```
    /// use partita_numa::{driver::Migrator, policy::*, NodeVec, Placement};
    /// let v = NodeVec::from_fn(partita_numa::page_size(), Placement::Node(0), |_| 0u8).unwrap();
    /// let mut m = Migrator::new(v.pages().unwrap(), Params::default()).unwrap();
    /// let mut t = CounterTable::new(1, 1, 0);
    /// let done = m.apply(&[(0, Action::Replicate { on: 0 })], &mut t, 0).unwrap();
    /// assert_eq!(done.not_executed, 1);
    /// ```
    pub fn apply(
        &mut self,
        plan: &[(usize, Action)],
        table: &mut CounterTable,
        now_ns: u64,
    ) -> Result<Applied> {
        let mut done = Applied::default();
        let ps = page_size();
        let mut targets: Vec<NodeId> = plan
            .iter()
            .filter_map(|(_, a)| match a {
                Action::Migrate { to } => Some(*to),
                _ => None,
            })
            .collect();
        targets.sort_unstable();
        targets.dedup();
        done.not_executed = plan
            .iter()
            .filter(|(_, a)| matches!(a, Action::Replicate { .. } | Action::Rearrange { .. }))
            .count();
        for to in targets {
            let pages: Vec<usize> = plan
                .iter()
                .filter(|(p, a)| *a == Action::Migrate { to } && *p < self.copies.len())
                .map(|(p, _)| *p)
                .collect();
            let addrs: Vec<usize> = pages.iter().map(|p| self.range.start() + p * ps).collect();
            let status = move_pages_to(
                &addrs,
                to as u32,
                self.params.batch.max(1) as usize,
                MoveScope::Exclusive,
            )?;
            for (page, st) in pages.into_iter().zip(status) {
                if st == PageStatus::Node(to as u32) {
                    self.copies[page].migrate(to);
                    self.last_migration_ns[page] = Some(now_ns);
                    table.clear_page(page);
                    done.migrated += 1;
                } else {
                    done.failed += 1;
                }
            }
        }
        Ok(done)
    }
}
