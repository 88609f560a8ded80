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
        .process_control(crate::ProcessControl::Manual)
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
    // Exit handlers run after a worker has left its loop (as in rayon-core): wait for them.
    let start = std::time::Instant::now();
    while exited.load(Ordering::SeqCst) != 3 {
        assert!(start.elapsed() < std::time::Duration::from_secs(20));
        std::thread::yield_now();
    }
}

#[test]
fn workers_stop_after_pool_dropped_even_when_suspended() {
    let pool = ThreadPoolBuilder::new()
        .process_control(crate::ProcessControl::Manual)
        .num_threads(3)
        .build()
        .unwrap();
    pool.set_target_workers(1);
    while pool.active_workers() != 1 {
        std::thread::yield_now();
    }
    // Termination must reach suspended workers too.
    pool.wait_until_stopped();
}

#[test]
fn pool_stays_alive_for_spawned_tasks() {
    let pool = manual_pool(2);
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

// The tests below that drive the pool as the manager client does (zero quantum, demand,
// CPU sets and re-pinning, idle time) need the Linux build.
#[cfg(partita_linux)]
use crate::Need;
use std::time::{Duration, Instant};

/// A pool of `n` that only these tests' calls control (no manager).
fn manual_pool(n: usize) -> crate::ThreadPool {
    ThreadPoolBuilder::new()
        .process_control(crate::ProcessControl::Manual)
        .num_threads(n)
        .build()
        .unwrap()
}

/// Poll `cond` until it holds (a generous deadline a passing run never reaches).
fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < Duration::from_secs(20), "{what}");
        std::thread::sleep(Duration::from_micros(100));
    }
}

fn wait_active(reg: &crate::registry::Registry, n: usize) {
    eventually(&format!("active did not reach {n}"), || reg.active() == n);
}

#[test]
#[cfg(partita_linux)]
fn zero_quantum_holds_tasks_until_granted_again() {
    let pool = manual_pool(2);
    let reg = pool.registry.clone();
    reg.set_target(0, true);
    wait_active(&reg, 0);
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    pool.spawn(move || {
        r.fetch_add(1, Ordering::SeqCst);
    });
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(
        ran.load(Ordering::SeqCst),
        0,
        "a task ran during a zero quantum"
    );
    reg.set_target(1, true);
    let start = Instant::now();
    while ran.load(Ordering::SeqCst) == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "task not run after the quantum"
        );
        std::thread::yield_now();
    }
    wait_active(&reg, 1);
}

#[test]
#[cfg(partita_linux)]
fn demand_is_zero_when_idle_and_capped_by_need() {
    let pool = manual_pool(2);
    let reg = pool.registry.clone();
    // Let the workers go idle.
    let start = Instant::now();
    while reg.demand_now() != 0 {
        assert!(start.elapsed() < Duration::from_secs(20));
        std::thread::sleep(Duration::from_millis(1));
    }
    // Busy workers raise demand; Need caps it.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let s = stop.clone();
    pool.spawn_broadcast(move |_| {
        while !s.load(Ordering::Relaxed) {
            std::hint::spin_loop();
        }
    });
    let start = Instant::now();
    while reg.demand_now() < 2 {
        assert!(start.elapsed() < Duration::from_secs(20));
        std::thread::sleep(Duration::from_millis(1));
    }
    pool.set_demand(Need::Absolute(1));
    assert_eq!(reg.demand_now(), 1);
    stop.store(true, Ordering::Relaxed);
    assert!(reg.stats().tasks_run <= 2);
    assert_eq!(reg.num_threads(), 2);
}

/// A worker that the target excludes parks before it re-pins: re-pinned first, it would
/// move onto the CPUs its pool keeps, busy with its siblings, and wait there for a slice
/// before it could park (the manager holds the revoked CPU until it has).
#[test]
#[cfg(partita_linux)]
fn a_revoked_worker_parks_without_repinning() {
    use std::sync::atomic::{AtomicBool, AtomicI32};
    let cpus = |tid: i32| partita_protocol::sys::get_affinity(tid).unwrap().to_vec();
    if cpus(0).len() < 2 {
        return; // nothing to narrow
    }
    let pool = manual_pool(2);
    let reg = pool.registry.clone();
    // Hold worker 1 in a job while both changes land, so its next safe point sees both.
    let (hold, tid) = (Arc::new(AtomicBool::new(true)), Arc::new(AtomicI32::new(0)));
    let (h, t) = (hold.clone(), tid.clone());
    pool.spawn_broadcast(move |ctx| {
        if ctx.index() == 1 {
            t.store(nix::unistd::gettid().as_raw(), Ordering::SeqCst);
            while h.load(Ordering::SeqCst) {
                std::hint::spin_loop();
            }
        }
    });
    eventually("worker 1 never ran", || tid.load(Ordering::SeqCst) != 0);
    let before = cpus(tid.load(Ordering::SeqCst));
    let first = before[0];
    reg.set_cpu_set(Some(vec![first]));
    reg.set_target(1, true);
    hold.store(false, Ordering::SeqCst);
    wait_active(&reg, 1);
    assert_eq!(
        cpus(tid.load(Ordering::SeqCst)),
        before,
        "re-pinned before parking"
    );
}

#[test]
#[cfg(partita_linux)]
fn set_cpus_repins_workers_at_safe_points() {
    let pool = manual_pool(2);
    let reg = pool.registry.clone();
    let affinity = || {
        let set = partita_protocol::sys::get_affinity(0).unwrap();
        set.iter().filter(|&c| c < 4).collect::<Vec<_>>()
    };
    // Workers re-pin at their next safe point (between two jobs of their main loop), so a
    // broadcast sees the new set once every worker has passed one.
    let eventually = |want: &dyn Fn(&Vec<usize>) -> bool| {
        let start = Instant::now();
        while !pool.broadcast(|_| affinity()).iter().all(want) {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "workers never re-pinned"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    reg.set_cpu_set(Some(vec![0]));
    eventually(&|a| a == &vec![0]);
    reg.set_cpu_set(None);
    let n = std::thread::available_parallelism().unwrap().get().min(4);
    eventually(&|a| a.len() == n);
}

#[test]
#[cfg(partita_linux)]
fn workers_never_leave_the_mask_the_pool_started_with() {
    if std::thread::available_parallelism().unwrap().get() < 2 {
        return; // needs two CPUs to restrict to one
    }
    // As under `taskset -c 0`: the thread that builds the pool may use CPU 0 only.
    std::thread::spawn(|| {
        let one = std::iter::once(0).collect();
        partita_protocol::sys::set_affinity(0, &one).unwrap();
        let pool = ThreadPoolBuilder::new()
            .process_control(crate::ProcessControl::Manual)
            .num_threads(2)
            .build()
            .unwrap();
        let reg = pool.registry.clone();
        let affinity = || crate::affinity::allowed_cpus();
        let settle = |want: Vec<usize>| {
            let start = Instant::now();
            loop {
                let seen = pool.broadcast(|_| affinity());
                if seen.iter().all(|a| *a == want) {
                    return;
                }
                assert!(start.elapsed() < Duration::from_secs(20), "saw {seen:?}");
                std::thread::sleep(Duration::from_millis(1));
            }
        };
        // The manager offers CPU 1 only (outside the mask): stay on the allowed mask.
        reg.set_cpu_set(Some(vec![1]));
        settle(vec![0]);
        // The manager goes away: back to the allowed mask, not to every CPU.
        reg.set_cpu_set(Some(vec![0, 1]));
        reg.set_cpu_set(None);
        settle(vec![0]);
    })
    .join()
    .unwrap();
}

#[test]
#[cfg(partita_linux)]
fn idle_time_is_counted() {
    let pool = manual_pool(2);
    pool.install(|| ());
    std::thread::sleep(Duration::from_millis(20));
    pool.install(|| ());
    assert!(pool.registry.stats().idle_time > Duration::ZERO);
}

#[test]
fn idle_workers_fall_asleep() {
    let pool = ThreadPoolBuilder::new()
        .process_control(crate::ProcessControl::Manual)
        .num_threads(3)
        .build()
        .unwrap();
    pool.install(|| crate::join(|| (), || ()));
    // Idle workers search briefly, then all of them sleep (none left spinning).
    let start = Instant::now();
    while pool.registry.sleep.snapshot() != (3, 0) {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{:?}",
            pool.registry.sleep.snapshot()
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}
