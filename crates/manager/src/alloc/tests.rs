//! Property tests of the allocator's invariants (manager.md §Invariants 1–8 and 10), over
//! arbitrary partitions, applications, demands and histories, with a simulated clock for
//! rotation, decay and revocation.

use super::*;
use crate::config::{PartitionConfig, PolicyKind, Sharing};
use proptest::prelude::*;
use std::collections::BTreeMap;

fn sharing() -> impl Strategy<Value = Sharing> {
    prop_oneof![
        Just(Sharing::LendIdle),
        Just(Sharing::Never),
        Just(Sharing::Always)
    ]
}

fn policy() -> impl Strategy<Value = PolicyKind> {
    prop_oneof![
        Just(PolicyKind::Equipartition),
        Just(PolicyKind::UsageDecay),
        Just(PolicyKind::Dss),
        Just(PolicyKind::Batch)
    ]
}

fn partition(i: usize) -> impl Strategy<Value = PartitionConfig> {
    (
        1u32..5,
        prop::option::weighted(0.25, 1u32..4),
        sharing(),
        policy(),
    )
        .prop_map(move |(share, cpus, sharing, policy)| {
            let mut p = PartitionConfig::named(
                if i == 0 {
                    "default".to_string()
                } else {
                    format!("p{i}")
                }
                .as_str(),
            );
            p.share = share;
            p.cpus = cpus;
            p.sharing = sharing;
            p.policy = policy;
            p
        })
}

fn partitions() -> impl Strategy<Value = Vec<PartitionConfig>> {
    (1usize..5).prop_flat_map(|n| (0..n).map(partition).collect::<Vec<_>>())
}

/// An arbitrary allocation input.
fn input() -> impl Strategy<Value = AllocInput> {
    (partitions(), 1usize..17).prop_flat_map(|(ps, ncpu)| {
        let np = ps.len();
        (
            Just(ps),
            Just(ncpu),
            prop::collection::vec((0..np, 0u32..9, 1u32..9), 0..12),
            prop::collection::vec(0u32..4, np),
            prop::collection::vec(0u32..3, ncpu),
        )
            .prop_map(|(ps, ncpu, apps, unc, domains)| {
                let mut i = AllocInput::new((0..ncpu).collect(), ps);
                i.domains = domains;
                i.uncontrolled = unc;
                i.apps = apps
                    .into_iter()
                    .enumerate()
                    .map(|(k, (partition, demand, pool_size))| AppDemand {
                        id: k as u32 + 1,
                        partition,
                        demand,
                        pool_size,
                    })
                    .collect();
                i
            })
    })
}

fn member_partition(input: &AllocInput, m: MemberId) -> usize {
    match m {
        MemberId::Uncontrolled(k) => k,
        MemberId::App(id) => input.apps.iter().find(|a| a.id == id).unwrap().partition,
    }
}

fn cap(input: &AllocInput, m: MemberId) -> u32 {
    match m {
        MemberId::Uncontrolled(k) => input.uncontrolled[k],
        MemberId::App(id) => input.apps.iter().find(|a| a.id == id).unwrap().cap(),
    }
}

/// Checks that hold for every allocation.
fn check_always(input: &AllocInput, out: &AllocOutput) -> Result<(), TestCaseError> {
    let p = input.cpus.len() as u32;
    // 1. Conservation.
    let total = out.total();
    prop_assert!(total <= p, "Σ allocated {} > {} CPUs", total, p);
    let palloc: u32 = out.partitions.iter().map(|x| x.allocation).sum();
    prop_assert!(palloc <= p);
    let idle_never: u32 = out
        .partitions
        .iter()
        .zip(&input.partitions)
        .filter(|(_, s)| s.sharing == Sharing::Never)
        .map(|(a, _)| a.entitlement - a.allocation)
        .sum();
    let unmet = out
        .partitions
        .iter()
        .zip(&input.partitions)
        .any(|(a, s)| s.sharing != Sharing::Never && a.allocation < a.demand);
    // 1 + 5. Work conservation and sharing: with unmet demand in a partition that may borrow,
    // every CPU is allocated except those `never` partitions keep idle.
    if unmet {
        prop_assert_eq!(palloc + idle_never, p, "idle CPUs while demand is unmet");
    }
    // Level 2 hands out the whole partition allocation (except FCFS batch, which by design
    // waits for exact requests).
    for (k, a) in out.partitions.iter().enumerate() {
        let got: u32 = out
            .members
            .iter()
            .filter(|(m, _)| member_partition(input, **m) == k)
            .map(|(_, x)| x.0)
            .sum();
        if input.partitions[k].policy == PolicyKind::Batch {
            prop_assert!(got <= a.allocation);
        } else {
            prop_assert_eq!(got, a.allocation, "partition {} not fully handed out", k);
        }
    }
    // 2. Caps and exclusive sets.
    let mut owner: BTreeMap<usize, MemberId> = BTreeMap::new();
    for (m, (n, set)) in &out.members {
        prop_assert!(*n <= cap(input, *m), "{:?} above its cap", m);
        prop_assert_eq!(set.len() as u32, *n);
        for c in set.iter() {
            prop_assert!(input.cpus.contains(&c));
            prop_assert!(owner.insert(c, *m).is_none(), "CPU {} in two sets", c);
        }
    }
    // 4. Isolation: a protected partition whose demand fits its entitlement gets its demand.
    for (a, s) in out.partitions.iter().zip(&input.partitions) {
        if s.sharing != Sharing::Always && a.demand <= a.entitlement {
            prop_assert!(a.allocation >= a.demand, "isolation broken: {:?}", a);
        }
    }
    // 10. Uncontrolled processes never get more than their runnable demand, 0 when none.
    for (k, &d) in input.uncontrolled.iter().enumerate() {
        prop_assert!(out.count(MemberId::Uncontrolled(k)) <= d);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Invariants 1, 2, 4, 5, 10 on a single allocation and along a random history.
    #[test]
    fn invariants_hold_along_histories(
        input in input(),
        steps in prop::collection::vec((0usize..12, 0u32..9, 0u64..400), 0..12),
    ) {
        let mut input = input;
        let mut h = History::default();
        let out = allocate(&input, &mut h);
        check_always(&input, &out)?;
        for (who, demand, dt) in steps {
            if !input.apps.is_empty() {
                let i = who % input.apps.len();
                input.apps[i].demand = demand;
            }
            input.now_ms += dt;
            let out = allocate(&input, &mut h);
            check_always(&input, &out)?;
        }
    }

    /// 4. Revocation: lent CPUs come back within one reallocation of the owner's demand rising.
    #[test]
    fn revocation_is_immediate(ncpu in 2usize..17, share_a in 1u32..4, share_b in 1u32..4, demand_a in 1u32..17) {
        let mut a = PartitionConfig::named("default");
        a.share = share_a;
        let mut b = PartitionConfig::named("b");
        b.share = share_b;
        let mut input = AllocInput::new((0..ncpu).collect(), vec![a, b]);
        input.apps = vec![
            AppDemand { id: 1, partition: 0, demand: 0, pool_size: 16 },
            AppDemand { id: 2, partition: 1, demand: 16, pool_size: 16 },
        ];
        let mut h = History::default();
        let out = allocate(&input, &mut h);
        // B borrows A's idle entitlement.
        prop_assert_eq!(out.partitions[1].allocation, ncpu as u32);
        input.apps[0].demand = demand_a;
        input.now_ms += 1;
        let out = allocate(&input, &mut h);
        let ent = out.partitions[0].entitlement;
        prop_assert_eq!(out.count(MemberId::App(1)), demand_a.min(ent).max(out.partitions[0].allocation.min(demand_a)));
        prop_assert!(out.partitions[0].allocation >= demand_a.min(ent));
    }

    /// 3. Equipartition: equal demand ⇒ counts differ by ≤ 1 at every instant and cumulative
    /// CPU time by ≤ one period's worth, whatever the pool sizes (threads) are.
    #[test]
    fn equipartition_is_fair_over_time(
        ncpu in 1usize..9,
        demand in 1u32..9,
        pools in prop::collection::vec(0u32..8, 1..7),
        periods in 1usize..40,
    ) {
        let mut input = AllocInput::new((0..ncpu).collect(), vec![PartitionConfig::named("default")]);
        input.apps = pools.iter().enumerate().map(|(i, extra)| AppDemand {
            id: i as u32 + 1, partition: 0, demand, pool_size: demand + extra,
        }).collect();
        let mut h = History::default();
        let mut cum: BTreeMap<u32, u64> = BTreeMap::new();
        for _ in 0..periods {
            let out = allocate(&input, &mut h);
            let counts: Vec<u32> = input.apps.iter().map(|a| out.count(MemberId::App(a.id))).collect();
            let (lo, hi) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
            prop_assert!(hi - lo <= 1, "counts {:?}", counts);
            for a in &input.apps {
                *cum.entry(a.id).or_default() += out.count(MemberId::App(a.id)) as u64;
            }
            let (lo, hi) = (cum.values().min().unwrap(), cum.values().max().unwrap());
            prop_assert!(hi - lo <= 1, "cumulative {:?}", cum);
            input.now_ms += input.period_ms;
        }
    }

    /// Level-1 rotation: fractional entitlements rotate so that the long-run share is exact.
    #[test]
    fn fractional_entitlements_rotate(ncpu in 1usize..9, shares in prop::collection::vec(1u32..5, 1..5), periods in 1u64..60) {
        let ps: Vec<PartitionConfig> = shares.iter().enumerate().map(|(i, &s)| {
            let mut p = PartitionConfig::named(&if i == 0 { "default".into() } else { format!("p{i}") });
            p.share = s;
            p
        }).collect();
        let mut input = AllocInput::new((0..ncpu).collect(), ps);
        let mut h = History::default();
        let w: u64 = shares.iter().map(|&s| s as u64).sum();
        let mut cum = vec![0u64; shares.len()];
        for t in 1..=periods {
            let out = allocate(&input, &mut h);
            for (k, p) in out.partitions.iter().enumerate() {
                cum[k] += p.entitlement as u64;
                // |cum_k − t·P·w_k/W| < 1, compared in units of 1/W.
                let exact = t * ncpu as u64 * shares[k] as u64;
                prop_assert!((cum[k] * w).abs_diff(exact) < w, "partition {} after {} periods: {} vs {}/{}", k, t, cum[k], exact, w);
            }
            input.now_ms += input.period_ms;
        }
    }

    /// 6. Stability: with the same counts nothing moves; otherwise moves ≤ Σ|Δcount|.
    #[test]
    fn placement_is_stable(input in input(), new_demands in prop::collection::vec(0u32..9, 12)) {
        let mut input = input;
        let mut h = History::default();
        let first = allocate(&input, &mut h);
        input.now_ms += 1; // within the period: no rotation step
        let again = allocate(&input, &mut h);
        prop_assert_eq!(&again.members, &first.members);
        prop_assert_eq!(again.moves, 0);
        for (a, d) in input.apps.iter_mut().zip(&new_demands) {
            a.demand = *d;
        }
        input.now_ms += 1;
        let next = allocate(&input, &mut h);
        let delta: u32 = first.members.keys().chain(next.members.keys())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .map(|m| first.count(*m).abs_diff(next.count(*m)))
            .sum();
        prop_assert!(next.moves <= delta, "moves {} > Σ|Δ| {}", next.moves, delta);
        // Members whose count did not shrink keep every CPU they had.
        for (m, (n, set)) in &next.members {
            let before = first.cpus(*m);
            if *n >= first.count(*m) {
                for c in before.iter() {
                    prop_assert!(set.contains(c), "{:?} lost CPU {} without shrinking", m, c);
                }
            }
        }
    }

    /// 7. Usage-decay greedy balance, and lower history never gets fewer CPUs at equal demand.
    #[test]
    fn usage_decay_balance(
        a in 0u32..20,
        members in prop::collection::vec((0u32..8, 0.0f64..200.0), 1..8),
        round in 0u64..1000,
    ) {
        let cfg = crate::config::UsageDecayConfig::default();
        let ms: Vec<(MemberId, u32)> = members.iter().enumerate().map(|(i, m)| (MemberId::App(i as u32), m.0)).collect();
        let mut h: MemberMap = members.iter().enumerate()
            .map(|(i, m)| (MemberId::App(i as u32), MemberHistory { inv_prio: m.1, ..Default::default() }))
            .collect();
        let got = level2::usage_decay(a, &ms, &mut h, &cfg, 0.0, 0, true, round);
        let total: u32 = got.iter().map(|x| x.1).sum();
        let caps: u32 = ms.iter().map(|x| x.1).sum();
        prop_assert_eq!(total, a.min(caps));
        for (i, &(_, ki)) in got.iter().enumerate() {
            for (j, &(_, kj)) in got.iter().enumerate() {
                let (ii, ij) = (members[i].1, members[j].1);
                if ki >= 1 && kj < ms[j].1 {
                    prop_assert!(ii + (ki as f64 - 1.0) * cfg.s <= ij + kj as f64 * cfg.s + 1e-9,
                        "i={} k={} inv={} vs j={} k={} inv={}", i, ki, ii, j, kj, ij);
                }
                if ms[i].1 == ms[j].1 && ii < ij {
                    prop_assert!(ki >= kj);
                }
            }
        }
    }

    /// 7 over time: with a simulated clock, usage accumulates and decays; two equal
    /// applications sharing one CPU alternate, and the greedy balance holds at every step.
    #[test]
    fn usage_decay_over_time(napps in 2usize..5, ncpu in 1usize..4, steps in 5usize..40) {
        let mut p = PartitionConfig::named("default");
        p.policy = PolicyKind::UsageDecay;
        let mut input = AllocInput::new((0..ncpu).collect(), vec![p]);
        input.apps = (0..napps).map(|i| AppDemand { id: i as u32 + 1, partition: 0, demand: 4, pool_size: 4 }).collect();
        let mut h = History::default();
        let mut cum = vec![0u64; napps];
        for _ in 0..steps {
            input.now_ms += input.usage_decay.period_ms;
            let out = allocate(&input, &mut h);
            prop_assert_eq!(out.total() as usize, ncpu.min(4 * napps));
            for (i, a) in input.apps.iter().enumerate() {
                cum[i] += out.count(MemberId::App(a.id)) as u64;
            }
        }
        // Nobody starves: usage-decay gives every equal application CPU time.
        if ncpu * steps >= napps * 4 {
            prop_assert!(cum.iter().all(|&c| c > 0), "starved: {:?}", cum);
        }
    }

    /// 8. DSS.
    #[test]
    fn dss_invariants(p in 1u32..17, reqs in prop::collection::vec(1u32..12, 1..10), rounds in 1usize..6) {
        let ms: Vec<(MemberId, u32)> = reqs.iter().enumerate().map(|(i, &r)| (MemberId::App(i as u32), r)).collect();
        let mut h = MemberMap::default();
        let (mut w_hist, mut off) = (0, 0);
        let w: u32 = reqs.iter().sum();
        let n = reqs.len() as u32;
        for r in 0..rounds {
            let got = level2::dss(p, &ms, &mut h, &mut w_hist, &mut off, r > 0);
            let sum: u32 = got.iter().map(|x| x.1).sum();
            if w <= p {
                for (g, &q) in got.iter().zip(&reqs) {
                    prop_assert_eq!(g.1, q);
                }
            } else if n <= p {
                prop_assert_eq!(sum, p);
                for (g, &q) in got.iter().zip(&reqs) {
                    prop_assert!(g.1 >= 1 && g.1 <= q, "x={} p={}", g.1, q);
                    // |x − P·p/W| < 1 holds whenever the at-least-one rule does not bind
                    // (every P·p_i ≥ W); otherwise it is infeasible in general (P=3, p=1,1,4).
                    if reqs.iter().all(|&q| p * q >= w) {
                        prop_assert!((g.1 as i64 * w as i64 - (p * q) as i64).abs() < w as i64);
                    }
                }
            } else {
                prop_assert_eq!(sum, p);
                prop_assert!(got.iter().all(|g| g.1 <= 1 || w > p));
            }
        }
    }

    /// 8 over time: with n > P, every application is served within ⌈n/P⌉ quanta.
    #[test]
    fn dss_serves_every_group(p in 1u32..5, n in 1usize..12) {
        let ms: Vec<(MemberId, u32)> = (0..n).map(|i| (MemberId::App(i as u32), 2)).collect();
        let mut h = MemberMap::default();
        let (mut w_hist, mut off) = (0, 0);
        let mut served = vec![false; n];
        let rounds = n.div_ceil(p as usize);
        for r in 0..rounds {
            for (i, g) in level2::dss(p, &ms, &mut h, &mut w_hist, &mut off, r > 0).iter().enumerate() {
                served[i] |= g.1 > 0;
            }
        }
        prop_assert!(served.iter().all(|&s| s), "{:?}", served);
    }

    /// 10. Default partition: 0 CPUs with no runnable thread; 1 at once when one appears.
    #[test]
    fn default_partition_follows_runnable(now in 0u32..6, avg in 0.0f64..6.0, apps in 0u32..4) {
        let d = uncontrolled_demand(now, avg);
        prop_assert_eq!(d == 0, now == 0);
        let mut other = PartitionConfig::named("b");
        other.share = 1;
        let mut input = AllocInput::new((0..4).collect(), vec![PartitionConfig::named("default"), other]);
        input.uncontrolled = vec![d, 0];
        input.apps = (0..apps).map(|i| AppDemand { id: i + 1, partition: 1, demand: 4, pool_size: 4 }).collect();
        let out = allocate(&input, &mut History::default());
        let got = out.count(MemberId::Uncontrolled(0));
        prop_assert!(got <= d);
        if now == 0 { prop_assert_eq!(got, 0); }
        if now >= 1 { prop_assert!(got >= 1); }
        // Above its runnable average only if every other partition is satisfied.
        if (got as f64) > avg.ceil() {
            prop_assert!(out.partitions[1].allocation >= out.partitions[1].demand);
        }
    }
}

#[test]
fn batch_is_fcfs_with_exact_requests() {
    let mut p = PartitionConfig::named("default");
    p.policy = PolicyKind::Batch;
    let mut input = AllocInput::new((0..4).collect(), vec![p]);
    input.apps = vec![
        AppDemand {
            id: 1,
            partition: 0,
            demand: 3,
            pool_size: 3,
        },
        AppDemand {
            id: 2,
            partition: 0,
            demand: 2,
            pool_size: 2,
        },
        AppDemand {
            id: 3,
            partition: 0,
            demand: 1,
            pool_size: 1,
        },
    ];
    let out = allocate(&input, &mut History::default());
    assert_eq!(out.count(MemberId::App(1)), 3);
    assert_eq!(out.count(MemberId::App(2)), 0);
    assert_eq!(out.count(MemberId::App(3)), 0);
}

#[test]
fn selective_assignment_prefers_the_same_domain() {
    // Two domains {0,1} and {2,3}; app 1 had CPU 2 and grows to 2 CPUs: it gets 3, not 0.
    let mut input = AllocInput::new((0..4).collect(), vec![PartitionConfig::named("default")]);
    input.domains = vec![0, 0, 1, 1];
    let counts = BTreeMap::from([(MemberId::App(1), 2u32)]);
    let prev = MemberMap::from_iter([(
        MemberId::App(1),
        MemberHistory {
            last_cpus: [2].into_iter().collect(),
            ..Default::default()
        },
    )]);
    let p = placement::place(&input.cpus, &input.domains, &counts, &prev);
    assert_eq!(p.sets[&MemberId::App(1)].to_vec(), vec![2, 3]);
}

/// Issue 26's bad input: a newcomer that arrives between periods does not take an incumbent's
/// extra CPU. A program of demand 1 ran alone for a while (its rotation count is ahead of the
/// outside load's), then one outside runnable thread appeared: each holds one of 2 CPUs. A
/// newcomer of demand 2 (level 0, two extras) used to take the program's, having the lowest
/// count; at the next period the remainder rotates as before and the newcomer gets its turn.
#[test]
fn a_newcomer_between_periods_leaves_the_incumbents_their_cpus() {
    let mut input = AllocInput::new(vec![0, 1], vec![PartitionConfig::named("default")]);
    let app = |id, demand| AppDemand {
        id,
        partition: 0,
        demand,
        pool_size: 2,
    };
    input.apps = vec![app(1, 1)];
    input.uncontrolled = vec![0];
    let mut h = History::default();
    for _ in 0..3 {
        assert_eq!(allocate(&input, &mut h).count(MemberId::App(1)), 1);
        input.now_ms += input.period_ms;
    }
    input.uncontrolled = vec![1];
    let out = allocate(&input, &mut h);
    assert_eq!(out.count(MemberId::App(1)), 1);
    assert_eq!(out.count(MemberId::Uncontrolled(0)), 1);
    // Arrival inside the period (same clock: no rotation step).
    input.now_ms += 1;
    input.apps.push(app(2, 2));
    let out = allocate(&input, &mut h);
    assert_eq!(out.count(MemberId::App(1)), 1, "{out:?}");
    assert_eq!(out.count(MemberId::Uncontrolled(0)), 1, "{out:?}");
    assert_eq!(out.count(MemberId::App(2)), 0, "{out:?}");
    // Its departure inside the period moves nothing either.
    input.apps.pop();
    let out = allocate(&input, &mut h);
    assert_eq!(out.count(MemberId::App(1)), 1);
    // A newcomer that stays gets its turn at the period boundaries: over 6 periods the three
    // share the 12 CPU-periods, none holding one in fewer than 3.
    input.apps.push(app(2, 2));
    let mut held = BTreeMap::new();
    for _ in 0..6 {
        input.now_ms += input.period_ms;
        let out = allocate(&input, &mut h);
        for m in [
            MemberId::Uncontrolled(0),
            MemberId::App(1),
            MemberId::App(2),
        ] {
            *held.entry(m).or_insert(0) += out.count(m);
        }
    }
    assert_eq!(held.values().sum::<u32>(), 12, "{held:?}");
    assert!(held.values().all(|&n| n >= 3), "{held:?}");
}
