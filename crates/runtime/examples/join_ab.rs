//! Join-heavy workloads on partita-runtime and rayon-core, interleaved, with the leaf code
//! shared by both runtimes.
//!
//! `cargo run --release -p partita-runtime --example join_ab -- [rounds]`
//!
//! `benches/runtime.rs` instantiates each workload once per runtime (and `compat/bench` builds
//! it into two binaries), so the two copies of the same leaf loop (quicksort's partition, fib's sequential cutoff) sit at
//! different addresses, and on this machine that placement alone moves a copy's speed by
//! 5–15 % (docs/bench/runtime.md, 2026-11-26). Here the leaves are one `#[inline(never)]`
//! function each, called by both runtimes, so the ratio measures the runtimes' join, steal
//! and wake-up paths; the join code itself is still instantiated per runtime. Prints the
//! medians, the median of the per-round ratios and partita's counters per run; with
//! `JOIN_AB_ROUNDS=1` also every round's times (stderr), which shows rounds slowed by
//! scheduling delays on a loaded machine.

use partita_stats::median;
use std::hint::black_box;
use std::time::Instant;

/// Lomuto partition around the last element (shared by both runtimes' quicksort).
#[inline(never)]
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

/// Sequential Fibonacci below the join cutoff (shared by both runtimes' fib).
#[inline(never)]
fn fib_seq(n: u32) -> u64 {
    if n < 2 {
        n as u64
    } else {
        fib_seq(n - 1) + fib_seq(n - 2)
    }
}

/// The join skeletons, once per runtime; only `join` differs.
macro_rules! skeletons {
    ($name:ident, $rt:ident) => {
        mod $name {
            use super::{fib_seq, partition};

            /// Quicksort with a join per split above 1000 elements.
            pub fn quick_sort(v: &mut [u32]) {
                if v.len() <= 1000 {
                    v.sort_unstable();
                    return;
                }
                let mid = partition(v);
                let (lo, hi) = v.split_at_mut(mid);
                $rt::join(|| quick_sort(lo), || quick_sort(&mut hi[1..]));
            }

            /// fib with a join at every level above a sequential cutoff of 8.
            pub fn fib(n: u32) -> u64 {
                if n < 8 {
                    return fib_seq(n);
                }
                let (a, b) = $rt::join(|| fib(n - 1), || fib(n - 2));
                a + b
            }
        }
    };
}

skeletons!(on_partita, partita_runtime);
skeletons!(on_rayon, rayon_core);

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

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rounds: usize = match std::env::args().nth(1) {
        Some(s) => s.parse().map_err(|e| format!("rounds {s:?}: {e}"))?,
        None => 21,
    };
    let threads = 2;
    let p = partita_runtime::ThreadPoolBuilder::new()
        .num_threads(threads)
        .process_control(partita_runtime::ProcessControl::Manual)
        .build()?;
    let r = rayon_core::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()?;
    let data = random_u32(1_000_000);
    println!("{threads} workers each, {rounds} interleaved rounds (medians)");
    println!(
        "| workload | partita | rayon-core | median ratio | partita steals / sleeps per run |"
    );
    println!("|---|---:|---:|---:|---:|");
    for workload in ["fib(32), cutoff 8", "quicksort 10^6 u32"] {
        let run = |on_partita: bool| {
            let mut v = data.clone();
            let t = Instant::now();
            match (workload.starts_with("fib"), on_partita) {
                (true, true) => drop(black_box(p.install(|| on_partita::fib(32)))),
                (true, false) => drop(black_box(r.install(|| on_rayon::fib(32)))),
                (false, true) => p.install(|| on_partita::quick_sort(&mut v)),
                (false, false) => r.install(|| on_rayon::quick_sort(&mut v)),
            }
            let s = t.elapsed().as_secs_f64();
            assert!(workload.starts_with("fib") || v.windows(2).all(|w| w[0] <= w[1]));
            s
        };
        run(true);
        run(false);
        let before = p.stats();
        let (mut tp, mut tr, mut ratio) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..rounds {
            // Alternate which runtime goes first.
            let (a, b) = if round % 2 == 0 {
                let a = run(true);
                (a, run(false))
            } else {
                let b = run(false);
                (run(true), b)
            };
            tp.push(a);
            tr.push(b);
            ratio.push(a / b);
        }
        if std::env::var_os("JOIN_AB_ROUNDS").is_some() {
            eprintln!("{workload}: partita {tp:.4?}\n  rayon {tr:.4?}");
        }
        let after = p.stats();
        let per_run = |x: u64, y: u64| (y - x) as f64 / rounds as f64;
        println!(
            "| {workload} | {:.3} ms | {:.3} ms | {:.3} | {:.1} / {:.1} |",
            median(&tp) * 1e3,
            median(&tr) * 1e3,
            median(&ratio),
            per_run(before.steals, after.steals),
            per_run(before.sleeps, after.sleeps),
        );
    }
    Ok(())
}
