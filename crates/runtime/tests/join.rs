//! `join` / `join_context` behave as in rayon-core.

use partita_runtime::{join, join_context, ThreadPoolBuilder};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

fn quick_sort<T: PartialOrd + Send>(v: &mut [T]) {
    if v.len() <= 1 {
        return;
    }
    let mid = partition(v);
    let (lo, hi) = v.split_at_mut(mid);
    join(|| quick_sort(lo), || quick_sort(&mut hi[1..]));
}

fn partition<T: PartialOrd>(v: &mut [T]) -> usize {
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

fn pseudo_random(n: usize) -> Vec<u32> {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u32
        })
        .collect()
}

#[test]
fn sort_via_join_in_pool_and_global() {
    let pool = ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    let mut v = pseudo_random(20_000);
    let mut expected = v.clone();
    expected.sort();
    pool.install(|| quick_sort(&mut v));
    assert_eq!(v, expected);
    let mut w = pseudo_random(5_000);
    quick_sort(&mut w); // from outside any pool: the global pool
    assert!(w.windows(2).all(|p| p[0] <= p[1]));
}

#[test]
fn join_results_and_borrowing() {
    let data = [1, 2, 3, 4];
    let (a, b) = join(
        || data[..2].iter().sum::<i32>(),
        || data[2..].iter().sum::<i32>(),
    );
    assert_eq!((a, b), (3, 7));
}

#[test]
fn panic_in_a_propagates_after_b_finished() {
    let pool = ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    let b_done = AtomicBool::new(false);
    let r = catch_unwind(AssertUnwindSafe(|| {
        pool.join(
            || panic!("a"),
            || {
                std::thread::sleep(std::time::Duration::from_millis(20));
                b_done.store(true, Ordering::SeqCst);
            },
        )
    }));
    let err = r.unwrap_err();
    assert_eq!(*err.downcast_ref::<&str>().unwrap(), "a");
    assert!(
        b_done.load(Ordering::SeqCst),
        "join returned before b finished"
    );
}

#[test]
fn panic_in_b_propagates() {
    let pool = ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    let r = catch_unwind(AssertUnwindSafe(|| {
        pool.join(|| 1, || -> i32 { panic!("b") })
    }));
    assert_eq!(*r.unwrap_err().downcast_ref::<&str>().unwrap(), "b");
    // The pool still works afterwards.
    assert_eq!(pool.join(|| 1, || 2), (1, 2));
}

#[test]
fn both_panic_first_wins() {
    let pool = ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    let r = catch_unwind(AssertUnwindSafe(|| {
        pool.join(|| -> () { panic!("a") }, || -> () { panic!("b") })
    }));
    assert_eq!(*r.unwrap_err().downcast_ref::<&str>().unwrap(), "a");
}

#[test]
fn join_context_reports_migration() {
    let pool = ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    // Called from a worker, oper_a never migrates.
    let a_migrated = pool.install(|| join_context(|ctx| ctx.migrated(), |_| ()).0);
    assert!(!a_migrated);
    // oper_b migrates iff it ran on another thread than the caller.
    let (caller, (b_thread, b_migrated)) = pool.install(|| {
        let me = std::thread::current().id();
        let (_, b) = join_context(
            |_| std::thread::sleep(std::time::Duration::from_millis(50)),
            |ctx| (std::thread::current().id(), ctx.migrated()),
        );
        (me, b)
    });
    assert_eq!(b_migrated, b_thread != caller);
}

#[test]
fn deep_recursion_counts_every_leaf() {
    fn count(depth: u32, n: &AtomicUsize) {
        if depth == 0 {
            n.fetch_add(1, Ordering::Relaxed);
            return;
        }
        join(|| count(depth - 1, n), || count(depth - 1, n));
    }
    let pool = ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    let n = AtomicUsize::new(0);
    pool.install(|| count(14, &n));
    assert_eq!(n.load(Ordering::Relaxed), 1 << 14);
}

// Heartbeat promotion (issue 29, crates/runtime/src/join/README.md).

#[test]
fn producer_and_consumer_on_a_bounded_channel_in_two_halves() {
    // The first half blocks outside the pool until the second half consumes: rayon-core
    // runs this on two threads because the second half is stolen; with heartbeat the first
    // join of a job offers its half at once, so a thief still takes it.
    let pool = ThreadPoolBuilder::new()
        .num_threads(2)
        .heartbeat_interval(Some(std::time::Duration::from_micros(100)))
        .build()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::sync_channel::<u32>(1);
    let (sent, got) = pool.join(
        move || (0..1000).map(|i| tx.send(i).unwrap()).count(),
        move || rx.iter().count(),
    );
    assert_eq!((sent, got), (1000, 1000));
}

#[test]
fn heartbeat_offers_halves_of_a_busy_join_tree() {
    // One worker runs a long tree of joins; a later second half must reach the other
    // worker (promoted by a heartbeat, never by a waiting owner: the owner never waits).
    fn tree(depth: u32) -> u64 {
        if depth == 0 {
            return 1;
        }
        let (a, b) = join(|| tree(depth - 1), || tree(depth - 1));
        a + b
    }
    let pool = ThreadPoolBuilder::new()
        .num_threads(2)
        .heartbeat_interval(Some(std::time::Duration::from_micros(100)))
        .build()
        .unwrap();
    let elsewhere = AtomicBool::new(false);
    let rounds = pool.install(|| {
        let me = std::thread::current().id();
        // The first join of the job offers its half at once: spend it.
        join(|| (), || ());
        let mut rounds = 0u64;
        while !elsewhere.load(Ordering::SeqCst) {
            rounds += 1;
            let (n, ()) = join(
                || tree(14),
                || {
                    if std::thread::current().id() != me {
                        elsewhere.store(true, Ordering::SeqCst);
                    }
                },
            );
            assert_eq!(n, 1 << 14);
        }
        rounds
    });
    assert!(rounds >= 1);
}

#[test]
fn pending_halves_count_as_pending_tasks() {
    fn nest(depth: u32) -> bool {
        if depth == 0 {
            return partita_runtime::current_thread_has_pending_tasks() == Some(true);
        }
        join(|| nest(depth - 1), || true).0
    }
    for hb in [None, Some(std::time::Duration::from_micros(100))] {
        let pool = ThreadPoolBuilder::new()
            .num_threads(1)
            .heartbeat_interval(hb)
            .build()
            .unwrap();
        assert!(pool.install(|| nest(6)), "heartbeat {hb:?}");
        assert_eq!(
            pool.install(|| pool.current_thread_has_pending_tasks()),
            Some(false)
        );
    }
}

#[test]
fn heartbeat_interval_out_of_range_is_a_build_error() {
    use std::time::Duration;
    for bad in [
        Duration::ZERO,
        Duration::from_nanos(999),
        Duration::from_secs(3600),
    ] {
        let err = ThreadPoolBuilder::new()
            .heartbeat_interval(Some(bad))
            .build()
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("heartbeat_interval") && err.contains("100ms"),
            "{err}"
        );
    }
    for good in [
        Some(Duration::from_micros(1)),
        Some(Duration::from_millis(100)),
        None,
    ] {
        let pool = ThreadPoolBuilder::new()
            .num_threads(2)
            .heartbeat_interval(good)
            .build();
        assert_eq!(pool.unwrap().join(|| 1, || 2), (1, 2));
    }
}
