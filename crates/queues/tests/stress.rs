//! Threaded stress through the whole set (invariants 1, 2 and 9 under real concurrency):
//! producers post by policy, consumers poll by policy, every task is served exactly once.
//! Includes 4 producers / 4 consumers on this 2-CPU machine, tiny queues (so fallback and
//! overflow happen under contention) and every compatible pair in both lock modes.
//!
//! Heavier variant: `PARTITA_STRESS_TASKS=200000 cargo test -p partita-queues --release --test stress`.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};

use partita_queues::{Config, ConsumerStats, LockMode, ProducerStats, ReadyQueues};
use proptest::prelude::*;

fn tasks_per_producer(default: u64) -> u64 {
    std::env::var("PARTITA_STRESS_TASKS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Runs `producers` threads posting `per_producer` unique tasks each and one consumer thread
/// per configured consumer; returns what each consumer served and the statistics.
fn run(
    set: &ReadyQueues<u64>,
    producers: usize,
    per_producer: u64,
) -> (Vec<u64>, Vec<ConsumerStats>, ProducerStats) {
    let total = producers as u64 * per_producer;
    let served_count = AtomicU64::new(0);
    let consumers = set.config().num_consumers();
    std::thread::scope(|s| {
        let served_count = &served_count;
        let cons: Vec<_> = (0..consumers)
            .map(|c| {
                s.spawn(move || {
                    let mut me = set.consumer(c);
                    let mut got = Vec::new();
                    while served_count.load(Ordering::Acquire) < total {
                        match set.poll(&mut me) {
                            Some(t) => {
                                got.push(t);
                                served_count.fetch_add(1, Ordering::AcqRel);
                            }
                            None => std::thread::yield_now(),
                        }
                    }
                    (got, *me.stats())
                })
            })
            .collect();
        let prods: Vec<_> = (0..producers)
            .map(|p| {
                s.spawn(move || {
                    let mut me = set.producer(p);
                    for i in 0..per_producer {
                        set.post(&mut me, p as u64 * per_producer + i);
                    }
                    *me.stats()
                })
            })
            .collect();
        let mut pstats = ProducerStats::default();
        for h in prods {
            pstats.merge(&h.join().unwrap());
        }
        let mut all = Vec::new();
        let mut cstats = Vec::new();
        for h in cons {
            let (got, st) = h.join().unwrap();
            all.extend(got);
            cstats.push(st);
        }
        (all, cstats, pstats)
    })
}

fn check(set: &ReadyQueues<u64>, producers: usize, per_producer: u64) {
    let (mut all, cstats, pstats) = run(set, producers, per_producer);
    let total = producers as u64 * per_producer;
    all.sort_unstable();
    assert_eq!(all.len() as u64, total, "served count");
    assert!(
        all.windows(2).all(|w| w[0] < w[1]),
        "a task was served twice"
    );
    assert_eq!(all, (0..total).collect::<Vec<_>>(), "a task was lost");
    assert!(set.is_empty());
    let served: u64 = cstats.iter().map(|s| s.served).sum();
    assert_eq!(served, total);
    for s in &cstats {
        assert_eq!(
            s.served,
            s.primary_claims + s.secondary_claims + s.extra_claims
        );
    }
    assert_eq!(pstats.posts, total);
}

#[test]
fn every_pair_both_modes_2_producers_2_consumers() {
    let per = tasks_per_producer(1_000);
    for pair in common::compatible_pairs() {
        for mode in [LockMode::Atomic, LockMode::Paper] {
            let set = common::config(pair, 2, mode, 4, 7).build().unwrap();
            check(&set, 2, per);
        }
    }
}

#[test]
fn four_producers_four_consumers_atomic_and_paper() {
    let per = tasks_per_producer(10_000);
    for mode in [LockMode::Atomic, LockMode::Paper] {
        for slots in [2, 64] {
            let set = Config::new(4).lock_mode(mode).slots(slots).build().unwrap();
            check(&set, 4, per);
        }
    }
}

#[test]
fn tiny_queues_overflow_under_contention() {
    let per = tasks_per_producer(5_000);
    let set: ReadyQueues<u64> = Config::new(2)
        .slots(1)
        .cutoff(1)
        .lock_mode(LockMode::Atomic)
        .build()
        .unwrap();
    check(&set, 4, per);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]
    /// Conservation and exclusive claim for random pairs, sizes and thread counts.
    #[test]
    fn conservation_random_configurations(
        pair_index in 0usize..33,
        paper in any::<bool>(),
        queues in 2usize..5,
        slots in 1usize..9,
        producers in 1usize..5,
        per in 1u64..500,
        seed in any::<u64>(),
    ) {
        let pairs = common::compatible_pairs();
        let mode = if paper { LockMode::Paper } else { LockMode::Atomic };
        let set = common::config(pairs[pair_index % pairs.len()], queues, mode, slots, seed).build().unwrap();
        check(&set, producers, per);
    }
}
