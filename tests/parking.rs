//! The worker that parks is the one with nothing to lose (issue 26): four copies of a program
//! whose main loop `install`s tiny `scope`s into a pool of 2, thousands of phases each, run
//! together under `partita serve` with the shipped default configuration. The manager gives
//! each copy fewer workers than its pool; when the target excluded the worker that ran the
//! copy's loop, that worker used to park at every wait of its own job and be woken for the
//! next step: 19,328 parks in one 0.4 s copy. Now an included worker between jobs parks in
//! its place, so parks follow the copy's allocation changes, not its phases.
//!
//! Each copy is this test binary re-run as `tiny_phases_child`; it prints its pool's counts.
//! The bounds are counts (parks against phases and target changes), never times.

mod support;

use std::process::Command;
use std::time::Duration;
use support::{field, serial, serve, Proc, TempDir};

/// Set in a copy's environment: how many phases it runs.
const CHILD_ENV: &str = "PARTITA_TINY_PHASES";
const PHASES: u64 = 4000;
const COPIES: usize = 4;

#[test]
fn four_tiny_phase_copies_park_with_their_allocation_not_their_phases() {
    let _g = serial();
    let dir = TempDir::new("parking");
    let (_mgr, socket) = serve(&dir, "hello_timeout_ms = 500\n");
    let copies: Vec<Proc> = (0..COPIES)
        .map(|i| {
            Proc::spawn(
                Command::new(std::env::current_exe().expect("test binary"))
                    .args(["tiny_phases_child", "--exact", "--ignored", "--nocapture"])
                    .env(CHILD_ENV, PHASES.to_string())
                    .env("PARTITA_SOCKET", &socket)
                    .env("PARTITA_NAME", format!("tiny{i}")),
            )
        })
        .collect();
    let mut lowered = 0;
    for c in &copies {
        let (_, line) = c
            .wait_line(0, Duration::from_secs(300), |l| l.starts_with("phases="))
            .expect("a copy did not finish");
        println!("{line}");
        let parks = field(&line, "parks").unwrap();
        let changes = field(&line, "target_changes").unwrap();
        assert_eq!(field(&line, "phases"), Some(PHASES), "{line}");
        lowered += u64::from(changes > 0);
        // Two parks per allocation change it saw (the worker that leaves, and at most one
        // hand-over while a partner takes its job), and a few while it registers and ends.
        assert!(
            parks <= 2 * changes + 20,
            "a copy parked with its phases, not its allocation: {line}"
        );
    }
    // Four copies of 2 workers on this machine's CPUs: the manager lowered some copy, or
    // the bound above tested nothing.
    let cpus = partita_manager::sys::get_affinity(0).unwrap().len();
    if cpus < 2 * COPIES {
        assert!(lowered > 0, "no copy's target ever changed");
    }
}

/// One copy (run by the test above in a child process; does nothing otherwise): a pool of 2
/// registered with the manager, whose one `install` loops over phases, each a `scope` of four
/// 20 µs tasks.
#[test]
#[ignore = "a child process of four_tiny_phase_copies_park_with_their_allocation_not_their_phases"]
fn tiny_phases_child() {
    let Some(phases) = std::env::var(CHILD_ENV)
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    else {
        return;
    };
    let pool = partita_runtime::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .expect("pool");
    // The whole loop in one `install`: one worker runs it from start to end, whatever the
    // manager does meanwhile.
    let done = pool.install(|| {
        let mut done = 0;
        for _ in 0..phases {
            partita_runtime::scope(|s| {
                for _ in 0..4 {
                    s.spawn(|_| spin(Duration::from_micros(20)));
                }
            });
            done += 1;
        }
        done
    });
    let s = pool.stats();
    println!(
        "phases={done} parks={} unparks={} target_changes={}",
        s.parks, s.unparks, s.target_changes
    );
}

fn spin(d: Duration) {
    let t = std::time::Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}
