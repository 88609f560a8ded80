//! partita-runtime against rayon-core, measured side by side in the same run.
//!
//! `cargo bench -p partita-runtime --bench runtime` (add `-- --quick` for a short run).
//! Before criterion's groups it prints what criterion cannot express: an interleaved A/B
//! table (partita and rayon-core alternate round by round, the ratio is the median of
//! per-round ratios — the robust number on a machine shared with other work), the reaction
//! time of `set_target_workers` 2→1→2 (p50/p99), the same shrink in the middle of a busy
//! `join` tree, and the CPU an idle pool uses over one
//! second. Results and analysis: docs/bench/runtime.md.

use criterion::{criterion_group, BatchSize, BenchmarkId, Criterion};
use partita_stats::median;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// The same algorithms, instantiated once per runtime (only `join`/`scope` differ).
macro_rules! algorithms {
    ($name:ident, $rt:ident) => {
        mod $name {
            pub fn fib(n: u32) -> u64 {
                if n < 2 {
                    return n as u64;
                }
                let (a, b) = $rt::join(|| fib(n - 1), || fib(n - 2));
                a + b
            }

            pub fn quick_sort(v: &mut [u32]) {
                if v.len() <= 1000 {
                    v.sort_unstable();
                    return;
                }
                let mid = partition(v);
                let (lo, hi) = v.split_at_mut(mid);
                $rt::join(|| quick_sort(lo), || quick_sort(&mut hi[1..]));
            }

            fn partition(v: &mut [u32]) -> usize {
                let pivot = v.len() - 1;
                let mut i = 0;
                for j in 0..pivot {
                    if v[j] <= v[pivot] {
                        v.swap(i, j);
                        i += 1;
                    }
                }
                v.swap(i, pivot);
                i
            }

            pub fn merge_sort(v: &mut [u32], buf: &mut [u32]) {
                if v.len() <= 1000 {
                    v.sort_unstable();
                    return;
                }
                let mid = v.len() / 2;
                {
                    let (vl, vr) = v.split_at_mut(mid);
                    let (bl, br) = buf.split_at_mut(mid);
                    $rt::join(|| merge_sort(vl, bl), || merge_sort(vr, br));
                }
                let (mut i, mut j, mut k) = (0, mid, 0);
                while i < mid && j < v.len() {
                    if v[i] <= v[j] {
                        buf[k] = v[i];
                        i += 1;
                    } else {
                        buf[k] = v[j];
                        j += 1;
                    }
                    k += 1;
                }
                buf[k..k + mid - i].copy_from_slice(&v[i..mid]);
                k += mid - i;
                buf[k..].copy_from_slice(&v[j..]);
                v.copy_from_slice(buf);
            }

            /// A binary tree of empty joins (2^depth - 1 joins).
            pub fn join_tree(depth: u32) {
                if depth == 0 {
                    return;
                }
                $rt::join(|| join_tree(depth - 1), || join_tree(depth - 1));
            }

            pub fn tiny_spawns(n: usize) -> usize {
                let count = std::sync::atomic::AtomicUsize::new(0);
                $rt::scope(|s| {
                    for _ in 0..n {
                        s.spawn(|_| {
                            count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        });
                    }
                });
                count.into_inner()
            }

            /// One short parallel region: two ~2 µs halves.
            pub fn region() -> u64 {
                let work = || (0..2_000u64).fold(0u64, |a, x| a.wrapping_mul(31).wrapping_add(x));
                let (a, b) = $rt::join(|| super::black_box(work()), || super::black_box(work()));
                a ^ b
            }
        }
    };
}

algorithms!(partita_algo, partita_runtime);
algorithms!(rayon_algo, rayon_core);

const THREADS: usize = 2;

fn partita_pool() -> partita_runtime::ThreadPool {
    partita_runtime::ThreadPoolBuilder::new()
        .num_threads(THREADS)
        .process_control(partita_runtime::ProcessControl::Manual)
        .build()
        .expect("partita pool")
}

fn rayon_pool() -> rayon_core::ThreadPool {
    rayon_core::ThreadPoolBuilder::new()
        .num_threads(THREADS)
        .build()
        .expect("rayon pool")
}

fn random_u32(n: usize) -> Vec<u32> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u32
        })
        .collect()
}

fn benches(c: &mut Criterion) {
    let p = partita_pool();
    let r = rayon_pool();

    let mut g = c.benchmark_group("fib30");
    g.sample_size(10);
    g.bench_function("partita", |b| {
        b.iter(|| p.install(|| partita_algo::fib(30)))
    });
    g.bench_function("rayon-core", |b| {
        b.iter(|| r.install(|| rayon_algo::fib(30)))
    });
    g.finish();

    sort_benches(c, &p, &r);

    let mut g = c.benchmark_group("join_tree_2^12");
    g.sample_size(20);
    g.bench_function("partita", |b| {
        b.iter(|| p.install(|| partita_algo::join_tree(12)))
    });
    g.bench_function("rayon-core", |b| {
        b.iter(|| r.install(|| rayon_algo::join_tree(12)))
    });
    g.finish();

    let mut g = c.benchmark_group("spawn_1e5_in_scope");
    g.sample_size(10);
    g.bench_function("partita", |b| {
        b.iter(|| p.install(|| partita_algo::tiny_spawns(100_000)))
    });
    g.bench_function("rayon-core", |b| {
        b.iter(|| r.install(|| rayon_algo::tiny_spawns(100_000)))
    });
    g.finish();

    // rayon's tick_bench shape: many short parallel regions entered from outside the pool.
    let mut g = c.benchmark_group("regions_1000");
    g.sample_size(10);
    g.bench_function("partita", |b| {
        b.iter(|| (0..1000).fold(0, |a, _| a ^ p.install(partita_algo::region)))
    });
    g.bench_function("rayon-core", |b| {
        b.iter(|| (0..1000).fold(0, |a, _| a ^ r.install(rayon_algo::region)))
    });
    g.finish();

    policy_benches(c);

    // Reaction time as a criterion group too (mean of a full 2→1→2 round trip).
    let mut g = c.benchmark_group("set_target_2_1_2");
    g.sample_size(20);
    g.bench_function(BenchmarkId::new("partita", "round_trip"), |b| {
        b.iter(|| {
            let (to1, to2) = reaction_round_trip(&p);
            black_box((to1, to2))
        })
    });
    g.finish();
}

/// Quicksort and mergesort of 10^6 random numbers on both pools.
fn sort_benches(c: &mut Criterion, p: &partita_runtime::ThreadPool, r: &rayon_core::ThreadPool) {
    let data = random_u32(1_000_000);
    let mut g = c.benchmark_group("quicksort_1e6");
    g.sample_size(10);
    g.bench_function("partita", |b| {
        b.iter_batched_ref(
            || data.clone(),
            |v| p.install(|| partita_algo::quick_sort(v)),
            BatchSize::LargeInput,
        )
    });
    g.bench_function("rayon-core", |b| {
        b.iter_batched_ref(
            || data.clone(),
            |v| r.install(|| rayon_algo::quick_sort(v)),
            BatchSize::LargeInput,
        )
    });
    g.finish();

    let mut g = c.benchmark_group("mergesort_1e6");
    g.sample_size(10);
    g.bench_function("partita", |b| {
        b.iter_batched_ref(
            || (data.clone(), vec![0u32; data.len()]),
            |(v, buf)| p.install(|| partita_algo::merge_sort(v, buf)),
            BatchSize::LargeInput,
        )
    });
    g.bench_function("rayon-core", |b| {
        b.iter_batched_ref(
            || (data.clone(), vec![0u32; data.len()]),
            |(v, buf)| r.install(|| rayon_algo::merge_sort(v, buf)),
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

/// Which ready-queue policy pair carries injected work best: the same regions workload,
/// plus 10^4 spawns posted from outside the pool, for a few compatible pairs.
fn policy_benches(c: &mut Criterion) {
    use partita_runtime::{DequeuePolicy as D, EnqueuePolicy as E};
    let pairs = [
        (E::Sequential, D::Sequential),
        (E::PrimaryRandom, D::PrimarySequential),
        (E::Random, D::Random),
        (E::Static, D::PrimarySequential),
        (E::Global, D::Global),
    ];
    let mut g = c.benchmark_group("ready_queue_policies");
    g.sample_size(10);
    for (e, d) in pairs {
        let pool = partita_runtime::ThreadPoolBuilder::new()
            .num_threads(THREADS)
            .process_control(partita_runtime::ProcessControl::Manual)
            .ready_queues(e, d)
            .build()
            .expect("valid pair");
        let name = format!("{e:?}/{d:?}");
        g.bench_function(BenchmarkId::new("regions_1000", &name), |b| {
            b.iter(|| (0..1000).fold(0, |a, _| a ^ pool.install(partita_algo::region)))
        });
        g.bench_function(BenchmarkId::new("external_spawns_1e4", &name), |b| {
            b.iter(|| {
                let left = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(10_000));
                let (tx, rx) = std::sync::mpsc::channel();
                for _ in 0..10_000 {
                    let (left, tx) = (left.clone(), tx.clone());
                    pool.spawn(move || {
                        if left.fetch_sub(1, std::sync::atomic::Ordering::AcqRel) == 1 {
                            tx.send(()).expect("receiver alive");
                        }
                    });
                }
                rx.recv().expect("all spawns ran")
            })
        });
    }
    g.finish();
}

/// Time until the pool follows a target change: 2→1 (worker 1 suspended) and 1→2 (worker 1
/// unparked and running a task).
fn reaction_round_trip(p: &partita_runtime::ThreadPool) -> (Duration, Duration) {
    let t0 = Instant::now();
    p.set_target_workers(1);
    while p.active_workers() != 1 {
        std::hint::spin_loop();
    }
    let to1 = t0.elapsed();
    let t1 = Instant::now();
    p.set_target_workers(2);
    // Worker 1 is back when it runs a broadcast-free task: a join whose second half it steals.
    while p.active_workers() != 2 {
        std::hint::spin_loop();
    }
    let to2 = t1.elapsed();
    (to1, to2)
}

/// A revocation in the middle of a long `join` tree (fib(34), ~40 ms of work on two
/// workers): time from `set_target_workers(1)` until the pool counts one active worker.
/// Every worker's stack holds part of the tree, so this is how long a revoked worker keeps
/// its CPU in a divide-and-conquer program (it parks at its next `join`).
fn busy_shrink() {
    let p = std::sync::Arc::new(partita_pool());
    let mut shrink = Vec::new();
    for _ in 0..50 {
        let started = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let run = {
            let (p, started) = (p.clone(), started.clone());
            std::thread::spawn(move || {
                p.install(|| {
                    started.store(true, std::sync::atomic::Ordering::SeqCst);
                    black_box(partita_algo::fib(34))
                })
            })
        };
        while !started.load(std::sync::atomic::Ordering::SeqCst) {
            std::hint::spin_loop();
        }
        std::thread::sleep(Duration::from_millis(5));
        let t0 = Instant::now();
        p.set_target_workers(1);
        // Poll with sleeps: a spinning observer would be a third runnable thread on the two
        // workers' CPUs and see the count only when the scheduler runs it (ms).
        while p.active_workers() != 1 {
            std::thread::sleep(Duration::from_micros(20));
        }
        shrink.push(t0.elapsed());
        p.set_target_workers(2);
        run.join().unwrap();
    }
    println!("shrink 2→1 in the middle of a busy join tree (fib(34)), 50 runs (20 µs polls):");
    println!(
        "  p50 {:?}  p90 {:?}  max {:?}",
        percentile(&mut shrink, 0.5),
        percentile(&mut shrink, 0.9),
        percentile(&mut shrink, 1.0)
    );
}

fn percentile(v: &mut [Duration], q: f64) -> Duration {
    v.sort();
    v[((v.len() as f64 - 1.0) * q).round() as usize]
}

/// CPU time (user + system) of this process.
fn process_cpu() -> Duration {
    // SAFETY: getrusage only writes into the zeroed struct we pass.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn idle_cpu(run: impl FnOnce()) -> f64 {
    run();
    std::thread::sleep(Duration::from_millis(100)); // let the workers finish searching
    let (c0, t0) = (process_cpu(), Instant::now());
    std::thread::sleep(Duration::from_secs(1));
    let (c1, t1) = (process_cpu(), Instant::now());
    (c1 - c0).as_secs_f64() / (t1 - t0).as_secs_f64()
}

fn extra_measurements() {
    let p = partita_pool();
    p.install(|| partita_algo::fib(20));
    let (mut down, mut up) = (Vec::new(), Vec::new());
    for _ in 0..1000 {
        let (a, b) = reaction_round_trip(&p);
        down.push(a);
        up.push(b);
        std::thread::sleep(Duration::from_micros(200));
    }
    println!("set_target_workers reaction over 1000 round trips (2 workers):");
    println!(
        "  2→1 (suspended): p50 {:?}  p99 {:?}",
        percentile(&mut down, 0.5),
        percentile(&mut down, 0.99)
    );
    println!(
        "  1→2 (unparked):  p50 {:?}  p99 {:?}",
        percentile(&mut up, 0.5),
        percentile(&mut up, 0.99)
    );
    drop(p);
    busy_shrink();

    let p = partita_pool();
    let partita = idle_cpu(|| {
        p.install(|| partita_algo::fib(25));
    });
    let r = rayon_pool();
    let rayon = idle_cpu(|| {
        r.install(|| rayon_algo::fib(25));
    });
    println!("idle pool of {THREADS} workers, CPU over 1 s (fraction of one CPU):");
    println!("  partita {:.4}   rayon-core {:.4}", partita, rayon);
}

/// Median of a sample.
/// A/B measurement robust to a machine whose load drifts (other builds on the same CPUs):
/// partita and rayon-core alternate round by round, and the ratio is the median of the
/// per-round ratios. `run(true)` runs partita's version, `run(false)` rayon-core's, and returns
/// the time of the measured part.
fn interleaved(name: &str, rounds: usize, mut run: impl FnMut(bool) -> Duration) {
    let (mut p, mut r, mut ratio) = (Vec::new(), Vec::new(), Vec::new());
    run(true);
    run(false);
    for round in 0..rounds {
        // Alternate which goes first, so neither always runs on a warmer cache.
        let (a, b) = if round % 2 == 0 {
            let a = run(true);
            (a, run(false))
        } else {
            let b = run(false);
            (run(true), b)
        };
        p.push(a.as_secs_f64());
        r.push(b.as_secs_f64());
        ratio.push(a.as_secs_f64() / b.as_secs_f64());
    }
    let (mp, mr, mq) = (median(&p), median(&r), median(&ratio));
    println!(
        "| {name} | {:.3} ms | {:.3} ms | {mq:.2} |",
        mp * 1e3,
        mr * 1e3
    );
}

fn interleaved_table() {
    let p = partita_pool();
    let r = rayon_pool();
    let time = |f: &mut dyn FnMut()| {
        let t = Instant::now();
        f();
        t.elapsed()
    };
    println!("interleaved A/B, {THREADS} workers each (median of rounds):");
    println!("| benchmark | partita | rayon-core | median ratio |");
    println!("|---|---|---|---|");
    interleaved("fib30", 21, |pt| {
        if pt {
            time(&mut || {
                black_box(p.install(|| partita_algo::fib(30)));
            })
        } else {
            time(&mut || {
                black_box(r.install(|| rayon_algo::fib(30)));
            })
        }
    });
    let data = random_u32(1_000_000);
    interleaved("quicksort_1e6", 15, |pt| {
        let mut v = data.clone();
        if pt {
            time(&mut || p.install(|| partita_algo::quick_sort(&mut v)))
        } else {
            time(&mut || r.install(|| rayon_algo::quick_sort(&mut v)))
        }
    });
    interleaved("mergesort_1e6", 15, |pt| {
        let (mut v, mut buf) = (data.clone(), vec![0u32; data.len()]);
        if pt {
            time(&mut || p.install(|| partita_algo::merge_sort(&mut v, &mut buf)))
        } else {
            time(&mut || r.install(|| rayon_algo::merge_sort(&mut v, &mut buf)))
        }
    });
    interleaved("join_tree_2^12 x100", 21, |pt| {
        if pt {
            time(&mut || {
                for _ in 0..100 {
                    p.install(|| partita_algo::join_tree(12));
                }
            })
        } else {
            time(&mut || {
                for _ in 0..100 {
                    r.install(|| rayon_algo::join_tree(12));
                }
            })
        }
    });
    interleaved("spawn_1e5_in_scope", 21, |pt| {
        if pt {
            time(&mut || {
                black_box(p.install(|| partita_algo::tiny_spawns(100_000)));
            })
        } else {
            time(&mut || {
                black_box(r.install(|| rayon_algo::tiny_spawns(100_000)));
            })
        }
    });
    interleaved("regions_1000", 21, |pt| {
        if pt {
            time(&mut || {
                black_box((0..1000).fold(0, |a, _| a ^ p.install(partita_algo::region)));
            })
        } else {
            time(&mut || {
                black_box((0..1000).fold(0, |a, _| a ^ r.install(rayon_algo::region)));
            })
        }
    });
}

criterion_group!(runtime_benches, benches);

fn main() {
    interleaved_table();
    extra_measurements();
    runtime_benches();
    Criterion::default().configure_from_args().final_summary();
}
