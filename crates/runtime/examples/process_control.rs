//! A program that changes its own number of active workers while it computes, and prints
//! what happened: which workers ran tasks in each phase and how quickly the pool followed.
//!
//! `cargo run -p partita-runtime --release --example process_control`

use partita_runtime::{ProcessControl, ThreadPool, ThreadPoolBuilder};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Run 2000 small tasks and count how many each worker ran.
fn phase(pool: &ThreadPool) -> Vec<u64> {
    let per_worker: Vec<AtomicU64> = (0..pool.current_num_threads())
        .map(|_| AtomicU64::new(0))
        .collect();
    pool.scope(|s| {
        for _ in 0..2000 {
            s.spawn(|_| {
                // ~20 µs of work the optimiser cannot fold away.
                std::hint::black_box(
                    (0..std::hint::black_box(20_000u64))
                        .fold(0u64, |a, x| a.wrapping_mul(31).wrapping_add(x)),
                );
                let i = partita_runtime::current_thread_index().expect("in the pool");
                per_worker[i].fetch_add(1, Ordering::Relaxed);
            });
        }
    });
    per_worker.into_iter().map(AtomicU64::into_inner).collect()
}

fn set_and_wait(pool: &ThreadPool, n: usize) -> Duration {
    let start = Instant::now();
    pool.set_target_workers(n);
    while pool.active_workers() != n.clamp(1, pool.current_num_threads()) {
        std::thread::yield_now();
    }
    start.elapsed()
}

fn main() {
    let pool = ThreadPoolBuilder::new()
        .num_threads(4)
        .process_control(ProcessControl::Manual)
        .build()
        .expect("pool");
    for target in [4, 1, 3, 2, 4] {
        let took = set_and_wait(&pool, target);
        let counts = phase(&pool);
        println!(
            "target {target}: active {} after {took:?}; tasks per worker {counts:?}",
            pool.active_workers()
        );
    }
    let s = pool.stats();
    println!(
        "{} tasks, {} steals, {} parks, {} unparks, idle {:?}, suspended {:?}",
        s.tasks_run, s.steals, s.parks, s.unparks, s.idle_time, s.suspended_time
    );
}
