use super::*;
use crate::alloc::allocate;
use crate::config::{PartitionConfig, PolicyKind};
use proptest::prelude::*;

fn set(v: &[usize]) -> CpuSet {
    v.iter().copied().collect()
}

/// The bound of a partition confined to `cpus`, with no quota.
fn within(cpus: &[usize]) -> Option<Bound> {
    Some(Bound {
        cpus: set(cpus),
        cap: None,
    })
}

fn part(name: &str, sharing: Sharing) -> PartitionConfig {
    let mut p = PartitionConfig::named(name);
    p.sharing = sharing;
    p
}

fn app(id: u32, partition: usize, demand: u32) -> AppDemand {
    AppDemand {
        id,
        partition,
        demand,
        pool_size: 8,
    }
}

/// Two Slurm jobs on a 4-CPU node, two programs each: each job's programs split exactly its
/// CPUs; the default partition's program gets what no job holds.
#[test]
fn two_jobs_split_their_own_cpus() {
    let mut input = AllocInput::new(
        (0..6).collect(),
        vec![
            PartitionConfig::named("default"),
            part("slurm-job-1", Sharing::Never),
            part("slurm-job-2", Sharing::Never),
        ],
    );
    input.bounds = vec![None, within(&[0, 1]), within(&[2, 3])];
    input.apps = vec![
        app(1, 1, 8),
        app(2, 1, 8),
        app(3, 2, 8),
        app(4, 2, 8),
        app(5, 0, 8),
    ];
    let mut h = History::default();
    for round in 0..3 {
        input.now_ms = round * 400;
        let out = allocate(&input, &mut h);
        let c = |id| out.cpus(MemberId::App(id));
        assert_eq!(c(1).len() + c(2).len(), 2);
        let mut j1 = c(1);
        j1.union_with(&c(2));
        assert_eq!(j1, set(&[0, 1]));
        let mut j2 = c(3);
        j2.union_with(&c(4));
        assert_eq!(j2, set(&[2, 3]));
        assert_eq!(c(5), set(&[4, 5]));
        assert_eq!(out.partitions[1].allocation, 2);
        assert_eq!(out.partitions[0].allocation, 2);
        if round > 0 {
            assert_eq!(out.moves, 0, "round {round}");
        }
    }
    assert_eq!(h.bound.len(), 2);
    // Job 2 ends: its history goes, its CPUs return to the default partition.
    input.bounds[2] = None;
    input.partitions.pop();
    input.bounds.pop();
    input.apps.retain(|a| a.partition != 2);
    let out = allocate(&input, &mut h);
    assert_eq!(h.bound.len(), 1);
    assert_eq!(out.cpus(MemberId::App(5)), set(&[2, 3, 4, 5]));
}

/// A quota caps the partition below its cpuset; `lend-idle` lends what its programs leave and
/// takes it back when they want it; `never` lends nothing.
#[test]
fn quota_caps_and_lending_follows_sharing() {
    for sharing in [Sharing::Never, Sharing::LendIdle] {
        let mut input = AllocInput::new(
            (0..4).collect(),
            vec![PartitionConfig::named("default"), part("pod", sharing)],
        );
        input.bounds = vec![
            None,
            Some(Bound {
                cpus: set(&[0, 1, 2, 3]),
                cap: Some(2),
            }),
        ];
        input.apps = vec![app(1, 1, 8), app(2, 0, 8)];
        let mut h = History::default();
        let out = allocate(&input, &mut h);
        assert_eq!(out.count(MemberId::App(1)), 2, "{sharing:?}");
        let global = out.count(MemberId::App(2));
        assert_eq!(global, if sharing == Sharing::Never { 0 } else { 2 });
        // The pod's program goes idle: lent (lend-idle) or left idle (never).
        input.apps[0].demand = 0;
        input.now_ms = 400;
        let out = allocate(&input, &mut h);
        let global = out.count(MemberId::App(2));
        assert_eq!(global, if sharing == Sharing::Never { 0 } else { 4 });
        // It wants them again: back at once.
        input.apps[0].demand = 8;
        input.now_ms = 800;
        let out = allocate(&input, &mut h);
        assert_eq!(out.count(MemberId::App(1)), 2);
        assert!(out
            .cpus(MemberId::App(1))
            .without(&set(&[0, 1, 2, 3]))
            .is_empty());
        let mut both = out.cpus(MemberId::App(1));
        both.union_with(&out.cpus(MemberId::App(2)));
        assert_eq!(both.len(), out.total() as usize, "no CPU held twice");
    }
}

/// A cpuset outside the managed CPUs, or one an earlier `never` partition holds: no CPUs, no
/// panic, the demand reported.
#[test]
fn no_free_cpu_means_none_not_a_foreign_one() {
    let mut input = AllocInput::new(
        vec![0, 1],
        vec![
            PartitionConfig::named("default"),
            part("a", Sharing::Never),
            part("b", Sharing::Never),
            part("c", Sharing::Never),
        ],
    );
    input.bounds = vec![
        None,
        within(&[0, 1]),
        within(&[1]),
        Some(Bound {
            cpus: set(&[7]),
            cap: Some(1),
        }),
    ];
    input.uncontrolled = vec![2, 0, 0, 0];
    input.apps = vec![app(1, 1, 2), app(2, 2, 3), app(3, 3, 1)];
    let out = allocate(&input, &mut History::default());
    assert_eq!(out.cpus(MemberId::App(1)), set(&[0, 1]));
    assert_eq!(out.count(MemberId::App(2)) + out.count(MemberId::App(3)), 0);
    assert_eq!(out.partitions[2].demand, 3);
    assert_eq!(out.count(MemberId::Uncontrolled(0)), 0);
}

fn sharing() -> impl Strategy<Value = Sharing> {
    prop_oneof![
        Just(Sharing::Never),
        Just(Sharing::LendIdle),
        Just(Sharing::Always)
    ]
}

prop_compose! {
    fn scenario()(ncpu in 1usize..10, parts in proptest::collection::vec((sharing(), proptest::collection::vec(0usize..12, 0..6), proptest::option::of(1u32..6), proptest::bool::ANY), 0..4), apps in proptest::collection::vec((0usize..5, 0u32..8, 1u32..8), 0..10), unc in proptest::collection::vec(0u32..3, 0..5), policy in prop_oneof![Just(PolicyKind::Equipartition), Just(PolicyKind::UsageDecay), Just(PolicyKind::Dss), Just(PolicyKind::Batch)]) -> AllocInput {
        let mut ps = vec![PartitionConfig::named("default")];
        let mut bounds = vec![None];
        for (i, (s, cpus, cap, is_bound)) in parts.iter().enumerate() {
            let mut p = part(&format!("p{i}"), *s);
            p.policy = policy;
            ps.push(p);
            bounds.push(is_bound.then(|| Bound { cpus: set(cpus), cap: *cap }));
        }
        let np = ps.len();
        let mut input = AllocInput::new((0..ncpu).collect(), ps);
        input.bounds = bounds;
        input.uncontrolled = unc;
        input.apps = apps.iter().enumerate().map(|(i, &(k, d, pool))| AppDemand { id: i as u32 + 1, partition: k % np, demand: d, pool_size: pool }).collect();
        input
    }
}

proptest! {
    /// Whatever the partitions, bounds and demands, over several rounds: a bound partition's
    /// members only get CPUs of its cgroup, at most its quota; no CPU lies inside a `never`
    /// bound partition's cgroup and goes to an unbound member; without `always` partitions no
    /// CPU is held twice; counts match sets.
    #[test]
    fn bound_partitions_never_exceed_their_cgroup(input in scenario(), rounds in 1u64..4) {
        let mut h = History::default();
        let mut input = input;
        for r in 0..rounds {
            input.now_ms = r * 350;
            let out = allocate(&input, &mut h);
            let partition_of = |m: &MemberId| match m {
                MemberId::Uncontrolled(k) => *k,
                MemberId::App(id) => input.apps.iter().find(|a| a.id == *id).unwrap().partition,
            };
            let mut held: Vec<usize> = Vec::new();
            let mut per_partition = vec![0u32; input.partitions.len()];
            for (m, (n, s)) in &out.members {
                prop_assert_eq!(*n as usize, s.len());
                let k = partition_of(m);
                per_partition[k] += n;
                held.extend(s.iter());
                match input.bounds.get(k).copied().flatten().filter(|_| k > 0) {
                    Some(b) => prop_assert!(s.without(&b.cpus).is_empty(), "{:?} got {} outside {}", m, s, b.cpus),
                    None => {
                        for (j, b) in input.bounds.iter().enumerate().skip(1) {
                            if let Some(b) = b {
                                if input.partitions[j].sharing == Sharing::Never {
                                    let mut inside = *s;
                                    inside = inside.without(&inside.without(&b.cpus));
                                    prop_assert!(inside.is_empty(), "{:?} got {} of never-partition {}", m, s, j);
                                }
                            }
                        }
                    }
                }
            }
            for (k, b) in input.bounds.iter().enumerate().skip(1) {
                if let Some(b) = b {
                    prop_assert!(per_partition[k] <= b.cap.unwrap_or(u32::MAX));
                    prop_assert!(per_partition[k] as usize <= b.cpus.len());
                    // (batch gives exact requests only: members may hold fewer than the level-1 count)
                    prop_assert!(per_partition[k] <= out.partitions[k].allocation);
                }
            }
            if input.partitions.iter().all(|p| p.sharing != Sharing::Always) {
                let n = held.len();
                held.sort_unstable();
                held.dedup();
                prop_assert_eq!(held.len(), n, "a CPU held twice");
            }
        }
    }
}
