//! The revocation hand-over: examples, and the invariant as a property over sequences of
//! rounds (demands change, workers park or not, time passes).

use super::tests::{apply_to, state};
use super::*;
use crate::alloc::AppDemand;
use crate::config::PartitionConfig;
use proptest::prelude::*;

const D: u64 = 2_000_000;

fn set(v: &[usize]) -> CpuSet {
    v.iter().copied().collect()
}

/// Two CPUs; B (app 2, pool 2) runs on both, A (app 1, pool 2) asks for nothing; both
/// confinable and reporting their active workers. `uncontrolled`: a tracked process in the
/// default partition asks for one CPU too.
fn two_apps(uncontrolled: u32) -> PlanInput {
    let mut alloc = AllocInput::new(vec![0, 1], vec![PartitionConfig::named("default")]);
    alloc.uncontrolled = vec![uncontrolled];
    for (id, demand) in [(1, 0), (2, 2)] {
        alloc.apps.push(AppDemand {
            id,
            partition: 0,
            demand,
            pool_size: 2,
        });
    }
    let view = |id, published: (u32, CpuSet), active, demand| AppView {
        id,
        partition: 0,
        pool_size: 2,
        partition_only: false,
        may_confine: true,
        published: Some(published),
        demand,
        active: Some(active),
        revoked_at: None,
        shared: false,
    };
    PlanInput {
        alloc,
        apps: vec![
            view(1, (0, CpuSet::new()), 0, 0),
            view(2, (2, set(&[0, 1])), 2, 2),
        ],
        managed: set(&[0, 1]),
        uncontrolled_sets: vec![CpuSet::new()],
        now_ns: 1_000_000_000,
        handover_ns: D,
        // The hand-over's own cases: an application given none stops (see `tests.rs` for
        // the one-worker floor).
        min_target: 0,
    }
}

/// A's demand rises to 2 (its page's and the allocator's view).
fn raise_a(input: &mut PlanInput) {
    input.alloc.apps[0].demand = 2;
    input.apps[0].demand = 2;
}

fn page(input: &PlanInput, id: AppId) -> (u32, CpuSet) {
    input
        .apps
        .iter()
        .find(|a| a.id == id)
        .unwrap()
        .published
        .unwrap()
}

fn affinity(plan: &Plan, id: AppId) -> Option<CpuSet> {
    plan.effects.iter().find_map(|e| match *e {
        Effect::Affinity { app, cpus } if app == id => Some(cpus),
        _ => None,
    })
}

fn set_active(input: &mut PlanInput, id: AppId, active: u32) {
    input.apps.iter_mut().find(|a| a.id == id).unwrap().active = Some(active);
}

/// A's demand rises: B's target drops to 1 at once but B keeps both CPUs (no affinity
/// change), A gets none yet and a round is due at the deadline; when B's worker has parked
/// the next round narrows B and grants A the CPU.
#[test]
fn the_revoked_cpu_goes_to_its_new_owner_once_the_worker_parked() {
    let mut input = two_apps(0);
    raise_a(&mut input);
    let mut history = History::default();
    let first = plan(&input, &mut history);
    apply_to(&mut input, &first);
    assert_eq!(
        page(&input, 2),
        (1, set(&[0, 1])),
        "B's target drops at once"
    );
    assert_eq!(
        affinity(&first, 2),
        None,
        "B's affinity is not narrowed yet"
    );
    assert_eq!(page(&input, 1).0, 0, "A waits for the CPU");
    assert_eq!(first.revoked.get(&2), Some(&input.now_ns));
    assert_eq!(first.recheck_at, Some(input.now_ns + D));
    // B's worker is still running its task: nothing moves, however often a round runs.
    input.now_ns += D / 2;
    let again = plan(&input, &mut history);
    assert!(again.effects.is_empty(), "{:?}", again.effects);
    // It parks (the runtime sends a demand change): the CPU is handed over.
    set_active(&mut input, 2, 1);
    let handed = plan(&input, &mut history);
    apply_to(&mut input, &handed);
    let (b, a) = (page(&input, 2), page(&input, 1));
    assert_eq!((b.0, b.1.len(), a.0, a.1.len()), (1, 1, 1, 1));
    assert!(!a.1.contains(b.1.iter().next().unwrap()));
    assert_eq!(affinity(&handed, 2), Some(b.1));
    assert_eq!(affinity(&handed, 1), Some(a.1));
    assert!(handed.revoked.is_empty() && handed.recheck_at.is_none());
}

/// A worker that does not park within `D` does not keep the CPU: the round at the deadline
/// hands it over.
#[test]
fn the_deadline_hands_the_cpu_over_anyway() {
    let mut input = two_apps(0);
    raise_a(&mut input);
    let mut history = History::default();
    let first = plan(&input, &mut history);
    apply_to(&mut input, &first);
    input.now_ns = first.recheck_at.unwrap();
    let late = plan(&input, &mut history);
    apply_to(&mut input, &late);
    assert_eq!(page(&input, 1).0, 1, "A got its CPU at the deadline");
    assert_eq!(page(&input, 2).1.len(), 1, "B narrowed");
    assert!(late.revoked.is_empty(), "the deadline is not renewed");
}

/// Nothing is withheld with `D` = 0, nor from an application whose active count cannot be
/// read: the grant and the narrowing are in the revoking round.
#[test]
fn no_hand_over_when_off_or_unreadable() {
    for unreadable in [false, true] {
        let mut input = two_apps(0);
        raise_a(&mut input);
        if unreadable {
            input.apps[1].active = None;
        } else {
            input.handover_ns = 0;
        }
        let p = plan(&input, &mut History::default());
        apply_to(&mut input, &p);
        assert_eq!(page(&input, 1).0, 1, "unreadable: {unreadable}");
        assert_eq!(page(&input, 2).1.len(), 1);
        assert!(p.revoked.is_empty() && p.recheck_at.is_none());
    }
}

/// A CPU the application gave up itself (its own demand fell to what it gets) goes at
/// once, busy workers or not: only a CPU taken from an application is held back.
#[test]
fn a_cpu_given_up_goes_at_once() {
    let mut input = two_apps(0);
    raise_a(&mut input);
    input.alloc.apps[1].demand = 1;
    input.apps[1].demand = 1;
    let p = plan(&input, &mut History::default());
    apply_to(&mut input, &p);
    assert_eq!(page(&input, 1).0, 1, "A got the CPU B gave up");
    assert_eq!(page(&input, 2).1.len(), 1, "B narrowed at once");
    assert!(p.revoked.is_empty());
}

/// The bandwidth policy parks an application by zeroing the demand the allocator sees, not
/// its own: its CPUs are taken from it, so a quantum switch gets the hand-over too.
#[test]
fn a_quantum_switch_hands_over_too() {
    let mut input = two_apps(0);
    raise_a(&mut input);
    input.alloc.apps[1].demand = 0; // B parked for a quantum; its page still says 2.
    let mut history = History::default();
    let p = plan(&input, &mut history);
    apply_to(&mut input, &p);
    assert_eq!(
        page(&input, 2),
        (0, set(&[0, 1])),
        "B parks, keeping its CPUs"
    );
    assert_eq!(page(&input, 1).0, 0, "A waits for them");
    set_active(&mut input, 2, 0);
    let handed = plan(&input, &mut history);
    apply_to(&mut input, &handed);
    assert_eq!(
        page(&input, 1),
        (2, set(&[0, 1])),
        "A gets both once B parked"
    );
}

/// An uncontrolled process gets the revoked CPU at once; the releasing application keeps
/// it in its affinity until its worker parks.
#[test]
fn an_uncontrolled_process_is_never_kept_waiting() {
    let mut input = two_apps(1);
    let mut history = History::default();
    let p = plan(&input, &mut history);
    let unc = p.allocation.cpus(MemberId::Uncontrolled(0));
    assert_eq!(unc.len(), 1);
    assert!(p.effects.contains(&Effect::Uncontrolled {
        partition: 0,
        cpus: unc
    }));
    apply_to(&mut input, &p);
    assert_eq!(
        page(&input, 2),
        (1, set(&[0, 1])),
        "B keeps its CPUs meanwhile"
    );
}

/// The CPUs a test-side application is letting go of while in transit, by the brief's
/// definition: its target was lowered (now, or pending since `revoked_at`) below its own
/// demand, its reported active workers exceed its new target, and the deadline has not
/// passed.
fn in_transit(before: &AppView, input: &PlanInput, plan: &Plan) -> Option<(u64, CpuSet)> {
    if input.handover_ns == 0 || before.partition_only {
        return None;
    }
    let (active, (old_target, old_cpus)) = (before.active?, before.published?);
    let (count, set) = plan
        .allocation
        .members
        .get(&MemberId::App(before.id))
        .copied()
        .unwrap_or((0, CpuSet::new()));
    let since = before
        .revoked_at
        .or((count < old_target).then_some(input.now_ns))?;
    (active > count && before.demand > count && input.now_ns < since + input.handover_ns)
        .then(|| (since, old_cpus.without(&set)))
}

/// One round of the property: plan, check, apply.
fn round(input: &mut PlanInput, history: &mut History) -> Result<Plan, TestCaseError> {
    let before = input.apps.clone();
    let p = plan(input, history);
    let transit: BTreeMap<AppId, (u64, CpuSet)> = before
        .iter()
        .filter_map(|a| Some((a.id, in_transit(a, input, &p)?)))
        .collect();
    let mut held = CpuSet::new();
    for (_, cpus) in transit.values() {
        held.union_with(cpus);
    }
    let now = input.now_ns;
    apply_to(input, &p);
    for a in input.apps.iter().filter(|a| !a.partition_only) {
        let (target, cpus) = a.published.unwrap();
        let (count, set) = p
            .allocation
            .members
            .get(&MemberId::App(a.id))
            .copied()
            .unwrap_or((0, CpuSet::new()));
        let withheld: CpuSet = set.iter().filter(|&c| held.contains(c)).collect();
        let granted = set.without(&held);
        match transit.get(&a.id) {
            Some((since, own)) => {
                // It keeps what it lets go of, and the deadline stays where it was.
                prop_assert_eq!(p.revoked.get(&a.id), Some(since));
                prop_assert!(target == 0 || own.iter().all(|c| cpus.contains(c)));
                prop_assert!(target <= count);
            }
            None => {
                prop_assert!(!p.revoked.contains_key(&a.id));
                // Never a CPU in transit from another application; every other one at once.
                let want = count - withheld.len() as u32;
                if want > 0 {
                    prop_assert_eq!((target, cpus), (want, granted), "app {}", a.id);
                } else {
                    prop_assert_eq!(target, 0);
                }
            }
        }
    }
    let deadline = transit.values().map(|(s, _)| s + input.handover_ns).min();
    prop_assert_eq!(p.recheck_at, deadline);
    prop_assert!(deadline.is_none_or(|d| d > now));
    for (k, set) in input.uncontrolled_sets.iter().enumerate() {
        let got = p.allocation.cpus(MemberId::Uncontrolled(k));
        if !got.is_empty() {
            prop_assert_eq!(*set, got, "uncontrolled processes wait for nothing");
        }
    }
    Ok(p)
}

proptest! {
    /// At no point does a plan give a CPU to another application while it is in transit;
    /// once the releasing application's active count reaches its target or the deadline
    /// passes, the CPU is given; uncontrolled processes get theirs at once; and planning
    /// again from the applied state changes nothing.
    #[test]
    fn no_cpu_is_given_while_in_transit(
        mut input in state(),
        d in prop::sample::select(vec![0u64, 1_000_000, 2_000_000]),
        steps in prop::collection::vec(
            (prop::collection::vec(0u32..10, 12), prop::collection::vec(any::<bool>(), 12), 0u64..3),
            1..8,
        ),
    ) {
        input.handover_ns = d;
        // The hand-over's model: an application given none stops (the one-worker floor
        // moves sets, not workers: tests_floor.rs).
        input.min_target = 0;
        let mut history = History::default();
        for (demands, parks, dt) in steps {
            let p = round(&mut input, &mut history)?;
            let q = plan(&input, &mut history.clone());
            if q.allocation.members == p.allocation.members {
                prop_assert!(q.effects.is_empty(), "{:?}", q.effects);
            }
            // The world moves: demands change, some workers reach a safe point (the active
            // count meets the target), time passes.
            for (i, a) in input.apps.iter_mut().enumerate() {
                input.alloc.apps[i].demand = demands[i];
                a.demand = demands[i];
                if parks[i] && a.active.is_some() {
                    a.active = a.published.map(|p| p.0);
                }
            }
            input.now_ns += dt * d / 2;
        }
    }
}
