//! End-to-end reaction: one process changes its demand, another process's workers adjust.
//!
//! `cargo run --release --example reaction [ROUNDS]`
//!
//! A manager runs in this process (the daemon code on its own thread, as `partita serve`
//! would run it); two applications built on partita-runtime run as separate processes (this
//! executable re-run as `partita probe`). Application A alternates its demand between 0 and 2;
//! B (pool 2) grows to 2 workers when A's demand falls (the manager pushes: futex wake) and
//! shrinks to 1 when it rises (revocation: B's workers notice at a safe point). Each latency
//! runs from A's `set_demand` call to B's active-worker count changing, both stamped with
//! `CLOCK_MONOTONIC` in their own process.
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
        return partita_demo::probe::run(&p.probe);
    }
    let rounds: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(200);
    let (grow, shrink) = across_processes(rounds)?;
    let (base_grow, base_shrink) = in_process(rounds)?;
    print_table(rounds, &grow, &shrink, &base_grow, &base_shrink);
    Ok(())
}

/// Latencies (µs) from A's demand change to B's workers changing, through the manager:
/// `(grow, shrink)`.
fn across_processes(rounds: usize) -> Result<(Vec<f64>, Vec<f64>), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("partita-reaction-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let socket = dir.join("m.sock");
    let cfg = partita_manager::Config {
        uncontrolled: partita_manager::config::Uncontrolled::Tracked,
        ..Default::default()
    };
    let mgr = partita_manager::spawn_in_process(cfg, socket.clone())?;

    let (mut a, a_rx) = spawn_probe(&socket, "A")?;
    let (mut b, b_rx) = spawn_probe(&socket, "B")?;
    // Wait for the steady split 1 + 1.
    wait_for(
        &b_rx,
        |l| field(l, "active") == Some(1),
        Duration::from_secs(10),
    )
    .ok_or("B never settled at 1 worker")?;

    let mut grow = Vec::new();
    let mut shrink = Vec::new();
    let mut a_in = a.stdin.take().ok_or("no stdin")?;
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
            match wait_for(
                &b_rx,
                |l| field(l, "active") == Some(want),
                Duration::from_secs(5),
            ) {
                Some(l) => out.push(field(&l, "t").unwrap_or(t0).saturating_sub(t0) as f64 / 1e3),
                None => eprintln!("B did not reach {want} workers within 5 s"),
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    let _ = writeln!(a_in, "quit");
    let _ = b.stdin.as_mut().map(|s| writeln!(s, "quit"));
    std::thread::sleep(Duration::from_millis(200));
    let _ = a.kill();
    let _ = b.kill();
    let _ = a.wait();
    let _ = b.wait();
    mgr.shutdown()?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok((grow, shrink))
}

/// The baseline: in-process `set_target_workers` on a pool of 2, no manager, timed to the
/// active-worker count changing: `(grow, shrink)` in µs.
fn in_process(rounds: usize) -> Result<(Vec<f64>, Vec<f64>), Box<dyn std::error::Error>> {
    // A Manual pool never connects to a manager.
    let pool = partita_runtime::ThreadPoolBuilder::new()
        .num_threads(2)
        .process_control(partita_runtime::ProcessControl::Manual)
        .build()?;
    let busy = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    for _ in 0..2 {
        let busy = busy.clone();
        pool.spawn(move || {
            while busy.load(std::sync::atomic::Ordering::Relaxed) {
                let t = Instant::now();
                while t.elapsed() < Duration::from_micros(500) {}
                partita_runtime::yield_now();
            }
        });
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
    println!("end-to-end reaction, {rounds} rounds (µs; B's poll interval 50 µs included)");
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
