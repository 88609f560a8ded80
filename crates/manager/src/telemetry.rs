//! What the manager counts beyond its status snapshot, for the metrics endpoint
//! ([`crate::metrics`]): CPU moves and revocations per partition and per application,
//! reallocation latency, registration refusals by reason.
//!
//! [`churn`] is a pure function of two consecutive allocations; [`Telemetry`] accumulates it.
//! The registry calls [`Telemetry::reallocated`] at the end of every reallocation and the
//! daemon [`Telemetry::count_refusal`] for every refusal it sends.

use crate::alloc::{AllocInput, AllocOutput, AppId, MemberId};
use partita_protocol::wire::ErrorCode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use std::collections::BTreeMap;
use std::time::Duration;

/// CPU moves and revocations of one member or partition.
///
/// ```
/// let c = partita_manager::telemetry::Churn::default();
/// assert_eq!((c.moves, c.revocations), (0, 0));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Churn {
    /// CPUs it was given that another member held before.
    pub moves: u64,
    /// CPUs taken from it while it still demanded them.
    pub revocations: u64,
}

impl Churn {
    fn add(&mut self, other: Churn) {
        self.moves += other.moves;
        self.revocations += other.revocations;
    }
}

/// What one reallocation changed, per member and per partition.
///
/// ```
/// let c = partita_manager::telemetry::Changes::default();
/// assert!(c.members.is_empty() && c.partitions.is_empty());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// Per member with a non-zero change.
    pub members: BTreeMap<MemberId, Churn>,
    /// Per partition, indexed like the input's partitions: the sum of its members' moves;
    /// its revocations are CPUs the partition lost while its demand still covered them.
    pub partitions: Vec<Churn>,
}

/// The changes from `before` to `after` (the allocation computed from `input`).
///
/// A CPU counts as a move for the member that now holds it when a different member held it
/// before and is still a member (so the moves of all members add up to `after.moves`). A revocation is a CPU a
/// member (or partition) lost while its demand was still at least its old count: with
/// counts `b → a` and demand `d`, `min(b, d) - a` when positive.
///
/// ```
/// use partita_manager::alloc::*;
/// use partita_manager::config::PartitionConfig;
/// let mut input = AllocInput::new((0..4).collect(), vec![PartitionConfig::named("default")]);
/// input.apps.push(AppDemand { id: 1, partition: 0, demand: 4, pool_size: 4 });
/// let mut history = History::default();
/// let before = allocate(&input, &mut history);
/// input.apps.push(AppDemand { id: 2, partition: 0, demand: 4, pool_size: 4 });
/// let after = allocate(&input, &mut history);
/// let c = partita_manager::telemetry::churn(&input, &before, &after);
/// assert_eq!(c.members[&MemberId::App(2)].moves, 2);
/// assert_eq!(c.members[&MemberId::App(1)].revocations, 2);
/// ```
pub fn churn(input: &AllocInput, before: &AllocOutput, after: &AllocOutput) -> Changes {
    // As the allocator counts moves: a CPU's previous owner counts only if it is still a
    // member (a departed application's CPUs are free, not moved).
    let np = input.partitions.len();
    let is_member = |m: &MemberId| match m {
        MemberId::Uncontrolled(k) => *k < np && input.uncontrolled.get(*k).is_some_and(|&d| d > 0),
        MemberId::App(id) => input.apps.iter().any(|a| a.id == *id && a.partition < np),
    };
    let mut old_owner: BTreeMap<usize, MemberId> = BTreeMap::new();
    for (m, (_, set)) in before.members.iter().filter(|(m, _)| is_member(m)) {
        for c in set.iter() {
            old_owner.insert(c, *m);
        }
    }
    let demand = |m: &MemberId| match m {
        MemberId::Uncontrolled(k) => input.uncontrolled.get(*k).copied().unwrap_or(0),
        MemberId::App(id) => input
            .apps
            .iter()
            .find(|a| a.id == *id)
            .map_or(0, |a| a.cap()),
    };
    let partition_of = |m: &MemberId| match m {
        MemberId::Uncontrolled(k) => Some(*k),
        MemberId::App(id) => input.apps.iter().find(|a| a.id == *id).map(|a| a.partition),
    };
    let mut changes = Changes {
        members: BTreeMap::new(),
        partitions: vec![Churn::default(); input.partitions.len()],
    };
    let members = before.members.keys().chain(after.members.keys());
    for m in members.collect::<std::collections::BTreeSet<_>>() {
        let set = after.cpus(*m);
        let moves = set
            .iter()
            .filter(|c| old_owner.get(c).is_some_and(|o| o != m))
            .count() as u64;
        let revocations = revoked(before.count(*m), after.count(*m), demand(m));
        if moves == 0 && revocations == 0 {
            continue;
        }
        changes.members.insert(*m, Churn { moves, revocations });
        if let Some(p) = partition_of(m).and_then(|k| changes.partitions.get_mut(k)) {
            p.moves += moves;
        }
    }
    for (k, p) in changes.partitions.iter_mut().enumerate() {
        let (b, a) = (before.partitions.get(k), after.partitions.get(k));
        let (Some(b), Some(a)) = (b, a) else { continue };
        p.revocations = revoked(b.allocation, a.allocation, a.demand);
    }
    changes
}

/// CPUs lost while still demanded: counts `before → after` with demand `demand`.
fn revoked(before: u32, after: u32, demand: u32) -> u64 {
    u64::from(before.min(demand).saturating_sub(after))
}

/// Labels of the refusal counter.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RefusalLabels {
    /// The error code sent, in snake case (`permission_denied`, `too_many_applications`, ...).
    pub reason: String,
}

/// Every error code, for walking the refusal counters.
const ALL_CODES: [ErrorCode; 10] = [
    ErrorCode::Malformed,
    ErrorCode::Oversized,
    ErrorCode::Version,
    ErrorCode::OutOfOrder,
    ErrorCode::TooManyApplications,
    ErrorCode::Timeout,
    ErrorCode::Internal,
    ErrorCode::UnknownPartition,
    ErrorCode::PermissionDenied,
    ErrorCode::Unknown,
];

/// The snake-case name of an error code (the `reason` label).
///
/// ```
/// use partita_protocol::wire::ErrorCode;
/// assert_eq!(partita_manager::telemetry::reason(ErrorCode::TooManyApplications), "too_many_applications");
/// ```
pub fn reason(code: ErrorCode) -> &'static str {
    match code {
        ErrorCode::Malformed => "malformed",
        ErrorCode::Oversized => "oversized",
        ErrorCode::Version => "version",
        ErrorCode::OutOfOrder => "out_of_order",
        ErrorCode::TooManyApplications => "too_many_applications",
        ErrorCode::Timeout => "timeout",
        ErrorCode::Internal => "internal",
        ErrorCode::UnknownPartition => "unknown_partition",
        ErrorCode::PermissionDenied => "permission_denied",
        ErrorCode::Unknown => "unknown",
    }
}

/// Counters the status snapshot does not hold, accumulated since the manager started.
///
/// ```
/// let t = partita_manager::telemetry::Telemetry::default();
/// assert_eq!(t.app(1), partita_manager::telemetry::Churn::default());
/// ```
#[derive(Debug)]
pub struct Telemetry {
    partitions: Vec<Churn>,
    apps: BTreeMap<AppId, Churn>,
    latency: Histogram,
    refusals: Family<RefusalLabels, Counter>,
}

impl Default for Telemetry {
    fn default() -> Self {
        let refusals = Family::<RefusalLabels, Counter>::default();
        // The reasons a registration is refused for exist from the start (at 0), so a rate()
        // over them works before the first refusal.
        for code in [
            ErrorCode::PermissionDenied,
            ErrorCode::TooManyApplications,
            ErrorCode::UnknownPartition,
            ErrorCode::OutOfOrder,
            ErrorCode::Internal,
        ] {
            drop(refusals.get_or_create(&RefusalLabels {
                reason: reason(code).into(),
            }));
        }
        Telemetry {
            partitions: Vec::new(),
            apps: BTreeMap::new(),
            // 10 µs .. ~160 ms: a reallocation is a computation plus a few syscalls.
            latency: Histogram::new(exponential_buckets(10e-6, 4.0, 8)),
            refusals,
        }
    }
}

impl Telemetry {
    /// Account one reallocation: `elapsed` is its duration (computation, publication,
    /// enforcement), `before` the previous allocation and `after` the new one. Applications
    /// absent from `input` are forgotten.
    pub fn reallocated(
        &mut self,
        elapsed: Duration,
        input: &AllocInput,
        before: &AllocOutput,
        after: &AllocOutput,
    ) {
        self.latency.observe(elapsed.as_secs_f64());
        let changes = churn(input, before, after);
        if self.partitions.len() < changes.partitions.len() {
            self.partitions
                .resize(changes.partitions.len(), Churn::default());
        }
        for (k, c) in changes.partitions.iter().enumerate() {
            self.partitions[k].add(*c);
        }
        self.apps
            .retain(|id, _| input.apps.iter().any(|a| a.id == *id));
        for a in &input.apps {
            let c = changes.members.get(&MemberId::App(a.id)).copied();
            self.apps
                .entry(a.id)
                .or_default()
                .add(c.unwrap_or_default());
        }
    }

    /// Count a refused registration (an `Err` result); an `Ok` is not counted.
    pub fn count_refusal<T>(&self, result: &Result<T, (ErrorCode, String)>) {
        if let Err((code, _)) = result {
            self.refusals
                .get_or_create(&RefusalLabels {
                    reason: reason(*code).into(),
                })
                .inc();
        }
    }

    /// Moves and revocations of the partition with this index so far.
    pub fn partition(&self, k: usize) -> Churn {
        self.partitions.get(k).copied().unwrap_or_default()
    }

    /// Moves and revocations of a registered application so far.
    pub fn app(&self, id: AppId) -> Churn {
        self.apps.get(&id).copied().unwrap_or_default()
    }

    /// The reallocation latency histogram (seconds).
    pub fn reallocation_latency(&self) -> &Histogram {
        &self.latency
    }

    /// Registration refusals by reason.
    pub fn refusals(&self) -> &Family<RefusalLabels, Counter> {
        &self.refusals
    }

    /// The refusals sent so far, by error code name (`PermissionDenied`, ...), codes never sent
    /// left out: what `partita status` shows, read from the same counters as the metrics.
    pub fn refusal_counts(&self) -> BTreeMap<String, u64> {
        ALL_CODES
            .iter()
            .filter_map(|&code| {
                let labels = RefusalLabels {
                    reason: reason(code).into(),
                };
                // Look up without creating: a code never sent stays out of the metrics too.
                let n = self.refusals.get(&labels).map_or(0, |c| c.get());
                (n > 0).then(|| (format!("{code:?}"), n))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alloc::{allocate, AppDemand, History};
    use crate::config::PartitionConfig;
    use proptest::prelude::*;

    fn input(ncpu: usize, demands: &[(u32, u32)]) -> AllocInput {
        let parts = vec![
            PartitionConfig::named("default"),
            PartitionConfig::named("batch"),
        ];
        let mut input = AllocInput::new((0..ncpu).collect(), parts);
        for (i, &(partition, demand)) in demands.iter().enumerate() {
            input.apps.push(AppDemand {
                id: i as u32 + 1,
                partition: partition as usize,
                demand,
                pool_size: 8,
            });
        }
        input
    }

    proptest! {
        /// Members' (applications' and uncontrolled processes') moves add up to the
        /// allocator's moves; partitions' moves to the same; a
        /// member never has more revocations than CPUs it lost.
        #[test]
        fn moves_add_up(ncpu in 1usize..12,
                        steps in prop::collection::vec((prop::collection::vec((0u32..2, 0u32..9), 0..5), prop::collection::vec(0u32..3, 2)), 1..8)) {
            let mut history = History::default();
            let mut before = AllocOutput::default();
            let mut tel = Telemetry::default();
            let n = steps.len();
            for (demands, uncontrolled) in steps {
                let mut inp = input(ncpu, &demands);
                inp.uncontrolled = uncontrolled;
                let after = allocate(&inp, &mut history);
                let c = churn(&inp, &before, &after);
                let sum: u64 = c.members.values().map(|m| m.moves).sum();
                prop_assert_eq!(sum, u64::from(after.moves));
                let psum: u64 = c.partitions.iter().map(|p| p.moves).sum();
                prop_assert_eq!(psum, u64::from(after.moves));
                for (m, ch) in &c.members {
                    let lost = before.count(*m).saturating_sub(after.count(*m));
                    prop_assert!(ch.revocations <= u64::from(lost));
                }
                tel.reallocated(Duration::from_micros(5), &inp, &before, &after);
                before = after;
            }
            let text = crate::metrics::encode(&crate::Status::default(), &tel);
            let count = format!("partita_reallocation_duration_seconds_count {n}");
            prop_assert!(text.lines().any(|l| l == count), "{}", text);
        }
    }

    #[test]
    fn giving_back_is_not_a_revocation() {
        let mut history = History::default();
        let a = input(4, &[(0, 4)]);
        let before = allocate(&a, &mut history);
        let b = input(4, &[(0, 1)]);
        let after = allocate(&b, &mut history);
        assert_eq!(after.count(MemberId::App(1)), 1);
        let c = churn(&b, &before, &after);
        assert_eq!(
            c.members
                .get(&MemberId::App(1))
                .map_or(0, |m| m.revocations),
            0
        );
    }

    #[test]
    fn refusals_count_by_reason_and_departed_apps_are_forgotten() {
        let mut t = Telemetry::default();
        t.count_refusal::<u32>(&Err((ErrorCode::PermissionDenied, "no".into())));
        t.count_refusal::<u32>(&Err((ErrorCode::PermissionDenied, "no".into())));
        t.count_refusal(&Ok(1u32));
        let get = |r: &str| {
            t.refusals()
                .get(&RefusalLabels { reason: r.into() })
                .map(|c| c.get())
        };
        assert_eq!(get("permission_denied"), Some(2));
        assert_eq!(get("too_many_applications"), Some(0));
        // Status reads the same counters: only the codes actually sent, by their names.
        let counts: Vec<_> = t.refusal_counts().into_iter().collect();
        assert_eq!(counts, [("PermissionDenied".to_string(), 2)]);
        let mut history = History::default();
        let one = input(2, &[(0, 2)]);
        let out = allocate(&one, &mut history);
        t.reallocated(Duration::ZERO, &one, &AllocOutput::default(), &out);
        assert!(t.apps.contains_key(&1));
        let none = input(2, &[]);
        let out2 = allocate(&none, &mut history);
        t.reallocated(Duration::ZERO, &none, &out, &out2);
        assert!(t.apps.is_empty());
    }
}
