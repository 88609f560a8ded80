//! Which CPUs: selective, affinity-keeping assignment (NANOS).
//!
//! 1. Every member keeps the CPUs it had, as many as its new count allows (when shrinking it
//!    keeps those in its best-populated domain, then the lowest numbers).
//! 2. Members that need more take, in order of preference: CPUs they used before; idle CPUs
//!    (owned by nobody in the previous allocation) in the domain of their other CPUs; other
//!    idle CPUs; CPUs in their domain; any CPU.
//!
//! So a reallocation moves only CPUs whose owner's count changed; `moves` counts the CPUs
//! handed to a different owner than before.

use super::{MemberId, MemberMap};
use partita_protocol::CpuSet;
use std::collections::BTreeMap;

/// Result of [`place`].
///
/// ```
/// assert_eq!(partita_manager::alloc::placement::Placement::default().moves, 0);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Placement {
    /// CPU set per member (`len() == count`, as far as CPUs exist).
    pub sets: BTreeMap<MemberId, CpuSet>,
    /// CPUs now owned by a member other than their previous owner.
    pub moves: u32,
}

/// Assign CPU sets. `domains[i]` is the domain of `cpus[i]` (missing: domain 0); `prev` holds
/// each member's last set and the CPUs it used before. Members with a count of 0 get no entry.
///
/// ```
/// use partita_manager::alloc::{placement::place, MemberHistory, MemberId::App};
/// use std::collections::BTreeMap;
/// let mut prev = partita_manager::alloc::MemberMap::default();
/// prev.insert(App(1), MemberHistory { last_cpus: [2, 3].into_iter().collect(), ..Default::default() });
/// let counts = BTreeMap::from([(App(1), 2), (App(2), 2)]);
/// let p = place(&[0, 1, 2, 3], &[], &counts, &prev);
/// assert_eq!(p.sets[&App(1)].to_vec(), vec![2, 3]); // kept
/// assert_eq!(p.sets[&App(2)].to_vec(), vec![0, 1]);
/// assert_eq!(p.moves, 0); // CPUs 0 and 1 were idle
/// ```
pub fn place(
    cpus: &[usize],
    domains: &[u32],
    counts: &BTreeMap<MemberId, u32>,
    prev: &MemberMap,
) -> Placement {
    let holders: Vec<MemberId> = prev
        .iter()
        .filter(|(_, h)| !h.last_cpus.is_empty())
        .map(|(m, _)| *m)
        .collect();
    place_with_holders(cpus, domains, counts, prev, &holders)
}

/// [`place`] when the caller knows which members held CPUs before (`holders`), so that the
/// members without CPUs (most of them, with 10^4 applications) are never visited.
///
/// ```
/// use partita_manager::alloc::{placement::place_with_holders, MemberMap};
/// use std::collections::BTreeMap;
/// let counts = BTreeMap::from([(partita_manager::alloc::MemberId::App(1), 1)]);
/// let p = place_with_holders(&[0, 1], &[], &counts, &MemberMap::default(), &[]);
/// assert_eq!(p.sets.len(), 1);
/// ```
pub fn place_with_holders(
    cpus: &[usize],
    domains: &[u32],
    counts: &BTreeMap<MemberId, u32>,
    prev: &MemberMap,
    holders: &[MemberId],
) -> Placement {
    let counts: Vec<(MemberId, u32)> = counts
        .iter()
        .filter(|x| *x.1 > 0)
        .map(|(m, n)| (*m, *n))
        .collect();
    let (sets, moves) = place_sorted(cpus, domains, &counts, prev, holders);
    Placement {
        // Sorted input: the map is built in bulk, not by repeated insertion.
        sets: sets.into_iter().collect(),
        moves,
    }
}

/// [`place_with_holders`] over `counts` sorted by member, every count above 0: the sets in
/// the same order, and the number of moves.
pub(crate) fn place_sorted(
    cpus: &[usize],
    domains: &[u32],
    counts: &[(MemberId, u32)],
    prev: &MemberMap,
    holders: &[MemberId],
) -> (Vec<(MemberId, CpuSet)>, u32) {
    let mut board = Board::new(cpus, domains, prev, holders);

    // 1. Keep.
    let mut sets: Vec<(MemberId, CpuSet)> = Vec::with_capacity(counts.len());
    let mut need: Vec<u32> = Vec::with_capacity(counts.len());
    let mut hists = Vec::with_capacity(counts.len());
    for &(m, n) in counts {
        let h = prev.get(&m);
        let set = h.map_or(CpuSet::new(), |h| board.keep(m, n, &h.last_cpus));
        need.push(n - set.len() as u32);
        sets.push((m, set));
        hists.push(h);
    }

    // 2a. CPUs used before.
    for (i, left) in need.iter_mut().enumerate() {
        if let Some(h) = hists[i] {
            let (m, set) = &mut sets[i];
            board.reclaim(*m, &h.used_before, left, set);
        }
    }

    // 2b. The rest, by preference class.
    board.fill(cpus, &mut need, &mut sets);

    let moves = board.moves();
    (sets, moves)
}

/// Who owns which CPU, before and during one placement, indexed by CPU number: what this
/// placement's board and the NUMA placement's (`topology.rs`) share.
pub(super) struct Owners {
    /// Whether the CPU is one of those being placed.
    pub(super) available: Vec<bool>,
    /// Owner of each CPU in the previous allocation.
    pub(super) old: Vec<Option<MemberId>>,
    /// Owner of each CPU so far in this placement.
    pub(super) now: Vec<Option<MemberId>>,
}

impl Owners {
    /// `cpus` to place, owned by nobody yet; before, each holder's `last_cpus` in `prev`.
    pub(super) fn new(cpus: &[usize], prev: &MemberMap, holders: &[MemberId]) -> Owners {
        let max_cpu = cpus.iter().copied().max().map_or(0, |c| c + 1);
        let mut available = vec![false; max_cpu];
        for &c in cpus {
            available[c] = true;
        }
        let mut old = vec![None; max_cpu];
        for (m, h) in holders.iter().filter_map(|m| prev.get(m).map(|h| (m, h))) {
            for c in h.last_cpus.iter().filter(|&c| c < max_cpu) {
                old[c] = Some(*m);
            }
        }
        Owners {
            available,
            old,
            now: vec![None; max_cpu],
        }
    }

    /// Whether `c` exists here and nobody took it yet in this placement.
    pub(super) fn free(&self, c: usize) -> bool {
        c < self.now.len() && self.available[c] && self.now[c].is_none()
    }

    /// CPUs now owned by a member other than their previous owner.
    pub(super) fn moves(&self) -> u32 {
        (0..self.now.len())
            .filter(|&c| {
                self.now[c].is_some() && self.old[c].is_some() && self.now[c] != self.old[c]
            })
            .count() as u32
    }
}

/// Who owns which CPU, before and during one placement, and in which domain each is.
struct Board {
    domain_of: Vec<u32>,
    own: Owners,
}

impl Board {
    fn new(cpus: &[usize], domains: &[u32], prev: &MemberMap, holders: &[MemberId]) -> Board {
        let own = Owners::new(cpus, prev, holders);
        let mut domain_of = vec![0u32; own.now.len()];
        for (i, &c) in cpus.iter().enumerate() {
            domain_of[c] = domains.get(i).copied().unwrap_or(0);
        }
        Board { domain_of, own }
    }

    fn free(&self, c: usize) -> bool {
        self.own.free(c)
    }

    /// Step 1: `m` keeps up to `n` of its previous CPUs `last` (when shrinking, those in its
    /// best-populated domain, then the lowest numbers).
    fn keep(&mut self, m: MemberId, n: u32, last: &CpuSet) -> CpuSet {
        let mut set = CpuSet::new();
        let free = last.iter().filter(|&c| self.free(c)).count();
        if free <= n as usize {
            // Keeps all of them: the common case, without sorting.
            for c in last.iter() {
                if self.free(c) {
                    self.own.now[c] = Some(m);
                    set.insert(c);
                }
            }
            return set;
        }
        let mut mine: Vec<usize> = last.iter().filter(|&c| self.free(c)).collect();
        let mut per_domain: BTreeMap<u32, usize> = BTreeMap::new();
        for &c in &mine {
            *per_domain.entry(self.domain_of[c]).or_default() += 1;
        }
        mine.sort_by_key(|&c| (std::cmp::Reverse(per_domain[&self.domain_of[c]]), c));
        mine.truncate(n as usize);
        for c in mine {
            self.own.now[c] = Some(m);
            set.insert(c);
        }
        set
    }

    /// Step 2a: `m` takes free CPUs it used before, up to `left`.
    fn reclaim(&mut self, m: MemberId, used_before: &CpuSet, left: &mut u32, set: &mut CpuSet) {
        for c in used_before.iter() {
            if *left == 0 {
                break;
            }
            if self.free(c) {
                self.own.now[c] = Some(m);
                set.insert(c);
                *left -= 1;
            }
        }
    }

    /// Step 2b: the rest, by preference class: idle CPUs in the member's home domain, other
    /// idle CPUs, CPUs in its domain, any CPU.
    fn fill(&mut self, cpus: &[usize], need: &mut [u32], sets: &mut [(MemberId, CpuSet)]) {
        if need.iter().all(|&n| n == 0) {
            return;
        }
        // Free lists per (idle, domain), lowest CPU last so `pop` yields the lowest number.
        let mut free: BTreeMap<(bool, u32), Vec<usize>> = BTreeMap::new();
        for &c in cpus.iter().rev() {
            if self.own.now[c].is_none() {
                free.entry((self.own.old[c].is_none(), self.domain_of[c]))
                    .or_default()
                    .push(c);
            }
        }
        let owner = &mut self.own.now;
        let mut take = |idle: Option<bool>, dom: Option<u32>, owner: &mut Vec<Option<MemberId>>| {
            if let (Some(i), Some(d)) = (idle, dom) {
                let list = free.get_mut(&(i, d))?;
                while let Some(c) = list.pop() {
                    if owner[c].is_none() {
                        return Some(c);
                    }
                }
                return None;
            }
            for ((i, d), list) in free.iter_mut() {
                if idle.is_some_and(|x| x != *i) || dom.is_some_and(|x| x != *d) {
                    continue;
                }
                while let Some(c) = list.pop() {
                    if owner[c].is_none() {
                        return Some(c);
                    }
                }
            }
            None
        };
        for (left, (m, set)) in need.iter_mut().zip(sets.iter_mut()) {
            if *left == 0 {
                continue;
            }
            // CPUs per domain of the member's set, kept up to date as it grows.
            let mut per: BTreeMap<u32, usize> = BTreeMap::new();
            for c in set.iter() {
                *per.entry(self.domain_of[c]).or_default() += 1;
            }
            while *left > 0 {
                let home = per
                    .iter()
                    .max_by_key(|&(d, n)| (*n, std::cmp::Reverse(*d)))
                    .map(|x| *x.0);
                let pick = match home {
                    Some(d) => take(Some(true), Some(d), owner)
                        .or_else(|| take(Some(true), None, owner))
                        .or_else(|| take(None, Some(d), owner))
                        .or_else(|| take(None, None, owner)),
                    None => take(Some(true), None, owner).or_else(|| take(None, None, owner)),
                };
                let Some(c) = pick else {
                    break; // More counted than CPUs exist: cannot happen with a valid allocation.
                };
                owner[c] = Some(*m);
                set.insert(c);
                *per.entry(self.domain_of[c]).or_default() += 1;
                *left -= 1;
            }
        }
    }

    fn moves(&self) -> u32 {
        self.own.moves()
    }
}
