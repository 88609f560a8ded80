//! rayon-core 1.13 parity. The same test bodies are instantiated twice by a macro: once on
//! rayon-core itself (the reference) and once on partita-runtime. Each body names every public
//! item of rayon-core — with its exact signature where a function-pointer coercion can state
//! it — so a missing or differently typed item is a compile error, and both instantiations must
//! pass, so a behaviour that differs from rayon-core (results, error messages, Debug output,
//! panics, aborts, environment variables) fails on the partita side.
//!
//! Aborting behaviours (a panic with no handler to take it) and environment variables are
//! checked in a child process: this test binary re-runs itself with `--ignored --exact`.
#![allow(deprecated)] // Configuration, initialize, ThreadPool::new, breadth_first are covered.

use std::process::Command;

/// Runs the ignored test `name` in a child process with `env`; returns its exit status.
fn run_child(name: &str, env: &[(&str, &str)]) -> std::process::ExitStatus {
    let mut cmd = Command::new(std::env::current_exe().expect("test binary path"));
    cmd.args(["--ignored", "--exact", name, "--test-threads=1"]);
    cmd.env_remove("RAYON_NUM_THREADS")
        .env_remove("RAYON_RS_NUM_CPUS");
    cmd.env("PARTITA", "off"); // the child must not depend on a manager being around
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    cmd.status().expect("spawn the test binary")
}

fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// `Debug` text with the pool ids (`addr: <address>`, different on every run) replaced by `_`.
fn mask_ids(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find(|c: char| c.is_ascii_digit()) {
        let (head, tail) = rest.split_at(i);
        let end = tail
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(tail.len());
        let key_is_id = head.ends_with("addr: ");
        out.push_str(head);
        out.push_str(if key_is_id { "_" } else { &tail[..end] });
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

macro_rules! parity_tests {
    ($krate:ident) => {
        mod $krate {
            use super::{cpus, mask_ids, run_child};
            use ::$krate as rc;
            use rc::{
                BroadcastContext, Configuration, FnContext, Scope, ScopeFifo, ThreadBuilder,
                ThreadPool, ThreadPoolBuildError, ThreadPoolBuilder, Yield,
            };
            use std::error::Error;
            use std::io;
            use std::sync::atomic::{AtomicUsize, Ordering};
            use std::sync::mpsc::channel;
            use std::sync::{Arc, Mutex};
            use std::thread;

            const CRATE: &str = stringify!($krate);

            fn pool(n: usize) -> ThreadPool {
                ThreadPoolBuilder::new().num_threads(n).build().unwrap()
            }

            /// Every non-generic item, with its signature.
            #[test]
            fn signatures() {
                let _: fn() -> usize = rc::max_num_threads;
                let _: fn() -> usize = rc::current_num_threads;
                let _: fn() -> Option<usize> = rc::current_thread_index;
                let _: fn() -> Option<bool> = rc::current_thread_has_pending_tasks;
                let _: fn() -> Option<Yield> = rc::yield_now;
                let _: fn() -> Option<Yield> = rc::yield_local;
                let _: fn(Configuration) -> Result<(), Box<dyn Error>> = rc::initialize;
                let _: fn() -> ThreadPoolBuilder = ThreadPoolBuilder::new;
                let _: fn() -> ThreadPoolBuilder = <ThreadPoolBuilder as Default>::default;
                let _: fn(ThreadPoolBuilder) -> Result<ThreadPool, ThreadPoolBuildError> =
                    ThreadPoolBuilder::build;
                let _: fn(ThreadPoolBuilder) -> Result<(), ThreadPoolBuildError> =
                    ThreadPoolBuilder::build_global;
                let _: fn(ThreadPoolBuilder, usize) -> ThreadPoolBuilder =
                    ThreadPoolBuilder::num_threads;
                let _: fn(ThreadPoolBuilder, usize) -> ThreadPoolBuilder =
                    ThreadPoolBuilder::stack_size;
                let _: fn(ThreadPoolBuilder) -> ThreadPoolBuilder =
                    ThreadPoolBuilder::use_current_thread;
                let _: fn(ThreadPoolBuilder) -> ThreadPoolBuilder =
                    ThreadPoolBuilder::breadth_first;
                let _: fn(&ThreadPool) -> usize = ThreadPool::current_num_threads;
                let _: fn(&ThreadPool) -> Option<usize> = ThreadPool::current_thread_index;
                let _: fn(&ThreadPool) -> Option<bool> =
                    ThreadPool::current_thread_has_pending_tasks;
                let _: fn(&ThreadPool) -> Option<Yield> = ThreadPool::yield_now;
                let _: fn(&ThreadPool) -> Option<Yield> = ThreadPool::yield_local;
                let _: fn(Configuration) -> Result<ThreadPool, Box<dyn Error>> = ThreadPool::new;
                let _: fn() -> Configuration = Configuration::new;
                let _: fn() -> Configuration = <Configuration as Default>::default;
                let _: fn(Configuration) -> Result<ThreadPool, Box<dyn Error>> =
                    Configuration::build;
                let _: fn(Configuration, usize) -> Configuration = Configuration::num_threads;
                let _: fn(Configuration, usize) -> Configuration = Configuration::stack_size;
                let _: fn(Configuration) -> Configuration = Configuration::breadth_first;
                let _: fn(&ThreadBuilder) -> usize = ThreadBuilder::index;
                let _: fn(&ThreadBuilder) -> Option<&str> = ThreadBuilder::name;
                let _: fn(&ThreadBuilder) -> Option<usize> = ThreadBuilder::stack_size;
                let _: fn(ThreadBuilder) = ThreadBuilder::run;
                let _: fn(&FnContext) -> bool = FnContext::migrated;
                let _: for<'a> fn(&'a BroadcastContext<'static>) -> usize =
                    BroadcastContext::index;
                let _: for<'a> fn(&'a BroadcastContext<'static>) -> usize =
                    BroadcastContext::num_threads;
                // Trait impls rayon-core has.
                fn is_error<E: Error + Send + Sync + 'static>() {}
                fn is_debug<T: std::fmt::Debug + ?Sized>() {}
                fn is_send_sync<T: Send + Sync + ?Sized>() {}
                fn is_send<T: Send + ?Sized>() {}
                is_error::<ThreadPoolBuildError>();
                is_debug::<ThreadPool>();
                is_debug::<ThreadPoolBuilder>();
                is_debug::<Configuration>();
                is_debug::<ThreadBuilder>();
                is_debug::<FnContext>();
                is_debug::<BroadcastContext<'_>>();
                is_debug::<Scope<'_>>();
                is_debug::<ScopeFifo<'_>>();
                is_send_sync::<ThreadPool>();
                is_send_sync::<Scope<'_>>();
                is_send_sync::<ScopeFifo<'_>>();
                is_send::<ThreadBuilder>();
                let y: Yield = Yield::Executed;
                let copy = y; // Copy + Eq
                assert!(copy == Yield::Executed && y != Yield::Idle);
                assert_eq!(format!("{:?}/{:?}", Yield::Executed, Yield::Idle), "Executed/Idle");
                assert!(rc::max_num_threads() >= 256);
            }

            #[test]
            fn free_functions_outside_and_inside_a_pool() {
                assert_eq!(rc::current_thread_index(), None);
                assert_eq!(rc::current_thread_has_pending_tasks(), None);
                assert_eq!(rc::yield_now(), None);
                assert_eq!(rc::yield_local(), None);
                let p = pool(3);
                assert_eq!(p.current_num_threads(), 3);
                assert_eq!(p.install(rc::current_num_threads), 3);
                assert!(p.install(rc::current_thread_index).unwrap() < 3);
                assert_eq!(p.current_thread_index(), None);
                assert_eq!(p.current_thread_has_pending_tasks(), None);
                assert_eq!(p.yield_now(), None);
                assert_eq!(p.yield_local(), None);
                // A second pool's worker is not a worker of `p`.
                let other = pool(1);
                assert_eq!(other.install(|| p.current_thread_index()), None);
                assert_eq!(other.install(|| other.current_thread_index()), Some(0));
            }

            #[test]
            fn pending_tasks_and_yield() {
                let p = pool(1);
                let ran = Arc::new(AtomicUsize::new(0));
                let r = Arc::clone(&ran);
                let seen = p.install(move || {
                    let r2 = Arc::clone(&r);
                    rc::spawn(move || {
                        r2.fetch_add(1, Ordering::SeqCst);
                    });
                    let before = rc::current_thread_has_pending_tasks();
                    let y1 = rc::yield_local();
                    let after = rc::current_thread_has_pending_tasks();
                    let y2 = rc::yield_now();
                    (before, y1, after, y2, r.load(Ordering::SeqCst))
                });
                let expect = (Some(true), Some(Yield::Executed), Some(false), Some(Yield::Idle), 1);
                assert_eq!(seen, expect);
                assert_eq!(ran.load(Ordering::SeqCst), 1);
            }

            #[test]
            fn join_and_join_context() {
                assert_eq!(rc::join(|| 1, || "b"), (1, "b"));
                // From outside any pool the call is injected: oper_a runs migrated.
                let (a, _) = rc::join_context(|c: FnContext| c.migrated(), |_| ());
                assert!(a);
                // Inside a 1-worker pool nothing can be stolen: neither side migrates.
                let p = pool(1);
                let ab = p.install(|| rc::join_context(|a| a.migrated(), |b| b.migrated()));
                assert_eq!(ab, (false, false));
                assert_eq!(p.join(|| 2, || 3), (2, 3));
                assert!(format!("{:?}", p.install(|| rc::join_context(|a| format!("{a:?}"), |_| ())).0)
                    .contains("FnContext"));
            }

            #[test]
            fn scopes() {
                let p = pool(2);
                let mut v = vec![0; 4];
                p.scope(|s: &Scope<'_>| {
                    for (i, x) in v.iter_mut().enumerate() {
                        s.spawn(move |_| *x = i + 1);
                    }
                });
                assert_eq!(v, [1, 2, 3, 4]);
                let order = Mutex::new(Vec::new());
                let one = pool(1);
                one.scope_fifo(|s: &ScopeFifo<'_>| {
                    for i in 0..5 {
                        let order = &order;
                        s.spawn_fifo(move |_| order.lock().unwrap().push(i));
                    }
                });
                assert_eq!(*order.lock().unwrap(), [0, 1, 2, 3, 4]);
                let hits = AtomicUsize::new(0);
                p.in_place_scope(|s| {
                    s.spawn_broadcast(|_, ctx| {
                        assert_eq!(ctx.num_threads(), 2);
                        hits.fetch_add(1, Ordering::SeqCst);
                    })
                });
                p.in_place_scope_fifo(|s| {
                    s.spawn_broadcast(|_, _| {
                        hits.fetch_add(1, Ordering::SeqCst);
                    })
                });
                assert_eq!(hits.load(Ordering::SeqCst), 4);
                let x = rc::scope(|s| {
                    s.spawn(|_| {});
                    format!("{s:?}").contains("Scope")
                });
                assert!(x);
                let y = rc::scope_fifo(|s| format!("{s:?}").contains("ScopeFifo"));
                assert!(y);
                let mut z = 0;
                rc::in_place_scope(|s| s.spawn(|_| z += 1));
                rc::in_place_scope_fifo(|s| s.spawn_fifo(|_| z += 1));
                assert_eq!(z, 2);
                assert_eq!(p.install(|| rc::in_place_scope(|_| rc::current_thread_index())).is_some(), true);
            }

            #[test]
            fn spawns_and_broadcasts() {
                let p = pool(3);
                let (tx, rx) = channel();
                let t = tx.clone();
                p.spawn(move || t.send("spawn").unwrap());
                let t = tx.clone();
                p.spawn_fifo(move || t.send("spawn_fifo").unwrap());
                let t = tx.clone();
                rc::spawn(move || t.send("rc::spawn").unwrap());
                let t = tx.clone();
                rc::spawn_fifo(move || t.send("rc::spawn_fifo").unwrap());
                let mut got: Vec<_> = rx.iter().take(4).collect();
                got.sort();
                assert_eq!(got, ["rc::spawn", "rc::spawn_fifo", "spawn", "spawn_fifo"]);
                let v = p.broadcast(|ctx: BroadcastContext<'_>| (ctx.index(), ctx.num_threads()));
                assert_eq!(v, [(0, 3), (1, 3), (2, 3)]);
                let v = p.install(|| rc::broadcast(|ctx| ctx.index()));
                assert_eq!(v, [0, 1, 2]);
                let d = p.broadcast(|ctx| format!("{ctx:?}"));
                assert_eq!(
                    mask_ids(&d[1]),
                    "BroadcastContext { index: 1, num_threads: 3, pool_id: RegistryId { addr: _ } }"
                );
                let (tx, rx) = channel();
                let t = tx.clone();
                p.spawn_broadcast(move |ctx| t.send(ctx.index()).unwrap());
                p.install(|| rc::spawn_broadcast(move |ctx| tx.send(ctx.index() + 10).unwrap()));
                let mut got: Vec<_> = rx.iter().take(6).collect();
                got.sort();
                assert_eq!(got, [0, 1, 2, 10, 11, 12]);
                assert_eq!(rc::broadcast(|ctx| ctx.num_threads()).len(), rc::current_num_threads());
            }

            #[test]
            fn broadcasts_between_two_pools_do_not_deadlock() {
                // A worker of pool1 waiting for pool2's broadcast must still run its copy of
                // pool1's broadcast (rayon-core waits by running its own pool's jobs).
                let count = AtomicUsize::new(0);
                let (pool1, pool2) = (pool(2), pool(3));
                pool1.install(|| {
                    pool2.broadcast(|_| {
                        pool1.broadcast(|_| count.fetch_add(1, Ordering::Relaxed));
                    })
                });
                assert_eq!(count.into_inner(), 2 * 3);
            }

            #[test]
            fn builder_options_and_handlers() {
                let started = Arc::new(AtomicUsize::new(0));
                let exited = Arc::new(AtomicUsize::new(0));
                let (s, e) = (Arc::clone(&started), Arc::clone(&exited));
                let p = ThreadPoolBuilder::new()
                    .num_threads(2)
                    .thread_name(|i| format!("parity-{i}"))
                    .stack_size(1 << 20)
                    .start_handler(move |_| {
                        s.fetch_add(1, Ordering::SeqCst);
                    })
                    .exit_handler(move |_| {
                        e.fetch_add(1, Ordering::SeqCst);
                    })
                    .build()
                    .unwrap();
                let names = p.broadcast(|_| thread::current().name().unwrap().to_owned());
                assert_eq!(names, ["parity-0", "parity-1"]);
                assert_eq!(started.load(Ordering::SeqCst), 2);
                drop(p);
                while exited.load(Ordering::SeqCst) < 2 {
                    thread::yield_now();
                }
                let bf = ThreadPoolBuilder::new().num_threads(1).breadth_first().build().unwrap();
                assert_eq!(bf.install(|| rc::join(|| 1, || 2)), (1, 2));
                // num_threads(0) means "the default", exactly as no call at all.
                let zero = ThreadPoolBuilder::new().num_threads(0).build().unwrap();
                let default = ThreadPoolBuilder::new().build().unwrap();
                assert_eq!(zero.current_num_threads(), default.current_num_threads());
                assert!(zero.current_num_threads() >= 1);
            }

            #[test]
            fn debug_output() {
                let b = ThreadPoolBuilder::new().num_threads(2).thread_name(|i| i.to_string());
                assert_eq!(
                    format!("{b:?}"),
                    "ThreadPoolBuilder { num_threads: 2, use_current_thread: false, \
                     get_thread_name: Some(<closure>), panic_handler: None, stack_size: None, \
                     start_handler: None, exit_handler: None, breadth_first: false }"
                );
                let c = Configuration::new().num_threads(3);
                assert!(format!("{c:?}").starts_with("ThreadPoolBuilder { num_threads: 3,"));
                let p = pool(2);
                assert_eq!(mask_ids(&format!("{p:?}")), "ThreadPool { num_threads: 2, id: RegistryId { addr: _ } }");
                let seen = Mutex::new(Vec::new());
                let p = ThreadPoolBuilder::new()
                    .num_threads(1)
                    .thread_name(|i| format!("t{i}"))
                    .spawn_handler(|t: ThreadBuilder| {
                        seen.lock().unwrap().push(mask_ids(&format!("{t:?}")));
                        thread::spawn(|| t.run());
                        Ok(())
                    })
                    .build()
                    .unwrap();
                drop(p);
                assert_eq!(
                    *seen.lock().unwrap(),
                    ["ThreadBuilder { pool: RegistryId { addr: _ }, index: 0, name: Some(\"t0\"), \
                      stack_size: None }"]
                );
            }

            #[test]
            fn spawn_handler_and_its_errors() {
                let handles = Mutex::new(Vec::new());
                let p = ThreadPoolBuilder::new()
                    .num_threads(3)
                    .stack_size(2 << 20)
                    .spawn_handler(|t| {
                        assert_eq!(t.stack_size(), Some(2 << 20));
                        assert_eq!(t.name(), None);
                        let i = t.index();
                        handles.lock().unwrap().push((i, thread::spawn(|| t.run())));
                        Ok(())
                    })
                    .build()
                    .unwrap();
                assert_eq!(p.install(|| rc::current_num_threads()), 3);
                drop(p);
                let hs = std::mem::take(&mut *handles.lock().unwrap());
                assert_eq!(hs.iter().map(|h| h.0).collect::<Vec<_>>(), [0, 1, 2]);
                for (_, h) in hs {
                    h.join().unwrap(); // workers exit once the pool is dropped
                }
                // An error from the handler is the build error; workers already started exit.
                let started = Mutex::new(Vec::new());
                let err = ThreadPoolBuilder::new()
                    .num_threads(3)
                    .spawn_handler(|t| {
                        if t.index() == 2 {
                            return Err(io::Error::new(io::ErrorKind::Other, "no more threads"));
                        }
                        started.lock().unwrap().push(thread::spawn(|| t.run()));
                        Ok(())
                    })
                    .build()
                    .unwrap_err();
                assert_eq!(err.to_string(), "no more threads");
                assert_eq!(err.source().unwrap().to_string(), "no more threads");
                assert!(format!("{err:?}").contains("no more threads"));
                for h in std::mem::take(&mut *started.lock().unwrap()) {
                    h.join().unwrap();
                }
            }

            #[test]
            fn build_scoped_borrows_and_joins() {
                let data = vec![1, 2, 3];
                let exited = AtomicUsize::new(0);
                let wrapped = AtomicUsize::new(0);
                let sum = ThreadPoolBuilder::new()
                    .num_threads(2)
                    .build_scoped(
                        |t| {
                            wrapped.fetch_add(1, Ordering::SeqCst);
                            t.run();
                            exited.fetch_add(1, Ordering::SeqCst);
                        },
                        |p| p.install(|| data.iter().sum::<i32>()),
                    )
                    .unwrap();
                assert_eq!(sum, 6);
                // build_scoped returns only after every worker thread has returned from run().
                assert_eq!(wrapped.load(Ordering::SeqCst), 2);
                assert_eq!(exited.load(Ordering::SeqCst), 2);
            }

            #[test]
            fn use_current_thread_and_second_pool_on_it() {
                thread::spawn(|| {
                    let p = ThreadPoolBuilder::new()
                        .num_threads(2)
                        .use_current_thread()
                        .build()
                        .unwrap();
                    assert_eq!(rc::current_thread_index(), Some(0));
                    assert_eq!(p.current_thread_index(), Some(0));
                    let err = ThreadPoolBuilder::new()
                        .num_threads(2)
                        .use_current_thread()
                        .build()
                        .unwrap_err();
                    assert_eq!(
                        err.to_string(),
                        "The current thread is already part of another thread pool."
                    );
                    assert!(err.source().is_none());
                    assert_eq!(p.join(|| 1, || 2), (1, 2));
                })
                .join()
                .unwrap();
            }

            #[test]
            fn global_pool_second_build_fails_exactly() {
                // Whether or not another test already created the global pool, the second
                // build_global (and the deprecated initialize) must fail the same way.
                let _ = ThreadPoolBuilder::new().build_global();
                let err = ThreadPoolBuilder::new().num_threads(1).build_global().unwrap_err();
                assert_eq!(err.to_string(), "The global thread pool has already been initialized.");
                assert!(err.source().is_none());
                let err = rc::initialize(Configuration::new()).unwrap_err();
                assert_eq!(err.to_string(), "The global thread pool has already been initialized.");
                assert!(rc::current_num_threads() >= 1);
            }

            #[test]
            fn deprecated_configuration() {
                let p = ThreadPool::new(
                    Configuration::new()
                        .num_threads(2)
                        .thread_name(|i| format!("cfg-{i}"))
                        .stack_size(1 << 20)
                        .breadth_first()
                        .start_handler(|_| {})
                        .exit_handler(|_| {})
                        .panic_handler(|_| {}),
                )
                .unwrap();
                assert_eq!(p.current_num_threads(), 2);
                let n = p.broadcast(|_| thread::current().name().unwrap().to_owned());
                assert_eq!(n, ["cfg-0", "cfg-1"]);
                let p = Configuration::default().num_threads(1).build().unwrap();
                assert_eq!(p.install(|| 5), 5);
            }

            #[test]
            fn panics_propagate_like_rayon_core() {
                let p = pool(2);
                let payload = |r: thread::Result<()>| {
                    let e = r.unwrap_err();
                    e.downcast_ref::<&str>().map(|s| s.to_string()).unwrap_or_default()
                };
                let catch = |f: &dyn Fn()| std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
                assert_eq!(payload(catch(&|| p.install(|| panic!("in install")))), "in install");
                assert_eq!(payload(catch(&|| {
                    p.join(|| (), || panic!("in join b"));
                })), "in join b");
                // join waits for the other side before re-raising: b still ran.
                let b_ran = AtomicUsize::new(0);
                let r = catch(&|| {
                    p.join(|| panic!("a"), || {
                        b_ran.fetch_add(1, Ordering::SeqCst);
                    });
                });
                assert_eq!(payload(r), "a");
                assert_eq!(b_ran.load(Ordering::SeqCst), 1);
                // A scope re-raises a task's panic after all its tasks have run.
                let ran = AtomicUsize::new(0);
                let r = catch(&|| {
                    p.scope(|s| {
                        s.spawn(|_| panic!("in scope"));
                        for _ in 0..10 {
                            s.spawn(|_| {
                                ran.fetch_add(1, Ordering::SeqCst);
                            });
                        }
                    })
                });
                assert_eq!(payload(r), "in scope");
                assert_eq!(ran.load(Ordering::SeqCst), 10);
                let r = catch(&|| {
                    p.broadcast(|ctx| {
                        if ctx.index() == 1 {
                            panic!("in broadcast")
                        }
                    });
                });
                assert_eq!(payload(r), "in broadcast");
                // The pool survives all of that.
                assert_eq!(p.join(|| 1, || 2), (1, 2));
            }

            #[test]
            fn panic_handler_receives_task_and_start_handler_panics() {
                let (tx, rx) = channel::<String>();
                let tx = Mutex::new(tx);
                let p = ThreadPoolBuilder::new()
                    .num_threads(2)
                    .panic_handler(move |e| {
                        let s = e.downcast_ref::<&str>().map_or("?".into(), |s| s.to_string());
                        tx.lock().unwrap().send(s).unwrap();
                    })
                    .start_handler(|i| {
                        if i == 1 {
                            panic!("start 1")
                        }
                    })
                    .build()
                    .unwrap();
                p.spawn(|| panic!("spawned"));
                p.spawn_broadcast(|ctx| {
                    if ctx.index() == 0 {
                        panic!("broadcast 0")
                    }
                });
                let mut got: Vec<String> = rx.iter().take(3).collect();
                got.sort();
                assert_eq!(got, ["broadcast 0", "spawned", "start 1"]);
                assert_eq!(p.install(|| 7), 7);
            }

            // ---- child processes: aborts and environment variables -------------------------

            fn child(name: &str, env: &[(&str, &str)]) -> std::process::ExitStatus {
                run_child(&format!("{CRATE}::{name}"), env)
            }

            fn aborted(status: std::process::ExitStatus) -> bool {
                use std::os::unix::process::ExitStatusExt;
                status.signal() == Some(libc::SIGABRT)
            }

            #[test]
            fn panic_without_handler_aborts() {
                assert!(aborted(child("child_spawn_panics", &[])));
                assert!(aborted(child("child_handler_panics", &[])));
                assert!(aborted(child("child_exit_handler_panics", &[])));
                assert!(child("child_env", &[("EXPECT", "1"), ("RAYON_NUM_THREADS", "1")]).success());
            }

            #[test]
            #[ignore = "child process of panic_without_handler_aborts"]
            fn child_spawn_panics() {
                let p = pool(1);
                p.spawn(|| panic!("no handler"));
                thread::sleep(std::time::Duration::from_secs(10));
            }

            #[test]
            #[ignore = "child process of panic_without_handler_aborts"]
            fn child_handler_panics() {
                let p = ThreadPoolBuilder::new()
                    .num_threads(1)
                    .panic_handler(|_| panic!("handler too"))
                    .build()
                    .unwrap();
                p.spawn(|| panic!("task"));
                thread::sleep(std::time::Duration::from_secs(10));
            }

            #[test]
            #[ignore = "child process of panic_without_handler_aborts"]
            fn child_exit_handler_panics() {
                let p = ThreadPoolBuilder::new()
                    .num_threads(1)
                    .exit_handler(|_| panic!("exit"))
                    .build()
                    .unwrap();
                drop(p);
                thread::sleep(std::time::Duration::from_secs(10));
            }

            #[test]
            fn environment_sets_the_default_size() {
                let n = cpus().to_string();
                let cases: &[(&[(&str, &str)], &str)] = &[
                    (&[("RAYON_NUM_THREADS", "3")], "3"),
                    (&[("RAYON_NUM_THREADS", "0")], &n),
                    (&[("RAYON_NUM_THREADS", "x"), ("RAYON_RS_NUM_CPUS", "2")], "2"),
                    (&[("RAYON_RS_NUM_CPUS", "5")], "5"),
                    (&[("RAYON_RS_NUM_CPUS", "0")], &n),
                    (&[("RAYON_NUM_THREADS", "3"), ("RAYON_RS_NUM_CPUS", "5")], "3"),
                    (&[("RAYON_NUM_THREADS", "0"), ("RAYON_RS_NUM_CPUS", "5")], &n),
                ];
                for (env, expect) in cases {
                    let mut env = env.to_vec();
                    env.push(("EXPECT", expect));
                    assert!(child("child_env", &env).success(), "{CRATE}: {env:?}");
                }
            }

            #[test]
            #[ignore = "child process of environment_sets_the_default_size"]
            fn child_env() {
                let expect: usize = std::env::var("EXPECT").unwrap().parse().unwrap();
                assert_eq!(pool(0).current_num_threads(), expect);
                assert_eq!(ThreadPoolBuilder::new().build().unwrap().current_num_threads(), expect);
                assert_eq!(rc::current_num_threads(), expect); // the global pool
                // An explicit size wins over the environment.
                assert_eq!(pool(2).current_num_threads(), 2);
            }
        }
    };
}

parity_tests!(rayon_core);
parity_tests!(partita_runtime);
