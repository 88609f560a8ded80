//! Issue 12: nothing the manager does to a process survives the manager, even its SIGKILL.
//! The manager journals every affinity it narrows (next to its socket) before narrowing it; a
//! manager started later on that socket, or `partita serve --cleanup`, restores each one whose
//! process is still the same one, threads created after the confinement included, and
//! discards the rest.

mod support;

use partita_manager::sys;
use partita_protocol::CpuSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use support::{bin, serial, wait_until, Proc, TempDir};

/// Affinity confinement (no cgroups) of `partita run` programs to CPU 0 only.
const CONFIG: &str = "uncontrolled = \"tracked\"\ncgroups = false\ncpus = \"0\"\n";

fn journals(dir: &Path, manager: i32) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                        n.starts_with(&format!("partita-mgr-{manager}-")) && n.ends_with(".journal")
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A `partita run` program confined to `one`, with a thread it created after confinement.
fn confined_program(socket: &Path, one: &CpuSet) -> (Proc, i32) {
    let mut p = Proc::spawn(
        Command::new(bin())
            .args(["run", "--socket"])
            .arg(socket)
            .args(["--", "python3", "-c", support::THREAD_ON_DEMAND]),
    );
    p.wait_line(0, Duration::from_secs(20), |l| l == "ready")
        .expect("the program did not start");
    assert!(
        wait_until(Duration::from_secs(10), || sys::get_affinity(p.pid())
            .is_ok_and(|a| a == *one)),
        "not confined to {one}"
    );
    p.send("go");
    let (_, line) = p
        .wait_line(0, Duration::from_secs(10), |l| l.starts_with("tid "))
        .expect("no thread");
    let tid: i32 = line[4..].trim().parse().unwrap();
    assert_eq!(sys::get_affinity(tid).unwrap(), *one, "inherits the mask");
    (p, tid)
}

#[derive(Debug, Clone, Copy)]
enum Undo {
    /// A new manager on the same socket.
    Restart,
    /// `partita serve --cleanup`.
    Cleanup,
}

/// This process's CPUs, CPU 0 alone and another CPU alone; `None` (the test is skipped) when
/// CPU 0 and another are not both ours.
fn cpu0_and_another() -> Option<(CpuSet, CpuSet, CpuSet)> {
    let all = sys::get_affinity(0).unwrap(); // A test: our own affinity is always readable.
    let Some(other) = all.iter().find(|&c| c != 0).filter(|_| all.contains(0)) else {
        eprintln!("skipped: needs CPUs 0 and another");
        return None;
    };
    let one = |c: usize| -> CpuSet { [c].into_iter().collect() };
    Some((all, one(0), one(other)))
}

#[test]
fn affinities_narrowed_by_a_sigkilled_manager_are_restored() {
    let Some((all, one, _)) = cpu0_and_another() else {
        return;
    };
    let _s = serial();
    for undo in [Undo::Restart, Undo::Cleanup] {
        let dir = TempDir::new("restart");
        let (mut m, socket) = support::serve(&dir, CONFIG);
        let (prog, tid) = confined_program(&socket, &one);
        // A second program that exits before the undo: its entry is discarded.
        let (mut gone, _) = confined_program(&socket, &one);
        assert_eq!(
            journals(dir.0.path(), m.pid()).len(),
            1,
            "{undo:?}: no journal"
        );
        m.kill(); // SIGKILL: no cleanup at all.
        gone.kill();
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(
            sys::get_affinity(prog.pid()).unwrap(),
            one,
            "{undo:?}: restored by nobody?"
        );
        let next = match undo {
            Undo::Restart => Some(support::serve(&dir, CONFIG).0),
            Undo::Cleanup => {
                let out = cleanup(&socket);
                let text = String::from_utf8_lossy(&out.stdout);
                // Discarded: the program that exited, and any short-lived process of either
                // program's tree (a `python3` shim's helpers) the manager's re-checks saw.
                let discarded = text
                    .split("discarded: ")
                    .nth(1)
                    .and_then(|t| t.split(',').next()?.parse::<u32>().ok());
                assert!(
                    text.contains("journals undone: 1, affinities restored: 1,")
                        && discarded.is_some_and(|d| d >= 1),
                    "{text}"
                );
                None
            }
        };
        assert_eq!(
            sys::get_affinity(prog.pid()).unwrap(),
            all,
            "{undo:?}: main thread"
        );
        assert_eq!(
            sys::get_affinity(tid).unwrap(),
            all,
            "{undo:?}: a thread created after confinement got the confined mask back"
        );
        assert!(
            journals(dir.0.path(), m.pid()).is_empty(),
            "{undo:?}: journal left"
        );
        if let Some(mut n) = next {
            // A clean exit leaves no journal either.
            let npid = n.pid();
            nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(npid),
                nix::sys::signal::Signal::SIGTERM,
            )
            .unwrap();
            let _ = n.child.wait();
            assert!(journals(dir.0.path(), npid).is_empty());
        }
    }
}

#[test]
fn a_journal_is_written_before_the_narrowing_and_removed_on_a_clean_exit() {
    let Some((all, one, _)) = cpu0_and_another() else {
        return;
    };
    let _s = serial();
    let dir = TempDir::new("journal");
    let (mut m, socket) = support::serve(&dir, CONFIG);
    let (prog, _) = confined_program(&socket, &one);
    let j = journals(dir.0.path(), m.pid());
    assert_eq!(j.len(), 1);
    let text = std::fs::read_to_string(&j[0]).unwrap();
    let rec = partita_manager::journal::Record::parse(&text).unwrap();
    let start = sys::start_time(prog.pid()).unwrap();
    assert_eq!(rec.affinity.get(&prog.pid()), Some(&(start, all)), "{text}");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(m.pid()),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let _ = m.child.wait();
    assert!(journals(dir.0.path(), m.pid()).is_empty(), "journal left");
    assert_eq!(sys::get_affinity(prog.pid()).unwrap(), all);
}

/// A `partita run` program's child that pins itself (`taskset`) to a CPU outside the
/// program's allocation runs on the allocation while a manager confines it (the manager
/// re-checks the tree every sampling period) and gets its own pin back when the manager
/// exits, after a SIGTERM and after a SIGKILL and `partita serve --cleanup` alike.
#[test]
fn a_child_pinned_outside_the_allocation_is_confined_and_its_pin_restored() {
    let Some((all, zero, pin)) = cpu0_and_another() else {
        return;
    };
    let _s = serial();
    for undo in [None, Some(Undo::Cleanup)] {
        let dir = TempDir::new("pinned-child");
        let (mut m, socket) = support::serve(&dir, CONFIG);
        let script = format!("taskset -c {} sleep 300 & echo $!; wait", pin.to_vec()[0]);
        let prog = Proc::spawn(
            Command::new(bin())
                .args(["run", "--socket"])
                .arg(&socket)
                .args(["--", "sh", "-c", &script]),
        );
        let (_, line) = prog
            .wait_line(0, Duration::from_secs(20), |l| l.parse::<i32>().is_ok())
            .expect("the program did not start its child");
        let child: i32 = line.parse().unwrap();
        // `taskset` has set the pin once the child runs `sleep`: only then is there a pin
        // to take away and give back (before, the child still has its parent's mask).
        let pinned = wait_until(Duration::from_secs(5), || {
            std::fs::read_to_string(format!("/proc/{child}/comm"))
                .is_ok_and(|c| c.trim() == "sleep")
        });
        assert!(pinned, "{undo:?}: taskset never ran");
        let confined = wait_until(Duration::from_secs(5), || {
            sys::get_affinity(child).is_ok_and(|a| a == zero)
        });
        let during = sys::get_affinity(child);
        match undo {
            None => {
                let pid = nix::unistd::Pid::from_raw(m.pid());
                nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
                let _ = m.child.wait();
            }
            Some(_) => {
                m.kill();
                cleanup(&socket);
            }
        }
        let after = sys::get_affinity(child);
        let parent = sys::get_affinity(prog.pid());
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(child),
            nix::sys::signal::Signal::SIGKILL,
        );
        assert!(confined, "{undo:?}: the pinned child escaped: {during:?}");
        assert_eq!(
            after.ok(),
            Some(pin),
            "{undo:?}: the child's pin was not restored"
        );
        assert_eq!(
            parent.ok(),
            Some(all),
            "{undo:?}: the program was not restored"
        );
    }
}

/// A python program that prints `ready` and, when a line arrives on its stdin, forks from a
/// thread (that stays) a child that forks a grandchild, and from its main thread a child that
/// pins itself to CPU `argv[1]`; it prints `child N`, `grandchild N` and `pinned N` (once
/// pinned).
const FORKS_ON_DEMAND: &str = r#"
import os, sys, threading, time
pin = int(sys.argv[1])
print("ready", flush=True)
sys.stdin.readline()
def say(*words):
    os.write(1, (" ".join(map(str, words)) + "\n").encode())  # one write: lines never mix
def fork(body):
    pid = os.fork()
    if pid == 0:
        body()
        time.sleep(60)
        os._exit(0)
    return pid
def forks_a_grandchild():
    say("grandchild", fork(lambda: None))
def pins_itself():
    os.sched_setaffinity(0, {pin})
    say("pinned", os.getpid())
def from_a_thread():
    say("child", fork(forks_a_grandchild))
    time.sleep(60)
threading.Thread(target=from_a_thread, daemon=True).start()
fork(pins_itself)
time.sleep(60)
"#;

/// Children a SIGKILLed manager never saw: a confined program forks after the manager's last
/// walk (the sampling period, which walks again, is an hour) a child from one of its threads,
/// that child a grandchild, and a child that pins itself to another CPU. The journal lists
/// none of them; the undo (a new manager, or `partita serve --cleanup`) gives the child and
/// the grandchild the program's original mask and leaves the pin alone.
#[test]
fn children_forked_after_a_sigkilled_managers_last_walk_are_restored_too() {
    let Some((all, zero, other)) = cpu0_and_another() else {
        return;
    };
    let _s = serial();
    let config = format!("{CONFIG}sample_period_ms = 3600000\n");
    let pin = other.to_vec()[0].to_string();
    for undo in [Undo::Restart, Undo::Cleanup] {
        let dir = TempDir::new("unseen-children");
        let (mut m, socket) = support::serve(&dir, &config);
        let mut prog = Proc::spawn(
            Command::new(bin())
                .args(["run", "--socket"])
                .arg(&socket)
                .args(["--", "python3", "-c", FORKS_ON_DEMAND, &pin]),
        );
        prog.wait_line(0, Duration::from_secs(20), |l| l == "ready")
            .expect("the program did not start");
        assert!(
            wait_until(Duration::from_secs(10), || sys::get_affinity(prog.pid())
                .is_ok_and(|a| a == zero)),
            "{undo:?}: not confined to {zero}"
        );
        prog.send("fork");
        let pid_of = |tag: &str| -> i32 {
            let (_, line) = prog
                .wait_line(0, Duration::from_secs(10), |l| l.starts_with(tag))
                .unwrap_or_else(|| panic!("{undo:?}: no {tag:?} line"));
            line[tag.len()..].trim().parse().unwrap() // A test: the script prints a pid.
        };
        let (child, grandchild, pinned) =
            (pid_of("child "), pid_of("grandchild "), pid_of("pinned "));
        let inherited = [child, grandchild].map(|p| sys::get_affinity(p).ok());
        m.kill(); // SIGKILL: no cleanup, no last walk.
        let listed: Vec<i32> = journals(dir.0.path(), m.pid())
            .iter()
            .filter_map(|j| std::fs::read_to_string(j).ok())
            .filter_map(|t| partita_manager::journal::Record::parse(&t).ok())
            .flat_map(|r| r.affinity.into_keys())
            .collect();
        let report = match undo {
            Undo::Restart => {
                let _next = support::serve(&dir, &config); // killed on drop; it changed nothing
                None
            }
            Undo::Cleanup => Some(String::from_utf8_lossy(&cleanup(&socket).stdout).into_owned()),
        };
        let after = [prog.pid(), child, grandchild, pinned].map(|p| sys::get_affinity(p).ok());
        for p in [child, grandchild, pinned] {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(p),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        assert_eq!(
            inherited,
            [Some(zero); 2],
            "{undo:?}: the confinement was not inherited"
        );
        assert!(
            listed.contains(&prog.pid())
                && ![child, grandchild, pinned]
                    .iter()
                    .any(|p| listed.contains(p)),
            "{undo:?}: the journal should list the program and none of its children: {listed:?}"
        );
        assert_eq!(
            after,
            [Some(all), Some(all), Some(all), Some(other)],
            "{undo:?}: program, child, grandchild, pinned child"
        );
        if let Some(text) = report {
            assert!(
                text.contains("affinities restored: 1, unlisted children restored: 2,"),
                "{text}"
            );
        }
    }
}

/// `partita serve --cleanup` on `socket`'s directory; it must succeed.
fn cleanup(socket: &std::path::Path) -> std::process::Output {
    let out = Command::new(bin())
        .args(["serve", "--cleanup", "--socket"])
        .arg(socket)
        .output()
        .unwrap(); // A test: failing to start the binary is a failure.
    assert!(out.status.success(), "{out:?}");
    out
}
