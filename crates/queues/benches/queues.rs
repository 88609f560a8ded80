//! Uncontended post + claim cost of every structure, side by side with crossbeam's
//! `Injector` and `SegQueue` (`cargo bench -p partita-queues`). One thread; each iteration
//! posts one task and takes it back (and a burst variant: 32 posts, then 32 claims).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use crossbeam_deque::{Injector, Steal};
use crossbeam_queue::SegQueue;
use partita_queues::{
    Config, DequeuePolicy, EnqueuePolicy, LockMode, MultiAccessQueue, PaperQueue, ReadyQueue,
    ReadyQueues, Scan,
};

const BURST: u64 = 32;

fn sets() -> Vec<(&'static str, ReadyQueues<u64>)> {
    let multi = |mode| {
        Config::new(2)
            .dequeue(DequeuePolicy::Sequential)
            .enqueue(EnqueuePolicy::Static)
            .lock_mode(mode)
            .build()
            .expect("valid pair")
    };
    vec![
        ("multi-access Atomic", multi(LockMode::Atomic)),
        ("multi-access Paper", multi(LockMode::Paper)),
        (
            "DistributedFifo",
            Config::distributed_fifo(2, EnqueuePolicy::StaticFcfs)
                .build()
                .expect("valid pair"),
        ),
        (
            "GlobalFifo",
            Config::global_fifo(2).build().expect("valid pair"),
        ),
    ]
}

fn post_claim(c: &mut Criterion) {
    let mut g = c.benchmark_group("post+claim (uncontended)");
    for (name, set) in sets() {
        let mut p = set.producer(0);
        let mut k = set.consumer(0);
        g.bench_function(BenchmarkId::new("set", name), |b| {
            b.iter(|| {
                set.post(&mut p, black_box(1));
                black_box(set.poll(&mut k))
            })
        });
    }
    let atomic = MultiAccessQueue::new(64);
    g.bench_function(
        BenchmarkId::new("queue", "MultiAccessQueue (no policy)"),
        |b| {
            b.iter(|| {
                let _ = atomic.try_post(black_box(1u64));
                black_box(atomic.claim(Scan::from_zero()))
            })
        },
    );
    let paper = PaperQueue::new(64);
    g.bench_function(BenchmarkId::new("queue", "PaperQueue (no policy)"), |b| {
        b.iter(|| {
            let _ = paper.try_post(black_box(1u64));
            black_box(paper.claim(Scan::from_zero()))
        })
    });
    let injector = Injector::new();
    g.bench_function(BenchmarkId::new("baseline", "crossbeam Injector"), |b| {
        b.iter(|| {
            injector.push(black_box(1u64));
            black_box(matches!(injector.steal(), Steal::Success(_)))
        })
    });
    let seg = SegQueue::new();
    g.bench_function(BenchmarkId::new("baseline", "crossbeam SegQueue"), |b| {
        b.iter(|| {
            seg.push(black_box(1u64));
            black_box(seg.pop())
        })
    });
    g.finish();

    let mut g = c.benchmark_group("32 posts then 32 claims (uncontended)");
    for (name, set) in sets() {
        let mut p = set.producer(0);
        let mut k = set.consumer(0);
        g.bench_function(BenchmarkId::new("set", name), |b| {
            b.iter(|| {
                for t in 0..BURST {
                    set.post(&mut p, black_box(t));
                }
                for _ in 0..BURST {
                    black_box(set.poll(&mut k));
                }
            })
        });
    }
    g.bench_function(BenchmarkId::new("baseline", "crossbeam Injector"), |b| {
        b.iter(|| {
            for t in 0..BURST {
                injector.push(black_box(t));
            }
            for _ in 0..BURST {
                black_box(matches!(injector.steal(), Steal::Success(_)));
            }
        })
    });
    g.bench_function(BenchmarkId::new("baseline", "crossbeam SegQueue"), |b| {
        b.iter(|| {
            for t in 0..BURST {
                seg.push(black_box(t));
            }
            for _ in 0..BURST {
                black_box(seg.pop());
            }
        })
    });
    g.finish();
}

criterion_group!(benches, post_claim);
criterion_main!(benches);
