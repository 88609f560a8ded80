//! `broadcast` / `spawn_broadcast` reach every worker, suspended ones included.

use partita_runtime::{broadcast, ThreadPoolBuilder};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::channel;

#[test]
fn broadcast_reaches_every_worker_once() {
    let pool = ThreadPoolBuilder::new().num_threads(4).build().unwrap();
    let v = pool.broadcast(|ctx| {
        (
            ctx.index(),
            ctx.num_threads(),
            partita_runtime::current_thread_index(),
        )
    });
    assert_eq!(v.len(), 4);
    for (i, (idx, n, cur)) in v.into_iter().enumerate() {
        assert_eq!((idx, n, cur), (i, 4, Some(i)));
    }
}

#[test]
fn broadcast_from_inside_the_pool() {
    let pool = ThreadPoolBuilder::new().num_threads(3).build().unwrap();
    let v = pool.install(|| broadcast(|ctx| ctx.index()));
    assert_eq!(v, vec![0, 1, 2]);
}

#[test]
fn broadcast_reaches_suspended_workers() {
    let pool = ThreadPoolBuilder::new()
        .num_threads(3)
        .process_control(partita_runtime::ProcessControl::Manual)
        .build()
        .unwrap();
    pool.set_target_workers(1);
    while pool.active_workers() != 1 {
        std::thread::yield_now();
    }
    assert_eq!(pool.broadcast(|ctx| ctx.index()), vec![0, 1, 2]);
    // And they go back to sleep afterwards.
    while pool.active_workers() != 1 {
        std::thread::yield_now();
    }
}

#[test]
fn broadcast_panic_propagates() {
    let pool = ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    let r = catch_unwind(AssertUnwindSafe(|| {
        pool.broadcast(|ctx| {
            if ctx.index() == 1 {
                panic!("one")
            }
        })
    }));
    assert_eq!(*r.unwrap_err().downcast_ref::<&str>().unwrap(), "one");
}

#[test]
fn spawn_broadcast_reaches_every_worker() {
    let pool = ThreadPoolBuilder::new().num_threads(3).build().unwrap();
    let (tx, rx) = channel();
    pool.spawn_broadcast(move |ctx| tx.send(ctx.index()).unwrap());
    let mut v: Vec<usize> = rx.iter().take(3).collect();
    v.sort();
    assert_eq!(v, vec![0, 1, 2]);
}

#[test]
fn spawn_broadcast_panic_goes_to_panic_handler() {
    let (tx, rx) = channel();
    let tx = std::sync::Mutex::new(tx);
    let pool = ThreadPoolBuilder::new()
        .num_threads(2)
        .panic_handler(move |_| tx.lock().unwrap().send(()).unwrap())
        .build()
        .unwrap();
    pool.spawn_broadcast(|_| panic!("each"));
    // One panic per worker reaches the handler; the workers survive.
    assert_eq!(rx.iter().take(2).count(), 2);
    assert_eq!(pool.install(|| 1), 1);
}
