//! A confined process tree is confined whole: a child that pinned itself to CPUs outside its
//! program's allocation (`taskset -c 1 child` under a program allocated CPU 0) runs on the
//! allocation while the manager confines it, and gets its own mask back when the manager lets
//! go. Before, such a child "stayed where it was": its recorded mask did not meet the set, so
//! it was left running outside the allocation.
//!
//! Real processes; every test kills what it started and restores every affinity it changed.

use partita_manager::enforce::Enforcer;
use partita_manager::proc_ref::ProcRef;
use partita_manager::sys;
use partita_protocol::CpuSet;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The first two CPUs this process may use, or `None` (the test is skipped) with fewer.
fn two_cpus() -> Option<(CpuSet, CpuSet, CpuSet)> {
    let mine = sys::get_affinity(0).unwrap();
    let v = mine.to_vec();
    if v.len() < 2 {
        eprintln!("skipped: needs two CPUs");
        return None;
    }
    let one = |c: usize| [c].into_iter().collect();
    Some((mine, one(v[0]), one(v[1])))
}

/// `sh -c script`, with its stdout read line by line.
struct Shell {
    child: Child,
    out: BufReader<std::process::ChildStdout>,
    stdin: Option<std::process::ChildStdin>,
}

impl Shell {
    fn spawn(script: &str) -> Shell {
        let mut child = Command::new("sh")
            .args(["-c", script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn sh");
        let out = BufReader::new(child.stdout.take().expect("piped stdout"));
        let stdin = child.stdin.take();
        Shell { child, out, stdin }
    }

    /// Let the script's `read` return.
    fn go(&mut self) {
        if let Some(s) = self.stdin.as_mut() {
            writeln!(s, "go").unwrap();
        }
    }

    fn proc(&self) -> ProcRef {
        ProcRef::open(self.child.id() as i32).unwrap()
    }

    /// The next line, as a pid.
    fn pid(&mut self) -> i32 {
        let mut line = String::new();
        self.out.read_line(&mut line).unwrap();
        line.trim().parse().expect("a pid")
    }
}

impl Drop for Shell {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn kill(pid: i32) {
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    );
}

fn affinity(pid: i32) -> CpuSet {
    sys::get_affinity(pid).unwrap()
}

fn wait_affinity(pid: i32, want: CpuSet) -> bool {
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(5) {
        if sys::get_affinity(pid).is_ok_and(|a| a == want) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    false
}

/// Started with `taskset` on the second CPU before its parent is confined to the first: the
/// child is narrowed to the first, then gets the second back.
#[test]
fn a_child_pinned_outside_the_allocation_is_confined_and_gets_its_pin_back() {
    let Some((mine, first, second)) = two_cpus() else {
        return;
    };
    let c = second.to_vec()[0];
    let mut sh = Shell::spawn(&format!("taskset -c {c} sleep 30 & echo $!; wait"));
    let child = sh.pid();
    assert!(
        wait_affinity(child, second),
        "taskset did not pin the child"
    );
    let mut e = Enforcer::new(false, mine);
    let r = e.confine_process(&sh.proc(), &first, true);
    let (during, parent) = (affinity(child), affinity(sh.child.id() as i32));
    e.restore_all();
    let after = affinity(child);
    kill(child);
    assert_eq!(r.map_err(|e| e.to_string()), Ok(first));
    assert_eq!(parent, first);
    assert_eq!(during, first, "the pinned child escaped the allocation");
    assert_eq!(after, second, "the child's own pin was not restored");
    assert_eq!(affinity(sh.child.id() as i32), mine);
}

/// Children started after the confinement: one pins itself outside the set (narrowed again by
/// `reconfine`, then given its pin back), one simply inherits the confinement (given its
/// parent's original mask back, not the confined one).
#[test]
fn children_started_after_the_confinement_are_kept_inside_and_restored_right() {
    let Some((mine, first, second)) = two_cpus() else {
        return;
    };
    let c = second.to_vec()[0];
    let mut sh = Shell::spawn(&format!(
        "read go; taskset -c {c} sleep 30 & echo $!; sleep 30 & echo $!; wait"
    ));
    let mut e = Enforcer::new(false, mine);
    e.confine_process(&sh.proc(), &first, true).unwrap();
    sh.go(); // the children are forked on `first`
    let (pinned, plain) = (sh.pid(), sh.pid());
    assert!(
        wait_affinity(pinned, second),
        "taskset did not pin the child"
    );
    let t = Instant::now();
    while affinity(pinned) != first && t.elapsed() < Duration::from_secs(5) {
        e.reconfine();
        std::thread::sleep(Duration::from_millis(10));
    }
    let (during, plain_during) = (affinity(pinned), affinity(plain));
    e.restore_all();
    let (after, plain_after) = (affinity(pinned), affinity(plain));
    kill(pinned);
    kill(plain);
    assert_eq!(during, first, "a child that pinned itself escaped");
    assert_eq!(plain_during, first);
    assert_eq!(after, second, "the child's own pin was not restored");
    assert_eq!(
        plain_after, mine,
        "the inherited confinement survived the manager"
    );
}

/// A child seen (and confined) before it pins itself elsewhere: narrowed again by the next
/// re-check, and its own later choice is what it gets back.
#[test]
fn a_child_that_pins_itself_after_it_was_seen_is_narrowed_and_keeps_its_choice() {
    let Some((mine, first, second)) = two_cpus() else {
        return;
    };
    let mut sh = Shell::spawn("sleep 30 & echo $!; wait");
    let child = sh.pid();
    let mut e = Enforcer::new(false, mine);
    e.confine_process(&sh.proc(), &first, true).unwrap();
    assert_eq!(affinity(child), first);
    sys::set_affinity(child, &second).unwrap(); // what `taskset -p` in the child would do
    e.reconfine();
    let during = affinity(child);
    e.restore_all();
    let after = affinity(child);
    kill(child);
    assert_eq!(during, first, "the child escaped");
    assert_eq!(after, second, "the child's own choice was not given back");
}

/// A child that outlives the process it was confined under (reparented away from the tree)
/// still follows its group's set, and is restored.
#[test]
fn an_orphaned_child_follows_its_group() {
    let Some((mine, first, second)) = two_cpus() else {
        return;
    };
    let mut sh = Shell::spawn("sleep 30 & echo $!; read x");
    let orphan = sh.pid();
    let root = sh.proc();
    let mut e = Enforcer::new(false, mine);
    e.update_uncontrolled("tree-test", std::slice::from_ref(&root), &first)
        .unwrap();
    assert_eq!(affinity(orphan), first);
    sh.go();
    let _ = sh.child.wait(); // the shell exits; `sleep 30` is reparented
    let _ = e.update_uncontrolled("tree-test", &[], &second);
    let during = affinity(orphan);
    e.restore_all();
    let after = affinity(orphan);
    kill(orphan);
    assert_eq!(during, second, "the orphan stayed on the old set");
    assert_eq!(after, mine);
}

/// The same rule for one process (an application's, no tree): pinned outside its allocation,
/// it is narrowed to the allocation (before, the request failed and it stayed where it was),
/// and given its pin back.
#[test]
fn a_process_pinned_outside_the_allocation_is_narrowed_too() {
    let Some((mine, first, second)) = two_cpus() else {
        return;
    };
    let c = second.to_vec()[0];
    let mut sh = Shell::spawn(&format!("echo $$; exec taskset -c {c} sleep 30"));
    let pid = sh.pid();
    assert!(
        wait_affinity(pid, second),
        "taskset did not pin the process"
    );
    let p = ProcRef::open(pid).unwrap();
    let mut e = Enforcer::new(false, mine);
    let r = e.confine_process(&p, &first, false);
    let during = affinity(pid);
    e.restore_process(&p);
    let after = affinity(pid);
    drop(sh);
    assert_eq!(r.map_err(|e| e.to_string()), Ok(first));
    assert_eq!(during, first);
    assert_eq!(after, second);
}

/// A child forked after the last walk (never seen by the manager) inherited its parent's
/// confinement; the restore finds it and gives it its parent's original mask, and a child
/// that pinned itself meanwhile keeps its own pin.
#[test]
fn a_child_the_manager_never_saw_is_restored_too() {
    let Some((mine, first, second)) = two_cpus() else {
        return;
    };
    let c = second.to_vec()[0];
    let mut sh = Shell::spawn(&format!(
        "read go; sleep 30 & echo $!; taskset -c {c} sleep 30 & echo $!; wait"
    ));
    let mut e = Enforcer::new(false, mine);
    e.confine_process(&sh.proc(), &first, true).unwrap();
    sh.go(); // forked on `first`, with no walk after it
    let (plain, pinned) = (sh.pid(), sh.pid());
    let inherited = affinity(plain);
    let pinned_ok = wait_affinity(pinned, second);
    e.restore_all();
    let (after_plain, after_pinned) = (affinity(plain), affinity(pinned));
    kill(plain);
    kill(pinned);
    assert_eq!(
        inherited, first,
        "the child did not inherit the confinement"
    );
    assert!(pinned_ok, "taskset did not pin the second child");
    assert_eq!(after_plain, mine, "an unseen child kept the confined mask");
    assert_eq!(after_pinned, second, "a child's own pin was overwritten");
}
