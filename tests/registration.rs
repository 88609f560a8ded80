//! Registration is free (issue 26): under the shipped default (`partita serve` with no
//! configuration, so every runnable thread of the system that is not an application's is
//! outside load), a program that starts right after another one exits gets its full demand
//! in its first allocation when nothing else runs. Before, the outside-load estimate still
//! counted the departed process for a few hundred milliseconds (a managed one's whole CPU
//! time, since its ticks left the known sum; an unmanaged one's through the gate's average
//! and the newcomer's own threads, outside ones until it registered), and a 60 ms program
//! started on one CPU of two.
//!
//! Assertions are on the manager's counters (allocations published, sampling rounds) and the
//! probe's own report of every target change it saw; the only times are generous timeouts.

mod support;

use std::time::Duration;
use support::{at_nice, probe, serial, serve, spawn_at, status, wait_for_status, Proc, TempDir};

const LONG: Duration = Duration::from_secs(10);
/// The shipped default, with a short hello timeout for the test's own status requests.
const DEFAULT: &str = "hello_timeout_ms = 500\n";

/// `probe`'s first allocation is its whole pool of 2: its first published allocation (seen
/// as `allocations == 1` in the status) says 2, and the probe never saw its target below 2
/// until then.
fn first_allocation_is_full(socket: &std::path::Path, p: &Proc) {
    let mut first = None;
    assert!(
        wait_for_status(socket, LONG, |s| {
            first = s
                .app_by_pid(p.pid())
                .filter(|a| a.allocations >= 1)
                .cloned();
            first.is_some()
        })
        .is_some(),
        "the probe was never allocated: {:?}",
        status(socket)
    );
    let first = first.expect("seen above");
    let lowered = |p: &Proc| {
        p.lines
            .lock()
            .unwrap()
            .iter()
            .find(|(_, l)| l.starts_with("active=") && !l.contains("target=2"))
            .map(|(_, l)| l.clone())
    };
    if first.allocations == 1 {
        assert_eq!(
            first.target, 2,
            "first allocation below the demand: {first:?}"
        );
    }
    // Whether or not the first snapshot caught the first allocation, the probe reports every
    // target it applied: none below 2 so far. On failure, the manager's view now (a later
    // allocation that lowered it shows as `allocations` above the first snapshot's) and every
    // line the probe printed, with its times.
    if let Some(line) = lowered(p) {
        let now = status(socket);
        let lines = p.lines.lock().unwrap().clone();
        panic!(
            "the newcomer was lowered ({line}): first snapshot {first:?}; now {:?} \
             (samples {}, reallocations {}); the probe's lines: {lines:?}",
            now.app_by_pid(p.pid()),
            now.samples,
            now.reallocations
        );
    }
}

/// Two unmanaged busy loops use both CPUs, seen by the manager as outside load; they are
/// killed and 10 ms later a program registers.
#[test]
fn a_program_started_right_after_an_unmanaged_one_exits_gets_its_demand() {
    let _g = serial();
    let dir = TempDir::new("after-unmanaged");
    let (_mgr, socket) = serve(&dir, DEFAULT);
    if status(&socket).cpus_managed < 2 {
        return;
    }
    // At nice 0 whatever the test command's own nice: niced loops are background, not
    // outside load (tests/niced.rs), and the manager would never count these.
    let hogs: Option<Vec<Proc>> = (0..2)
        .map(|_| spawn_at(0, at_nice(0).args(["sh", "-c", "while :; do :; done"])))
        .collect();
    let Some(hogs) = hogs else {
        return;
    };
    assert!(
        wait_for_status(&socket, LONG, |s| s.partitions[0].uncontrolled_runnable
            >= 1)
        .is_some(),
        "the manager never saw the busy loops: {:?}",
        status(&socket)
    );
    drop(hogs); // SIGKILL and reap
    std::thread::sleep(Duration::from_millis(10));
    let next = probe(&socket, "next", 2, 2);
    first_allocation_is_full(&socket, &next);
}

/// A managed program runs at full demand, is killed, and 10 ms later another registers.
#[test]
fn a_program_started_right_after_a_managed_one_exits_gets_its_demand() {
    let _g = serial();
    let dir = TempDir::new("after-managed");
    let (_mgr, socket) = serve(&dir, DEFAULT);
    if status(&socket).cpus_managed < 2 {
        return;
    }
    let mut before = probe(&socket, "before", 2, 2);
    let s0 = status(&socket).samples;
    assert!(
        wait_for_status(&socket, LONG, |s| {
            s.samples >= s0 + 4 && s.app_by_pid(before.pid()).is_some()
        })
        .is_some(),
        "the first program never registered"
    );
    before.kill();
    std::thread::sleep(Duration::from_millis(10));
    let next = probe(&socket, "next", 2, 2);
    first_allocation_is_full(&socket, &next);
}
