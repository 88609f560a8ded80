//! An unmodified rayon program (par_iter, par_sort) running on partita-runtime through the
//! rayon-core patch in Cargo.toml.
//!
//! ```sh
//! cargo run --release                 # one round
//! cargo run --release -- 20           # 20 rounds: time to look at `partita status`
//! ```
//!
//! Each round prints the pool size and how many workers the pool is asked to keep active: with
//! a manager running (`partita serve`; `PARTITA_SOCKET` if its socket is not the default) the
//! pool registers at start-up and the target follows the manager's allocation, which
//! `partita status` shows next to this program's name. `PARTITA=off` never registers.
use rayon::prelude::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

fn main() {
    let rounds: u32 = match std::env::args().nth(1).map(|s| s.parse()) {
        None => 1,
        Some(Ok(n)) => n,
        Some(Err(e)) => {
            eprintln!("usage: rayon-par-iter [rounds]: bad rounds: {e}");
            std::process::exit(2);
        }
    };
    let socket = std::env::var("PARTITA_SOCKET").unwrap_or_else(|_| "(default path)".into());
    let registration = match std::env::var("PARTITA").as_deref() {
        Ok("off") => "off (PARTITA=off)".to_string(),
        _ => format!("with a manager if one answers at {socket}"),
    };
    println!(
        "rayon pool: {} threads; registration: {registration}",
        rayon::current_num_threads()
    );
    for round in 1..=rounds {
        let t = Instant::now();
        // Between rounds the pool is idle and a manager may lower its target to 0, so the
        // workers are sampled while the map-reduce runs (the same global pool, seen through
        // partita-runtime: the types are the same).
        let (target, active) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let sample = |x: u64| {
            if x % (1 << 22) == 0 {
                target.fetch_max(partita_runtime::target_workers(), Ordering::Relaxed);
                active.fetch_max(partita_runtime::active_workers(), Ordering::Relaxed);
            }
        };
        // A map-reduce over 10^8 elements and a sort of 10^7 numbers, in plain rayon.
        let sum: u64 = (0..100_000_000u64)
            .into_par_iter()
            .map(|x| {
                sample(x);
                x % 7
            })
            .sum();
        let mut v: Vec<u64> = (0..10_000_000u64)
            .map(|x| x.wrapping_mul(0x9e37_79b9))
            .collect();
        v.par_sort_unstable();
        assert!(v.windows(2).all(|w| w[0] <= w[1]));
        println!(
            "round {round}: sum {sum}, sorted {} in {:.2?}; while busy: target {}, active {} of {} workers",
            v.len(),
            t.elapsed(),
            target.into_inner(),
            active.into_inner(),
            rayon::current_num_threads(),
        );
    }
}
