//! Niced processes are background, not outside demand (issue 26): under the shipped default
//! (`partita serve` with no configuration, every runnable thread of the system outside load
//! when it uses CPU), a `nice -n 19` loop on every CPU beside a managed program leaves the
//! program its whole demand — without the manager the kernel gives a nice-0 program ~98 % of
//! a CPU it shares with a nice-19 one, so keeping CPUs for the loops would cost the program
//! ~2× (`crates/manager/src/daemon/outside.rs`). A managed program that is itself niced is
//! neither outside load nor a hole that hides a nice-0 loop beside it.
//!
//! Assertions are on the manager's counters (sampling rounds, published targets); the only
//! times are generous timeouts.

mod support;

use std::path::Path;
use std::time::Duration;
use support::{at_nice, serial, serve, spawn_at, status, wait_for_status, Proc, TempDir};

const LONG: Duration = Duration::from_secs(20);
/// The shipped default, with a short hello timeout for the test's own status requests.
const DEFAULT: &str = "hello_timeout_ms = 500\n";

/// `n` busy loops at nice `nice`, unmanaged.
fn loops(n: usize, nice: i64) -> Option<Vec<Proc>> {
    (0..n)
        .map(|_| {
            spawn_at(
                nice,
                at_nice(nice).args(["sh", "-c", "while :; do :; done"]),
            )
        })
        .collect()
}

/// A probe (pool 2, demand 2) at nice `nice`.
fn probe_at(socket: &Path, name: &str, nice: i64) -> Option<Proc> {
    spawn_at(
        nice,
        at_nice(nice)
            .arg(support::bin())
            .args(["probe", "--name", name, "--pool", "2", "--demand", "2"])
            .arg("--socket")
            .arg(socket)
            .env("PARTITA_SOCKET", socket),
    )
}

/// The targets `pid` holds in `rounds` snapshots, each taken after a new sampling round.
fn targets_over_samples(socket: &Path, pid: i32, rounds: u32) -> Vec<u32> {
    let mut seen = Vec::new();
    let mut last = status(socket).samples;
    for _ in 0..rounds {
        let s = wait_for_status(socket, LONG, |s| s.samples > last).expect("the sampler stopped");
        last = s.samples;
        seen.push(s.app_by_pid(pid).map_or(0, |a| a.target));
    }
    seen
}

/// Settle: the probe registered and allocated, and `n` more sampling rounds done (the
/// averages of outside use and runnable threads then hold the loops' steady state).
fn settle(socket: &Path, pid: i32, n: u64) {
    let registered = wait_for_status(socket, LONG, |s| {
        s.app_by_pid(pid).is_some_and(|a| a.allocations >= 1)
    });
    let s0 = registered.expect("the probe was never allocated").samples;
    assert!(wait_for_status(socket, LONG, |s| s.samples >= s0 + n).is_some());
}

#[test]
fn a_niced_loop_on_every_cpu_leaves_a_program_its_demand() {
    let _g = serial();
    let dir = TempDir::new("niced-loops");
    let (_mgr, socket) = serve(&dir, DEFAULT);
    let cpus = status(&socket).cpus_managed;
    if cpus < 2 {
        return;
    }
    let Some(_loops) = loops(cpus, 19) else {
        return;
    };
    // The loops run, and the manager sampled them for a while before the program starts.
    let s0 = status(&socket).samples;
    assert!(wait_for_status(&socket, LONG, |s| s.samples >= s0 + 8).is_some());
    let Some(p) = probe_at(&socket, "beside-niced", 0) else {
        return;
    };
    settle(&socket, p.pid(), 8);
    let seen = targets_over_samples(&socket, p.pid(), 20);
    let full = seen.iter().filter(|&&t| t == 2).count();
    // Counted as outside demand, the loops held a CPU in every snapshot (target 1).
    assert!(
        full >= 18,
        "the program held its demand of 2 in {full} of 20 rounds beside niced loops: \
         {seen:?}\n{:#?}",
        status(&socket)
    );
}

#[test]
fn a_niced_program_does_not_hide_a_nice_0_loop() {
    let _g = serial();
    let dir = TempDir::new("niced-program");
    let (_mgr, socket) = serve(&dir, DEFAULT);
    if status(&socket).cpus_managed < 2 {
        return;
    }
    // Alone, a niced program is not its own outside load: it keeps both CPUs.
    let Some(p) = probe_at(&socket, "niced", 10) else {
        return;
    };
    settle(&socket, p.pid(), 8);
    // Processes of the test before this one may still be exiting (outside load for a few
    // rounds): start counting once the program holds both CPUs.
    assert!(
        wait_for_status(&socket, LONG, |s| s.app_by_pid(p.pid()).map(|a| a.target)
            == Some(2))
        .is_some(),
        "a lone niced program never held both CPUs: {:#?}",
        status(&socket)
    );
    let alone = targets_over_samples(&socket, p.pid(), 20);
    let full = alone.iter().filter(|&&t| t == 2).count();
    assert!(
        full >= 18,
        "a lone niced program held both CPUs in {full} of 20 rounds: {alone:?}"
    );
    // A nice-0 loop beside it is outside load: the manager counts it and gives it a CPU.
    let Some(_hog) = loops(1, 0) else {
        return;
    };
    let seen = wait_for_status(&socket, LONG, |s| {
        s.partitions[0].uncontrolled_runnable >= 1
            && s.app_by_pid(p.pid()).map(|a| a.target) == Some(1)
    });
    assert!(
        seen.is_some(),
        "the nice-0 loop beside a niced program was never counted: {:#?}",
        status(&socket)
    );
}
