//! The allocator: a pure function of (state, history, config) → allocation.
//!
//! Two levels (manager.md §Allocation):
//! - [`level1`]: CPUs to partitions (entitlement by shares or fixed counts, rotation of
//!   fractional entitlements, lending of idle entitlement, revocation);
//! - [`level2`]: a partition's CPUs to its members (applications and the pseudo-member that
//!   stands for the partition's uncontrolled processes) with the partition's policy;
//! - [`placement`]: which CPUs (selective, affinity-keeping assignment).
//!
//! Nothing here touches the system: the daemon builds an [`AllocInput`] from its registry,
//! calls [`allocate`] with the [`History`] it keeps, and enforces the [`AllocOutput`].
//!
//! ```
//! use partita_manager::alloc::*;
//! use partita_manager::config::PartitionConfig;
//! let mut input = AllocInput::new((0..4).collect(), vec![PartitionConfig::named("default")]);
//! input.apps.push(AppDemand { id: 1, partition: 0, demand: 4, pool_size: 4 });
//! input.apps.push(AppDemand { id: 2, partition: 0, demand: 4, pool_size: 4 });
//! let mut history = History::default();
//! let out = allocate(&input, &mut history);
//! assert_eq!(out.count(MemberId::App(1)), 2);
//! assert_eq!(out.count(MemberId::App(2)), 2);
//! ```

pub mod bandwidth;
pub mod bound;
pub mod level1;
pub mod level2;
pub mod placement;
pub mod quantum;
#[cfg(test)]
mod tests_numa;
pub mod topology;

use crate::config::{DssConfig, PartitionConfig, PolicyKind, UsageDecayConfig};
use partita_protocol::CpuSet;
use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

/// Identifier of an application in the manager.
pub type AppId = u32;

/// A member of a partition: a registered application, or the partition's uncontrolled
/// processes taken together.
///
/// ```
/// use partita_manager::alloc::MemberId;
/// assert!(MemberId::Uncontrolled(0) < MemberId::App(1));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MemberId {
    /// The uncontrolled processes of the partition with this index.
    Uncontrolled(usize),
    /// A registered application.
    App(AppId),
}

/// An application's request.
///
/// ```
/// let a = partita_manager::alloc::AppDemand { id: 1, partition: 0, demand: 3, pool_size: 8 };
/// assert_eq!(a.cap(), 3);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppDemand {
    /// Id (registration order: lower is earlier).
    pub id: AppId,
    /// Index of its partition in [`AllocInput::partitions`].
    pub partition: usize,
    /// Workers it could use now.
    pub demand: u32,
    /// Pool size (a cap).
    pub pool_size: u32,
}

impl AppDemand {
    /// The most CPUs it may get: `min(demand, pool_size)`.
    ///
    /// ```
    /// let a = partita_manager::alloc::AppDemand { id: 1, partition: 0, demand: 9, pool_size: 4 };
    /// assert_eq!(a.cap(), 4);
    /// ```
    pub fn cap(&self) -> u32 {
        self.demand.min(self.pool_size)
    }
}

/// Everything the allocator looks at.
///
/// ```
/// let i = partita_manager::alloc::AllocInput::new(vec![0, 1], vec![partita_manager::config::PartitionConfig::named("default")]);
/// assert!(i.apps.is_empty());
/// ```
#[derive(Debug, Clone)]
pub struct AllocInput {
    /// CPUs the manager may hand out (its own affinity / cpuset).
    pub cpus: Vec<usize>,
    /// Cache / NUMA domain of each CPU, indexed like `cpus` (empty: one domain).
    pub domains: Vec<u32>,
    /// NUMA node of each CPU, indexed like `cpus` (empty or all equal: one node, and the
    /// plain [`placement`] is used; otherwise [`topology::place_numa`]).
    pub nodes: Vec<u32>,
    /// Partitions; index 0 is `default`.
    pub partitions: Vec<PartitionConfig>,
    /// Registered applications.
    pub apps: Vec<AppDemand>,
    /// Demand of the uncontrolled processes of each partition (see [`uncontrolled_demand`]);
    /// missing entries are 0.
    pub uncontrolled: Vec<u32>,
    /// Current time (any monotonic milliseconds; a simulated clock in tests).
    pub now_ms: u64,
    /// Rotation period of fractional entitlements and uneven remainders.
    pub period_ms: u64,
    /// Usage-decay parameters.
    pub usage_decay: UsageDecayConfig,
    /// DSS parameters.
    pub dss: DssConfig,
    /// Partitions bound to a cgroup's CPUs, indexed like `partitions` (missing or `None`:
    /// not bound); see [`bound`].
    pub bounds: Vec<Option<bound::Bound>>,
}

impl AllocInput {
    /// An input with no applications, at time 0, paper defaults.
    ///
    /// ```
    /// let i = partita_manager::alloc::AllocInput::new(vec![0, 1], vec![partita_manager::config::PartitionConfig::named("default")]);
    /// assert_eq!(i.period_ms, 300);
    /// ```
    pub fn new(cpus: Vec<usize>, partitions: Vec<PartitionConfig>) -> Self {
        AllocInput {
            cpus,
            domains: Vec::new(),
            nodes: Vec::new(),
            partitions,
            apps: Vec::new(),
            uncontrolled: Vec::new(),
            now_ms: 0,
            period_ms: 300,
            usage_decay: UsageDecayConfig::default(),
            dss: DssConfig::default(),
            bounds: Vec::new(),
        }
    }
}

/// Demand of a partition's uncontrolled processes from their runnable-thread counts: 0 when
/// none is runnable now; otherwise at least 1 (at once) and otherwise the rounded average.
///
/// ```
/// use partita_manager::alloc::uncontrolled_demand;
/// assert_eq!(uncontrolled_demand(0, 3.0), 0);
/// assert_eq!(uncontrolled_demand(1, 0.0), 1);
/// assert_eq!(uncontrolled_demand(2, 2.4), 2);
/// ```
pub fn uncontrolled_demand(runnable_now: u32, runnable_avg: f64) -> u32 {
    if runnable_now == 0 {
        0
    } else {
        (runnable_avg.round().max(0.0) as u32).max(1)
    }
}

/// What one partition got.
///
/// ```
/// let p = partita_manager::alloc::PartitionAlloc::default();
/// assert_eq!(p.lent + p.borrowed, 0);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PartitionAlloc {
    /// CPUs it is entitled to this period.
    pub entitlement: u32,
    /// Σ of its members' caps.
    pub demand: u32,
    /// CPUs it got.
    pub allocation: u32,
    /// Entitled CPUs other partitions are using.
    pub lent: u32,
    /// CPUs above its entitlement.
    pub borrowed: u32,
}

/// The allocation.
///
/// ```
/// assert_eq!(partita_manager::alloc::AllocOutput::default().moves, 0);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AllocOutput {
    /// Per partition, indexed like the input.
    pub partitions: Vec<PartitionAlloc>,
    /// Per member that got at least one CPU: CPU count and CPU set (`set.len() == count`).
    /// Members absent here got none.
    pub members: BTreeMap<MemberId, (u32, CpuSet)>,
    /// CPUs whose owner changed compared with the previous allocation.
    pub moves: u32,
}

impl AllocOutput {
    /// CPU count of a member (0 if absent).
    ///
    /// ```
    /// let o = partita_manager::alloc::AllocOutput::default();
    /// assert_eq!(o.count(partita_manager::alloc::MemberId::App(3)), 0);
    /// ```
    pub fn count(&self, m: MemberId) -> u32 {
        self.members.get(&m).map_or(0, |x| x.0)
    }

    /// CPU set of a member (empty if absent).
    ///
    /// ```
    /// let o = partita_manager::alloc::AllocOutput::default();
    /// assert!(o.cpus(partita_manager::alloc::MemberId::App(3)).is_empty());
    /// ```
    pub fn cpus(&self, m: MemberId) -> CpuSet {
        self.members.get(&m).map_or(CpuSet::new(), |x| x.1)
    }

    /// Σ of all counts.
    ///
    /// ```
    /// assert_eq!(partita_manager::alloc::AllocOutput::default().total(), 0);
    /// ```
    pub fn total(&self) -> u32 {
        self.members.values().map(|x| x.0).sum()
    }
}

/// A small multiplicative hasher for [`MemberId`] keys (SipHash's DoS resistance is not
/// needed: keys come from the manager's own counters, and lookups dominate allocations of
/// 10^4 applications).
///
/// ```
/// use std::hash::{Hash, Hasher};
/// let mut h = partita_manager::alloc::MemberHasher::default();
/// partita_manager::alloc::MemberId::App(7).hash(&mut h);
/// assert_ne!(h.finish(), 0);
/// ```
#[derive(Debug, Default, Clone, Copy)]
pub struct MemberHasher(u64);

impl Hasher for MemberHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(v as u64);
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
    fn write_isize(&mut self, v: isize) {
        self.write_u64(v as u64);
    }
}

/// Per-member history map.
///
/// ```
/// let m = partita_manager::alloc::MemberMap::default();
/// assert!(m.is_empty());
/// ```
pub type MemberMap = HashMap<MemberId, MemberHistory, BuildHasherDefault<MemberHasher>>;

/// What a member carries from one allocation to the next.
///
/// ```
/// let h = partita_manager::alloc::MemberHistory::default();
/// assert_eq!(h.inv_prio, 0.0);
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemberHistory {
    /// Cumulative CPU count summed at each rotation period (equipartition rotation).
    pub cum: u64,
    /// Tucker's inverse priority.
    pub inv_prio: f64,
    /// Inverse priority the current period's choices are made with (taken at each decay
    /// period, so that reallocations inside a period do not flap).
    pub inv_key: f64,
    /// DSS remainder carry, in units of 1/W (W = `dss_w` of the partition).
    pub dss_carry: i64,
    /// DSS: got one of the remainder CPUs this quantum.
    pub dss_extra: bool,
    /// Allocation round in which the member was last present.
    pub seen: u64,
    /// Count of the last allocation.
    pub last_count: u32,
    /// Rotation steps (equipartition periods) it has been present at.
    pub boundaries: u32,
    /// CPU set of the last allocation.
    pub last_cpus: CpuSet,
    /// Every CPU it has held (selective assignment prefers these).
    pub used_before: CpuSet,
}

/// State carried between allocations (rotation credits, decay, carries, previous sets).
///
/// ```
/// let h = partita_manager::alloc::History::default();
/// assert!(h.members.is_empty());
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct History {
    /// Per member (a hash map: with 10^4 applications, lookups dominate the allocation).
    pub members: MemberMap,
    /// Members that held CPUs after the last allocation.
    pub holders: Vec<MemberId>,
    /// Level-1 rotation credit per partition name, in units of 1/Σshares.
    pub partition_credit: BTreeMap<String, i64>,
    /// Σshares the credits are expressed in.
    pub partition_credit_w: i64,
    /// Partitions that got one of the leftover CPUs this period.
    pub partition_extra: Vec<String>,
    /// DSS: W the carries of each partition are expressed in.
    pub dss_w: BTreeMap<usize, i64>,
    /// DSS: first member of the group served when applications outnumber CPUs.
    pub dss_offset: BTreeMap<usize, usize>,
    /// Time of the last allocation.
    pub last_ms: Option<u64>,
    /// Time of the last rotation step.
    pub last_rotation_ms: u64,
    /// Time of the last usage decay.
    pub last_decay_ms: u64,
    /// Time of the last DSS quantum step.
    pub last_dss_ms: u64,
    /// Number of allocations made (seeds tie-breaking).
    pub rounds: u64,
    /// The histories of the partitions bound to cgroups, by partition name ([`bound`]).
    pub bound: BTreeMap<String, History>,
}

/// Compute the allocation, updating `history`.
///
/// ```
/// use partita_manager::alloc::*;
/// use partita_manager::config::PartitionConfig;
/// let mut input = AllocInput::new(vec![0, 1], vec![PartitionConfig::named("default")]);
/// input.uncontrolled = vec![1];
/// input.apps.push(AppDemand { id: 1, partition: 0, demand: 2, pool_size: 2 });
/// let out = allocate(&input, &mut History::default());
/// assert_eq!(out.count(MemberId::Uncontrolled(0)) + out.count(MemberId::App(1)), 2);
/// ```
pub fn allocate(input: &AllocInput, history: &mut History) -> AllocOutput {
    if input.bounds.iter().any(Option::is_some) {
        return bound::allocate(input, history);
    }
    allocate_flat(input, history)
}

/// [`allocate`] when no partition is bound to a cgroup.
fn allocate_flat(input: &AllocInput, history: &mut History) -> AllocOutput {
    let clock = advance_clocks(input, history);
    let members = members_by_partition(input);
    refresh_history(&members, history);

    // Level 1.
    let demands: Vec<u32> = members
        .iter()
        .map(|ms| ms.iter().map(|m| m.1).sum())
        .collect();
    let l1 = level1::partition_counts(
        input.cpus.len() as u32,
        &input.partitions,
        &demands,
        history,
        clock.advance_rotation,
    );

    // Level 2.
    let counts = level2_counts(input, &members, &l1, history, &clock);

    // Which CPUs: node-first on a multi-node machine, else the flat selective placement.
    let multi_node = input.nodes.windows(2).any(|w| w[0] != w[1]);
    let (sets, moves) = if multi_node {
        let map: BTreeMap<MemberId, u32> = counts.iter().copied().collect();
        let p = topology::place(input, &map, &history.members, &history.holders);
        // In the order of `counts` (sorted by member, every count above 0), as
        // record_placement expects.
        let sets = counts
            .iter()
            .map(|(m, _)| (*m, p.sets.get(m).copied().unwrap_or_else(CpuSet::new)))
            .collect();
        (sets, p.moves)
    } else {
        placement::place_sorted(
            &input.cpus,
            &input.domains,
            &counts,
            &history.members,
            &history.holders,
        )
    };
    AllocOutput {
        partitions: l1,
        members: record_placement(sets, &counts, history),
        moves,
    }
}

/// Which of the periodic steps (rotation, DSS quantum, usage decay) this allocation takes.
struct Clock {
    first: bool,
    advance_rotation: bool,
    advance_dss: bool,
    decay_steps: u64,
    elapsed_s: f64,
}

/// Advance the history's clocks to `input.now_ms` and say which periodic steps are due.
fn advance_clocks(input: &AllocInput, history: &mut History) -> Clock {
    let now = input.now_ms;
    let first = history.last_ms.is_none();
    if first {
        history.last_rotation_ms = now;
        history.last_decay_ms = now;
        history.last_dss_ms = now;
    }
    let period = input.period_ms.max(1);
    let advance_rotation = first || now >= history.last_rotation_ms + period;
    if advance_rotation {
        history.last_rotation_ms = now;
    }
    let advance_dss = first || now >= history.last_dss_ms + input.dss.quantum_ms.max(1);
    if advance_dss {
        history.last_dss_ms = now;
    }
    let decay_steps = if first {
        0
    } else {
        let p = input.usage_decay.period_ms.max(1);
        let steps = (now.saturating_sub(history.last_decay_ms)) / p;
        history.last_decay_ms += steps * p;
        steps
    };
    let elapsed_s = history
        .last_ms
        .map_or(0.0, |t| now.saturating_sub(t) as f64 / 1000.0);
    history.last_ms = Some(now);
    history.rounds += 1;
    Clock {
        first,
        advance_rotation,
        advance_dss,
        decay_steps,
        elapsed_s,
    }
}

/// Members per partition with their caps, in member order (uncontrolled first, then
/// applications by id).
fn members_by_partition(input: &AllocInput) -> Vec<Vec<(MemberId, u32)>> {
    let np = input.partitions.len();
    let mut sizes = vec![1usize; np];
    for a in &input.apps {
        if a.partition < np {
            sizes[a.partition] += 1;
        }
    }
    let mut members: Vec<Vec<(MemberId, u32)>> =
        sizes.into_iter().map(Vec::with_capacity).collect();
    for (k, &d) in input.uncontrolled.iter().enumerate().take(np) {
        if d > 0 {
            members[k].push((MemberId::Uncontrolled(k), d));
        }
    }
    if input.apps.is_sorted_by_key(|a| a.id) {
        // The daemon's applications come sorted by id: no copy, no sort.
        for a in input.apps.iter().filter(|a| a.partition < np) {
            members[a.partition].push((MemberId::App(a.id), a.cap()));
        }
    } else {
        let mut apps: Vec<&AppDemand> = input.apps.iter().filter(|a| a.partition < np).collect();
        apps.sort_by_key(|a| a.id);
        for a in apps {
            members[a.partition].push((MemberId::App(a.id), a.cap()));
        }
    }
    members
}

/// Forget members that left; seed new ones. A new member starts at the highest cumulative
/// count of its partition: it takes its turn in the rotation after the members that were
/// there, and gets ahead of them only by going without while they hold CPUs. (Starting at
/// the lowest, a program that lived across one period boundary ranked before every
/// incumbent whose count had grown against a member that held nothing, such as the outside
/// load's at 0: 600 registrations that exit at once took a running program's only CPU in
/// 3 of 6 quiet runs of `tests/churn.rs`.)
fn refresh_history(members: &[Vec<(MemberId, u32)>], history: &mut History) {
    let round = history.rounds;
    for ms in members {
        let mut max_cum: Option<u64> = None;
        let mut fresh = false;
        for (m, _) in ms {
            match history.members.get_mut(m) {
                Some(h) => {
                    h.seen = round;
                    max_cum = Some(max_cum.map_or(h.cum, |c| c.max(h.cum)));
                }
                None => fresh = true,
            }
        }
        if fresh {
            for (m, _) in ms {
                history.members.entry(*m).or_insert_with(|| MemberHistory {
                    cum: max_cum.unwrap_or(0),
                    seen: round,
                    ..MemberHistory::default()
                });
            }
        }
    }
    // Members that left are those not seen this round; if the map holds exactly this round's
    // members, none left and the whole-map pass is skipped.
    let present: usize = members.iter().map(Vec::len).sum();
    if history.members.len() != present {
        history.members.retain(|_, h| h.seen == round);
    }
}

/// Level 2: each partition's CPUs to its members with the partition's policy. Only members
/// that get CPUs are returned (with 10^4 applications on 1024 CPUs most get none), sorted by
/// member.
fn level2_counts(
    input: &AllocInput,
    members: &[Vec<(MemberId, u32)>],
    l1: &[PartitionAlloc],
    history: &mut History,
    clock: &Clock,
) -> Vec<(MemberId, u32)> {
    let mut counts: Vec<(MemberId, u32)> = Vec::new();
    for (k, ms) in members.iter().enumerate() {
        let a = l1[k].allocation;
        let got = match input.partitions[k].policy {
            // Bandwidth: the quantum's selection already zeroed the demand of the parked
            // applications (crate::quantum); the selected ones share the CPUs equally.
            PolicyKind::Equipartition | PolicyKind::Bandwidth => {
                level2::equipartition(a, ms, &mut history.members, clock.advance_rotation)
            }
            PolicyKind::UsageDecay => level2::usage_decay(
                a,
                ms,
                &mut history.members,
                &input.usage_decay,
                clock.elapsed_s,
                clock.decay_steps,
                clock.first || clock.decay_steps > 0,
                history.last_decay_ms,
            ),
            PolicyKind::Dss => {
                let w = history.dss_w.entry(k).or_insert(0);
                let off = history.dss_offset.entry(k).or_insert(0);
                level2::dss(a, ms, &mut history.members, w, off, clock.advance_dss)
            }
            PolicyKind::Batch => level2::batch(a, ms),
        };
        counts.extend(got.into_iter().filter(|x| x.1 > 0));
    }
    counts.sort_unstable_by_key(|x| x.0);
    counts
}

/// Remember who holds which CPUs now (the next placement keeps them where it can) and build
/// the output's member table (`sets` and `counts` are aligned and sorted by member).
fn record_placement(
    sets: Vec<(MemberId, CpuSet)>,
    counts: &[(MemberId, u32)],
    history: &mut History,
) -> BTreeMap<MemberId, (u32, CpuSet)> {
    for m in std::mem::take(&mut history.holders) {
        if let Some(h) = history.members.get_mut(&m) {
            h.last_count = 0;
            h.last_cpus = CpuSet::new();
        }
    }
    let mut members = Vec::with_capacity(sets.len());
    for ((m, set), &(_, n)) in sets.into_iter().zip(counts) {
        history.holders.push(m);
        if let Some(h) = history.members.get_mut(&m) {
            h.last_count = n;
            h.last_cpus = set;
            h.used_before.union_with(&set);
        }
        members.push((m, (n, set)));
    }
    // Sorted input: the map is built in bulk, not by repeated insertion.
    members.into_iter().collect()
}

#[cfg(test)]
mod tests;
