//! The plan (pure): what an application's page, its affinity and the uncontrolled processes'
//! CPU sets should be under the allocator's output, as a list of [`Effect`]s against what
//! was last applied, with the revocation hand-over ([`handover`]).
//!
//! **One worker at least.** When a partition has fewer CPUs than members that want one, the
//! allocator gives some applications none for a rotation period (300 ms by default). Such an
//! application keeps one worker running on its partition's CPUs, time-shared by the kernel
//! with their owners, rather than stopping (`min_target = 1`, the default): Tucker's process
//! control lets an application reduce to one process, never below (§7, workload LOMCW), and
//! his policy module put several applications in one processor set rather than leave some
//! with none, which "would have degraded response time" (§6.3.1). A program that lives less
//! than a period would otherwise wait out a whole turn with nothing running: four copies of
//! a 20–60 ms rayon program on 2 CPUs ran 1.08–1.18× slower than without the manager
//! (docs/bench/manager.md §14). Measured (§18, four b3sum copies under `partita serve`, blocks
//! alternating with `min_target = 0` and `PARTITA=off`): 2–5 % faster than the rotation, still
//! 3–4 % slower than no manager and 1.13× the static split in the benchmark, so it does not
//! make them a static split. Only the sharing policies (equipartition, usage
//! decay) do this; batch, DSS's groups and the bandwidth policy's zero quanta keep an
//! application at zero on purpose.

use crate::alloc::{self, AllocInput, AllocOutput, AppId, History, MemberId};
use crate::config::PolicyKind;
use partita_protocol::CpuSet;
use std::collections::BTreeMap;

/// What planning needs to know about one application (plain data).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AppView {
    /// Its id.
    pub id: AppId,
    /// Its partition's index.
    pub partition: usize,
    /// Worker threads in its pool.
    pub pool_size: u32,
    /// It follows only its CPU set, at full size.
    pub partition_only: bool,
    /// The manager may set its affinity (same user, or the manager is privileged).
    pub may_confine: bool,
    /// What its page says now: `(target, cpus)`, `None` before the first publish.
    pub published: Option<(u32, CpuSet)>,
    /// Whether those CPUs were published as its partition's, time-shared ([`Share`]).
    pub shared: bool,
    /// The demand its page reports (its own, before the bandwidth policy parks it).
    pub demand: u32,
    /// The active workers its page reports (`None`: cannot be read, so no hand-over).
    pub active: Option<u32>,
    /// When its pending revocation was published (monotonic ns; [`handover`]).
    pub revoked_at: Option<u64>,
}

/// The input of [`plan`].
#[derive(Debug, Clone)]
pub(crate) struct PlanInput {
    /// The allocator's input (CPUs, partitions, demands).
    pub alloc: AllocInput,
    /// Every registered application, sorted by id.
    pub apps: Vec<AppView>,
    /// Every CPU the manager hands out.
    pub managed: CpuSet,
    /// Per partition, the CPU set its uncontrolled processes are confined to now.
    pub uncontrolled_sets: Vec<CpuSet>,
    /// Now (monotonic ns).
    pub now_ns: u64,
    /// The hand-over deadline `D` (ns; 0: no hand-over, revoked CPUs move at once).
    pub handover_ns: u64,
    /// The least target of a controlled application with demand in a sharing partition
    /// (`min_target`: 1 keeps one worker on the partition's CPUs, 0 lets it stop).
    pub min_target: u32,
}

/// What the allocation gives one application.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Share {
    /// Workers it may run.
    pub count: u32,
    /// Its CPUs: its own, or (`shared`) its partition's, which it time-shares.
    pub cpus: CpuSet,
    /// The allocator gave it no CPU of its own; it keeps `min_target` workers on its
    /// partition's CPUs.
    pub shared: bool,
}

/// One change to the world.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Effect {
    /// Write `(target, cpus)` into the application's page and wake its client.
    Publish {
        /// The application.
        app: AppId,
        /// Workers it should run.
        target: u32,
        /// CPUs it should run on (empty: no confinement).
        cpus: CpuSet,
        /// They are its partition's, time-shared with their owners ([`Share::shared`]).
        shared: bool,
    },
    /// Set the affinity of every thread of the application's process.
    Affinity {
        /// The application.
        app: AppId,
        /// The CPUs.
        cpus: CpuSet,
    },
    /// Move a partition's uncontrolled processes to this CPU set.
    Uncontrolled {
        /// The partition's index.
        partition: usize,
        /// The CPUs.
        cpus: CpuSet,
    },
}

/// A reallocation: the allocation and the effects that make the world match it.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// The allocator's output.
    pub allocation: AllocOutput,
    /// What to change, in order.
    pub effects: Vec<Effect>,
    /// The applications releasing CPUs after this plan, with when their revocation was
    /// published (the next plan's [`AppView::revoked_at`]; absent: none pending).
    pub revoked: BTreeMap<AppId, u64>,
    /// When a round must run to hand over CPUs whose deadline passes (monotonic ns).
    pub recheck_at: Option<u64>,
}

/// Compute the allocation and the effects that apply it. Pure: the only state it changes is
/// the allocator's `history`. An application whose `(target, cpus)` would not change gets
/// no effect.
pub(crate) fn plan(input: &PlanInput, history: &mut History) -> Plan {
    let allocation = alloc::allocate(&input.alloc, history);
    let mut effects = Vec::new();
    let partition_sets = partition_sets(input, &allocation);
    let shares: Vec<Share> = input
        .apps
        .iter()
        .map(|a| share(input, a, &allocation, &partition_sets))
        .collect();
    let transit = handover::transit(input, &shares);
    for (app, share) in input.apps.iter().zip(&shares) {
        let (target, cpus) = desired(app, share, &partition_sets, input.managed, &transit);
        let shared = share.shared && target > 0;
        // A program that moves between a CPU of its own and its partition's shared ones can
        // keep the same page (a one-CPU partition): published again all the same, so the
        // status says which it has.
        if app.published == Some((target, cpus)) && app.shared == shared {
            continue;
        }
        effects.push(Effect::Publish {
            app: app.id,
            target,
            cpus,
            shared,
        });
        let cpus_changed = app.published.map(|p| p.1) != Some(cpus);
        if cpus_changed && !cpus.is_empty() && app.may_confine {
            effects.push(Effect::Affinity { app: app.id, cpus });
        }
    }
    for (k, before) in input.uncontrolled_sets.iter().enumerate() {
        let set = allocation.cpus(MemberId::Uncontrolled(k));
        if set != *before && !set.is_empty() {
            effects.push(Effect::Uncontrolled {
                partition: k,
                cpus: set,
            });
        }
    }
    Plan {
        allocation,
        effects,
        recheck_at: transit.deadline(input.handover_ns),
        revoked: transit
            .releasing
            .iter()
            .map(|(&id, &(t, _))| (id, t))
            .collect(),
    }
}

/// Per partition, the union of its members' CPUs (what a partition-only application given
/// none, and an application kept at one worker, run on).
fn partition_sets(input: &PlanInput, allocation: &AllocOutput) -> Vec<CpuSet> {
    let mut sets = vec![CpuSet::new(); input.alloc.partitions.len()];
    let partition_of = |id: AppId| {
        input
            .apps
            .binary_search_by_key(&id, |a| a.id)
            .map_or(0, |i| input.apps[i].partition)
    };
    for (m, (_, set)) in &allocation.members {
        let k = match m {
            MemberId::Uncontrolled(k) => *k,
            MemberId::App(id) => partition_of(*id),
        };
        if let Some(s) = sets.get_mut(k) {
            s.union_with(set);
        }
    }
    sets
}

/// `app`'s share of `allocation`: its own CPUs; or, given none while it wants some, in a
/// partition of a sharing policy that has CPUs, `min_target` workers on the partition's CPUs.
pub(crate) fn share(
    input: &PlanInput,
    app: &AppView,
    allocation: &AllocOutput,
    partition_sets: &[CpuSet],
) -> Share {
    let id = MemberId::App(app.id);
    let (count, cpus) = (allocation.count(id), allocation.cpus(id));
    if count > 0 || input.min_target == 0 || app.partition_only || app.demand == 0 {
        return Share {
            count,
            cpus,
            shared: false,
        };
    }
    let sharing =
        input.alloc.partitions.get(app.partition).is_some_and(|p| {
            matches!(p.policy, PolicyKind::Equipartition | PolicyKind::UsageDecay)
        });
    let union = partition_sets
        .get(app.partition)
        .copied()
        .unwrap_or_default();
    if !sharing || union.is_empty() {
        return Share::default();
    }
    Share {
        count: input.min_target.min(app.demand).min(union.len() as u32),
        cpus: union,
        shared: true,
    }
}

/// What an application's page should say under `allocation` (a controlled one's, with the
/// hand-over: [`handover::controlled_page`]).
fn desired(
    app: &AppView,
    share: &Share,
    partition_sets: &[CpuSet],
    managed: CpuSet,
    transit: &handover::Transit,
) -> (u32, CpuSet) {
    if !app.partition_only {
        return handover::controlled_page(app, share, transit);
    }
    let set = share.cpus;
    let union = partition_sets
        .get(app.partition)
        .copied()
        .unwrap_or_default();
    let cpus = if !set.is_empty() {
        set
    } else if !union.is_empty() {
        union
    } else {
        managed
    };
    (app.pool_size, cpus)
}

pub(crate) mod handover;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_floor;
#[cfg(test)]
mod tests_handover;
