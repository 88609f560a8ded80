//! The plan is a pure function (proptests).

use super::*;
use crate::alloc::AppDemand;
use crate::config::{PartitionConfig, PolicyKind};
use proptest::prelude::*;
use std::collections::BTreeMap;

/// A random manager state: CPUs, partitions with policies, applications with demands, some
/// partition-only, some already published, some not confinable, some reporting active
/// workers; uncontrolled demand. No hand-over (`handover_ns` 0) and none pending.
pub(super) fn state() -> impl Strategy<Value = PlanInput> {
    (
        1usize..24,
        1usize..4,
        prop::collection::vec(
            (
                0usize..4,
                0u32..10,
                1u32..10,
                any::<bool>(),
                any::<bool>(),
                any::<bool>(),
                prop::option::of(0u32..10),
            ),
            0..12,
        ),
        prop::collection::vec(0u32..3, 4),
        0u32..2,
    )
        .prop_map(|(ncpu, np, apps, unc, min_target)| {
            let parts: Vec<PartitionConfig> = (0..np)
                .map(|k| {
                    let mut p = PartitionConfig::named(&if k == 0 {
                        "default".to_string()
                    } else {
                        format!("p{k}")
                    });
                    p.policy = [
                        PolicyKind::Equipartition,
                        PolicyKind::UsageDecay,
                        PolicyKind::Dss,
                    ][k % 3];
                    p
                })
                .collect();
            let mut alloc = AllocInput::new((0..ncpu).collect(), parts);
            alloc.uncontrolled = unc[..np].to_vec();
            let mut views = Vec::new();
            for (i, (k, demand, pool, po, confinable, was_published, active)) in
                apps.into_iter().enumerate()
            {
                let id = i as AppId + 1;
                let partition = k % np;
                alloc.apps.push(AppDemand {
                    id,
                    partition,
                    demand,
                    pool_size: pool,
                });
                views.push(AppView {
                    id,
                    partition,
                    pool_size: pool,
                    partition_only: po,
                    may_confine: confinable,
                    published: was_published.then(|| (pool, [i % ncpu].into_iter().collect())),
                    demand,
                    active,
                    revoked_at: None,
                    shared: false,
                });
            }
            PlanInput {
                alloc,
                apps: views,
                managed: (0..ncpu).collect(),
                uncontrolled_sets: vec![CpuSet::new(); np],
                now_ns: 1_000_000_000,
                handover_ns: 0,
                min_target,
            }
        })
}

/// Apply a plan's effects to the plain-data state, as `Registry::plan` does to its own.
pub(super) fn apply_to(input: &mut PlanInput, plan: &Plan) {
    for a in &mut input.apps {
        a.revoked_at = plan.revoked.get(&a.id).copied();
    }
    for e in &plan.effects {
        match *e {
            Effect::Publish {
                app,
                target,
                cpus,
                shared,
            } => {
                let a = input.apps.iter_mut().find(|a| a.id == app).unwrap();
                a.published = Some((target, cpus));
                a.shared = shared;
            }
            Effect::Affinity { .. } => {}
            Effect::Uncontrolled { partition, cpus } => input.uncontrolled_sets[partition] = cpus,
        }
    }
}

/// The union of the CPUs the allocation gives partition `k`'s members.
fn partition_union(input: &PlanInput, plan: &Plan, k: usize) -> CpuSet {
    let mut u = CpuSet::new();
    for (m, (_, set)) in &plan.allocation.members {
        let of = match m {
            MemberId::Uncontrolled(j) => *j,
            MemberId::App(id) => input.apps.iter().find(|a| a.id == *id).unwrap().partition,
        };
        if of == k {
            u.union_with(set);
        }
    }
    u
}

proptest! {
    /// Applying plan(state) gives the allocation: every controlled application's page says
    /// its allocated count and set (given none: one worker on its partition's CPUs, or a
    /// zero quantum on its previous set); a partition-only
    /// one keeps its pool size on a non-empty set of managed CPUs; affinity is changed only
    /// for confinable applications whose set changed; the uncontrolled sets follow. With no
    /// hand-over (`handover_ns` 0) nothing is withheld, whatever the active counts.
    #[test]
    fn applying_the_plan_gives_the_allocation(mut input in state()) {
        let before: BTreeMap<AppId, Option<(u32, CpuSet)>> =
            input.apps.iter().map(|a| (a.id, a.published)).collect();
        let plan = plan(&input, &mut History::default());
        prop_assert!(plan.revoked.is_empty() && plan.recheck_at.is_none());
        apply_to(&mut input, &plan);
        for a in &input.apps {
            let (count, set) = plan.allocation.members.get(&MemberId::App(a.id)).copied()
                .unwrap_or((0, CpuSet::new()));
            let (target, cpus) = a.published.expect("every application is published");
            if a.partition_only {
                prop_assert_eq!(target, a.pool_size);
                prop_assert!(!cpus.is_empty());
                prop_assert!(cpus.iter().all(|c| input.managed.contains(c)));
            } else if count == 0 {
                // One worker on its partition's CPUs in a sharing partition that has some,
                // when it wants CPUs and the floor is on; else stopped on its previous set.
                let union = partition_union(&input, &plan, a.partition);
                let sharing = matches!(
                    input.alloc.partitions[a.partition].policy,
                    PolicyKind::Equipartition | PolicyKind::UsageDecay
                );
                if input.min_target == 1 && a.demand > 0 && sharing && !union.is_empty() {
                    prop_assert_eq!((target, cpus), (1, union));
                } else {
                    prop_assert_eq!(target, 0);
                    prop_assert_eq!(cpus, before[&a.id].map_or(CpuSet::new(), |p| p.1));
                }
            } else {
                prop_assert_eq!((target, cpus), (count, set));
            }
            let old_cpus = before[&a.id].map(|p| p.1);
            let affinity = plan.effects.iter().any(|e| matches!(e, Effect::Affinity { app, .. } if *app == a.id));
            prop_assert_eq!(
                affinity,
                a.may_confine && !cpus.is_empty() && old_cpus != Some(cpus),
                "affinity effect for app {}", a.id
            );
        }
        for (k, set) in input.uncontrolled_sets.iter().enumerate() {
            let got = plan.allocation.cpus(MemberId::Uncontrolled(k));
            if !got.is_empty() {
                prop_assert_eq!(*set, got);
            }
        }
    }

    /// No effect for an unchanged application: planning again from the applied state emits
    /// nothing for an application whose allocation did not change, nor for an uncontrolled
    /// set that did not change; and an effect exists exactly when the page would change.
    #[test]
    fn no_effect_for_an_unchanged_app(mut input in state()) {
        let mut history = History::default();
        let first = plan(&input, &mut history);
        apply_to(&mut input, &first);
        let second = plan(&input, &mut history);
        for a in &input.apps {
            let m = MemberId::App(a.id);
            let publishes = second.effects.iter().any(|e| matches!(e, Effect::Publish { app, .. } if *app == a.id));
            let same = first.allocation.members.get(&m) == second.allocation.members.get(&m);
            let partition_same = first.allocation.partitions == second.allocation.partitions
                && first.allocation.members == second.allocation.members;
            // A page that follows its partition's CPUs (partition-only, or kept at one worker
            // on them) may change with the partition even when its own allocation did not.
            let follows_partition =
                a.partition_only || (input.min_target > 0 && first.allocation.count(m) == 0);
            if same && (!follows_partition || partition_same) {
                prop_assert!(!publishes, "app {} unchanged but published again", a.id);
                let affinity = second.effects.iter().any(|e| matches!(e, Effect::Affinity { app, .. } if *app == a.id));
                prop_assert!(!affinity, "app {} unchanged but confined again", a.id);
            }
        }
        for (k, _) in input.uncontrolled_sets.iter().enumerate() {
            let u = MemberId::Uncontrolled(k);
            if first.allocation.cpus(u) == second.allocation.cpus(u) {
                let moved = second.effects.iter().any(|e| matches!(e, Effect::Uncontrolled { partition, .. } if *partition == k));
                prop_assert!(!moved, "partition {} unchanged but moved again", k);
            }
        }
        // And a third plan of the same state changes nothing at all once the allocation is
        // the same as the second's.
        let mut again = input.clone();
        apply_to(&mut again, &second);
        let third = plan(&again, &mut history);
        if third.allocation.members == second.allocation.members {
            prop_assert!(third.effects.is_empty(), "{:?}", third.effects);
        }
    }
}
