//! Chaos over real processes (issue 12): random steps — start and SIGKILL probe applications,
//! SIGKILL and restart the manager, `partita run` programs, demand storms, a client that never
//! reads its status reply — with the invariants:
//! - while a manager is up, the probes' active workers (from their `active=N t=NS` lines,
//!   CLOCK_MONOTONIC) add up to more than the managed CPUs for no longer than one
//!   reallocation period ([`PERIOD`]) at a time (checked over the whole run at the end; an
//!   excess that began while the manager was down counts from the moment every probe is
//!   registered again, and a newcomer, which runs at full size until the manager knows it,
//!   from its registration);
//! - after the manager's SIGKILL every surviving probe is standalone (target = pool size)
//!   within [`STANDALONE`];
//! - after its restart every surviving probe is registered again within [`REREGISTER`],
//!   counted from when the new manager listens (it can register no one before; its own
//!   start-up, spawn to listening, is printed: 40–240 ms here, over 1.2 s at load 16 on 2
//!   CPUs, and the runtime looks for a manager with a backoff capped at 1 s, so counted from
//!   the spawn the bound cannot hold on a loaded machine);
//! - the manager (when up) answers a status request and its targets add up to at most the
//!   managed CPUs;
//! - after the last manager exits (SIGTERM), no cgroup any of the managers created remains
//!   and every `partita run` program is back in its cgroup with its original affinity.
//!
//! Latencies are judged net of the scheduler's delay measured in the same run (a [`Canary`]
//! thread's oversleep while the latency ran): on a quiet machine that is about 1 ms, so the
//! bounds are the issue's. On this 2-CPU host at load 10–17, with the test at `nice -n 19`,
//! a run of 25 steps still failed about one time in six: a probe's runtime noticed the
//! manager's death 125–492 ms late, and once the active workers stayed above the CPUs for
//! 474 ms, while the canary saw under 10 ms — the probes' own threads (two spinning workers
//! each, at nice 19 beside normal-priority builds) wait longer for a CPU than a lone sleeper;
//! the runtime's client then checked every 1 ms (since session 8 a thread of the client's waits
//! on the socket and notices the EOF at once: 3–5 ms to standalone over 300 steps here). Of two 1000-step runs there, one passed (152
//! manager kills; maxima 59 ms standalone, 150 ms to register again, 115 ms above the CPUs)
//! and one failed at its 15th kill (a probe standalone after 155 ms, 138 ms net).
//!
//! The maxima seen are printed (`--nocapture`). CI runs 25 steps; the long run is
//! `PARTITA_CHAOS_STEPS=1000 cargo test -p partita --test chaos -- --nocapture`.

mod support;

use partita_manager::status::AppStatus;
use partita_manager::sys;
use partita_protocol::page::monotonic_ns;
use partita_queues::XorShift64 as Rng;
use std::io::Write;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::{bin, probe, serial, wait_until, Proc, TempDir};

const CONFIG: &str = "uncontrolled = \"tracked\"\nhello_timeout_ms = 500\ncgroups = true\n";
/// The reallocation period (`realloc_period_ms`, default).
const PERIOD: Duration = Duration::from_millis(300);
/// The bound on going standalone after the manager's death.
const STANDALONE: Duration = Duration::from_millis(100);
/// The bound on registering again after the manager's restart.
const REREGISTER: Duration = Duration::from_secs(1);

type Lines = Arc<Mutex<Vec<(Instant, String)>>>;

/// The largest latencies seen (raw, and net of the scheduler's delay), for the report.
#[derive(Debug, Default)]
struct Maxima {
    standalone: (Duration, Duration),
    reregister: (Duration, Duration),
    startup: Duration,
    excess: (Duration, Duration),
    slack: Duration,
}

impl Maxima {
    fn see(slot: &mut (Duration, Duration), raw: Duration, net: Duration) {
        slot.0 = slot.0.max(raw);
        slot.1 = slot.1.max(net);
    }
}

struct World {
    dir: TempDir,
    mgr: Option<Proc>,
    socket: std::path::PathBuf,
    manager_pids: Vec<u32>,
    probes: Vec<Proc>,
    runs: Vec<Proc>,
    silent: Vec<std::os::unix::net::UnixStream>,
    /// Every probe's output and, once killed, when (CLOCK_MONOTONIC ns).
    timelines: Vec<(Lines, Option<u64>)>,
    /// When excess is judged: from when every probe is registered with a manager until that
    /// manager's death (ns).
    judged: Vec<(u64, u64)>,
    /// When each step began (ns), to say where an excess happened.
    steps: Vec<u64>,
    maxima: Maxima,
    canary: Canary,
}

impl World {
    fn start_manager(&mut self) {
        let (m, socket) = support::serve(&self.dir, CONFIG);
        self.manager_pids.push(m.pid() as u32);
        self.mgr = Some(m);
        self.socket = socket;
        self.judged.push((monotonic_ns(), u64::MAX));
    }

    fn kill_probe(&mut self, i: usize) {
        let mut p = self.probes.remove(i);
        let lines = p.lines.clone();
        p.kill();
        let at = monotonic_ns();
        if let Some(t) = self
            .timelines
            .iter_mut()
            .find(|t| Arc::ptr_eq(&t.0, &lines))
        {
            t.1 = Some(at);
        }
    }

    fn check(&self, step: usize) {
        if self.mgr.is_none() {
            return;
        }
        let mut last = String::new();
        let ok = wait_until(
            Duration::from_secs(2),
            || match partita_manager::query_status(&self.socket) {
                Ok(s) => {
                    // CPUs of their own never exceed the machine; an application that
                    // time-shares its partition's CPUs (`min_target`) runs one worker.
                    let own = |a: &&AppStatus| !a.shared;
                    let targets: Vec<u32> = s
                        .applications
                        .iter()
                        .filter(own)
                        .map(|a| a.target)
                        .collect();
                    let sharing: Vec<u32> = s
                        .applications
                        .iter()
                        .filter(|a| a.shared)
                        .map(|a| a.target)
                        .collect();
                    last = format!(
                        "targets {targets:?} and sharing {sharing:?} on {} CPUs",
                        s.cpus_managed
                    );
                    targets.iter().sum::<u32>() as usize <= s.cpus_managed
                        && sharing.iter().all(|&t| t == 1)
                }
                Err(e) => {
                    last = e.to_string();
                    false
                }
            },
        );
        assert!(
            ok,
            "step {step}: status unavailable or targets exceed the CPUs: {last}"
        );
    }

    fn kill_manager(&mut self, step: usize) {
        let Some(mut m) = self.mgr.take() else { return };
        let killed = monotonic_ns();
        m.kill();
        if let Some(j) = self.judged.last_mut() {
            j.1 = killed;
        }
        // Standalone: the first `target=2` line stamped after the kill (or target 2 already).
        let mut slowest = (Duration::ZERO, Duration::ZERO);
        for p in &self.probes {
            let mut at = None;
            let ok = wait_until(Duration::from_secs(5), || {
                at = standalone_since(&p.lines, killed);
                at.is_some()
            });
            assert!(ok, "step {step}: probe {} never standalone", p.pid());
            let at = at.unwrap_or(killed);
            let raw = Duration::from_nanos(at - killed);
            let net = raw.saturating_sub(self.canary.slack(killed, at));
            slowest = (slowest.0.max(raw), slowest.1.max(net));
        }
        Maxima::see(&mut self.maxima.standalone, slowest.0, slowest.1);
        assert!(
            slowest.1 <= STANDALONE,
            "step {step}: a probe went standalone {:?} after the manager's SIGKILL, {:?} net of the scheduler's delay (bound {STANDALONE:?})",
            slowest.0, slowest.1
        );
        let t = Instant::now();
        self.start_manager();
        let up = t.elapsed();
        let t = Instant::now();
        let listening = monotonic_ns();
        let pids: Vec<i32> = self.probes.iter().map(|p| p.pid()).collect();
        let ok = wait_until(Duration::from_secs(10), || {
            partita_manager::query_status(&self.socket).is_ok_and(|s| {
                pids.iter()
                    .all(|p| s.applications.iter().any(|a| a.pid == *p))
            })
        });
        let took = t.elapsed();
        assert!(
            ok,
            "step {step}: probes not registered again after the restart"
        );
        if let Some(j) = self.judged.last_mut() {
            j.0 = monotonic_ns();
        }
        let net = took.saturating_sub(self.canary.slack(listening, monotonic_ns()));
        Maxima::see(&mut self.maxima.reregister, took, net);
        self.maxima.startup = self.maxima.startup.max(up);
        println!(
            "step {step}: {} probes standalone {:?} after the manager's SIGKILL; the new one up after {up:?}, probes registered {took:?} after that",
            pids.len(),
            slowest.0
        );
        assert!(
            net <= REREGISTER,
            "step {step}: probes registered again {took:?} after the new manager listened, {net:?} net of the scheduler's delay (bound {REREGISTER:?})"
        );
    }

    fn step(&mut self, rng: &mut Rng, step: usize) {
        self.steps.push(monotonic_ns());
        match rng.below(7) {
            0 | 1 if self.probes.len() < 3 => {
                // The probe program gives up if its first registration fails, so it joins the
                // world once registered (or is dropped if the manager is down).
                let spawned = monotonic_ns();
                let p = probe(&self.socket, &format!("p{step}"), 2, 2);
                let pid = p.pid();
                if self.mgr.is_some()
                    && wait_until(Duration::from_secs(5), || {
                        partita_manager::query_status(&self.socket)
                            .is_ok_and(|s| s.applications.iter().any(|a| a.pid == pid))
                    })
                {
                    // A newcomer runs at full size until the manager knows it: excess is
                    // judged again from its registration.
                    if let Some(j) = self.judged.last_mut().filter(|j| j.1 == u64::MAX) {
                        j.1 = spawned;
                        self.judged.push((monotonic_ns(), u64::MAX));
                    }
                    self.timelines.push((p.lines.clone(), None));
                    self.probes.push(p);
                }
            }
            2 if !self.probes.is_empty() => {
                let i = rng.below(self.probes.len());
                self.kill_probe(i);
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

/// When the probe became standalone (target 2) at or after `since`: the time of its first
/// `target=2` line stamped after `since`, or `since` if its last target before was 2 already.
fn standalone_since(lines: &Lines, since: u64) -> Option<u64> {
    let l = lines.lock().unwrap();
    let stamped = |s: &str| Some((support::field(s, "t")?, support::field(s, "target")?));
    let mut before = None;
    for (_, s) in l.iter() {
        let Some((t, target)) = stamped(s) else {
            continue;
        };
        if t < since {
            before = Some(target);
        } else if target == 2 {
            return Some(t);
        }
    }
    (before == Some(2)).then_some(since)
}

/// The stretches, clipped to the judged windows, during which the probes' active workers
/// added up to more than `cpus`: (from, to) in ns.
fn excess_episodes(
    timelines: &[(Lines, Option<u64>)],
    judged: &[(u64, u64)],
    cpus: u64,
) -> Vec<(u64, u64)> {
    // (time, probe, active) events; a killed probe drops to 0 when killed.
    let mut events: Vec<(u64, usize, u64)> = Vec::new();
    for (i, (lines, killed)) in timelines.iter().enumerate() {
        for (_, s) in lines.lock().unwrap().iter() {
            if let (Some(t), Some(a)) = (support::field(s, "t"), support::field(s, "active")) {
                if killed.is_none_or(|k| t < k) {
                    events.push((t, i, a));
                }
            }
        }
        if let Some(k) = killed {
            events.push((*k, i, 0));
        }
    }
    events.sort_unstable();
    let mut out = Vec::new();
    let mut clip = |from: u64, to: u64| {
        for &(a, b) in judged {
            let (f, t) = (from.max(a), to.min(b));
            if t > f {
                out.push((f, t));
            }
        }
    };
    let mut active = vec![0u64; timelines.len()];
    let mut excess_since: Option<u64> = None;
    for (t, i, a) in events {
        active[i] = a;
        let over = active.iter().sum::<u64>() > cpus;
        match (over, excess_since) {
            (true, None) => excess_since = Some(t),
            (false, Some(from)) => {
                clip(from, t);
                excess_since = None;
            }
            _ => {}
        }
    }
    if let Some(from) = excess_since {
        clip(from, monotonic_ns());
    }
    out
}

/// How late a thread of this (niced, like the probes and managers it starts) test process
/// wakes up from a 1 ms sleep: the scheduler's delay, which no manager or runtime can beat.
/// A latency is judged net of the largest delay seen while it ran; on a quiet machine that
/// is about a millisecond, so the bounds are the issue's.
struct Canary {
    stalls: Arc<Mutex<Vec<(u64, u64)>>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
}

impl Canary {
    fn start() -> Canary {
        let stalls = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (s, st) = (stalls.clone(), stop.clone());
        std::thread::spawn(move || {
            while !st.load(std::sync::atomic::Ordering::Relaxed) {
                let t0 = monotonic_ns();
                std::thread::sleep(Duration::from_millis(1));
                let late = (monotonic_ns() - t0).saturating_sub(1_000_000);
                if late > 1_000_000 {
                    s.lock().unwrap().push((t0, late));
                }
            }
        });
        Canary { stalls, stop }
    }

    /// The largest wake-up delay overlapping [from, to] (ns).
    fn slack(&self, from: u64, to: u64) -> Duration {
        let s = self.stalls.lock().unwrap();
        let late = s
            .iter()
            .filter(|&&(t0, late)| t0 <= to && t0 + 1_000_000 + late >= from)
            .map(|&(_, late)| late)
            .max()
            .unwrap_or(0);
        Duration::from_nanos(late)
    }
}

impl Drop for Canary {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
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

/// The active workers' excess over the CPUs, judged at the end, and the report of maxima.
fn judge_excess(w: &mut World, steps: usize) {
    let cpus = partita_manager::query_status(&w.socket)
        .map(|s| s.cpus_managed as u64)
        .unwrap();
    let mut worst = (0, 0);
    for (from, to) in excess_episodes(&w.timelines, &w.judged, cpus) {
        let raw = Duration::from_nanos(to - from);
        let net = raw.saturating_sub(w.canary.slack(from, to));
        Maxima::see(&mut w.maxima.excess, raw, net);
        worst = worst.max((net.as_nanos() as u64, from));
    }
    w.maxima.slack = w.canary.slack(0, u64::MAX);
    let m = &w.maxima;
    println!(
        "chaos: {steps} steps; maxima raw / net of the scheduler's delay: standalone {:?} / {:?} (bound {STANDALONE:?}), registered again after the new manager listens {:?} / {:?} (bound {REREGISTER:?}), active workers above {cpus} CPUs {:?} / {:?} (bound {PERIOD:?}); manager start-up {:?}; largest scheduler delay {:?}",
        m.standalone.0, m.standalone.1, m.reregister.0, m.reregister.1, m.excess.0, m.excess.1, m.startup, m.slack
    );
    let at_step = w.steps.iter().rposition(|&t| t <= worst.1);
    assert!(
        m.excess.1 <= PERIOD,
        "the probes' active workers exceeded the CPUs for {:?} net of the scheduler's delay, from step {at_step:?} on (bound: one period, {PERIOD:?})",
        m.excess.1
    );
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
        timelines: Vec::new(),
        judged: Vec::new(),
        steps: Vec::new(),
        maxima: Maxima::default(),
        canary: Canary::start(),
    };
    w.start_manager();
    let mut rng = Rng::new(seed);
    for step in 0..steps {
        w.step(&mut rng, step);
    }
    judge_excess(&mut w, steps);
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
