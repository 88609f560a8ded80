use super::*;
use proptest::prelude::*;

const MS: u64 = 1_000_000;

fn placement(at_ms: u64, nodes: &[u32]) -> Placement {
    Placement {
        at_ns: at_ms * MS,
        cpu_nodes: nodes.to_vec(),
    }
}

fn facts<'a>(history: &'a [Placement], now_ms: u64, stray: Option<u64>) -> Facts<'a> {
    Facts {
        online_nodes: 2,
        opted_out: None,
        history,
        stray_pages: stray,
        page_size: 4096,
        now_ns: now_ms * MS,
        bucket: Bucket::default(),
    }
}

#[test]
fn one_node_or_opted_out_or_unconfined_means_nothing() {
    let h = [placement(0, &[0])];
    let mut f = facts(&h, 10_000, Some(100));
    f.online_nodes = 1;
    assert_eq!(
        decide(&Params::default(), &f).0,
        Decision::Nothing(Why::OneNode)
    );
    let mut f = facts(&h, 10_000, Some(100));
    f.opted_out = Some("PARTITA_NUMA=off");
    assert_eq!(
        decide(&Params::default(), &f).0,
        Decision::Nothing(Why::OptedOut("PARTITA_NUMA=off"))
    );
    // CPUs on both nodes: nothing is stray by definition.
    let both = [placement(0, &[0, 1])];
    assert_eq!(
        decide(&Params::default(), &facts(&both, 10_000, Some(100))).0,
        Decision::Nothing(Why::NotConfined)
    );
    assert_eq!(
        decide(&Params::default(), &facts(&[], 10_000, Some(100))).0,
        Decision::Nothing(Why::NotConfined)
    );
    assert_eq!(
        decide(&Params::default(), &facts(&h, 10_000, Some(0))).0,
        Decision::Nothing(Why::NothingStray)
    );
}

#[test]
fn a_free_remote_miss_never_pays() {
    let p = Params {
        remote_penalty_ns: 0.0,
        ..Params::default()
    };
    let h = [placement(0, &[1])];
    assert_eq!(
        decide(&p, &facts(&h, 10_000, Some(5))).0,
        Decision::Nothing(Why::NeverPays)
    );
}

/// The flapping rule: an application whose CPUs go back and forth between the nodes faster
/// than the break-even time is never migrated, however long it flaps; its moves are counted.
/// Once it stays, its memory follows after the break-even time.
#[test]
fn flapping_faster_than_the_cost_rule_is_never_migrated() {
    let p = Params::default();
    let be = p.break_even().unwrap().as_millis() as u64;
    let period = be / 2; // every stint ends before it could pay
    let mut history = vec![placement(0, &[0])];
    let mut asked = 0;
    for step in 1..=200u64 {
        history.push(placement(step * period, &[(step % 2) as u32]));
        // Ask every 5 ms during the stint, with pages stray all along.
        for t in (step * period..(step + 1) * period).step_by(5) {
            let d = decide(&p, &facts(&history, t, Some(10_000))).0;
            assert!(
                matches!(d, Decision::Wait { .. }),
                "step {step} at {t} ms: {d:?}"
            );
            asked += 1;
        }
    }
    assert!(asked > 1000);
    let now = 201 * period;
    assert_eq!(
        moves_within(&history, Duration::from_millis(now), now * MS),
        200
    );
    assert_eq!(
        moves_within(&history, Duration::from_millis(10 * period), now * MS),
        10
    );
    // It stays on node 1 from now on: after break-even, count, then move.
    history.push(placement(now, &[1]));
    let d = decide(&p, &facts(&history, now + be - 1, Some(10_000))).0;
    assert!(matches!(d, Decision::Wait { .. }), "{d:?}");
    // (`be` is rounded down to whole milliseconds.)
    assert_eq!(
        decide(&p, &facts(&history, now + be + 1, None)).0,
        Decision::Count
    );
    let mut f = facts(&history, now + be + 1, Some(10_000));
    f.bucket = Bucket {
        bytes: 0.0,
        at_ns: (now + be - 100) * MS,
    };
    assert!(matches!(
        decide(&p, &f).0,
        Decision::Move { node: 1, bytes } if bytes > 0
    ));
}

/// Paced: over one simulated second of asking every millisecond, the bytes moved never
/// exceed the budget of that second plus one burst, and do reach most of it.
#[test]
fn the_budget_paces_the_moves() {
    let p = Params {
        budget_bytes_per_s: 64 << 20,
        ..Params::default()
    };
    let h = [placement(0, &[1])];
    let start = 1_000;
    let mut bucket = Bucket {
        bytes: 0.0,
        at_ns: start * MS,
    };
    let mut moved = 0u64;
    let mut paced = 0;
    for t in start..start + 1000 {
        let mut f = facts(&h, t, Some(u64::MAX / 8192));
        f.bucket = bucket;
        let (d, b) = decide(&p, &f);
        bucket = b;
        match d {
            Decision::Move { bytes, .. } => moved += bytes,
            Decision::Paced { until_ns } => {
                assert!(until_ns > t * MS);
                paced += 1
            }
            other => panic!("{other:?}"),
        }
    }
    let cap = (64u64 << 20) + (64u64 << 20) / 10;
    assert!(moved <= cap, "{moved} > {cap}");
    assert!(moved >= (60u64 << 20), "{moved}");
    assert!(paced == 0 || moved > 0);
}

#[test]
fn memory_goes_to_the_node_with_most_cpus() {
    let h = [placement(0, &[0, 0, 1, 1, 1, 2])];
    let mut f = facts(&h, 10_000, Some(3));
    f.online_nodes = 4;
    f.bucket = Bucket {
        bytes: 1e9,
        at_ns: 10_000 * MS,
    };
    assert_eq!(
        decide(&Params::default(), &f).0,
        Decision::Move {
            node: 1,
            bytes: 3 * 4096
        }
    );
}

fn arb_history() -> impl Strategy<Value = Vec<Placement>> {
    prop::collection::vec((0u64..5_000, prop::collection::vec(0u32..4, 0..6)), 0..8).prop_map(
        |steps| {
            let mut at = 0;
            steps
                .into_iter()
                .map(|(dt, cpu_nodes)| {
                    at += dt * MS;
                    Placement {
                        at_ns: at,
                        cpu_nodes,
                    }
                })
                .collect()
        },
    )
}

proptest! {
    /// Whatever the input: a move never exceeds the stray pages nor the refilled budget,
    /// leaves a non-negative bucket, goes to a node of the current placement, and comes only
    /// after the placement has lasted the break-even time, on a machine with several nodes.
    #[test]
    fn moves_respect_the_rule_and_the_budget(
        history in arb_history(),
        nodes in 1usize..5,
        now_ms in 0u64..40_000,
        stray in prop::option::of(0u64..1 << 20),
        bucket_bytes in 0.0f64..1e9,
        budget in 0u64..(4 << 30),
        move_us in 0.0f64..1000.0,
        penalty_ns in -10.0f64..5000.0,
        opted_out in any::<bool>(),
    ) {
        let p = Params {
            move_ns_per_page: move_us * 1000.0,
            remote_penalty_ns: penalty_ns,
            budget_bytes_per_s: budget,
            ..Params::default()
        };
        let mut f = facts(&history, now_ms, stray);
        f.online_nodes = nodes;
        f.opted_out = opted_out.then_some("config");
        f.bucket = Bucket { bytes: bucket_bytes.min(p.budget_bytes_per_s as f64 * 0.1), at_ns: 0 };
        let (d, after) = decide(&p, &f);
        prop_assert!(after.bytes >= -1e-6);
        if let Decision::Move { node, bytes } = d {
            let now = history.last().unwrap();
            prop_assert!(nodes >= 2 && !opted_out);
            prop_assert!(now.cpu_nodes.contains(&node));
            prop_assert!(bytes <= stray.unwrap() * 4096);
            prop_assert!(bytes as f64 <= refill(&p, f.bucket, f.now_ns).bytes + 1e-6);
            let be = p.break_even().unwrap().as_nanos() as u64;
            prop_assert!(f.now_ns >= now.at_ns + be);
        }
    }
}
