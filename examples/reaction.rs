//! End-to-end reaction: one process changes its demand, another process's workers adjust.
//!
//! `cargo run --release --example reaction [ROUNDS] [--task-us N] [--manager KEY=VALUE]...`
//! (`--manager` adds a manager setting in TOML, e.g. `--manager handover_us=0`)
//!
//! A manager runs in this process (the daemon code on its own thread, as `partita serve`
//! would run it); two applications built on partita-runtime run as separate processes (this
//! executable re-run as `partita probe`). Application A alternates its demand between 0 and 2;
//! B (pool 2) grows to 2 workers when A's demand falls (the manager pushes: futex wake) and
//! shrinks to 1 when it rises (revocation: B's workers notice at a safe point). Each latency
//! runs from A's `set_demand` call to B's active-worker count changing, both stamped with
//! `CLOCK_MONOTONIC` in their own process.
//!
//! The first table times the change as B's main thread sees it (polling the count every
//! 50 µs: that thread's own wake-up latency is included). The breakdown tables follow each
//! round hop by hop through the `partita::hop` trace stamps that the runtime and the manager
//! emit (collected here by a tracing layer, in memory, in all three processes): A rings →
//! the manager reads the doorbell → its reallocator plans and publishes → B's client thread
//! wakes and sets the target → B's worker acts. "Reaction" is `set_demand` → B's target set
//! (the manager's and the protocol's part); "end to end" adds B's worker acting on it: a
//! futex wake when growing, and when shrinking the wait for the worker's next safe point,
//! which only a task's end gives. The shrink's breakdown also times A's side: `set_demand`
//! → A's worker resuming on the CPU B gives up (its grant, which the manager's revocation
//! hand-over holds until B's worker has parked or the hand-over deadline passed). The probe's tasks are rounds of `join(scope of four 500 µs
//! spins, fib(18))`; the worker that must park may be inside the root of such a round, so
//! the safe-point wait is up to a round (≈ 1–1.5 ms) and is the application's granularity,
//! not the manager's speed. The tasks are not shortened to flatter the number: the default
//! is 500 µs; `--task-us N` sets another length (the tables' headings say which was used), to
//! show the shrink of a finer-grained program.
//!
//! Baseline, same run: the same change made in-process with `set_target_workers` on a local
//! pool of 2 (no manager), timed to the active-worker count changing — the part of the
//! reaction that is the pool's own.

use partita_protocol::page::monotonic_ns;
use partita_stats::percentile;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("probe") {
        use clap::Parser;
        #[derive(Parser)]
        struct P {
            #[command(flatten)]
            probe: partita_demo::probe::ProbeArgs,
        }
        let p =
            P::parse_from(std::iter::once("probe".to_string()).chain(args[2..].iter().cloned()));
        hops::install();
        partita_demo::probe::run(&p.probe)?;
        // The probe's own hop stamps, for the parent's breakdown.
        let mut out = std::io::stdout().lock();
        for s in hops::take() {
            writeln!(out, "{}", s.to_line())?;
        }
        writeln!(out, "hops-end")?;
        return Ok(());
    }
    let rounds: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(200);
    let task_us: u64 = match args.iter().position(|a| a == "--task-us") {
        Some(i) => args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .filter(|&us| us > 0)
            .ok_or("--task-us needs a positive number of microseconds")?,
        None => 500,
    };
    // `--manager KEY=VALUE` (repeatable): manager settings in TOML, e.g. `handover_us=0`.
    let extra: Vec<&str> = args
        .windows(2)
        .filter(|w| w[0] == "--manager")
        .map(|w| w[1].as_str())
        .collect();
    hops::install();
    let run = across_processes(rounds, task_us, &extra)?;
    let (base_grow, base_shrink) = in_process(rounds, task_us)?;
    println!(
        "probe tasks: {task_us} µs spins (rounds of join(scope of 4 spins, fib(18))){}",
        if task_us == 500 { " [default]" } else { "" }
    );
    print_table(rounds, &run.grow, &run.shrink, &base_grow, &base_shrink);
    println!();
    breakdown::print(&run);
    Ok(())
}

/// One change of A's demand and what B did about it.
struct Round {
    /// B's workers grew (A's demand fell) rather than shrank.
    grow: bool,
    /// A's `set_demand` call.
    t0: u64,
    /// B's active-worker count seen changed by B's poll (`None`: not within 5 s).
    seen: Option<u64>,
}

/// Everything one cross-process run measured.
struct Run {
    grow: Vec<f64>,
    shrink: Vec<f64>,
    rounds: Vec<Round>,
    /// Hop stamps of A, B and the manager (this process).
    a: Vec<hops::Stamp>,
    b: Vec<hops::Stamp>,
    manager: Vec<hops::Stamp>,
    /// A's pid (the manager's doorbell stamps name the ringing process).
    a_pid: u64,
}

/// Latencies (µs) from A's demand change to B's workers changing, through the manager, and
/// the hop stamps of every process.
fn across_processes(
    rounds: usize,
    task_us: u64,
    extra: &[&str],
) -> Result<Run, Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("partita-reaction-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let socket = dir.join("m.sock");
    let mut toml = String::from("uncontrolled = \"tracked\"\n");
    for kv in extra {
        toml.push_str(kv);
        toml.push('\n');
        println!("manager setting: {kv}");
    }
    let cfg = partita_manager::Config::from_toml_str(&toml)?;
    let mgr = partita_manager::spawn_in_process(cfg, socket.clone())?;

    let (mut a, a_rx) = spawn_probe(&socket, "A", task_us)?;
    let a_pid = a.id();
    let (mut b, b_rx) = spawn_probe(&socket, "B", task_us)?;
    // Wait for the steady split 1 + 1.
    wait_for(
        &b_rx,
        |l| field(l, "active") == Some(1),
        Duration::from_secs(10),
    )
    .ok_or("B never settled at 1 worker")?;

    let mut grow = Vec::new();
    let mut shrink = Vec::new();
    let mut log = Vec::new();
    let mut a_in = a.stdin.take().ok_or("no stdin")?;
    // Only the measured rounds' manager stamps (not the settling's).
    drop(hops::take());
    for _ in 0..rounds {
        for (demand, want, out) in [(0, 2, &mut grow), (2, 1, &mut shrink)] {
            drain(&b_rx);
            writeln!(a_in, "demand {demand}")?;
            a_in.flush()?;
            let set = wait_for(
                &a_rx,
                |l| l.starts_with("demand-set"),
                Duration::from_secs(5),
            )
            .ok_or("A did not apply its demand")?;
            let t0 = field(&set, "t").ok_or("no t")?;
            let seen = wait_for(
                &b_rx,
                |l| field(l, "active") == Some(want),
                Duration::from_secs(5),
            )
            .and_then(|l| field(&l, "t"));
            match seen {
                Some(t) => out.push(t.saturating_sub(t0) as f64 / 1e3),
                None => eprintln!("B did not reach {want} workers within 5 s"),
            }
            log.push(Round {
                grow: want == 2,
                t0,
                seen,
            });
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    let manager = hops::take();
    let _ = writeln!(a_in, "quit");
    let _ = b.stdin.as_mut().map(|s| writeln!(s, "quit"));
    // Each probe prints its stamps once its pool has stopped.
    let a_hops = collect_hops(&a_rx);
    let b_hops = collect_hops(&b_rx);
    let _ = a.kill();
    let _ = b.kill();
    let _ = a.wait();
    let _ = b.wait();
    mgr.shutdown()?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(Run {
        grow,
        shrink,
        rounds: log,
        a: a_hops,
        b: b_hops,
        manager,
        a_pid: u64::from(a_pid),
    })
}

/// A probe's `hop ...` lines up to `hops-end` (at most 10 s).
fn collect_hops(rx: &mpsc::Receiver<String>) -> Vec<hops::Stamp> {
    let mut v = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(l) if l == "hops-end" => break,
            Ok(l) => v.extend(hops::Stamp::from_line(&l)),
            Err(_) => break,
        }
    }
    v.sort_by_key(|s| s.t);
    v
}

/// The baseline: in-process `set_target_workers` on a pool of 2, no manager, timed to the
/// active-worker count changing: `(grow, shrink)` in µs.
fn in_process(
    rounds: usize,
    task_us: u64,
) -> Result<(Vec<f64>, Vec<f64>), Box<dyn std::error::Error>> {
    // A Manual pool never connects to a manager.
    let pool = partita_runtime::ThreadPoolBuilder::new()
        .num_threads(2)
        .process_control(partita_runtime::ProcessControl::Manual)
        .build()?;
    let busy = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    // Two chains of `task_us` tasks, each spawning its successor: a worker reaches a safe
    // point between two of them (a task that looped forever would never let one park).
    fn chain(busy: std::sync::Arc<std::sync::atomic::AtomicBool>, task: Duration) {
        let t = Instant::now();
        while t.elapsed() < task {}
        if busy.load(std::sync::atomic::Ordering::Relaxed) {
            partita_runtime::spawn(move || chain(busy, task));
        }
    }
    for _ in 0..2 {
        let busy = busy.clone();
        pool.spawn(move || chain(busy, Duration::from_micros(task_us)));
    }
    let mut base_grow = Vec::new();
    let mut base_shrink = Vec::new();
    for _ in 0..rounds {
        for (target, out) in [(1usize, &mut base_shrink), (2, &mut base_grow)] {
            let t0 = monotonic_ns();
            pool.set_target_workers(target);
            let deadline = Instant::now() + Duration::from_secs(5);
            while pool.active_workers() != target && Instant::now() < deadline {
                std::thread::sleep(Duration::from_micros(50));
            }
            out.push((monotonic_ns() - t0) as f64 / 1e3);
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    busy.store(false, std::sync::atomic::Ordering::Relaxed);
    Ok((base_grow, base_shrink))
}

fn print_table(
    rounds: usize,
    grow: &[f64],
    shrink: &[f64],
    base_grow: &[f64],
    base_shrink: &[f64],
) {
    println!(
        "as B's main thread sees it, {rounds} rounds (µs; its 50 µs poll and its own wake-up \
         included: the breakdowns' \"end to end\" lines below time the workers themselves)"
    );
    println!(
        "{:<44} {:>8} {:>8} {:>8} {:>8}",
        "case", "p50", "p90", "p99", "max"
    );
    for (name, v) in [
        ("grow: A demand 2->0, B workers 1->2", grow),
        ("shrink: A demand 0->2, B workers 2->1", shrink),
        ("baseline in-process set_target 1->2", base_grow),
        ("baseline in-process set_target 2->1", base_shrink),
    ] {
        println!(
            "{:<44} {:>8.0} {:>8.0} {:>8.0} {:>8.0}",
            name,
            percentile(v, 0.5),
            percentile(v, 0.9),
            percentile(v, 0.99),
            percentile(v, 1.0)
        );
    }
}

fn spawn_probe(
    socket: &std::path::Path,
    name: &str,
    task_us: u64,
) -> Result<(Child, mpsc::Receiver<String>), Box<dyn std::error::Error>> {
    let mut child = Command::new(std::env::current_exe()?)
        .args([
            "probe",
            "--name",
            name,
            "--pool",
            "2",
            "--demand",
            "2",
            "--poll-us",
            "50",
            "--task-us",
            &task_us.to_string(),
        ])
        .env("PARTITA_SOCKET", socket)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let out = child.stdout.take().ok_or("no stdout")?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    Ok((child, rx))
}

fn drain(rx: &mpsc::Receiver<String>) {
    while rx.try_recv().is_ok() {}
}

fn wait_for(
    rx: &mpsc::Receiver<String>,
    pred: impl Fn(&str) -> bool,
    t: Duration,
) -> Option<String> {
    let deadline = Instant::now() + t;
    loop {
        let left = deadline.checked_duration_since(Instant::now())?;
        match rx.recv_timeout(left) {
            Ok(l) if pred(&l) => return Some(l),
            Ok(_) => {}
            Err(_) => return None,
        }
    }
}

fn field(line: &str, key: &str) -> Option<u64> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
}

/// Hop stamps: the runtime and the manager emit `trace` events of target `partita::hop` with
/// a `CLOCK_MONOTONIC` `t` at each step of a reaction; this layer keeps them in memory (no
/// I/O on the measured path) and the probes print them when they stop.
mod hops {
    use std::sync::Mutex;
    use tracing::field::{Field, Visit};
    use tracing::subscriber::Interest;
    use tracing::{Event, Metadata, Subscriber};
    use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
    use tracing_subscriber::util::SubscriberInitExt;

    /// One stamp: the hop's name, its time, and its other numeric fields.
    #[derive(Clone, Debug, Default, PartialEq)]
    pub struct Stamp {
        pub hop: String,
        pub t: u64,
        pub fields: Vec<(String, u64)>,
    }

    impl Stamp {
        /// A numeric field.
        pub fn get(&self, key: &str) -> Option<u64> {
            self.fields.iter().find(|(k, _)| k == key).map(|&(_, v)| v)
        }

        /// `hop NAME t=NS k=v ...`
        pub fn to_line(&self) -> String {
            let mut l = format!("hop {} t={}", self.hop, self.t);
            for (k, v) in &self.fields {
                l.push_str(&format!(" {k}={v}"));
            }
            l
        }

        pub fn from_line(line: &str) -> Option<Stamp> {
            let mut it = line.strip_prefix("hop ")?.split_whitespace();
            let mut s = Stamp {
                hop: it.next()?.to_string(),
                ..Stamp::default()
            };
            for w in it {
                let (k, v) = w.split_once('=')?;
                let v: u64 = v.parse().ok()?;
                if k == "t" {
                    s.t = v;
                } else {
                    s.fields.push((k.to_string(), v));
                }
            }
            Some(s)
        }
    }

    static STAMPS: Mutex<Vec<Stamp>> = Mutex::new(Vec::new());

    struct Collect;

    fn is_hop(m: &Metadata<'_>) -> bool {
        m.target() == "partita::hop"
    }

    impl Visit for Stamp {
        fn record_str(&mut self, f: &Field, v: &str) {
            if f.name() == "hop" {
                self.hop = v.to_string();
            }
        }
        fn record_u64(&mut self, f: &Field, v: u64) {
            match f.name() {
                "t" => self.t = v,
                k => self.fields.push((k.to_string(), v)),
            }
        }
        fn record_i64(&mut self, f: &Field, v: i64) {
            self.record_u64(f, v.max(0) as u64);
        }
        fn record_debug(&mut self, _: &Field, _: &dyn std::fmt::Debug) {}
    }

    impl<S: Subscriber> Layer<S> for Collect {
        fn register_callsite(&self, m: &'static Metadata<'static>) -> Interest {
            if is_hop(m) {
                Interest::always()
            } else {
                Interest::never()
            }
        }
        fn enabled(&self, m: &Metadata<'_>, _: Context<'_, S>) -> bool {
            is_hop(m)
        }
        fn on_event(&self, e: &Event<'_>, _: Context<'_, S>) {
            let mut s = Stamp::default();
            e.record(&mut s);
            STAMPS.lock().unwrap_or_else(|p| p.into_inner()).push(s);
        }
    }

    /// Collect this process's hop stamps from now on.
    pub fn install() {
        tracing_subscriber::registry().with(Collect).init();
    }

    /// The stamps collected so far, in time order (and forget them).
    pub fn take() -> Vec<Stamp> {
        let mut v = std::mem::take(&mut *STAMPS.lock().unwrap_or_else(|p| p.into_inner()));
        v.sort_by_key(|s| s.t);
        v
    }
}

/// Where the time goes: each round's path followed hop by hop through the stamps of A, the
/// manager and B (each hop is the first stamp of its kind after the previous hop), printed as
/// per-hop percentiles and as the mean of each hop over the slowest rounds.
mod breakdown {
    use super::hops::Stamp;
    use super::{Round, Run};
    use partita_stats::percentile;

    const HOPS: [&str; 9] = [
        "A: set_demand -> doorbell sent",
        "manager reads the doorbell",
        "reallocator starts its round",
        "plan (under the registry lock)",
        "apply starts",
        "B notices (client's futex wake or a worker's safe point)",
        "B sets the target",
        "B's worker acts (resume / safe point)",
        "B's poll sees the count",
    ];

    /// The first stamp named `hop` in `[from, until)` that satisfies `pred`.
    fn first<'a>(
        v: &'a [Stamp],
        hop: &str,
        from: u64,
        until: u64,
        pred: impl Fn(&Stamp) -> bool,
    ) -> Option<&'a Stamp> {
        let i = v.partition_point(|s| s.t < from);
        v[i..]
            .iter()
            .take_while(|s| s.t < until)
            .find(|s| s.hop == hop && pred(s))
    }

    /// The time of the last stamp named `hop` in `[from, until]`.
    fn last(v: &[Stamp], hop: &str, from: u64, until: u64) -> Option<u64> {
        let i = v.partition_point(|s| s.t <= until);
        v[..i]
            .iter()
            .rev()
            .take_while(|s| s.t >= from)
            .find(|s| s.hop == hop)
            .map(|s| s.t)
    }

    /// The end of each hop (ns, absolute) for one round, or the index of the first hop
    /// without a stamp.
    fn chain(r: &Round, until: u64, run: &Run, a_pid: u64) -> Result<[u64; 9], usize> {
        let want = if r.grow { 2 } else { 1 };
        let ring = first(&run.a, "ring", r.t0, until, |_| true)
            .ok_or(0usize)?
            .t;
        let read = first(&run.manager, "doorbell", ring, until, |s| {
            s.get("pid") == Some(a_pid)
        })
        .ok_or(1usize)?
        .t;
        // B's change, then back to the manager's round that published it (a round that ran
        // between the doorbell and it, publishing only A's page, counts as waiting).
        let apply = first(&run.b, "client_apply", read, until, |s| {
            s.get("target") == Some(want)
        })
        .ok_or(6usize)?;
        let published = last(&run.manager, "publish", read, apply.t).ok_or(4usize)?;
        let planned = last(&run.manager, "planned", read, published).ok_or(3usize)?;
        let round = last(&run.manager, "round", read, planned).ok_or(2usize)?;
        let woke = apply.get("woke").ok_or(5usize)?.clamp(published, apply.t);
        let act_name = if r.grow { "resume" } else { "park" };
        let act = first(&run.b, act_name, apply.t, until, |_| true)
            .ok_or(7usize)?
            .t;
        let seen = r.seen.ok_or(8usize)?.max(act);
        Ok([
            ring, read, round, planned, published, woke, apply.t, act, seen,
        ])
    }

    /// One case's rounds, followed hop by hop.
    struct Case {
        per_hop: Vec<Vec<f64>>,
        totals: Vec<f64>,
        manager_part: Vec<f64>,
        rows: Vec<[f64; 9]>,
        missing: [usize; 9],
        held: usize,
        /// Rounds whose change a worker applied at its safe point before the client woke.
        by_worker: usize,
        /// Rounds the manager ran on the doorbell's own thread (no reallocator wake-up).
        inline: usize,
        /// A's side: `set_demand` -> A's first worker resuming (its grant; shrink rounds).
        a_grant: Vec<f64>,
    }

    fn collect(run: &Run, grow: bool) -> Case {
        let mut c = Case {
            per_hop: vec![Vec::new(); HOPS.len()],
            totals: Vec::new(),
            manager_part: Vec::new(),
            rows: Vec::new(),
            missing: [0; 9],
            held: 0,
            by_worker: 0,
            inline: 0,
            a_grant: Vec::new(),
        };
        for (i, r) in run
            .rounds
            .iter()
            .enumerate()
            .filter(|(_, r)| r.grow == grow)
        {
            let until = run.rounds.get(i + 1).map_or(u64::MAX, |n| n.t0);
            if !grow {
                if let Some(s) = first(&run.a, "resume", r.t0, until, |_| true) {
                    c.a_grant.push((s.t - r.t0) as f64 / 1e3);
                }
            }
            let ends = match chain(r, until, run, run.a_pid) {
                Ok(e) => e,
                Err(k) => {
                    c.missing[k] += 1;
                    continue;
                }
            };
            if first(&run.a, "held", r.t0, ends[0], |_| true).is_some() {
                c.held += 1;
            }
            let applied = first(&run.b, "client_apply", ends[5], u64::MAX, |_| true);
            if applied.and_then(|s| s.get("by_worker")) == Some(1) {
                c.by_worker += 1;
            }
            if first(&run.manager, "round", ends[2], u64::MAX, |_| true)
                .and_then(|s| s.get("inline"))
                == Some(1)
            {
                c.inline += 1;
            }
            let mut prev = r.t0;
            let mut row = [0.0; 9];
            for (k, &end) in ends.iter().enumerate() {
                row[k] = end.saturating_sub(prev) as f64 / 1e3;
                c.per_hop[k].push(row[k]);
                prev = end.max(prev);
            }
            c.totals.push((ends[7] - r.t0) as f64 / 1e3);
            c.manager_part.push((ends[6] - r.t0) as f64 / 1e3);
            c.rows.push(row);
        }
        c
    }

    fn line(name: &str, v: &[f64], slow_mean: f64) {
        println!(
            "{:<40} {:>8.0} {:>8.0} {:>8.0} {:>14.0}",
            name,
            percentile(v, 0.5),
            percentile(v, 0.9),
            percentile(v, 0.99),
            slow_mean
        );
    }

    pub(super) fn print(run: &Run) {
        for grow in [true, false] {
            let c = collect(run, grow);
            let case = if grow {
                "grow (A 2->0, B 1->2)"
            } else {
                "shrink (A 0->2, B 2->1)"
            };
            println!(
                "{case}: per-hop breakdown, µs ({} rounds followed to the end, {} with A's doorbell held by the rate bound; {} applied by a B worker at a safe point, {} run on the doorbell's thread)",
                c.rows.len(),
                c.held,
                c.by_worker,
                c.inline
            );
            for (k, &m) in c.missing.iter().enumerate().filter(|&(_, &m)| m > 0) {
                println!("  {m} rounds without a stamp for: {}", HOPS[k]);
            }
            if c.rows.is_empty() {
                continue;
            }
            // The slowest 5% of rounds by time to the worker's act.
            let mut order: Vec<usize> = (0..c.rows.len()).collect();
            order.sort_by(|&x, &y| c.totals[y].total_cmp(&c.totals[x]));
            let slow = &order[..c.rows.len().div_ceil(20)];
            let slow_mean = |f: &dyn Fn(usize) -> f64| {
                slow.iter().map(|&i| f(i)).sum::<f64>() / slow.len() as f64
            };
            println!(
                "{:<40} {:>8} {:>8} {:>8} {:>14}",
                "hop (each from the end of the previous)", "p50", "p90", "p99", "slowest 5%"
            );
            for (k, name) in HOPS.iter().enumerate() {
                line(name, &c.per_hop[k], slow_mean(&|i| c.rows[i][k]));
            }
            for (name, v) in [
                ("reaction: set_demand -> B's target set", &c.manager_part),
                ("end to end: set_demand -> worker acts", &c.totals),
            ] {
                line(name, v, slow_mean(&|i| v[i]));
            }
            if !c.a_grant.is_empty() {
                // A's grant is the CPU B gives up: with the manager's hand-over it waits
                // for B's worker to park (or for the hand-over deadline).
                let name = "A's grant: set_demand -> A's worker resumes";
                let mut v = c.a_grant.clone();
                v.sort_by(|x, y| y.total_cmp(x));
                let slow = &v[..v.len().div_ceil(20)];
                line(
                    name,
                    &c.a_grant,
                    slow.iter().sum::<f64>() / slow.len() as f64,
                );
            }
            println!();
        }
    }
}
