//! Chaos over real processes (issue 12): random steps — start and SIGKILL probe applications,
//! SIGKILL and restart the manager, `partita run` programs, demand storms, a client that never
//! reads its status reply — with invariants checked after each step:
//! - the manager (when up) answers a status request, and the registered targets add up to at
//!   most the managed CPUs once one reallocation period has passed;
//! - after the manager's SIGKILL every surviving probe is standalone (target = pool size);
//! - after its restart every surviving probe is registered again;
//! - after the last manager exits (SIGTERM), no cgroup any of the managers created remains
//!   and every `partita run` program is back in its cgroup with its original affinity.
//!
//! CI runs 25 steps; the long run is
//! `PARTITA_CHAOS_STEPS=1000 cargo test -p partita --test chaos -- --nocapture`.
//! Bounds are looser than the targets (1 s for standalone, 3 s for re-registration)
//! because CI machines are loaded; the measured times are printed.

mod support;

use partita_manager::sys;
use partita_queues::XorShift64 as Rng;
use std::io::Write;
use std::process::Command;
use std::time::{Duration, Instant};
use support::{bin, probe, serial, wait_until, Proc, TempDir};

const CONFIG: &str = "uncontrolled = \"tracked\"\nhello_timeout_ms = 500\ncgroups = true\n";

struct World {
    dir: TempDir,
    mgr: Option<Proc>,
    socket: std::path::PathBuf,
    manager_pids: Vec<u32>,
    probes: Vec<Proc>,
    runs: Vec<Proc>,
    silent: Vec<std::os::unix::net::UnixStream>,
}

fn last_target(p: &Proc) -> Option<u64> {
    let l = p.lines.lock().unwrap();
    l.iter()
        .rev()
        .find_map(|(_, s)| support::field(s, "target"))
}

impl World {
    fn start_manager(&mut self) {
        let (m, socket) = support::serve(&self.dir, CONFIG);
        self.manager_pids.push(m.pid() as u32);
        self.mgr = Some(m);
        self.socket = socket;
    }

    fn check(&self, step: usize) {
        if self.mgr.is_none() {
            return;
        }
        let ok = wait_until(Duration::from_secs(2), || {
            partita_manager::query_status(&self.socket).is_ok_and(|s| {
                let sum: u32 = s.applications.iter().map(|a| a.target).sum();
                sum as usize <= s.cpus_managed
            })
        });
        assert!(
            ok,
            "step {step}: status unavailable or targets exceed the CPUs"
        );
    }

    fn kill_manager(&mut self, step: usize) {
        let Some(mut m) = self.mgr.take() else { return };
        m.kill();
        let t = Instant::now();
        for p in &self.probes {
            let ok = wait_until(Duration::from_secs(1), || last_target(p) == Some(2));
            assert!(ok, "step {step}: probe {} not standalone", p.pid());
        }
        println!(
            "step {step}: all probes standalone {:?} after the manager's SIGKILL",
            t.elapsed()
        );
        self.start_manager();
        let t = Instant::now();
        let pids: Vec<i32> = self.probes.iter().map(|p| p.pid()).collect();
        let ok = wait_until(Duration::from_secs(10), || {
            partita_manager::query_status(&self.socket).is_ok_and(|s| {
                pids.iter()
                    .all(|p| s.applications.iter().any(|a| a.pid == *p))
            })
        });
        assert!(
            ok,
            "step {step}: probes not registered again after the restart"
        );
        println!(
            "step {step}: all probes registered {:?} after the restart",
            t.elapsed()
        );
    }

    fn step(&mut self, rng: &mut Rng, step: usize) {
        match rng.below(7) {
            0 | 1 if self.probes.len() < 3 => {
                // The probe program gives up if its first registration fails, so it joins the
                // world once registered (or is dropped if the manager is down).
                let p = probe(&self.socket, &format!("p{step}"), 2, 2);
                let pid = p.pid();
                if self.mgr.is_some()
                    && wait_until(Duration::from_secs(5), || {
                        partita_manager::query_status(&self.socket)
                            .is_ok_and(|s| s.applications.iter().any(|a| a.pid == pid))
                    })
                {
                    self.probes.push(p);
                }
            }
            2 if !self.probes.is_empty() => {
                let i = rng.below(self.probes.len());
                self.probes.remove(i).kill();
            }
            3 => self.kill_manager(step),
            4 if self.runs.len() < 2 && self.mgr.is_some() => {
                let p = Proc::spawn(
                    Command::new(bin())
                        .args(["run", "--socket"])
                        .arg(&self.socket)
                        .args(["--", "sleep", "3600"]),
                );
                self.runs.push(p);
            }
            5 => {
                for _ in 0..20 {
                    if let Some(p) = self.probes.get_mut(rng.below(3)) {
                        p.send(&format!("demand {}", 1 + rng.below(2)));
                    }
                }
            }
            _ => {
                // A client that asks for status and never reads the reply.
                if let Ok(mut s) = std::os::unix::net::UnixStream::connect(&self.socket) {
                    let req = partita_protocol::wire::ClientMessage::StatusRequest { version: 1 };
                    let _ = s.write_all(&req.encode());
                    self.silent.push(s);
                }
            }
        }
        self.check(step);
    }
}

fn cpuset_cgroup(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .unwrap_or_default()
        .lines()
        .find(|l| {
            l.split(':')
                .nth(1)
                .is_some_and(|c| c.split(',').any(|x| x == "cpuset"))
        })
        .and_then(|l| l.splitn(3, ':').nth(2).map(str::to_string))
        .unwrap_or_default()
}

#[test]
fn chaos_keeps_the_invariants() {
    let _g = serial();
    let steps: usize = std::env::var("PARTITA_CHAOS_STEPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(25);
    let seed: u64 = std::env::var("PARTITA_CHAOS_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0xc4a05);
    let all = sys::get_affinity(0).unwrap();
    let mut w = World {
        dir: TempDir::new("chaos"),
        mgr: None,
        socket: Default::default(),
        manager_pids: Vec::new(),
        probes: Vec::new(),
        runs: Vec::new(),
        silent: Vec::new(),
    };
    w.start_manager();
    let mut rng = Rng::new(seed);
    for step in 0..steps {
        w.step(&mut rng, step);
    }
    // The last manager exits cleanly: nothing of any manager remains.
    let mut m = w.mgr.take().unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(m.pid()),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let _ = m.child.wait();
    for pid in &w.manager_pids {
        let left: Vec<_> = std::fs::read_dir("/sys/fs/cgroup/cpuset")
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with(&format!("partita-mgr-{pid}-"))
            })
            .collect();
        assert!(left.is_empty(), "manager {pid} left {left:?}");
    }
    for r in &mut w.runs {
        // A `partita run` whose manager was killed before it answered exits with an error
        // (its command never ran): a dead process has no affinity left to restore.
        if r.child.try_wait().is_ok_and(|s| s.is_some()) {
            continue;
        }
        assert_eq!(
            sys::get_affinity(r.pid()).unwrap(),
            all,
            "run program {}",
            r.pid()
        );
        if std::path::Path::new("/sys/fs/cgroup/cpuset/cgroup.procs").exists() {
            assert_eq!(cpuset_cgroup(r.pid()), "/", "run program {}", r.pid());
        }
    }
}
