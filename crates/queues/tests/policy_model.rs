//! Deterministic step model: the real `ReadyQueues` driven from one thread, every decision
//! checked against the policy rules of queues.md (invariants 1, 4–7, 9–13 and the
//! process-control rule). With one thread the set is deterministic (seeded generators), so a
//! failing case shrinks and replays.

mod common;

use std::collections::BTreeMap;

use partita_queues::{
    enqueue_choice, Config, ConfigError, DequeuePolicy, Direction, EnqueueCursor, EnqueuePolicy,
    LockMode, ReadyQueues, Scan, XorShift64,
};
use proptest::prelude::*;

fn lock_mode() -> impl Strategy<Value = LockMode> {
    prop_oneof![Just(LockMode::Atomic), Just(LockMode::Paper)]
}

fn multi_access_dequeue() -> impl Strategy<Value = DequeuePolicy> {
    proptest::sample::select(DequeuePolicy::MULTI_ACCESS.to_vec())
}

/// A task tagged with where it was posted: (queue, slot, serial).
type Tag = (usize, usize, u64);

/// The model of one queue: which slots hold which task.
#[derive(Default, Clone)]
struct ModelQueue {
    slots: BTreeMap<usize, Tag>,
}

impl ModelQueue {
    fn bits(&self) -> u64 {
        self.slots.keys().fold(0, |b, &s| b | 1 << s)
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    // One piece (over 80 lines) on purpose: the model and the queue advance in lockstep, and
    // every invariant reads the snapshot taken just before the poll (lengths, ring index,
    // cursors, stats); split up, each part would take that whole snapshot as arguments.
    /// Invariants 4, 5, 6, 7, 12 (and 1 for direct posts): each poll of each multi-access
    /// dequeue policy, checked against a model of the queue contents and cursors.
    #[test]
    fn dequeue_rules_hold_at_every_decision(
        policy in multi_access_dequeue(),
        mode in lock_mode(),
        n in 2usize..5,
        slots in 1usize..9,
        bidirectional in any::<bool>(),
        seed in any::<u64>(),
        ops in proptest::collection::vec((any::<bool>(), any::<u8>()), 1..120),
    ) {
        let set: ReadyQueues<Tag> = Config::new(n)
            .dequeue(policy)
            .enqueue(EnqueuePolicy::Random)
            .lock_mode(mode)
            .slots(slots)
            .bidirectional(bidirectional)
            .seed(seed)
            .build()
            .unwrap();
        let mut model = vec![ModelQueue::default(); n];
        let mut consumers: Vec<_> = (0..n).map(|c| set.consumer(c)).collect();
        // Model of each consumer's shared secondary cursor (last secondary slot served).
        let mut secondary_last = vec![0usize; n];
        let mut serial = 0u64;
        let mut posted = 0u64;
        let mut served = 0u64;
        for (is_post, arg) in ops {
            if is_post {
                let q = arg as usize % n;
                serial += 1;
                match set.try_post_to(q, (q, usize::MAX, serial)) {
                    Ok(slot) => {
                        prop_assert!(!model[q].slots.contains_key(&slot));
                        model[q].slots.insert(slot, (q, slot, serial));
                        posted += 1;
                    }
                    // Invariant 3 at quiescence: Full exactly when every slot is occupied.
                    Err(_) => prop_assert_eq!(model[q].slots.len(), slots),
                }
                continue;
            }
            let c = arg as usize % n;
            let p = c;
            let lens: Vec<usize> = model.iter().map(|m| m.slots.len()).collect();
            let ring_before = consumers[c].cursor().ring;
            let primary_last = consumers[c].primary_cursor();
            let before = *consumers[c].stats();
            let got = set.poll(&mut consumers[c]);
            let after = *consumers[c].stats();
            let Some((q, _, s)) = got else {
                // Nothing found: the policy saw every queue it may visit empty.
                match policy {
                    DequeuePolicy::Static => prop_assert_eq!(lens[p], 0),
                    DequeuePolicy::PrimaryFixed => {
                        prop_assert_eq!(lens[p] + lens[(p + 1) % n], 0)
                    }
                    DequeuePolicy::PrimarySequential | DequeuePolicy::Sequential => {
                        prop_assert!(lens.iter().all(|&l| l == 0))
                    }
                    DequeuePolicy::PrimaryRandom => prop_assert_eq!(lens[p], 0),
                    _ => {}
                }
                if policy == DequeuePolicy::Sequential {
                    // A fruitless full cycle brings the ring index back where it was.
                    prop_assert_eq!(consumers[c].cursor().ring, ring_before);
                }
                continue;
            };
            served += 1;
            // The task really was in queue q; find its slot.
            let slot = model[q]
                .slots
                .iter()
                .find(|(_, t)| t.2 == s)
                .map(|(&slot, _)| slot)
                .expect("served a task the model holds");
            let bits = model[q].bits();
            model[q].slots.remove(&slot);
            // Invariant 4: home-only access.
            match policy {
                DequeuePolicy::Static => prop_assert_eq!(q, p),
                DequeuePolicy::PrimaryFixed => prop_assert!(q == p || q == (p + 1) % n),
                _ => {}
            }
            // Invariant 5: primary preference.
            if policy != DequeuePolicy::Random && lens[p] > 0 {
                prop_assert_eq!(q, p, "claimed elsewhere while the primary held {}", lens[p]);
            }
            // Invariant 6: Primary/Sequential picks the first non-empty queue after p.
            if policy == DequeuePolicy::PrimarySequential && q != p {
                let first = (1..n).map(|i| (p + i) % n).find(|&x| lens[x] > 0);
                prop_assert_eq!(Some(q), first);
            }
            // Invariant 7: Sequential continues at its persistent ring index, cyclically.
            if policy == DequeuePolicy::Sequential && q != p {
                let first = (0..n)
                    .map(|i| (ring_before + i) % n)
                    .find(|&x| x != p && lens[x] > 0);
                prop_assert_eq!(Some(q), first);
                prop_assert_eq!(consumers[c].cursor().ring, q);
            }
            // Invariant 12 (and the cursors): the slot is the first ready one in scan order.
            let expected = if q == p {
                prop_assert_eq!(after.primary_claims, before.primary_claims + 1);
                Scan::after_cursor(primary_last, slots, Direction::Forward).pick(bits)
            } else {
                prop_assert_eq!(after.secondary_claims, before.secondary_claims + 1);
                let dir = if bidirectional { Direction::Backward } else { Direction::Forward };
                Scan::after_cursor(secondary_last[c], slots, dir).pick(bits)
            };
            prop_assert_eq!(Some(slot), expected);
            if q == p {
                prop_assert_eq!(consumers[c].primary_cursor(), slot);
            } else {
                secondary_last[c] = slot;
            }
            // Invariant 3: len is the popcount at quiescence.
            for (x, m) in model.iter().enumerate() {
                prop_assert_eq!(set.queue_len(x), m.slots.len());
            }
        }
        prop_assert_eq!(set.len() as u64, posted - served);
    }

    /// Invariant 10 on the pure function: Sequential's k-th post lands on (id mod N + k) mod N;
    /// Primary/* posts to the primary exactly when its length is below the cutoff, and a
    /// secondary is never the primary (Fixed: always (p+1) mod N). Static/Global are fixed.
    #[test]
    fn enqueue_rules(
        id in 0usize..16,
        n in 2usize..7,
        cutoff in 1usize..8,
        seed in any::<u64>(),
        lens in proptest::collection::vec(0usize..10, 1..60),
    ) {
        for policy in EnqueuePolicy::ALL {
            let mut cur = EnqueueCursor::new(id, XorShift64::new(seed));
            for (k, &len) in lens.iter().enumerate() {
                let (q, _) = enqueue_choice(policy, &mut cur, n, cutoff, |_| len);
                prop_assert!(q < n);
                let p = id % n;
                match policy {
                    EnqueuePolicy::Static | EnqueuePolicy::StaticFcfs => prop_assert_eq!(q, p),
                    EnqueuePolicy::Global => prop_assert_eq!(q, 0),
                    EnqueuePolicy::Sequential => prop_assert_eq!(q, (p + k) % n),
                    EnqueuePolicy::PrimaryFixed => {
                        prop_assert_eq!(q == p, len < cutoff);
                        if q != p { prop_assert_eq!(q, (p + 1) % n); }
                    }
                    EnqueuePolicy::PrimaryRandom => prop_assert_eq!(q == p, len < cutoff),
                    EnqueuePolicy::Random | EnqueuePolicy::RandomFcfs => {}
                }
            }
        }
    }

    /// Invariant 10 through the real set: the queue that grows is the one the rule names.
    #[test]
    fn enqueue_rules_in_the_set(
        policy in proptest::sample::select(EnqueuePolicy::MULTI_ACCESS.to_vec()),
        mode in lock_mode(),
        n in 2usize..5,
        id in 0usize..8,
        prefill in proptest::collection::vec(0usize..8, 4),
        posts in 1usize..40,
    ) {
        let cutoff = 4;
        let set: ReadyQueues<u32> = Config::new(n)
            .dequeue(DequeuePolicy::Sequential)
            .enqueue(policy)
            .lock_mode(mode)
            .slots(64)
            .cutoff(cutoff)
            .build()
            .unwrap();
        for (q, &k) in prefill.iter().take(n).enumerate() {
            for _ in 0..k { set.try_post_to(q, 0).unwrap(); }
        }
        let mut producer = set.producer(id);
        let p = id % n;
        for k in 0..posts {
            let before: Vec<usize> = (0..n).map(|q| set.queue_len(q)).collect();
            set.post(&mut producer, 1);
            let grew: Vec<usize> = (0..n).filter(|&q| set.queue_len(q) == before[q] + 1).collect();
            prop_assert_eq!(grew.len(), 1);
            let q = grew[0];
            match policy {
                EnqueuePolicy::Static => prop_assert_eq!(q, p),
                EnqueuePolicy::Sequential => prop_assert_eq!(q, (p + k) % n),
                EnqueuePolicy::PrimaryFixed => {
                    prop_assert_eq!(q == p, before[p] < cutoff);
                    if q != p { prop_assert_eq!(q, (p + 1) % n); }
                }
                EnqueuePolicy::PrimaryRandom => prop_assert_eq!(q == p, before[p] < cutoff),
                _ => {}
            }
        }
        let stats = producer.stats();
        prop_assert_eq!(stats.posts, posts as u64);
        prop_assert_eq!(stats.primary_posts + stats.secondary_posts, posts as u64);
    }

    /// Invariants 1, 9 and 11 for every compatible pair: random interleavings of policy posts
    /// (tiny queues, so full-queue fallback and the overflow list are exercised) and polls,
    /// then a drain: every task is served exactly once, within a bounded number of polls, and
    /// the FIFO baselines serve each queue in post order.
    #[test]
    fn conservation_and_liveness_for_every_pair(
        pair_index in 0usize..33,
        mode in lock_mode(),
        n in 2usize..5,
        slots in 1usize..5,
        seed in any::<u64>(),
        ops in proptest::collection::vec((any::<bool>(), any::<u8>()), 1..150),
    ) {
        let pairs = common::compatible_pairs();
        let pair = pairs[pair_index % pairs.len()];
        let set: ReadyQueues<u64> = common::config(pair, n, mode, slots, seed).build().unwrap();
        let consumers_n = set.config().num_consumers();
        let mut producers: Vec<_> = (0..3).map(|p| set.producer(p)).collect();
        let mut consumers: Vec<_> = (0..consumers_n).map(|c| set.consumer(c)).collect();
        let mut next = 0u64;
        let mut served = Vec::new();
        for (is_post, arg) in ops {
            if is_post {
                set.post(&mut producers[arg as usize % 3], next);
                next += 1;
            } else if let Some(t) = set.poll(&mut consumers[arg as usize % consumers_n]) {
                served.push(t);
            }
        }
        // Drain (liveness): round-robin polls; a bounded number suffices even for Random.
        let mut budget = 200 * (next as usize + 1) * consumers_n;
        while !set.is_empty() && budget > 0 {
            for c in consumers.iter_mut() {
                if let Some(t) = set.poll(c) { served.push(t); }
                budget -= 1;
            }
        }
        prop_assert!(set.is_empty(), "tasks left after the drain: {}", set.len());
        let mut sorted = served.clone();
        sorted.sort_unstable();
        prop_assert_eq!(sorted, (0..next).collect::<Vec<_>>());
        let total: u64 = consumers.iter().map(|c| c.stats().served).sum();
        prop_assert_eq!(total, next);
        // Invariant 11: the Global FIFO serves in post order.
        if pair.0 == DequeuePolicy::Global {
            prop_assert_eq!(served, (0..next).collect::<Vec<_>>());
        }
    }

    /// Process control: with workers suspended and resumed at random, active consumers that
    /// serve their extra queues leave no task stranded in a suspended worker's queue.
    #[test]
    fn no_task_stranded_in_a_suspended_workers_queue(
        policy in proptest::sample::select(vec![
            DequeuePolicy::Random, DequeuePolicy::Sequential, DequeuePolicy::PrimaryFixed,
            DequeuePolicy::PrimaryRandom, DequeuePolicy::PrimarySequential,
        ]),
        enqueue in proptest::sample::select(EnqueuePolicy::MULTI_ACCESS.to_vec()),
        mode in lock_mode(),
        n in 2usize..6,
        seed in any::<u64>(),
        steps in proptest::collection::vec((any::<u8>(), any::<u64>()), 1..80),
        final_active in any::<u64>(),
    ) {
        let set: ReadyQueues<u64> = Config::new(n)
            .dequeue(policy).enqueue(enqueue).lock_mode(mode).slots(4).cutoff(2).seed(seed)
            .build().unwrap();
        let mut producers: Vec<_> = (0..n).map(|p| set.producer(p)).collect();
        let mut consumers: Vec<_> = (0..n).map(|c| set.consumer(c)).collect();
        let mut posted = 0u64;
        let mut served = 0u64;
        let activity = |mask: u64| {
            let mut a: Vec<bool> = (0..n).map(|c| mask >> c & 1 == 1).collect();
            if !a.iter().any(|&x| x) { a[(mask as usize) % n] = true; } // never below one
            a
        };
        let apply = |active: &[bool], consumers: &mut Vec<partita_queues::ConsumerState>| {
            let extras = set.extra_queues(active).unwrap();
            for (c, e) in consumers.iter_mut().zip(extras) { c.set_extra(e); }
        };
        let mut active = vec![true; n];
        for (op, mask) in steps {
            match op % 4 {
                0 => { active = activity(mask); apply(&active, &mut consumers); }
                1 | 2 => {
                    // Producers keep posting by policy, into suspended workers' queues too.
                    set.post(&mut producers[op as usize % n], posted);
                    posted += 1;
                }
                _ => {
                    let c = (mask as usize) % n;
                    if active[c] && set.poll(&mut consumers[c]).is_some() { served += 1; }
                }
            }
        }
        active = activity(final_active);
        apply(&active, &mut consumers);
        let mut budget = 400 * (posted as usize + 1) * n;
        while !set.is_empty() && budget > 0 {
            for c in (0..n).filter(|&c| active[c]) {
                if set.poll(&mut consumers[c]).is_some() { served += 1; }
                budget -= 1;
            }
        }
        prop_assert!(set.is_empty(), "stranded: {:?}", (0..n).map(|q| set.queue_len(q)).collect::<Vec<_>>());
        prop_assert_eq!(served, posted);
    }
}

/// Invariant 11 for Distributed FCFS: each queue is served in post order.
#[test]
fn distributed_fifo_serves_each_queue_in_post_order() {
    let set: ReadyQueues<(usize, u32)> = Config::distributed_fifo(3, EnqueuePolicy::StaticFcfs)
        .build()
        .unwrap();
    for k in 0..30u32 {
        let q = (k % 3) as usize;
        set.post(&mut set.producer(q), (q, k));
    }
    let mut last: Vec<Option<u32>> = vec![None; 3];
    let mut c = set.consumer(0); // serves 0, then searches 1, 2 sequentially
    while let Some((q, k)) = set.poll(&mut c) {
        assert!(
            last[q].is_none_or(|prev| prev < k),
            "queue {q} out of order"
        );
        last[q] = Some(k);
    }
    assert!(set.is_empty());
}

/// Invariant 13: the whole product of policies; exactly the Table 3 pairs build.
#[test]
fn every_incompatible_pair_fails_at_construction() {
    let compatible = common::compatible_pairs();
    for d in DequeuePolicy::ALL {
        for e in EnqueuePolicy::ALL {
            let result = Config::new(3).dequeue(d).enqueue(e).build::<u8>();
            if compatible.contains(&(d, e)) {
                assert!(result.is_ok(), "{d:?}:{e:?} should build: {result:?}");
            } else {
                match result {
                    Err(ConfigError::IncompatiblePolicies {
                        dequeue, enqueue, ..
                    }) => {
                        assert_eq!((dequeue, enqueue), (d, e));
                    }
                    other => panic!("{d:?}:{e:?} should fail with Table 3, got {other:?}"),
                }
            }
        }
    }
}

#[test]
fn static_coverage_and_single_queue_rules_name_the_rule() {
    let err = Config::new(4)
        .consumers(3)
        .dequeue(DequeuePolicy::Static)
        .enqueue(EnqueuePolicy::Static)
        .build::<u8>()
        .unwrap_err();
    assert!(err.to_string().contains("Static coverage"), "{err}");
    for d in [
        DequeuePolicy::Sequential,
        DequeuePolicy::PrimaryFixed,
        DequeuePolicy::PrimaryRandom,
        DequeuePolicy::PrimarySequential,
    ] {
        let err = Config::new(1)
            .dequeue(d)
            .enqueue(EnqueuePolicy::Static)
            .build::<u8>();
        assert!(
            matches!(err, Err(ConfigError::SecondaryNeedsTwoQueues { .. })),
            "{d:?}"
        );
    }
    for e in [EnqueuePolicy::PrimaryFixed, EnqueuePolicy::PrimaryRandom] {
        let err = Config::new(1)
            .dequeue(DequeuePolicy::Static)
            .enqueue(e)
            .build::<u8>();
        assert!(err.unwrap_err().to_string().contains("N = 1"));
    }
    // Legal with one queue: Static and Random, Global, Distributed FCFS.
    assert!(Config::new(1)
        .dequeue(DequeuePolicy::Random)
        .enqueue(EnqueuePolicy::Random)
        .build::<u8>()
        .is_ok());
    let err = Config::new(2).slots(65).build::<u8>().unwrap_err();
    assert!(err.to_string().contains("rule slots"), "{err}");
    let err = Config::new(2).slots(8).cutoff(9).build::<u8>().unwrap_err();
    assert!(err.to_string().contains("rule cutoff"), "{err}");
    let err = Config::new(0).build::<u8>().unwrap_err();
    assert!(err.to_string().contains("rule queues"), "{err}");
}

#[test]
fn process_control_rules() {
    let set: ReadyQueues<u8> = Config::new(3).build().unwrap();
    assert_eq!(
        set.extra_queues(&[false, false, false]),
        Err(ConfigError::NoActiveConsumer { consumers: 3 })
    );
    assert_eq!(
        set.extra_queues(&[true]),
        Err(ConfigError::ActivityLength {
            got: 1,
            consumers: 3
        })
    );
    assert_eq!(
        set.extra_queues(&[false, true, false]).unwrap(),
        vec![vec![], vec![0, 2], vec![]]
    );
    let fixed: ReadyQueues<u8> = Config::new(2)
        .dequeue(DequeuePolicy::Static)
        .enqueue(EnqueuePolicy::Random)
        .build()
        .unwrap();
    assert!(fixed.extra_queues(&[true, true]).is_ok());
    assert!(fixed.extra_queues(&[true, false]).is_err());
}

/// Sequential's ring index persists across episodes: after serving queue 2 it stays there,
/// and a later episode starts at 2, not at p + 1.
#[test]
fn sequential_ring_persists_across_episodes() {
    let set: ReadyQueues<u8> = Config::new(4)
        .dequeue(DequeuePolicy::Sequential)
        .enqueue(EnqueuePolicy::Static)
        .build()
        .unwrap();
    let mut c = set.consumer(0);
    assert_eq!(c.cursor().ring, 1);
    set.try_post_to(2, 20).unwrap();
    assert_eq!(set.poll(&mut c), Some(20));
    assert_eq!(c.cursor().ring, 2);
    // Episode 2: queues 1 and 3 both hold tasks; Sequential continues at 2 -> 3 first.
    set.try_post_to(1, 10).unwrap();
    set.try_post_to(3, 30).unwrap();
    assert_eq!(set.poll(&mut c), Some(30));
    assert_eq!(set.poll(&mut c), Some(10)); // wraps past p = 0 to 1
    assert_eq!(c.cursor().ring, 1);
    // Primary/Sequential, by contrast, restarts at p + 1 every time.
    let ps: ReadyQueues<u8> = Config::new(4)
        .dequeue(DequeuePolicy::PrimarySequential)
        .enqueue(EnqueuePolicy::Static)
        .build()
        .unwrap();
    let mut c = ps.consumer(0);
    ps.try_post_to(3, 30).unwrap();
    ps.try_post_to(1, 10).unwrap();
    assert_eq!(ps.poll(&mut c), Some(10));
}
