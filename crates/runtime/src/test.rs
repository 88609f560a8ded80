//! Tests that need crate internals (rayon-core's `test.rs` counterpart). The API behaviour
//! tests are in `tests/`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};

use crate::ThreadPoolBuilder;

#[test]
fn start_and_exit_handlers_run_once_per_worker() {
    let started = Arc::new(AtomicUsize::new(0));
    let exited = Arc::new(AtomicUsize::new(0));
    let (s, e) = (started.clone(), exited.clone());
    let pool = ThreadPoolBuilder::new()
        .num_threads(3)
        .start_handler(move |_| {
            s.fetch_add(1, Ordering::SeqCst);
        })
        .exit_handler(move |_| {
            e.fetch_add(1, Ordering::SeqCst);
        })
        .build()
        .unwrap();
    // Every worker runs a broadcast, so every start handler has run by then.
    pool.broadcast(|_| ());
    assert_eq!(started.load(Ordering::SeqCst), 3);
    pool.wait_until_stopped();
    assert_eq!(exited.load(Ordering::SeqCst), 3);
}

#[test]
fn workers_stop_after_pool_dropped_even_when_suspended() {
    let pool = ThreadPoolBuilder::new().num_threads(3).build().unwrap();
    pool.set_target_workers(1);
    while pool.active_workers() != 1 {
        std::thread::yield_now();
    }
    // Termination must reach suspended workers too.
    pool.wait_until_stopped();
}

#[test]
fn pool_stays_alive_for_spawned_tasks() {
    let pool = ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    let barrier = Arc::new(Barrier::new(2));
    let done = Arc::new(AtomicUsize::new(0));
    {
        let (b, d) = (barrier.clone(), done.clone());
        pool.spawn(move || {
            b.wait();
            d.fetch_add(1, Ordering::SeqCst);
        });
    }
    // Dropping the handle does not cancel the task; workers exit only after it ran.
    let registry = pool.registry.clone();
    drop(pool);
    barrier.wait();
    registry.wait_until_stopped();
    assert_eq!(done.load(Ordering::SeqCst), 1);
}
