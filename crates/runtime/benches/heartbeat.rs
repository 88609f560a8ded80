//! Fine-grained fork-join (issue 29): sequential, rayon-core, chili (heartbeat scheduling)
//! and partita side by side, on 1 and 2 threads, in one run.
//!
//! `cargo bench -p partita-runtime --bench heartbeat` prints a paired table first (every
//! round runs each runtime once, in an order that rotates between rounds; the table gives
//! each runtime's median and the median of its per-round ratios — the robust number on a
//! machine shared with other work), then runs criterion's groups. `HB_QUICK=1` prints only
//! the table (3 rounds unless `HB_ROUNDS` says otherwise; default 7); `HB_ONLY=<a>|<b>` keeps
//! the workloads whose name contains one of the texts, `HB_THREADS=2` one thread count. Workloads:
//!
//! - tree-sum: the Spice/chili benchmark, a `join` at every node of a binary tree of
//!   2^10-1, 2^16-1 and 2^23-1 nodes;
//! - fib(32) with a `join` per call;
//! - a `scope` that spawns 10^5 tiny tasks from one thread (chili has no scope: n/a);
//! - quicksort of 10^6 u32 (`join` per partition, leaves of 1000 sorted sequentially).
//!
//! The coarse rayon programs (`par_sort` 10^7, map-reduce 10^8) need rayon on top of each
//! runtime, and one binary cannot link rayon-core twice (`links = "rayon-core"`): they are
//! measured by `compat/bench/run.sh`, which builds the same rayon program on the registry's
//! rayon-core and through the compat patch and runs the two interleaved.
//! Results: docs/bench/runtime.md (2026-11-29, issue 29).

use criterion::{criterion_group, BatchSize, Criterion};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// The interval of the "partita" columns: heartbeat is off by default (join/README.md §5),
/// so the bench turns it on at the interval `PARTITA_HEARTBEAT_US=on` means.
const HEARTBEAT: Duration = Duration::from_micros(100);

/// A node of the tree-sum benchmark (as in Spice and chili).
pub struct Node {
    val: u64,
    left: Option<Box<Node>>,
    right: Option<Box<Node>>,
}

impl Node {
    /// A perfect tree of `layers` layers (2^layers - 1 nodes), values 1 to n.
    fn tree(layers: u32) -> Node {
        fn build(layers: u32, next: &mut u64) -> Option<Box<Node>> {
            if layers == 0 {
                return None;
            }
            let left = build(layers - 1, next);
            *next += 1;
            let val = *next;
            let right = build(layers - 1, next);
            Some(Box::new(Node { val, left, right }))
        }
        *build(layers, &mut 0).expect("layers > 0")
    }
}

mod seq {
    use super::Node;

    pub fn sum(node: &Node) -> u64 {
        let l = node.left.as_deref().map_or(0, sum);
        let r = node.right.as_deref().map_or(0, sum);
        node.val + l + r
    }

    pub fn fib(n: u32) -> u64 {
        if n < 2 {
            return n as u64;
        }
        fib(n - 1) + fib(n - 2)
    }

    pub fn tiny_tasks(n: usize) -> usize {
        let count = std::sync::atomic::AtomicUsize::new(0);
        for _ in 0..n {
            count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        count.into_inner()
    }

    pub fn quick_sort(v: &mut [u32]) {
        if v.len() <= 1000 {
            v.sort_unstable();
            return;
        }
        let mid = super::partition(v);
        let (lo, hi) = v.split_at_mut(mid);
        quick_sort(lo);
        quick_sort(&mut hi[1..]);
    }
}

/// The same algorithms on a rayon-core-shaped runtime (only `join`/`scope` differ).
macro_rules! algorithms {
    ($name:ident, $rt:ident) => {
        mod $name {
            use super::Node;

            pub fn sum(node: &Node) -> u64 {
                let (l, r) = $rt::join(
                    || node.left.as_deref().map_or(0, sum),
                    || node.right.as_deref().map_or(0, sum),
                );
                node.val + l + r
            }

            pub fn fib(n: u32) -> u64 {
                if n < 2 {
                    return n as u64;
                }
                let (a, b) = $rt::join(|| fib(n - 1), || fib(n - 2));
                a + b
            }

            pub fn tiny_tasks(n: usize) -> usize {
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

            pub fn quick_sort(v: &mut [u32]) {
                if v.len() <= 1000 {
                    v.sort_unstable();
                    return;
                }
                let mid = super::partition(v);
                let (lo, hi) = v.split_at_mut(mid);
                $rt::join(|| quick_sort(lo), || quick_sort(&mut hi[1..]));
            }
        }
    };
}

algorithms!(partita_algo, partita_runtime);
algorithms!(rayon_algo, rayon_core);

mod chili_algo {
    use super::Node;
    use chili::Scope;

    pub fn sum(s: &mut Scope<'_>, node: &Node) -> u64 {
        let (l, r) = s.join(
            |s| node.left.as_deref().map_or(0, |n| sum(s, n)),
            |s| node.right.as_deref().map_or(0, |n| sum(s, n)),
        );
        node.val + l + r
    }

    pub fn fib(s: &mut Scope<'_>, n: u32) -> u64 {
        if n < 2 {
            return n as u64;
        }
        let (a, b) = s.join(|s| fib(s, n - 1), |s| fib(s, n - 2));
        a + b
    }

    pub fn quick_sort(s: &mut Scope<'_>, v: &mut [u32]) {
        if v.len() <= 1000 {
            v.sort_unstable();
            return;
        }
        let mid = super::partition(v);
        let (lo, hi) = v.split_at_mut(mid);
        s.join(|s| quick_sort(s, lo), |s| quick_sort(s, &mut hi[1..]));
    }
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

/// The pools of one thread count.
struct Pools {
    threads: usize,
    partita: partita_runtime::ThreadPool,
    /// Partita with every join half stealable at once (the join path before issue 29).
    eager: partita_runtime::ThreadPool,
    rayon: rayon_core::ThreadPool,
    chili: chili::ThreadPool,
}

impl Pools {
    fn new(threads: usize) -> Pools {
        Pools {
            threads,
            partita: partita_runtime::ThreadPoolBuilder::new()
                .num_threads(threads)
                .process_control(partita_runtime::ProcessControl::Manual)
                .heartbeat_interval(Some(HEARTBEAT))
                .build()
                .expect("partita pool"),
            eager: partita_runtime::ThreadPoolBuilder::new()
                .num_threads(threads)
                .process_control(partita_runtime::ProcessControl::Manual)
                .heartbeat_interval(None)
                .build()
                .expect("partita pool"),
            rayon: rayon_core::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .expect("rayon pool"),
            chili: chili::ThreadPool::with_config(chili::Config {
                thread_count: std::num::NonZero::new(threads),
                ..Default::default()
            }),
        }
    }
}

/// The runtimes compared, in table order.
const RUNTIMES: [&str; 5] = [
    "sequential",
    "rayon-core",
    "chili",
    "partita, no heartbeat",
    "partita",
];

/// One workload: runs it on runtime `rt` (an index into [`RUNTIMES`]) and returns its
/// checksum, or `None` where the runtime has no such operation.
type Workload<'a> = Box<dyn Fn(&Pools, usize) -> Option<u64> + 'a>;

fn workloads<'a>(trees: &'a [(u32, Node)], data: &'a [u32]) -> Vec<(String, Workload<'a>)> {
    let mut w: Vec<(String, Workload<'a>)> = Vec::new();
    for (layers, tree) in trees {
        // Small trees are summed repeatedly inside one pool entry (the join is measured,
        // not entering the pool), so that one timing is at least ~1 ms.
        let reps = 1u64 << 23u32.saturating_sub(*layers).min(10);
        w.push((
            format!("tree-sum 2^{layers}-1 nodes ×{reps}"),
            Box::new(move |p: &Pools, rt| {
                // `black_box` per repetition: the sums must not be hoisted out of the loop.
                let sum = |one: &dyn Fn() -> u64| (0..reps).fold(0, |a, _| a ^ black_box(one()));
                Some(match rt {
                    0 => sum(&|| seq::sum(black_box(tree))),
                    1 => p
                        .rayon
                        .install(|| sum(&|| rayon_algo::sum(black_box(tree)))),
                    2 => {
                        let mut s = p.chili.scope();
                        (0..reps).fold(0, |a, _| a ^ chili_algo::sum(&mut s, black_box(tree)))
                    }
                    3 => p
                        .eager
                        .install(|| sum(&|| partita_algo::sum(black_box(tree)))),
                    _ => p
                        .partita
                        .install(|| sum(&|| partita_algo::sum(black_box(tree)))),
                })
            }),
        ));
    }
    w.push((
        "fib(32), join per call".into(),
        Box::new(|p: &Pools, rt| {
            Some(match rt {
                0 => seq::fib(32),
                1 => p.rayon.install(|| rayon_algo::fib(32)),
                2 => chili_algo::fib(&mut p.chili.scope(), 32),
                3 => p.eager.install(|| partita_algo::fib(32)),
                _ => p.partita.install(|| partita_algo::fib(32)),
            })
        }),
    ));
    w.push((
        "scope, 10^5 tiny spawns".into(),
        Box::new(|p: &Pools, rt| {
            let n = 100_000;
            Some(match rt {
                0 => seq::tiny_tasks(n),
                1 => p.rayon.install(|| rayon_algo::tiny_tasks(n)),
                2 => return None,
                3 => p.eager.install(|| partita_algo::tiny_tasks(n)),
                _ => p.partita.install(|| partita_algo::tiny_tasks(n)),
            } as u64)
        }),
    ));
    w.push((
        "quicksort 10^6 u32".into(),
        Box::new(move |p: &Pools, rt| {
            let mut v = data.to_vec();
            match rt {
                0 => seq::quick_sort(&mut v),
                1 => p.rayon.install(|| rayon_algo::quick_sort(&mut v)),
                2 => chili_algo::quick_sort(&mut p.chili.scope(), &mut v),
                3 => p.eager.install(|| partita_algo::quick_sort(&mut v)),
                _ => p.partita.install(|| partita_algo::quick_sort(&mut v)),
            }
            Some(v[v.len() / 2] as u64)
        }),
    ));
    w
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Times one run of `w` on `rt` (None: not supported). The sort's copy is inside the timing
/// for every runtime alike.
fn time_once(w: &Workload<'_>, p: &Pools, rt: usize) -> Option<f64> {
    let t = Instant::now();
    let sum = w(p, rt)?;
    black_box(sum);
    Some(t.elapsed().as_secs_f64())
}

/// The paired table: per workload and thread count, `rounds` rounds of every runtime.
fn paired(rounds: usize, pools: &[Pools], workloads: &[(String, Workload<'_>)]) {
    println!(
        "paired runs: {rounds} rounds, median ms (median per-round ratio to sequential); \
         last columns: median per-round ratio of partita to rayon-core and to chili"
    );
    for p in pools {
        println!("\n{} thread(s)", p.threads);
        println!(
            "| workload | {} | partita / rayon-core | partita / chili |",
            RUNTIMES.join(" | ")
        );
        println!("|---|{}", "---|".repeat(RUNTIMES.len() + 2));
        for (name, w) in workloads {
            let checks: Vec<Option<u64>> = (0..RUNTIMES.len()).map(|rt| w(p, rt)).collect();
            assert!(
                checks.iter().flatten().all(|c| Some(*c) == checks[0]),
                "{name}: runtimes disagree: {checks:?}"
            );
            let mut times = vec![Vec::new(); RUNTIMES.len()];
            for r in 0..rounds {
                for k in 0..RUNTIMES.len() {
                    let rt = (r + k) % RUNTIMES.len();
                    if let Some(t) = time_once(w, p, rt) {
                        times[rt].push(t);
                    }
                }
            }
            let cells: Vec<String> = (0..RUNTIMES.len())
                .map(|rt| {
                    if times[rt].is_empty() {
                        return "n/a".into();
                    }
                    let mut ratios: Vec<f64> = times[rt]
                        .iter()
                        .zip(&times[0])
                        .map(|(a, s)| a / s)
                        .collect();
                    let ms = median(&mut times[rt].clone()) * 1e3;
                    format!("{ms:.3} ({:.2}×)", median(&mut ratios))
                })
                .collect();
            // Partita (last column) against rayon-core and chili, round by round.
            let last = RUNTIMES.len() - 1;
            let against = |other: usize| {
                let mut r: Vec<f64> = times[last]
                    .iter()
                    .zip(&times[other])
                    .map(|(a, b)| a / b)
                    .collect();
                if r.is_empty() {
                    "n/a".to_owned()
                } else {
                    format!("{:.2}", median(&mut r))
                }
            };
            println!(
                "| {name} | {} | {} | {} |",
                cells.join(" | "),
                against(1),
                against(2)
            );
        }
    }
}

/// Revocation in the middle of a busy join tree (fib(34) on 2 workers), as in the runtime
/// bench's `busy_shrink`, for partita with and without heartbeat, alternating run by run:
/// time from `set_target_workers(1)` until the pool counts one active worker.
fn busy_shrink(runs: usize) {
    let pool = |hb: bool| {
        let b = partita_runtime::ThreadPoolBuilder::new()
            .num_threads(2)
            .process_control(partita_runtime::ProcessControl::Manual);
        let b = b.heartbeat_interval(hb.then_some(HEARTBEAT));
        std::sync::Arc::new(b.build().expect("partita pool"))
    };
    let pools = [pool(false), pool(true)];
    let mut shrink = [Vec::new(), Vec::new()];
    for r in 0..runs * 2 {
        let k = r % 2;
        let p = &pools[k];
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
        // Poll with sleeps: a spinning observer would take a CPU from the two workers.
        while p.active_workers() != 1 {
            std::thread::sleep(Duration::from_micros(20));
        }
        shrink[k].push(t0.elapsed().as_secs_f64() * 1e6);
        p.set_target_workers(2);
        run.join().expect("fib ran");
    }
    println!("\nshrink 2→1 in a busy join tree (fib(34)), {runs} runs each, alternating, µs:");
    for (name, v) in ["no heartbeat", "heartbeat"].iter().zip(&mut shrink) {
        v.sort_by(f64::total_cmp);
        let q = |f: f64| v[((v.len() - 1) as f64 * f).round() as usize];
        println!(
            "  {name:>12}: p50 {:.0}  p90 {:.0}  max {:.0}",
            q(0.5),
            q(0.9),
            q(1.0)
        );
    }
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

/// CPU share (of one CPU) this process uses over 10 s while `pool` (already used) is idle.
fn idle_share<P>(pool: P) -> f64 {
    std::thread::sleep(Duration::from_millis(100)); // the workers finish searching
    let (c0, t0) = (process_cpu(), Instant::now());
    std::thread::sleep(Duration::from_secs(10));
    let (c1, t1) = (process_cpu(), Instant::now());
    drop(pool);
    (c1 - c0).as_secs_f64() / (t1 - t0).as_secs_f64()
}

/// Idle cost: a 2-worker partita pool with heartbeat (nothing runs while idle: the heartbeat
/// is a clock read at `join`), then a 2-thread chili pool (a heartbeat thread), each alone.
fn idle_cpu() {
    let p = partita_runtime::ThreadPoolBuilder::new()
        .num_threads(2)
        .process_control(partita_runtime::ProcessControl::Manual)
        .heartbeat_interval(Some(HEARTBEAT))
        .build()
        .expect("partita pool");
    black_box(p.install(|| partita_algo::fib(25)));
    let partita = idle_share(p);
    let c = chili::ThreadPool::with_config(chili::Config {
        thread_count: std::num::NonZero::new(2),
        ..Default::default()
    });
    black_box(chili_algo::fib(&mut c.scope(), 25));
    let chili = idle_share(c);
    println!(
        "\nidle pool, 2 threads, process CPU over 10 s (% of one CPU): partita {:.3} %, chili {:.3} %",
        partita * 100.0,
        chili * 100.0
    );
}

fn benches(c: &mut Criterion) {
    let quick = std::env::var_os("HB_QUICK").is_some();
    let rounds = std::env::var("HB_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(if quick { 3 } else { 7 });
    let trees: Vec<(u32, Node)> = [10, 16, 23].iter().map(|&l| (l, Node::tree(l))).collect();
    let data = random_u32(1_000_000);
    let mut workloads = workloads(&trees, &data);
    if let Ok(only) = std::env::var("HB_ONLY") {
        workloads.retain(|(name, _)| only.split('|').any(|o| name.contains(o)));
    }
    let threads: Vec<usize> = match std::env::var("HB_THREADS") {
        Ok(t) => vec![t.parse().expect("HB_THREADS: a number of threads")],
        Err(_) => vec![1, 2],
    };
    let pools: Vec<Pools> = threads.into_iter().map(Pools::new).collect();
    paired(rounds, &pools, &workloads);
    let extras = std::env::var_os("HB_ONLY").is_none();
    if extras {
        busy_shrink(if quick { 20 } else { 50 });
    }
    if !quick {
        criterion_groups(c, &pools, &workloads);
    }
    drop(pools);
    if extras {
        idle_cpu();
    }
}

/// The same workloads as criterion groups (sequential samples: noisier than the table).
fn criterion_groups(c: &mut Criterion, pools: &[Pools], workloads: &[(String, Workload<'_>)]) {
    for p in pools {
        for (name, w) in workloads {
            let mut g = c.benchmark_group(format!("{name} [{} threads]", p.threads));
            g.sample_size(10)
                .warm_up_time(Duration::from_millis(300))
                .measurement_time(Duration::from_secs(1));
            for (rt, rt_name) in RUNTIMES.iter().enumerate() {
                if w(p, rt).is_none() {
                    continue;
                }
                g.bench_function(*rt_name, |b| {
                    b.iter_batched(|| (), |()| black_box(w(p, rt)), BatchSize::PerIteration)
                });
            }
            g.finish();
        }
    }
}

criterion_group!(heartbeat, benches);

fn main() {
    heartbeat();
    Criterion::default().configure_from_args().final_summary();
}
