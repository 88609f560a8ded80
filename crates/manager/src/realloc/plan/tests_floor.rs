//! One worker at least (`min_target`): an application the rotation gives no CPU of its own
//! keeps one worker on its partition's CPUs; the rotation then moves CPU sets, not workers.

use super::tests::apply_to;
use super::*;
use crate::alloc::AppDemand;
use crate::config::PartitionConfig;
use std::collections::BTreeSet;

const D: u64 = 2_000_000;

/// `n` applications of pool 2 and demand 2 in one partition of `policy` on 2 CPUs, with the
/// hand-over on, every one confinable and reporting its active workers (0: not started).
fn crowd(n: u32, policy: PolicyKind, min_target: u32) -> PlanInput {
    let mut p = PartitionConfig::named("default");
    p.policy = policy;
    let mut alloc = AllocInput::new(vec![0, 1], vec![p]);
    alloc.uncontrolled = vec![0];
    let mut apps = Vec::new();
    for id in 1..=n {
        alloc.apps.push(AppDemand {
            id,
            partition: 0,
            demand: 2,
            pool_size: 2,
        });
        apps.push(AppView {
            id,
            partition: 0,
            pool_size: 2,
            partition_only: false,
            may_confine: true,
            published: None,
            demand: 2,
            active: Some(0),
            revoked_at: None,
            shared: false,
        });
    }
    PlanInput {
        alloc,
        apps,
        managed: [0, 1].into_iter().collect(),
        uncontrolled_sets: vec![CpuSet::new()],
        now_ns: 1_000_000_000,
        handover_ns: D,
        min_target,
    }
}

/// Every application's page, by id.
fn pages(input: &PlanInput) -> Vec<(u32, CpuSet)> {
    input.apps.iter().map(|a| a.published.unwrap()).collect()
}

/// The workers run what the pages say (each application's runtime followed its target).
fn follow(input: &mut PlanInput) {
    for a in &mut input.apps {
        a.active = a.published.map(|p| p.0);
    }
}

/// Four programs on two CPUs: two own a CPU each, the other two run one worker each on
/// both CPUs; nobody is at zero.
#[test]
fn four_programs_on_two_cpus_each_keep_one_worker() {
    let mut input = crowd(4, PolicyKind::Equipartition, 1);
    let p = plan(&input, &mut History::default());
    apply_to(&mut input, &p);
    let both: CpuSet = [0, 1].into_iter().collect();
    let pages = pages(&input);
    assert!(pages.iter().all(|&(t, _)| t == 1), "{pages:?}");
    let own: Vec<CpuSet> = pages.iter().map(|p| p.1).filter(|s| s.len() == 1).collect();
    assert_eq!(own.len(), 2, "{pages:?}");
    assert_ne!(own[0], own[1], "the owned CPUs are distinct: {pages:?}");
    assert_eq!(pages.iter().filter(|p| p.1 == both).count(), 2, "{pages:?}");
    // The allocation itself is unchanged: two CPUs, one each to two applications.
    assert_eq!(p.allocation.total(), 2);
}

/// With `min_target = 0` the two without a CPU stop; in a batch partition too, whatever
/// `min_target` (one application at a time is what batch is for).
#[test]
fn the_floor_is_off_at_zero_and_in_batch_partitions() {
    for input in [
        crowd(4, PolicyKind::Equipartition, 0),
        crowd(4, PolicyKind::Batch, 1),
    ] {
        let mut input = input;
        let p = plan(&input, &mut History::default());
        apply_to(&mut input, &p);
        let stopped = pages(&input).iter().filter(|p| p.0 == 0).count();
        assert!(stopped >= 2, "{:?}", pages(&input));
    }
}

/// Over many rotation periods, with every runtime following its page: no page ever says 0,
/// no application is ever releasing (the rotation moves CPU sets, not workers, so nothing
/// waits for a hand-over), and the CPUs of their own do rotate among all four.
#[test]
fn the_rotation_moves_sets_not_workers() {
    let mut input = crowd(4, PolicyKind::Equipartition, 1);
    let mut history = History::default();
    let mut owners = BTreeSet::new();
    for round in 0..40u64 {
        input.alloc.now_ms = round * 100;
        input.now_ns += 100_000_000;
        let p = plan(&input, &mut history);
        apply_to(&mut input, &p);
        let pages = pages(&input);
        assert!(
            pages.iter().all(|&(t, _)| t == 1),
            "round {round}: {pages:?}"
        );
        if round > 0 {
            assert!(p.revoked.is_empty(), "round {round}: {:?}", p.revoked);
            assert!(p.recheck_at.is_none(), "round {round}");
        }
        for (a, page) in input.apps.iter().zip(&pages) {
            if page.1.len() == 1 {
                owners.insert(a.id);
            }
        }
        follow(&mut input);
    }
    assert_eq!(owners.len(), 4, "every program owned a CPU in its turn");
}

/// A program running on both CPUs that the rotation leaves without one of its own releases
/// one worker (the hand-over holds nothing: it keeps both CPUs, shared) and runs on.
#[test]
fn a_program_losing_its_cpus_keeps_one_worker() {
    let mut input = crowd(1, PolicyKind::Equipartition, 1);
    let mut history = History::default();
    let p = plan(&input, &mut history);
    apply_to(&mut input, &p);
    follow(&mut input);
    assert_eq!(pages(&input)[0].0, 2);
    // Three more arrive; in a later period the first one gets none of its own.
    let more = crowd(4, PolicyKind::Equipartition, 1);
    input.alloc.apps = more.alloc.apps;
    input.apps.extend(more.apps.into_iter().skip(1));
    for round in 1..20u64 {
        input.alloc.now_ms = round * 300;
        input.now_ns += 300_000_000;
        let p = plan(&input, &mut history);
        apply_to(&mut input, &p);
        let first = pages(&input)[0];
        assert!(first.0 >= 1, "round {round}: {:?}", pages(&input));
        if p.allocation.count(MemberId::App(1)) == 0 {
            assert_eq!(first, (1, [0, 1].into_iter().collect()));
            return;
        }
        follow(&mut input);
    }
    panic!("the first program always kept a CPU of its own");
}
