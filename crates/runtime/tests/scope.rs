//! Scopes behave as in rayon-core.

use partita_runtime::{in_place_scope, scope, scope_fifo, ThreadPoolBuilder};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

#[test]
fn scope_with_borrowed_data() {
    let mut a = vec![0u32; 100];
    let mut b = 0u64;
    scope(|s| {
        s.spawn(|_| a.iter_mut().enumerate().for_each(|(i, x)| *x = i as u32));
        s.spawn(|_| b = 42);
    });
    assert_eq!(a[99], 99);
    assert_eq!(b, 42);
}

#[test]
fn nested_scopes_count_every_task() {
    let pool = ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    let n = AtomicUsize::new(0);
    pool.scope(|s| {
        for _ in 0..10 {
            s.spawn(|_| {
                scope(|s2| {
                    for _ in 0..10 {
                        s2.spawn(|s2| {
                            n.fetch_add(1, Ordering::Relaxed);
                            s2.spawn(|_| {
                                n.fetch_add(1, Ordering::Relaxed);
                            });
                        });
                    }
                });
            });
        }
    });
    assert_eq!(n.load(Ordering::Relaxed), 200);
}

#[test]
fn scope_returns_value_of_op() {
    assert_eq!(scope(|_| 7), 7);
}

#[test]
fn panic_in_task_propagates_after_all_tasks_finished() {
    let pool = ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    let finished = AtomicUsize::new(0);
    let r = catch_unwind(AssertUnwindSafe(|| {
        pool.scope(|s| {
            s.spawn(|_| panic!("task"));
            for _ in 0..20 {
                s.spawn(|_| {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                    finished.fetch_add(1, Ordering::SeqCst);
                });
            }
        })
    }));
    assert_eq!(*r.unwrap_err().downcast_ref::<&str>().unwrap(), "task");
    assert_eq!(finished.load(Ordering::SeqCst), 20);
}

#[test]
fn panic_in_scope_op_propagates_after_tasks() {
    let finished = AtomicUsize::new(0);
    let r = catch_unwind(AssertUnwindSafe(|| {
        scope(|s| {
            s.spawn(|_| {
                std::thread::sleep(std::time::Duration::from_millis(10));
                finished.fetch_add(1, Ordering::SeqCst);
            });
            panic!("op");
        })
    }));
    assert_eq!(*r.unwrap_err().downcast_ref::<&str>().unwrap(), "op");
    assert_eq!(finished.load(Ordering::SeqCst), 1);
}

#[test]
fn spawn_fifo_order_on_one_thread() {
    let pool = ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    let order = Mutex::new(Vec::new());
    pool.scope_fifo(|s| {
        for i in 0..10 {
            let order = &order;
            s.spawn_fifo(move |_| order.lock().unwrap().push(i));
        }
    });
    assert_eq!(order.into_inner().unwrap(), (0..10).collect::<Vec<_>>());
}

#[test]
fn spawn_lifo_order_on_one_thread() {
    // Plain scope spawns run LIFO on one thread (rayon-core's documented behaviour).
    let pool = ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    let order = Mutex::new(Vec::new());
    pool.scope(|s| {
        for i in 0..10 {
            let order = &order;
            s.spawn(move |_| order.lock().unwrap().push(i));
        }
    });
    assert_eq!(
        order.into_inner().unwrap(),
        (0..10).rev().collect::<Vec<_>>()
    );
}

#[test]
fn scope_fifo_from_global() {
    let n = AtomicUsize::new(0);
    scope_fifo(|s| {
        for _ in 0..50 {
            s.spawn_fifo(|_| {
                n.fetch_add(1, Ordering::Relaxed);
            });
        }
    });
    assert_eq!(n.load(Ordering::Relaxed), 50);
}

#[test]
fn in_place_scope_runs_op_on_calling_thread() {
    let me = std::thread::current().id();
    let rc = std::rc::Rc::new(1); // not Send
    let pool = ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    let ran_on = Mutex::new(None);
    pool.in_place_scope(|s| {
        assert_eq!(std::thread::current().id(), me);
        let _ = *rc;
        s.spawn(|_| *ran_on.lock().unwrap() = std::thread::current().id().into());
    });
    // The task ran in the pool, not on this (non-pool) thread.
    assert_ne!(ran_on.into_inner().unwrap(), Some(me));
    let mut x = 0;
    in_place_scope(|s| s.spawn(|_| x = 3));
    assert_eq!(x, 3);
}

#[test]
fn in_place_scope_fifo_orders_spawns() {
    let pool = ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    let order = Mutex::new(Vec::new());
    pool.install(|| {
        partita_runtime::in_place_scope_fifo(|s| {
            for i in 0..5 {
                let order = &order;
                s.spawn_fifo(move |_| order.lock().unwrap().push(i));
            }
        })
    });
    assert_eq!(order.into_inner().unwrap(), vec![0, 1, 2, 3, 4]);
}

#[test]
fn scope_spawn_broadcast_reaches_every_worker() {
    let pool = ThreadPoolBuilder::new().num_threads(3).build().unwrap();
    let seen = Mutex::new(Vec::new());
    pool.scope(|s| {
        s.spawn_broadcast(|_, ctx| seen.lock().unwrap().push(ctx.index()));
    });
    let mut v = seen.into_inner().unwrap();
    v.sort();
    assert_eq!(v, vec![0, 1, 2]);
}

#[test]
fn panic_in_scope_fifo_task_propagates() {
    let r = catch_unwind(AssertUnwindSafe(|| {
        scope_fifo(|s| {
            s.spawn_fifo(|_| panic!("fifo task"));
            s.spawn_fifo(|_| ());
        })
    }));
    assert_eq!(*r.unwrap_err().downcast_ref::<&str>().unwrap(), "fifo task");
}

#[test]
fn panic_in_in_place_scope_task_propagates() {
    let pool = ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    let r = catch_unwind(AssertUnwindSafe(|| {
        pool.in_place_scope(|s| s.spawn(|_| panic!("in place")))
    }));
    assert_eq!(*r.unwrap_err().downcast_ref::<&str>().unwrap(), "in place");
}

#[test]
fn panic_in_scope_spawn_broadcast_propagates() {
    let pool = ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    let r = catch_unwind(AssertUnwindSafe(|| {
        pool.scope(|s| {
            s.spawn_broadcast(|_, ctx| {
                if ctx.index() == 0 {
                    panic!("broadcast in scope")
                }
            })
        })
    }));
    assert_eq!(
        *r.unwrap_err().downcast_ref::<&str>().unwrap(),
        "broadcast in scope"
    );
}
