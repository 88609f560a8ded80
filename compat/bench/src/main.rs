//! The four rayon programs of issue 10, timed in-process: `rayon-bench <workload>` prints the
//! seconds the workload took (setup and pool start excluded). The same source is built twice,
//! once on the registry's rayon-core (`stock/`) and once with the compat patch (`partita/`);
//! `run.sh` runs the two binaries interleaved and prints the medians.
use rayon::prelude::*;
use std::time::Instant;

/// Pseudo-random u32s (xorshift; deterministic, so both runtimes sort the same data).
fn random_u32s(n: usize) -> Vec<u32> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 32) as u32
        })
        .collect()
}

/// par_sort of 10^7 u32 (stable merge sort: rayon's `par_sort`).
fn par_sort() -> f64 {
    let mut v = random_u32s(10_000_000);
    let t = Instant::now();
    v.par_sort();
    let s = t.elapsed().as_secs_f64();
    assert!(v.windows(2).all(|w| w[0] <= w[1]));
    s
}

/// A par_iter map-reduce over 10^8 elements.
fn map_reduce() -> f64 {
    let t = Instant::now();
    let sum: u64 = (0..100_000_000u64)
        .into_par_iter()
        .map(|x| x.wrapping_mul(x) % 1_000_003)
        .sum();
    let s = t.elapsed().as_secs_f64();
    assert_eq!(sum, (0..100_000_000u64).map(|x| x.wrapping_mul(x) % 1_000_003).sum());
    s
}

/// par_bridge over a sequential iterator: 10^6 items, each a little work (~1 µs).
fn par_bridge() -> f64 {
    let work = |x: u64| (0..100).fold(x, |a, i| a.wrapping_mul(6_364_136_223_846_793_005) ^ i);
    let t = Instant::now();
    let sum: u64 = (0..1_000_000u64).par_bridge().map(work).reduce(|| 0, u64::wrapping_add);
    let s = t.elapsed().as_secs_f64();
    assert_eq!(sum, (0..1_000_000u64).map(work).fold(0, u64::wrapping_add));
    s
}

/// Nested joins: fib(36) with a join at every level above a sequential cutoff of 8 (about
/// 10^6 joins).
fn nested_joins() -> f64 {
    fn fib(n: u32) -> u64 {
        if n < 8 {
            return fib_seq(n);
        }
        let (a, b) = rayon::join(|| fib(n - 1), || fib(n - 2));
        a + b
    }
    fn fib_seq(n: u32) -> u64 {
        if n < 2 { n as u64 } else { fib_seq(n - 1) + fib_seq(n - 2) }
    }
    let t = Instant::now();
    let r = fib(36);
    let s = t.elapsed().as_secs_f64();
    assert_eq!(r, 14_930_352);
    s
}

fn main() {
    let which = std::env::args().nth(1).unwrap_or_default();
    let run: fn() -> f64 = match which.as_str() {
        "par_sort" => par_sort,
        "map_reduce" => map_reduce,
        "par_bridge" => par_bridge,
        "nested_joins" => nested_joins,
        _ => {
            eprintln!("usage: rayon-bench par_sort|map_reduce|par_bridge|nested_joins");
            std::process::exit(2);
        }
    };
    rayon::join(|| (), || ()); // start the global pool outside the timed region
    println!("{:.6}", run());
}
