//! ThreadPool / ThreadPoolBuilder behaviour (rayon-core's thread_pool tests).

use partita_runtime::*;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

#[test]
fn zero_threads_means_default() {
    let pool = ThreadPoolBuilder::new().num_threads(0).build().unwrap();
    let expected = std::env::var("RAYON_NUM_THREADS")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|&n: &usize| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().unwrap().get());
    assert_eq!(pool.current_num_threads(), expected);
}

#[test]
fn install_returns_and_propagates_panics() {
    let pool = ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    assert_eq!(pool.install(current_num_threads), 2);
    let r = catch_unwind(AssertUnwindSafe(|| pool.install(|| panic!("inside"))));
    assert_eq!(*r.unwrap_err().downcast_ref::<&str>().unwrap(), "inside");
    assert_eq!(pool.install(|| 3), 3);
}

#[test]
fn nested_pools_install_cross() {
    let outer = ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    let inner = ThreadPoolBuilder::new().num_threads(3).build().unwrap();
    let (o, i) = outer.install(|| {
        let o = current_num_threads();
        let i = inner.install(|| {
            assert!(inner.current_thread_index().is_some());
            current_num_threads()
        });
        (o, i)
    });
    assert_eq!((o, i), (2, 3));
}

#[test]
fn current_thread_index_and_pending_tasks() {
    let pool = ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    assert_eq!(current_thread_index(), None);
    assert_eq!(current_thread_has_pending_tasks(), None);
    let (idx, pending) =
        pool.install(|| (current_thread_index(), current_thread_has_pending_tasks()));
    assert!(idx.unwrap() < 2);
    assert_eq!(pending, Some(false));
    // With a spawned task not yet run, the worker has pending work.
    let one = ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    let pending = one.install(|| {
        spawn(|| ());
        current_thread_has_pending_tasks()
    });
    assert_eq!(pending, Some(true));
}

#[test]
fn yield_now_and_local_run_pending_tasks() {
    let pool = ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    let n = Arc::new(AtomicUsize::new(0));
    let r = pool.install(|| {
        let n2 = n.clone();
        spawn(move || {
            n2.fetch_add(1, Ordering::SeqCst);
        });
        let first = yield_local();
        let second = yield_now();
        (first, second)
    });
    assert_eq!(r, (Some(Yield::Executed), Some(Yield::Idle)));
    assert_eq!(n.load(Ordering::SeqCst), 1);
    assert_eq!(yield_now(), None);
}

#[test]
fn use_current_thread_makes_caller_worker_zero() {
    std::thread::spawn(|| {
        let pool = ThreadPoolBuilder::new()
            .num_threads(2)
            .use_current_thread()
            .build()
            .unwrap();
        assert_eq!(current_thread_index(), Some(0));
        assert_eq!(pool.current_thread_index(), Some(0));
        // Work still gets done, and broadcast reaches both (worker 0 runs its copy while
        // waiting).
        assert_eq!(pool.join(|| 1, || 2), (1, 2));
        assert_eq!(pool.broadcast(|c| c.index()), vec![0, 1]);
        // A thread can only belong to one pool.
        let err = ThreadPoolBuilder::new()
            .num_threads(1)
            .use_current_thread()
            .build()
            .unwrap_err();
        assert!(err
            .to_string()
            .contains("already part of another thread pool"));
    })
    .join()
    .unwrap();
}

#[test]
fn start_handler_panic_goes_to_panic_handler() {
    let caught = Arc::new(AtomicUsize::new(0));
    let c = caught.clone();
    let pool = ThreadPoolBuilder::new()
        .num_threads(2)
        .start_handler(|_| panic!("start"))
        .panic_handler(move |_| {
            c.fetch_add(1, Ordering::SeqCst);
        })
        .build()
        .unwrap();
    pool.broadcast(|_| ());
    assert_eq!(caught.load(Ordering::SeqCst), 2);
}

#[test]
fn thread_names_and_stack_size() {
    let pool = ThreadPoolBuilder::new()
        .num_threads(2)
        .thread_name(|i| format!("p-{i}"))
        .stack_size(8 << 20)
        .build()
        .unwrap();
    let mut names = pool.broadcast(|_| std::thread::current().name().unwrap().to_owned());
    names.sort();
    assert_eq!(names, vec!["p-0", "p-1"]);
}

#[test]
#[allow(deprecated)] // breadth_first is deprecated, as in rayon-core; still supported
fn breadth_first_pool_works() {
    let pool = ThreadPoolBuilder::new()
        .num_threads(2)
        .breadth_first()
        .build()
        .unwrap();
    let n = AtomicUsize::new(0);
    pool.scope(|s| {
        for _ in 0..100 {
            s.spawn(|_| {
                n.fetch_add(1, Ordering::Relaxed);
            });
        }
    });
    assert_eq!(n.load(Ordering::Relaxed), 100);
}

#[test]
fn ready_queue_policies_are_validated() {
    for (e, d) in [
        (EnqueuePolicy::Sequential, DequeuePolicy::Sequential),
        (
            EnqueuePolicy::PrimaryRandom,
            DequeuePolicy::PrimarySequential,
        ),
        (EnqueuePolicy::Global, DequeuePolicy::Global),
        (EnqueuePolicy::StaticFcfs, DequeuePolicy::DistributedFcfs),
    ] {
        let pool = ThreadPoolBuilder::new()
            .num_threads(2)
            .ready_queues(e, d)
            .build()
            .unwrap();
        // Injected tasks go through the ready queues.
        assert_eq!(pool.install(|| 40 + 2), 42, "{e:?}/{d:?}");
    }
    let err = ThreadPoolBuilder::new()
        .num_threads(2)
        .ready_queues(EnqueuePolicy::Static, DequeuePolicy::Static)
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("Standalone"));
    let ok = ThreadPoolBuilder::new()
        .num_threads(2)
        .process_control(ProcessControl::Standalone)
        .ready_queues(EnqueuePolicy::Static, DequeuePolicy::Static)
        .build()
        .unwrap();
    assert_eq!(ok.install(|| 1), 1);
}

#[test]
fn use_current_thread_keeps_a_main_loop_worker_active() {
    std::thread::spawn(|| {
        let pool = ThreadPoolBuilder::new()
            .num_threads(2)
            .use_current_thread()
            .process_control(ProcessControl::Manual)
            .build()
            .unwrap();
        pool.set_target_workers(1);
        assert_eq!(pool.target_workers(), 2);
        // A spawn still runs while this (worker 0) thread waits outside the pool.
        let (tx, rx) = std::sync::mpsc::channel();
        pool.spawn(move || tx.send(7).unwrap());
        assert_eq!(
            rx.recv_timeout(std::time::Duration::from_secs(20)).unwrap(),
            7
        );
    })
    .join()
    .unwrap();
}
