//! BBMA, nBBMA and the bandwidth demo mix (Antonopoulos et al.'s microbenchmarks on
//! partita-runtime, reporting their traffic with `partita_runtime::report_bytes`).
//!
//! ```text
//! cargo run --release -p partita-sim --example bandwidth_mix -- bbma  [UNITS]   # one BBMA
//! cargo run --release -p partita-sim --example bandwidth_mix -- nbbma [UNITS]   # one nBBMA
//! cargo run --release -p partita-sim --example bandwidth_mix -- mix   [ROUNDS]  # the demo
//! ```
//!
//! - BBMA: column-wise writes over an array of 64-byte rows twice the last-level cache (capped
//!   at 256 MiB: a VM may report its host's whole LLC): every write fetches a new line.
//! - nBBMA: row-wise sweeps over half the L2: every access hits.
//! - mix: two BBMA and two nBBMA (one worker each) under an in-process manager, once with
//!   equipartition and once with `policy = "bandwidth"` (capacity measured by the triad first,
//!   counter source self-report), interleaved, ROUNDS rounds; prints the mean turnaround of each
//!   run and the median ratio bandwidth / equipartition. Where a PMU exists, set
//!   `PARTITA_MIX_SOURCES=perf-event` to use hardware counters instead of self-report.

use partita_runtime::{report_bytes, ThreadPoolBuilder};
use partita_stats::median;
use std::process::Command;
use std::time::{Duration, Instant};

const LINE: usize = 64;
const MAX_BBMA: usize = 256 << 20;

fn cache_size(level: &str) -> Option<usize> {
    (0..8).find_map(|i| {
        let base = format!("/sys/devices/system/cpu/cpu0/cache/index{i}");
        let l = std::fs::read_to_string(format!("{base}/level")).ok()?;
        if l.trim() != level {
            return None;
        }
        partita_numa::triad::parse_size(
            std::fs::read_to_string(format!("{base}/size")).ok()?.trim(),
        )
    })
}

/// One unit of BBMA: one column of writes over every row (a new line per write).
fn bbma(units: usize) {
    let bytes = (2 * cache_size("3").unwrap_or(32 << 20)).min(MAX_BBMA);
    let rows = bytes / LINE;
    let mut a = vec![0u64; rows * LINE / 8];
    let pool = ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("pool");
    for u in 0..units {
        let col = u % (LINE / 8);
        pool.install(|| {
            // Report as it goes (a relaxed atomic add per 64 Ki lines) so that every quantum
            // sees the traffic of the time it ran.
            for start in (0..rows).step_by(1 << 16) {
                let end = (start + (1 << 16)).min(rows);
                for r in start..end {
                    a[r * (LINE / 8) + col] += 1;
                }
                report_bytes(((end - start) * LINE) as u64);
            }
        });
    }
    std::hint::black_box(&a);
}

/// One unit of nBBMA: row-wise sweeps over half the L2, about as long as a BBMA unit.
fn nbbma(units: usize) {
    let bytes = cache_size("2").unwrap_or(1 << 20) / 2;
    let mut a = vec![1u64; bytes / 8];
    let pool = ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("pool");
    for _ in 0..units {
        pool.install(|| {
            for _ in 0..1024 {
                for x in a.iter_mut() {
                    *x = x.wrapping_mul(3).wrapping_add(1);
                }
            }
        });
        // Cache-resident: only the compulsory misses reach memory.
        report_bytes(0);
    }
    std::hint::black_box(&a);
}

/// CPU seconds used by this process's waited-for children so far (`/proc/self/stat` cutime +
/// cstime, in clock ticks of 1/100 s: Linux's USER_HZ), 0 where unreadable.
fn children_cpu_s() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces) start at field 3 (state).
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<f64> = rest
        .split_whitespace()
        .skip(13)
        .take(2)
        .filter_map(|x| x.parse().ok())
        .collect();
    f.iter().sum::<f64>() / 100.0
}

/// One run: mean turnaround (s); prints each application's finish time, the makespan and how
/// busy the applications kept the CPUs (their CPU time / (CPUs × makespan)).
fn run_mix_once(bandwidth: bool, capacity_gbps: f64, units: usize) -> f64 {
    let dir = std::env::temp_dir().join(format!("partita-mix-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let socket = dir.join(if bandwidth { "bw.sock" } else { "eq.sock" });
    let mut config = partita_manager::Config::default();
    config.uncontrolled = partita_manager::config::Uncontrolled::Tracked;
    if bandwidth {
        let sources = std::env::var("PARTITA_MIX_SOURCES").unwrap_or_else(|_| "self-report".into());
        config = partita_manager::Config::from_toml_str(&format!(
            "uncontrolled = \"tracked\"\n[bandwidth]\ncapacity_gbps = {capacity_gbps}\nsources = [\"{sources}\"]\n\
             [[partition]]\nname = \"default\"\npolicy = \"bandwidth\"\n"
        ))
        .expect("valid configuration");
    }
    let manager = partita_manager::spawn_in_process(config, socket.clone()).expect("manager");
    let exe = std::env::current_exe().expect("own executable");
    let cpu0 = children_cpu_s();
    let t = Instant::now();
    let mut children: Vec<_> = ["bbma", "bbma", "nbbma", "nbbma"]
        .iter()
        .enumerate()
        .map(|(i, role)| {
            Command::new(&exe)
                .args([role.to_string(), units.to_string()])
                .env("PARTITA_SOCKET", &socket)
                .env("PARTITA_NAME", format!("{role}-{i}"))
                .spawn()
                .expect("spawn")
        })
        .collect();
    let mut finished = [0.0f64; 4];
    let mut left: Vec<usize> = (0..children.len()).collect();
    while !left.is_empty() {
        left.retain(|&i| match children[i].try_wait() {
            Ok(Some(_)) => {
                finished[i] = t.elapsed().as_secs_f64();
                false
            }
            _ => true,
        });
        std::thread::sleep(Duration::from_millis(5));
    }
    manager.shutdown().expect("manager shutdown");
    let makespan = finished.iter().copied().fold(0.0, f64::max);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "  {}: finished bbma {:.2} {:.2} nbbma {:.2} {:.2} s; makespan {makespan:.2} s, CPUs busy {:.0} %",
        if bandwidth { "bandwidth    " } else { "equipartition" },
        finished[0],
        finished[1],
        finished[2],
        finished[3],
        100.0 * (children_cpu_s() - cpu0) / (threads as f64 * makespan)
    );
    finished.iter().sum::<f64>() / 4.0
}

fn mix(rounds: usize) {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let llc = cache_size("3").unwrap_or(32 << 20);
    let triad = partita_numa::triad::measure(threads, (4 * llc).clamp(32 << 20, MAX_BBMA), 3);
    println!(
        "capacity (triad, {threads} threads): {:.2} GB/s",
        triad.best_gbps
    );
    let units = 64;
    let (mut eq, mut bw, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for r in 0..rounds {
        // Interleaved, alternating which goes first.
        let (e, b) = if r % 2 == 0 {
            let e = run_mix_once(false, triad.best_gbps, units);
            (e, run_mix_once(true, triad.best_gbps, units))
        } else {
            let b = run_mix_once(true, triad.best_gbps, units);
            (run_mix_once(false, triad.best_gbps, units), b)
        };
        println!(
            "round {r}: mean turnaround equipartition {e:.2} s, bandwidth {b:.2} s, ratio {:.3}",
            b / e
        );
        eq.push(e);
        bw.push(b);
        ratios.push(b / e);
    }
    println!(
        "median of {rounds}: equipartition {:.2} s, bandwidth {:.2} s, ratio bandwidth/equipartition {:.3}",
        median(&eq),
        median(&bw),
        median(&ratios)
    );
}

/// Stamps to `DIR/PID.log` when `PARTITA_MIX_TRACE=DIR` (inherited by the children).
fn trace_to_file() {
    let Some(dir) = std::env::var_os("PARTITA_MIX_TRACE") else {
        return;
    };
    let path = std::path::Path::new(&dir).join(format!("{}.log", std::process::id()));
    match std::fs::File::create(&path) {
        Ok(f) => tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new("partita::hop=trace"))
            .with_writer(std::sync::Mutex::new(f))
            .with_ansi(false)
            .without_time()
            .init(),
        Err(e) => eprintln!("PARTITA_MIX_TRACE: {}: {e}", path.display()),
    }
}

fn main() {
    trace_to_file();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n = |d: usize| args.get(1).and_then(|s| s.parse().ok()).unwrap_or(d);
    match args.first().map(String::as_str) {
        Some("bbma") => bbma(n(64)),
        Some("nbbma") => nbbma(n(64)),
        Some("mix") | None => mix(n(3)),
        Some(other) => {
            eprintln!("unknown mode {other:?}: bbma [UNITS] | nbbma [UNITS] | mix [ROUNDS]");
            std::process::exit(2);
        }
    }
}
