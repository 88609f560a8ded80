//! What an idle pool costs while its manager client looks for a manager that is not running.
//!
//! `cargo run --release -p partita-runtime --example idle_client [SECONDS_PER_ROUND]`
//!
//! A pool built in the default (manager) mode while no manager runs keeps looking for one
//! (backoff 10 ms … 1 s, one `stat` per look), so that it registers when one appears. This
//! measures the process's CPU time and the client thread's wake-ups while such a pool idles,
//! against the same pool with `PARTITA=off` (no client thread), alternating rounds in one run.

use std::time::{Duration, Instant};

fn process_cpu() -> Duration {
    // SAFETY: getrusage writes into the struct we pass; an all-zero rusage is a valid value.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a valid out-pointer.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } != 0 {
        return Duration::ZERO;
    }
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// Context switches (voluntary + involuntary) of the threads named `partita-client`.
fn client_switches() -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    let mut total = 0;
    for t in tasks.flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if comm.trim() != "partita-client" {
            continue;
        }
        let status = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
        for line in status.lines() {
            if line.starts_with("voluntary_ctxt_switches")
                || line.starts_with("nonvoluntary_ctxt_switches")
            {
                total += line
                    .split_whitespace()
                    .last()
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0);
            }
        }
    }
    total
}

fn main() {
    let secs: f64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(3.0);
    let round = Duration::from_secs_f64(secs);
    let dir = std::env::temp_dir().join(format!("partita-idle-client-{}", std::process::id()));
    // SAFETY: the only readers of the environment in this process are the runtime's Rust
    // threads, which go through std::env and its lock.
    unsafe { std::env::set_var("PARTITA_SOCKET", dir.join("no-manager.sock")) };

    let mut rows = Vec::new();
    for r in 0..4 {
        let with_client = r % 2 == 0;
        if with_client {
            // SAFETY: as above.
            unsafe { std::env::remove_var("PARTITA") };
        } else {
            // SAFETY: as above.
            unsafe { std::env::set_var("PARTITA", "off") };
        }
        let pool = partita_runtime::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .expect("pool");
        pool.install(|| ());
        // Let the client's backoff reach its 1 s ceiling, as in a long-idle program.
        std::thread::sleep(Duration::from_millis(1500));
        let (cpu0, sw0, t0) = (process_cpu(), client_switches(), Instant::now());
        std::thread::sleep(round);
        let (cpu1, sw1, dt) = (process_cpu(), client_switches(), t0.elapsed());
        let frac = (cpu1 - cpu0).as_secs_f64() / dt.as_secs_f64();
        let wakeups = (sw1 - sw0) as f64 / dt.as_secs_f64();
        rows.push((with_client, frac, wakeups));
        drop(pool);
    }
    println!("idle pool of 2, no manager running, {secs} s per round (alternating)");
    println!("| round | client | process CPU (fraction of one CPU) | client wake-ups / s |");
    println!("|---|---|---:|---:|");
    for (i, (c, f, w)) in rows.iter().enumerate() {
        let client = if *c {
            "looking for a manager"
        } else {
            "PARTITA=off"
        };
        println!("| {} | {client} | {f:.6} | {w:.2} |", i + 1);
    }
}
