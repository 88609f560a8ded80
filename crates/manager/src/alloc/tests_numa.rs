//! Property tests of the node-first placement (`topology.rs`, issue 14): an application whose
//! count fits in one node never spans two (when the nodes can hold every application
//! separately), and a reallocation moves at most Σ|Δcount| + conflicts CPUs.

use super::topology::place_numa;
use super::*;
use proptest::prelude::*;
use std::collections::BTreeMap;

/// A machine of `nodes` nodes × `per_node` CPUs (CPU numbers interleaved across nodes when
/// `interleave`, as some firmware numbers them), two LLCs per node when possible.
fn machine(nodes: u32, per_node: usize, interleave: bool) -> (Vec<usize>, Vec<u32>, Vec<u32>) {
    let total = nodes as usize * per_node;
    let cpus: Vec<usize> = (0..total).collect();
    let node_of = |c: usize| {
        if interleave {
            (c % nodes as usize) as u32
        } else {
            (c / per_node) as u32
        }
    };
    let ns: Vec<u32> = cpus.iter().map(|&c| node_of(c)).collect();
    // Rank of the CPU inside its node, halves form the two LLCs.
    let llcs: Vec<u32> = cpus
        .iter()
        .map(|&c| {
            let rank = cpus[..c]
                .iter()
                .filter(|&&d| node_of(d) == node_of(c))
                .count();
            node_of(c) * 2 + u32::from(per_node >= 2 && rank >= per_node / 2)
        })
        .collect();
    (cpus, ns, llcs)
}

fn node_count(set: &CpuSet, cpus: &[usize], nodes: &[u32]) -> usize {
    let mut seen: Vec<u32> = set
        .iter()
        .map(|c| nodes[cpus.iter().position(|&x| x == c).unwrap()])
        .collect();
    seen.sort_unstable();
    seen.dedup();
    seen.len()
}

fn to_map(counts: &[u32]) -> BTreeMap<MemberId, u32> {
    counts
        .iter()
        .enumerate()
        .map(|(i, &n)| (MemberId::App(i as u32 + 1), n))
        .collect()
}

fn history_of(sets: &BTreeMap<MemberId, CpuSet>) -> (MemberMap, Vec<MemberId>) {
    let mut prev = MemberMap::default();
    for (m, s) in sets {
        prev.insert(
            *m,
            MemberHistory {
                last_cpus: *s,
                last_count: s.len() as u32,
                used_before: *s,
                ..Default::default()
            },
        );
    }
    (prev, sets.keys().copied().collect())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// With no more applications than nodes, every application whose count fits in a node
    /// gets CPUs of one node only — in the first placement and after any reallocation.
    #[test]
    fn fitting_app_never_spans_two_nodes(
        nodes in 2u32..5,
        per_node in 1usize..6,
        interleave: bool,
        seq in prop::collection::vec(prop::collection::vec(0u32..8, 4), 1..5),
    ) {
        let (cpus, ns, llcs) = machine(nodes, per_node, interleave);
        let k = nodes as usize;
        let mut prev = MemberMap::default();
        let mut holders = Vec::new();
        for raw in seq {
            let counts: Vec<u32> = raw.iter().take(k).map(|&n| n % (per_node as u32 + 1)).collect();
            let map = to_map(&counts);
            let p = place_numa(&cpus, &ns, &llcs, &map, &prev, &holders);
            for (m, set) in &p.sets {
                prop_assert_eq!(set.len() as u32, map[m], "{:?} got {}", m, set);
                prop_assert_eq!(node_count(set, &cpus, &ns), 1, "{:?} spans nodes: {}", m, set);
            }
            (prev, holders) = history_of(&p.sets);
        }
    }

    /// Moves per reallocation ≤ Σ|Δcount| + conflicts; every count is met; sets are
    /// disjoint; with unchanged counts nothing moves.
    #[test]
    fn moves_bounded_by_count_changes_plus_conflicts(
        nodes in 1u32..5,
        per_node in 1usize..7,
        interleave: bool,
        apps in 1usize..7,
        seed_counts in prop::collection::vec(0u32..10, 6),
        next_counts in prop::collection::vec(0u32..10, 6),
    ) {
        let (cpus, ns, llcs) = machine(nodes, per_node, interleave);
        let total = cpus.len();
        let clamp = |v: &[u32]| -> Vec<u32> {
            let mut v: Vec<u32> = v.iter().take(apps).copied().collect();
            while v.iter().sum::<u32>() as usize > total {
                let i = v.iter().position(|&x| x > 0).unwrap(); // sum > 0
                v[i] -= 1;
            }
            v
        };
        let (a, b) = (to_map(&clamp(&seed_counts)), to_map(&clamp(&next_counts)));
        let first = place_numa(&cpus, &ns, &llcs, &a, &MemberMap::default(), &[]);
        let (prev, holders) = history_of(&first.sets);
        let same = place_numa(&cpus, &ns, &llcs, &a, &prev, &holders);
        prop_assert_eq!(same.moves, 0);
        prop_assert_eq!(&same.sets, &first.sets);
        let p = place_numa(&cpus, &ns, &llcs, &b, &prev, &holders);
        let mut owned = CpuSet::new();
        for (m, set) in &p.sets {
            prop_assert_eq!(set.len() as u32, b[m]);
            for c in set.iter() {
                prop_assert!(owned.insert(c), "CPU {} given twice", c);
            }
        }
        let delta: u32 = a
            .keys()
            .chain(b.keys())
            .map(|m| a.get(m).copied().unwrap_or(0).abs_diff(b.get(m).copied().unwrap_or(0)))
            .sum::<u32>()
            / 2; // every member appears in both maps (App(1..=apps)), so twice in the chain
        prop_assert!(p.moves <= delta + p.conflicts,
            "moves {} > Σ|Δ| {} + conflicts {}", p.moves, delta, p.conflicts);
    }

    /// A growing application takes its new CPUs from its own node while that node has room.
    #[test]
    fn growth_stays_on_home_node(per_node in 2usize..8, start in 1u32..4, interleave: bool) {
        let (cpus, ns, llcs) = machine(2, per_node, interleave);
        let start = start.min(per_node as u32 - 1);
        let a = to_map(&[start, 1]);
        let first = place_numa(&cpus, &ns, &llcs, &a, &MemberMap::default(), &[]);
        let app1 = first.sets[&MemberId::App(1)];
        let home1 = ns[app1.iter().next().unwrap()]; // non-empty: count ≥ 1
        let others_there = first.sets[&MemberId::App(2)].iter().filter(|&c| ns[c] == home1).count();
        prop_assume!(others_there == 0, "app 2 shares app 1's node: no room to grow in place");
        let (prev, holders) = history_of(&first.sets);
        let b = to_map(&[per_node as u32, 1]);
        let p = place_numa(&cpus, &ns, &llcs, &b, &prev, &holders);
        let home = |s: &CpuSet| ns[s.iter().next().unwrap()]; // non-empty: count ≥ 1
        prop_assert_eq!(home(&p.sets[&MemberId::App(1)]), home(&first.sets[&MemberId::App(1)]));
        prop_assert_eq!(p.moves, 0);
        prop_assert_eq!(node_count(&p.sets[&MemberId::App(1)], &cpus, &ns), 1);
    }
}

#[test]
fn allocate_uses_node_first_placement_on_two_nodes() {
    let (cpus, ns, llcs) = machine(2, 2, true); // CPUs 0,2 on node 0; 1,3 on node 1
    let mut input = AllocInput::new(cpus, vec![crate::config::PartitionConfig::named("default")]);
    input.nodes = ns.clone();
    input.domains = llcs;
    input.apps.push(AppDemand {
        id: 1,
        partition: 0,
        demand: 2,
        pool_size: 2,
    });
    input.apps.push(AppDemand {
        id: 2,
        partition: 0,
        demand: 2,
        pool_size: 2,
    });
    let out = allocate(&input, &mut History::default());
    for id in [1, 2] {
        let set = out.members[&MemberId::App(id)].1;
        assert_eq!(set.len(), 2);
        assert_eq!(node_count(&set, &input.cpus, &ns), 1, "app {id}: {set}");
    }
}
