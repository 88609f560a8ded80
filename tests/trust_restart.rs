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

#[test]
fn affinities_narrowed_by_a_sigkilled_manager_are_restored() {
    let all = sys::get_affinity(0).unwrap();
    if all.len() < 2 || !all.contains(0) {
        eprintln!("skipped: needs CPUs 0 and another");
        return;
    }
    let one: CpuSet = [0].into_iter().collect();
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
                let out = Command::new(bin())
                    .args(["serve", "--cleanup", "--socket"])
                    .arg(&socket)
                    .output()
                    .unwrap();
                assert!(out.status.success(), "{out:?}");
                let text = String::from_utf8_lossy(&out.stdout);
                assert!(
                    text.contains("journals undone: 1, affinities restored: 1,")
                        && text.contains("discarded: 1,"),
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
    let all = sys::get_affinity(0).unwrap();
    if all.len() < 2 || !all.contains(0) {
        eprintln!("skipped: needs CPUs 0 and another");
        return;
    }
    let one: CpuSet = [0].into_iter().collect();
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
