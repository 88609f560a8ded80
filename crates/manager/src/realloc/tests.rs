//! The plan is a pure function (proptests); the doorbell coalesces (counts, not times).

use super::*;
use crate::alloc::AppDemand;
use crate::config::{PartitionConfig, PolicyKind};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;

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
    )
        .prop_map(|(ncpu, np, apps, unc)| {
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
                });
            }
            PlanInput {
                alloc,
                apps: views,
                managed: (0..ncpu).collect(),
                uncontrolled_sets: vec![CpuSet::new(); np],
                now_ns: 1_000_000_000,
                handover_ns: 0,
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
            Effect::Publish { app, target, cpus } => {
                let a = input.apps.iter_mut().find(|a| a.id == app).unwrap();
                a.published = Some((target, cpus));
            }
            Effect::Affinity { .. } => {}
            Effect::Uncontrolled { partition, cpus } => input.uncontrolled_sets[partition] = cpus,
        }
    }
}

proptest! {
    /// Applying plan(state) gives the allocation: every controlled application's page says
    /// its allocated count and set (or a zero quantum on its previous set); a partition-only
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
                prop_assert_eq!(target, 0);
                prop_assert_eq!(cpus, before[&a.id].map_or(CpuSet::new(), |p| p.1));
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
            if same && (!a.partition_only || partition_same) {
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

/// A doorbell storm while a reallocation is in flight makes exactly one more reallocation.
#[test]
fn a_doorbell_storm_coalesces_into_one_more_round() {
    let bell = Arc::new(Doorbell::default());
    let rounds = Arc::new(AtomicU64::new(0));
    let (started_tx, started_rx) = mpsc::channel::<()>();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let worker = {
        let rounds = rounds.clone();
        spawn(bell.clone(), move || {
            rounds.fetch_add(1, Ordering::SeqCst);
            started_tx.send(()).unwrap();
            // Block the round until the test releases it: the storm happens meanwhile.
            release_rx.recv().unwrap();
        })
        .unwrap()
    };
    bell.ring();
    started_rx.recv().unwrap(); // Round 1 is in flight.
    let mut last = 0;
    for _ in 0..10_000 {
        last = bell.ring();
    }
    release_tx.send(()).unwrap(); // Round 1 ends; round 2 covers all 10^4 rings.
    started_rx.recv().unwrap();
    release_tx.send(()).unwrap();
    bell.wait_served(last);
    assert_eq!(rounds.load(Ordering::SeqCst), 2);
    assert_eq!(bell.rounds(), 2);
    // Nothing more is pending: a third round needs a new ring.
    let n = bell.ring();
    started_rx.recv().unwrap();
    release_tx.send(()).unwrap();
    bell.wait_served(n);
    assert_eq!(bell.rounds(), 3);
    bell.stop();
    worker.join().unwrap();
}

/// A ring while no round is in flight is served at once (growth and revocation stay
/// immediate), and `wait_served` returns only after a round that started after the ring.
#[test]
fn a_ring_is_served_by_a_round_that_starts_after_it() {
    let bell = Arc::new(Doorbell::default());
    let seen = Arc::new(AtomicU64::new(0));
    let value = Arc::new(AtomicU64::new(0));
    let worker = {
        let (seen, value) = (seen.clone(), value.clone());
        spawn(bell.clone(), move || {
            seen.store(value.load(Ordering::SeqCst), Ordering::SeqCst);
        })
        .unwrap()
    };
    for v in 1..=100 {
        value.store(v, Ordering::SeqCst);
        let n = bell.ring();
        bell.wait_served(n);
        assert_eq!(
            seen.load(Ordering::SeqCst),
            v,
            "round did not see the change"
        );
    }
    assert!(bell.rounds() <= 100);
    bell.stop();
    worker.join().unwrap();
}

#[test]
fn a_scheduled_round_runs_without_a_ring_and_a_round_covers_it() {
    let (bell, rounds, worker) = counting_reallocator();
    bell.schedule(std::time::Instant::now() + std::time::Duration::from_millis(5));
    // No ring: the thread runs one round when the time comes (generous bound: counts only).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while rounds.load(Ordering::SeqCst) == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert_eq!(
        rounds.load(Ordering::SeqCst),
        1,
        "the scheduled round did not run"
    );
    std::thread::sleep(std::time::Duration::from_millis(30));
    assert_eq!(
        rounds.load(Ordering::SeqCst),
        1,
        "a timer runs one round, once"
    );
    // A time already passed is served at once; a ring in between covers it.
    let n = bell.ring();
    bell.schedule(std::time::Instant::now());
    bell.wait_served(n);
    std::thread::sleep(std::time::Duration::from_millis(30));
    assert!(rounds.load(Ordering::SeqCst) <= 3);
    assert!(rounds.load(Ordering::SeqCst) >= 2);
    bell.stop();
    worker.join().unwrap();
}

#[test]
fn revocations_are_published_first() {
    // (before, after): a grant, a revocation, an unchanged target, another revocation.
    let order = revocations_first(&[(1, 2), (2, 1), (1, 1), (3, 0)]);
    assert_eq!(order, vec![1, 3, 0, 2]);
}

proptest! {
    /// Every page is published exactly once, and no raised or kept target goes before a
    /// lowered one.
    #[test]
    fn publish_order_is_a_permutation_with_revocations_first(
        changes in prop::collection::vec((0u32..5, 0u32..5), 0..20),
    ) {
        let order = revocations_first(&changes);
        let mut sorted = order.clone();
        sorted.sort_unstable();
        prop_assert_eq!(sorted, (0..changes.len()).collect::<Vec<_>>());
        let lowered = |i: usize| changes[i].1 < changes[i].0;
        let first_other = order.iter().position(|&i| !lowered(i)).unwrap_or(order.len());
        prop_assert!(order[first_other..].iter().all(|&i| !lowered(i)));
    }
}

/// A doorbell and a reallocator thread whose rounds only count themselves.
fn counting_reallocator() -> (Arc<Doorbell>, Arc<AtomicU64>, std::thread::JoinHandle<()>) {
    let bell = Arc::new(Doorbell::default());
    let rounds = Arc::new(AtomicU64::new(0));
    let r = rounds.clone();
    let worker = spawn(bell.clone(), move || {
        r.fetch_add(1, Ordering::SeqCst);
    })
    .unwrap(); // A test: failing to start a thread is a failure.
    (bell, rounds, worker)
}

/// A ring while no round is in flight and rounds have been rare is claimed by the ringer (the
/// reallocator thread does not run it); rings during the claimed round wait for it and are
/// merged into exactly one round of the thread. (When a ringer may claim: the next test.)
#[test]
fn a_claimed_round_excludes_the_thread_and_later_rings_coalesce() {
    let (bell, thread_rounds, worker) = counting_reallocator();
    let claim = bell
        .ring_or_claim()
        .expect("a quiet bell lets the ringer run the round");
    // While it is in flight, no other claim, and the thread does not start a round.
    let mut last = 0;
    for _ in 0..10_000 {
        assert!(bell.ring_or_claim().is_none(), "two rounds in flight");
        last = bell.ring();
    }
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert_eq!(
        thread_rounds.load(Ordering::SeqCst),
        0,
        "overlapping rounds"
    );
    drop(claim);
    // The thread serves the 2 × 10^4 rings in one round.
    bell.wait_served(last);
    assert_eq!(thread_rounds.load(Ordering::SeqCst), 1);
    assert_eq!(bell.rounds(), 2);
    bell.stop();
    worker.join().unwrap();
}

/// A claimant that cannot run its round hands it to the thread, which serves the ring.
#[test]
fn a_handed_over_claim_is_served_by_the_thread() {
    let (bell, thread_rounds, worker) = counting_reallocator();
    let claim = bell
        .ring_or_claim()
        .expect("a quiet bell lets the ringer run the round");
    claim.hand_over();
    bell.wait_served(1);
    assert_eq!(thread_rounds.load(Ordering::SeqCst), 1);
    bell.stop();
    worker.join().unwrap();
}

/// Only a ring after a quiet spell following a short round may be claimed: a storm of rings
/// (rounds back to back) and a large registry's rounds stay on the reallocator thread.
#[test]
fn claims_only_after_a_quiet_spell_and_a_short_round() {
    use std::time::{Duration, Instant};
    let end = Instant::now();
    let short = CLAIM_MAX_ROUND;
    assert!(may_claim(None, end, false), "the first round");
    assert!(may_claim(Some((end, short)), end + CLAIM_QUIET, false));
    assert!(!may_claim(
        Some((end, short)),
        end + CLAIM_QUIET - Duration::from_nanos(1),
        false
    ));
    assert!(
        !may_claim(Some((end, short)), end, false),
        "right after a round"
    );
    assert!(
        may_claim(Some((end, short)), end, true),
        "a hand-over's ring right after a round"
    );
    let long = CLAIM_MAX_ROUND + Duration::from_nanos(1);
    for handover in [false, true] {
        assert!(
            !may_claim(Some((end, long)), end + CLAIM_QUIET * 100, handover),
            "a long round"
        );
    }
}
