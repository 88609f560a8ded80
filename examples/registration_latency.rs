//! Registration latency while another client rings its doorbell 10^4 times per second
//! (target: p99 ≤ 2 ms).
//!
//! `cargo run --release -p partita-manager --example registration_latency [-- ROUNDS]`
//!
//! A manager runs in this process with `BACKGROUND` idle applications registered (child
//! processes, so that a reallocation has some work). During a storm a *ringer* child flips
//! its demand between 1 and its pool size and rings `DemandChanged` at `RATE` per second.
//! (Every client is its own process: the manager confines applications' processes, and it
//! must not confine itself.)
//! Registrants are child processes (the manager admits one registration per process): each
//! connects, says hello, waits for the welcome with its control page, and reports the time
//! that took; `PER_ROUND` of them per round, one after the other.
//! Rounds alternate between "quiet" (no ringing) and "storm", `ROUNDS` of each (default 3),
//! interleaved; the table gives the registrant's p50 / p99 per condition, and how many
//! reallocations the manager made per doorbell during the storm.

use partita_manager::config::Uncontrolled;
use partita_manager::Config;
use partita_protocol::page::PageMap;
use partita_protocol::wire::{ClientMessage, Hello};
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const RATE: u64 = 10_000;
const PER_ROUND: usize = 400;
const BACKGROUND: usize = 50;

/// Register (the one client path: `partita_protocol::client::register`); the stream (kept
/// open: the registration lives as long as it, blocking and without timeouts again, as it was here) and the control
/// page.
fn register(socket: &Path, name: &str, pool: u32) -> Result<(UnixStream, PageMap), String> {
    let (s, page) = partita_protocol::client::register(socket, Hello::new(pool, name))
        .map_err(|e| e.to_string())?;
    s.set_nonblocking(false)
        .and_then(|()| s.set_read_timeout(None))
        .and_then(|()| s.set_write_timeout(None))
        .map_err(|e| format!("socket options: {e}"))?;
    Ok((s, page))
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// The ringer: flip the demand and ring at `RATE` per second until `stop`; the doorbells
/// rung.
fn ring(socket: &Path, stop: &AtomicBool) -> Result<u64, String> {
    let (mut s, page) = register(socket, "ringer", 4)?;
    let frame = ClientMessage::DemandChanged.encode();
    let mut next = Instant::now();
    let mut rung = 0u64;
    while !stop.load(Ordering::Relaxed) {
        rung += 1;
        page.app
            .demand
            .store(if rung % 2 == 0 { 1 } else { 4 }, Ordering::Relaxed);
        if s.write_all(&frame).is_err() {
            break;
        }
        next += Duration::from_nanos(1_000_000_000 / RATE);
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        }
    }
    Ok(rung)
}

/// Child roles: `--once SOCKET` registers once and prints the milliseconds it took;
/// `--hold SOCKET` registers and stays until its stdin closes; `--ring SOCKET` rings until
/// its stdin closes and prints how many doorbells it rang.
fn child(role: &str, socket: &Path) -> Result<(), Box<dyn std::error::Error>> {
    if role == "--ring" {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        std::thread::spawn(move || {
            let _ = std::io::stdin().read_line(&mut String::new());
            s.store(true, Ordering::Relaxed);
        });
        println!("{}", ring(socket, &stop)?);
        return Ok(());
    }
    let t = Instant::now();
    let reg = register(socket, "child", 2)?;
    let ms = t.elapsed().as_secs_f64() * 1e3;
    if role == "--once" {
        println!("{ms}");
    } else {
        println!("ready");
        let _ = std::io::stdin().read_line(&mut String::new());
    }
    drop(reg);
    Ok(())
}

fn spawn_child(role: &str, socket: &Path) -> std::io::Result<std::process::Child> {
    std::process::Command::new(std::env::current_exe()?)
        .arg(role)
        .arg(socket)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
}

fn read_line(child: &mut std::process::Child) -> Result<String, Box<dyn std::error::Error>> {
    use std::io::BufRead;
    let out = child.stdout.as_mut().ok_or("no stdout")?;
    let mut line = String::new();
    std::io::BufReader::new(out).read_line(&mut line)?;
    Ok(line.trim().to_string())
}

/// Registration latencies (ms) per condition; doorbells and reallocations during storms.
struct Measured {
    quiet: Vec<f64>,
    storm: Vec<f64>,
    rings: u64,
    reallocs: u64,
}

/// `rounds` quiet and `rounds` storm rounds, interleaved.
fn measure(
    mgr: &partita_manager::ManagerHandle,
    socket: &Path,
    rounds: usize,
) -> Result<Measured, Box<dyn std::error::Error>> {
    let mut m = Measured {
        quiet: Vec::new(),
        storm: Vec::new(),
        rings: 0,
        reallocs: 0,
    };
    for r in 0..2 * rounds {
        let during_storm = r % 2 == 1;
        let mut ringer = match during_storm {
            true => Some(spawn_child("--ring", socket)?),
            false => None,
        };
        std::thread::sleep(Duration::from_millis(50));
        let reallocs0 = mgr.status().reallocations;
        let out = if during_storm {
            &mut m.storm
        } else {
            &mut m.quiet
        };
        for _ in 0..PER_ROUND {
            let mut c = spawn_child("--once", socket)?;
            let line = read_line(&mut c)?;
            c.wait()?;
            out.push(
                line.parse()
                    .map_err(|e| format!("child said {line:?}: {e}"))?,
            );
        }
        if let Some(mut c) = ringer.take() {
            m.reallocs += mgr.status().reallocations - reallocs0;
            drop(c.stdin.take());
            let line = read_line(&mut c)?;
            c.wait()?;
            m.rings += line
                .parse::<u64>()
                .map_err(|e| format!("ringer said {line:?}: {e}"))?;
        }
    }
    Ok(m)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if let [_, role, socket] = &args[..] {
        if role.starts_with("--") {
            return child(role, Path::new(socket));
        }
    }
    let rounds: usize = std::env::args()
        .nth(1)
        .map_or(Ok(3), |s| s.parse())
        .map_err(|e| format!("ROUNDS: {e}"))?;
    let dir = std::env::temp_dir().join(format!("partita-reglat-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let socket = dir.join("m.sock");
    let cfg = Config {
        uncontrolled: Uncontrolled::Tracked,
        ..Default::default()
    };
    let mgr = partita_manager::spawn_in_process(cfg, socket.clone())?;

    let mut background = Vec::new();
    for _ in 0..BACKGROUND {
        let mut c = spawn_child("--hold", &socket)?;
        if read_line(&mut c)? != "ready" {
            return Err("a background application did not register".into());
        }
        background.push(c);
    }
    let m = measure(&mgr, &socket, rounds)?;
    for mut c in background {
        drop(c.stdin.take());
        let _ = c.wait();
    }
    mgr.shutdown()?;
    let _ = std::fs::remove_dir_all(&dir);

    println!(
        "registration latency, {BACKGROUND} idle applications registered, {rounds} interleaved rounds of {PER_ROUND} per condition"
    );
    println!("| condition | registrations | p50 ms | p99 ms | max ms |");
    println!("|---|---|---|---|---|");
    let (mut quiet, mut stormy) = (m.quiet, m.storm);
    for (name, v) in [
        ("quiet", &mut quiet),
        ("doorbell storm (10^4/s)", &mut stormy),
    ] {
        v.sort_by(f64::total_cmp);
        println!(
            "| {name} | {} | {:.3} | {:.3} | {:.3} |",
            v.len(),
            percentile(v, 0.5),
            percentile(v, 0.99),
            v.last().copied().unwrap_or(0.0)
        );
    }
    println!(
        "storm: {} doorbells, {} reallocations ({:.3} per doorbell, registrations included)",
        m.rings,
        m.reallocs,
        m.reallocs as f64 / m.rings.max(1) as f64
    );
    Ok(())
}
