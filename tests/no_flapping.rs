//! No flapping under a real manager: a program that loops over short regions (a `scope` of a
//! few spinning tasks, then a short pause, again and again) runs beside a busy application
//! under `partita serve`. Its pool's demand is a runnable average over a window longer than
//! a region (`crates/runtime/src/control/demand.rs`), so the allocation it receives settles
//! and stays put. The test counts the target changes the looping pool receives while it runs:
//! with a demand that fell to 0 whenever a region ended, the manager moved a CPU back and
//! forth at the rate of the regions (hundreds of changes in the measured seconds).
//!
//! The looping program runs as a child process (this test binary re-run with
//! `looping_child`), so its pool registers with the manager like any application's.

mod support;

use std::process::Command;
use std::time::{Duration, Instant};
use support::{field, probe, serial, serve, Proc, TempDir, TRACKED};

/// Set in the child's environment: the measured seconds.
const CHILD_ENV: &str = "PARTITA_NO_FLAPPING_CHILD";
/// Before measuring: the pool has followed the manager's first allocation below its size
/// (an event, however long a loaded machine takes to get there), then this long for the
/// allocations to settle.
const WARM_UP: Duration = Duration::from_millis(1500);
/// The longest the child waits for that first allocation.
const REGISTER_WAIT: Duration = Duration::from_secs(30);
const MEASURED_SECS: f64 = 3.0;
/// Target changes allowed in the measured seconds: a few settling steps (the demand's hold
/// is 100 ms, the manager's period 300 ms), far below the rate of the regions (~300/s).
const MAX_CHANGES: u64 = 8;

#[test]
fn a_loop_of_short_regions_does_not_flap_under_a_manager() {
    let _serial = serial();
    let dir = TempDir::new("no-flapping");
    let (_manager, socket) = serve(&dir, TRACKED);
    // The other application: always busy, wants both CPUs.
    let busy = probe(&socket, "busy", 2, 2);
    assert!(
        busy.wait_line(0, Duration::from_secs(10), |l| l.starts_with("ready"))
            .is_some(),
        "the busy probe did not start"
    );
    let looping = Proc::spawn(
        Command::new(std::env::current_exe().expect("test binary"))
            .args(["looping_child", "--exact", "--ignored", "--nocapture"])
            .env(CHILD_ENV, MEASURED_SECS.to_string())
            .env("PARTITA_SOCKET", &socket)
            .env("PARTITA_NAME", "looping"),
    );
    // While it runs, the manager knows it and hears its demand (it follows the manager, not
    // itself): waited for as an event, however slowly a loaded machine starts the child.
    let known = support::wait_until(Duration::from_secs(30), || {
        partita_manager::query_status(&socket)
            .ok()
            .and_then(|s| s.app_by_pid(looping.pid()).map(|a| a.demand > 0))
            .unwrap_or(false)
    });
    assert!(
        known,
        "the looping program is not registered with a demand: {:?}",
        partita_manager::query_status(&socket)
    );
    let (_, line) = looping
        .wait_line(0, Duration::from_secs(60), |l| l.starts_with("changes="))
        .expect("the looping program did not report");
    println!("{line}");
    let changes = field(&line, "changes").unwrap();
    let regions = field(&line, "regions").unwrap();
    let start_target = field(&line, "start_target").unwrap();
    // The manager decided its size: the busy program beside it wants both CPUs, so the
    // looping one holds fewer than its pool of 2 while it is measured.
    assert!(start_target < 2, "not following the manager: {line}");
    assert!(
        regions > 100,
        "too few regions ran to show anything: {line}"
    );
    assert!(
        changes <= MAX_CHANGES,
        "the looping program's allocation flapped: {line}"
    );
}

/// The looping program (run by the test above in a child process; does nothing otherwise).
#[test]
#[ignore = "the child process of a_loop_of_short_regions_does_not_flap_under_a_manager"]
fn looping_child() {
    let Some(secs) = std::env::var(CHILD_ENV)
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
    else {
        return;
    };
    let pool = std::sync::Arc::new(
        partita_runtime::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .expect("pool"),
    );
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let measuring = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // The observer: counts every change of the pool's target it sees (polled every 100 µs;
    // a change the manager makes lasts at least one of its rounds, far longer).
    let observer = {
        let (pool, stop, measuring) = (pool.clone(), stop.clone(), measuring.clone());
        std::thread::spawn(move || {
            let t0 = Instant::now();
            while pool.target_workers() >= 2 && t0.elapsed() < REGISTER_WAIT {
                std::thread::sleep(Duration::from_micros(100));
            }
            std::thread::sleep(WARM_UP);
            measuring.store(true, std::sync::atomic::Ordering::Relaxed);
            let start = pool.target_workers();
            let (mut last, mut changes) = (start, 0u64);
            let measured = Duration::from_secs_f64(secs);
            let t1 = Instant::now();
            while t1.elapsed() < measured {
                let now = pool.target_workers();
                if now != last {
                    changes += 1;
                    last = now;
                }
                std::thread::sleep(Duration::from_micros(100));
            }
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            (start, changes)
        })
    };
    let mut regions = 0u64;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        // A short region: four tasks of 200 µs, then a pause with the pool idle.
        pool.install(|| {
            partita_runtime::scope(|s| {
                for _ in 0..4 {
                    s.spawn(|_| spin(Duration::from_micros(200)));
                }
            })
        });
        if measuring.load(std::sync::atomic::Ordering::Relaxed) {
            regions += 1;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let (start, changes) = observer.join().expect("observer");
    let stats = pool.stats();
    println!(
        "changes={changes} regions={regions} start_target={start} parks={} unparks={}",
        stats.parks, stats.unparks
    );
}

fn spin(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}
