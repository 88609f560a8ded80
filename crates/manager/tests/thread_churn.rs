//! Confining a process whose threads and child processes come and go. Found by the `session`
//! fuzz target (fuzz/): a `partita run` confinement of a process was refused with
//! PermissionDenied when one of its threads or children exited between the listing and its
//! `sched_setaffinity` (ESRCH), or when a child forked after the previous confinement had
//! recorded that confinement as its "original" mask, which the next CPU set did not meet.

use partita_manager::enforce::Enforcer;
use partita_manager::proc_ref::ProcRef;
use partita_manager::sys;
use partita_protocol::CpuSet;
use std::process::{Command, Stdio};

/// Confine `cmd`'s process tree 1000 times, alternating between this process's first and last
/// CPU; the failures.
fn confine_repeatedly(cmd: &mut Command) -> Vec<String> {
    let mine = sys::get_affinity(0).unwrap();
    let mut child = cmd
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn the churning child");
    let p = ProcRef::open(child.id() as i32).unwrap();
    let cpus = mine.to_vec();
    let sets: Vec<CpuSet> = [cpus[0], *cpus.last().unwrap()]
        .map(|c| [c].into_iter().collect())
        .to_vec();
    let mut e = Enforcer::new(false, mine);
    let mut failures = Vec::new();
    for i in 0..1000 {
        if let Err(err) = e.confine_process(&p, &sets[i % 2], true) {
            failures.push(err.to_string());
        }
    }
    e.restore_all();
    child.kill().unwrap();
    child.wait().unwrap();
    failures
}

/// Every one of the 1000 confinements succeeded.
fn assert_never_fails<E: std::fmt::Debug>(failures: Vec<E>) {
    assert!(
        failures.is_empty(),
        "{} of 1000 failed: {:?}",
        failures.len(),
        failures.first()
    );
}

/// A thread that exits while the enforcer walks the process's threads has nothing left to
/// confine: not a failure to confine the process.
#[test]
fn threads_exiting_during_confinement_are_not_an_error() {
    let churn = "import threading\nwhile True:\n    ts = [threading.Thread(target=lambda: None) for _ in range(8)]\n    [t.start() for t in ts]\n    [t.join() for t in ts]\n";
    assert_never_fails(confine_repeatedly(
        Command::new("python3").args(["-c", churn]),
    ));
}

/// Children forked after a confinement (so they inherit it) and children exiting during the
/// walk: the tree is still confined, every time.
#[test]
fn children_coming_and_going_do_not_fail_the_confinement() {
    let churn = "while :; do sleep 0.01 & sleep 0.001; done";
    assert_never_fails(confine_repeatedly(Command::new("sh").args(["-c", churn])));
}

/// A child forked while its parent was confined (so its own mask is the manager's doing),
/// first seen after the parent's original mask was restored and forgotten (the parent was a
/// registered application that left): confining the parent elsewhere still succeeds.
/// (The `session` fuzz target's second finding: the fuzzer's symbolizer child.)
#[test]
fn a_child_narrowed_before_it_was_seen_does_not_fail_its_parent() {
    let mine = sys::get_affinity(0).unwrap();
    let cpus = mine.to_vec();
    let first: CpuSet = [cpus[0]].into_iter().collect();
    let last: CpuSet = [*cpus.last().unwrap()].into_iter().collect();
    let mut child = Command::new("sh")
        .args(["-c", "sleep 0.3; sleep 30 & wait"])
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let p = ProcRef::open(child.id() as i32).unwrap();
    let mut e = Enforcer::new(false, mine);
    e.confine_process(&p, &first, false).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(800)); // `sleep 30` forks, on `first`
    e.restore_process(&p);
    let r = e.confine_process(&p, &last, true);
    let now = sys::get_affinity(child.id() as i32).unwrap();
    e.restore_all();
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(r.map_err(|e| e.to_string()), Ok(last));
    assert_eq!(now, last);
}
