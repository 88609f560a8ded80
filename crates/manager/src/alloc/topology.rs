//! Which CPUs on a machine with several NUMA nodes: node-first, then last-level cache.
//!
//! The rule (issue 14): an application's CPUs stay within one node whenever its count fits in
//! one, and new CPUs come from the node (then the LLC) of its current ones, because memory the
//! runtime placed on a node follows the CPUs only at a cost (page migration).
//!
//! 1. **Keep.** Every member keeps its previous CPUs up to its new count. A member whose
//!    count fits in one node keeps only those on its *home* node (the node holding most of
//!    them); the others are given up (counted as `conflicts` when not explained by a shrink).
//! 2. **Grow**, largest count first (first-fit decreasing packs nodes best): a member takes
//!    the missing CPUs from its home node if that node has room; otherwise, if some node has
//!    room for its whole count, it moves to the roomiest such node (its old CPUs are
//!    `conflicts`; a new member starts there too, leaving room to grow); otherwise it
//!    spills over the nodes with the most free CPUs. Inside a node it prefers its own LLC,
//!    then CPUs nobody held before (no move), then CPUs it used before, then low numbers.
//!
//! `moves` counts the CPUs now owned by a member other than their previous owner (as in
//! [`super::placement`]). Every such CPU was given up by its previous owner, by shrinking or
//! as a conflict, so `moves ≤ Σ|Δcount| + conflicts` (proptested in `alloc/tests_numa.rs`).

use super::placement::Owners;
use super::{MemberId, MemberMap};
use partita_protocol::CpuSet;
use std::cmp::Reverse;
use std::collections::BTreeMap;

/// NUMA node and last-level-cache domain of every managed CPU (indexed like the manager's
/// CPU list). Read from the machine by [`crate::hardware::cpu_topology`] (nothing in
/// [`crate::alloc`] touches the system).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuTopology {
    /// Node of each CPU.
    pub nodes: Vec<u32>,
    /// Last-level cache (L3, else L2) domain of each CPU.
    pub llcs: Vec<u32>,
}

impl CpuTopology {
    /// Whether there is more than one node (otherwise the plain placement is used).
    ///
    /// ```
    /// use partita_manager::alloc::topology::CpuTopology;
    /// assert!(!CpuTopology { nodes: vec![0, 0], llcs: vec![0, 0] }.multi_node());
    /// assert!(CpuTopology { nodes: vec![0, 1], llcs: vec![0, 1] }.multi_node());
    /// ```
    pub fn multi_node(&self) -> bool {
        self.nodes.windows(2).any(|w| w[0] != w[1])
    }
}

/// Result of [`place_numa`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NumaPlacement {
    /// CPU set per member.
    pub sets: BTreeMap<MemberId, CpuSet>,
    /// CPUs now owned by a member other than their previous owner.
    pub moves: u32,
    /// CPUs a member gave up although its count did not shrink (to stay within one node).
    pub conflicts: u32,
}

/// Assign CPU sets node-first. `nodes[i]` / `llcs[i]` are the node and LLC of `cpus[i]`
/// (missing: 0); `prev` and `holders` as in [`super::placement::place_with_holders`].
///
/// ```
/// use partita_manager::alloc::{topology::place_numa, MemberHistory, MemberMap, MemberId::App};
/// use std::collections::BTreeMap;
/// let mut prev = MemberMap::default();
/// prev.insert(App(1), MemberHistory { last_cpus: [0].into_iter().collect(), ..Default::default() });
/// // CPUs 0,1 on node 0 and 2,3 on node 1; app 1 grows from 1 to 2 CPUs: it stays on node 0.
/// let counts = BTreeMap::from([(App(1), 2), (App(2), 2)]);
/// let p = place_numa(&[0, 1, 2, 3], &[0, 0, 1, 1], &[0, 0, 1, 1], &counts, &prev, &[App(1)]);
/// assert_eq!(p.sets[&App(1)].to_vec(), vec![0, 1]);
/// assert_eq!(p.sets[&App(2)].to_vec(), vec![2, 3]);
/// assert_eq!((p.moves, p.conflicts), (0, 0));
/// ```
pub fn place_numa(
    cpus: &[usize],
    nodes: &[u32],
    llcs: &[u32],
    counts: &BTreeMap<MemberId, u32>,
    prev: &MemberMap,
    holders: &[MemberId],
) -> NumaPlacement {
    let mut board = Board::new(cpus, nodes, llcs, prev, holders);
    let mut sets: BTreeMap<MemberId, CpuSet> = BTreeMap::new();
    for (&m, &n) in counts.iter().filter(|e| *e.1 > 0) {
        sets.insert(m, board.keep(m, n, prev));
    }
    let mut order: Vec<(MemberId, u32)> = counts
        .iter()
        .filter(|e| *e.1 > 0)
        .map(|(&m, &n)| (m, n))
        .collect();
    order.sort_by_key(|&(m, n)| (Reverse(n), m));
    for (m, n) in order {
        let used = prev.get(&m).map(|h| h.used_before).unwrap_or_default();
        if let Some(set) = sets.get_mut(&m) {
            board.grow(m, n, &used, set);
        }
    }
    let conflicts = board.conflicts(prev, holders, &sets);
    NumaPlacement {
        moves: board.own.moves(),
        conflicts,
        sets,
    }
}

/// Who owns which CPU, before and during one placement, and where each is; indexed by CPU
/// number.
struct Board {
    node_of: Vec<u32>,
    llc_of: Vec<u32>,
    own: Owners,
    /// CPUs of each node, ascending.
    node_cpus: BTreeMap<u32, Vec<usize>>,
    largest_node: usize,
}

impl Board {
    fn new(
        cpus: &[usize],
        nodes: &[u32],
        llcs: &[u32],
        prev: &MemberMap,
        holders: &[MemberId],
    ) -> Board {
        let own = Owners::new(cpus, prev, holders);
        let max_cpu = own.now.len();
        let (mut node_of, mut llc_of) = (vec![0u32; max_cpu], vec![0u32; max_cpu]);
        let mut node_cpus: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for (i, &c) in cpus.iter().enumerate() {
            node_of[c] = nodes.get(i).copied().unwrap_or(0);
            llc_of[c] = llcs.get(i).copied().unwrap_or(0);
            node_cpus.entry(node_of[c]).or_default().push(c);
        }
        for list in node_cpus.values_mut() {
            list.sort_unstable();
            list.dedup();
        }
        Board {
            largest_node: node_cpus.values().map(Vec::len).max().unwrap_or(0),
            node_of,
            llc_of,
            own,
            node_cpus,
        }
    }

    fn free(&self, c: usize) -> bool {
        self.own.free(c)
    }

    fn free_in(&self, node: u32) -> usize {
        self.node_cpus
            .get(&node)
            .map_or(0, |l| l.iter().filter(|&&c| self.free(c)).count())
    }

    fn claim(&mut self, m: MemberId, c: usize, set: &mut CpuSet) {
        self.own.now[c] = Some(m);
        set.insert(c);
    }

    /// Step 1: keep previous CPUs (only the home node's when the count fits in a node).
    fn keep(&mut self, m: MemberId, n: u32, prev: &MemberMap) -> CpuSet {
        let mut set = CpuSet::new();
        let Some(h) = prev.get(&m) else {
            return set;
        };
        let mut mine: Vec<usize> = h.last_cpus.iter().filter(|&c| self.free(c)).collect();
        let per_node = population(&mine, &self.node_of);
        let per_llc = population(&mine, &self.llc_of);
        if n as usize <= self.largest_node {
            if let Some(home) = densest(&per_node) {
                mine.retain(|&c| self.node_of[c] == home);
            }
        }
        mine.sort_by_key(|&c| {
            (
                Reverse(per_node[&self.node_of[c]]),
                Reverse(per_llc[&self.llc_of[c]]),
                c,
            )
        });
        mine.truncate(n as usize);
        for c in mine {
            self.claim(m, c, &mut set);
        }
        set
    }

    /// Step 2: take the missing CPUs, node-first.
    fn grow(&mut self, m: MemberId, n: u32, used: &CpuSet, set: &mut CpuSet) {
        let want = n as usize;
        if set.len() >= want {
            return;
        }
        let home = densest(&population(&set.to_vec(), &self.node_of));
        let fits = want <= self.largest_node;
        let room_home = home.is_some_and(|h| self.free_in(h) >= want - set.len());
        if fits && !room_home {
            // The node with the most room that holds the whole count (room to grow later;
            // largest counts go first, so packing stays good).
            let target = self
                .node_cpus
                .keys()
                .copied()
                .filter(|&d| Some(d) != home && self.free_in(d) >= want)
                .max_by_key(|&d| (self.free_in(d), Reverse(d)));
            if let Some(d) = target {
                for c in set.iter() {
                    self.own.now[c] = None;
                }
                *set = CpuSet::new();
                self.take_from(m, d, want, used, set);
                return;
            }
        }
        // Home node first, then the nodes with the most free CPUs.
        let mut order: Vec<u32> = self.node_cpus.keys().copied().collect();
        order.sort_by_key(|&d| (Some(d) != home, Reverse(self.free_in(d)), d));
        for d in order {
            if set.len() >= want {
                break;
            }
            self.take_from(m, d, want, used, set);
        }
    }

    /// Take free CPUs of `node` until `set` has `want`: own LLC, never-held, used-before first.
    fn take_from(&mut self, m: MemberId, node: u32, want: usize, used: &CpuSet, set: &mut CpuSet) {
        let home_llc = densest(&population(&set.to_vec(), &self.llc_of));
        let mut cands: Vec<usize> = self.node_cpus[&node]
            .iter()
            .copied()
            .filter(|&c| self.free(c))
            .collect();
        cands.sort_by_key(|&c| {
            (
                home_llc.is_some_and(|l| l != self.llc_of[c]),
                self.own.old[c].is_some_and(|o| o != m),
                !used.contains(c),
                c,
            )
        });
        for c in cands.into_iter().take(want.saturating_sub(set.len())) {
            self.claim(m, c, set);
        }
    }

    /// Σ over previous holders of (available CPUs given up − shrink), never negative.
    fn conflicts(
        &self,
        prev: &MemberMap,
        holders: &[MemberId],
        sets: &BTreeMap<MemberId, CpuSet>,
    ) -> u32 {
        let empty = CpuSet::new();
        holders
            .iter()
            .filter_map(|m| prev.get(m).map(|h| (m, h)))
            .map(|(m, h)| {
                let now = sets.get(m).unwrap_or(&empty);
                let old: Vec<usize> = h
                    .last_cpus
                    .iter()
                    .filter(|&c| c < self.own.available.len() && self.own.available[c])
                    .collect();
                let lost = old.iter().filter(|&&c| !now.contains(c)).count();
                let shrink = old.len().saturating_sub(now.len());
                lost.saturating_sub(shrink) as u32
            })
            .sum()
    }
}

/// How many of `cpus` fall in each class of `class_of`.
fn population(cpus: &[usize], class_of: &[u32]) -> BTreeMap<u32, usize> {
    let mut per = BTreeMap::new();
    for &c in cpus {
        *per.entry(class_of[c]).or_default() += 1;
    }
    per
}

/// The most populated class (ties: the lowest id); `None` when empty.
fn densest(per: &BTreeMap<u32, usize>) -> Option<u32> {
    per.iter()
        .max_by_key(|&(d, n)| (*n, Reverse(*d)))
        .map(|x| *x.0)
}

/// The allocator's placement step: node-first on a multi-node machine ([`place_numa`], LLC
/// domains from `input.domains`), the plain [`super::placement`] otherwise.
pub(crate) fn place(
    input: &super::AllocInput,
    counts: &BTreeMap<MemberId, u32>,
    prev: &MemberMap,
    holders: &[MemberId],
) -> super::placement::Placement {
    let multi = input.nodes.windows(2).any(|w| w[0] != w[1]);
    if !multi {
        return super::placement::place_with_holders(
            &input.cpus,
            &input.domains,
            counts,
            prev,
            holders,
        );
    }
    let p = place_numa(
        &input.cpus,
        &input.nodes,
        &input.domains,
        counts,
        prev,
        holders,
    );
    if p.conflicts > 0 {
        tracing::debug!(
            conflicts = p.conflicts,
            "members moved to stay within one node"
        );
    }
    super::placement::Placement {
        sets: p.sets,
        moves: p.moves,
    }
}
