//! Memory follows CPUs (issue 31) on a one-node machine: `partita serve` with two probe
//! applications whose allocations change makes no page-migration call, says why in
//! `partita status --json`, and reads no `numa_maps` for the status. (The two-node behaviour
//! is the NUMA VM suite's: vm/numa/follow, `numa-process`.)

mod support;

use std::time::Duration;
use support::{probe, serial, serve, wait_until, TempDir, TRACKED};

#[test]
fn one_node_machine_makes_no_migration_call() {
    let _g = serial();
    let dir = TempDir::new("numa-migration");
    let (_manager, socket) = serve(&dir, TRACKED);
    let status = || partita_manager::query_status(&socket).unwrap();
    if status().memory.nodes != 1 {
        eprintln!(
            "skipped: this machine has {} NUMA nodes",
            status().memory.nodes
        );
        return;
    }
    let _a = probe(&socket, "mig-a", 2, 2);
    let start = status().reallocations;
    let _b = probe(&socket, "mig-b", 2, 2);
    // Both placed, and reallocated a few times since (the second changed the first's CPUs).
    assert!(
        wait_until(Duration::from_secs(20), || {
            let s = status();
            s.applications.len() == 2
                && s.applications.iter().all(|a| !a.cpus.is_empty())
                && s.reallocations >= start + 3
        }),
        "not placed: {:?}",
        status()
    );
    let s = status();
    assert!(!s.memory.running, "{:?}", s.memory);
    assert_eq!(
        (s.memory.calls, s.memory.moved_bytes, s.memory.errors),
        (0, 0, 0)
    );
    for a in &s.applications {
        assert_eq!(a.memory_migration, "off: one NUMA node", "{a:?}");
        assert!(a.pages_per_node.is_empty(), "{a:?}");
    }
}
