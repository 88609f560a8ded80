//! A program under a manager: its partita-runtime pool follows the allocation.
//!
//! `cargo run --release --example under_manager`
//!
//! The example starts a manager inside this process (the daemon `partita serve` runs, on its
//! own thread, on a private socket), builds a pool as wide as the machine and keeps it busy.
//! Alone, it gets every CPU; when a second program arrives (this executable re-run as
//! `under_manager competitor`, another process) the manager splits the CPUs and the pool
//! suspends workers at safe points to match; when the competitor exits the pool grows back.
//! Every 100 ms it prints the pool's target and active workers next to the manager's view.
//!
//! In your own program only the pool part is needed: build a `ThreadPoolBuilder` pool as
//! usual; with `PARTITA_SOCKET` (or the default socket) pointing at a running `partita serve`
//! it registers and follows the manager by itself.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

type BoxError = Box<dyn std::error::Error>;

fn main() -> Result<(), BoxError> {
    if std::env::args().nth(1).as_deref() == Some("competitor") {
        return competitor();
    }
    let dir = std::env::temp_dir().join(format!("partita-example-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let config = partita_manager::Config {
        // Count only registered programs as load, not the rest of this machine.
        uncontrolled: partita_manager::config::Uncontrolled::Tracked,
        realloc_period_ms: 100,
        ..Default::default()
    };
    let socket = dir.join("m.sock");
    // What an application needs: the socket (here set in its environment) and a pool.
    // SAFETY: no other thread exists yet (the manager starts on the next line), so nothing
    // reads the environment while it changes.
    unsafe {
        std::env::set_var("PARTITA_SOCKET", &socket);
        std::env::set_var("PARTITA_NAME", "example");
    }
    let manager = partita_manager::spawn_in_process(config, socket)?;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let pool = Arc::new(
        partita_runtime::ThreadPoolBuilder::new()
            .num_threads(cpus)
            .build()?,
    );
    let stop = Arc::new(AtomicBool::new(false));
    let busy = keep_busy(pool.clone(), stop.clone());

    println!(
        "{:>6}  {:>6} {:>6}  manager: applications (target)",
        "t (s)", "target", "active"
    );
    let t0 = Instant::now();
    let mut competitor = None;
    let mut finished = false;
    while t0.elapsed() < Duration::from_secs(4) {
        let t = t0.elapsed().as_secs_f64();
        if t >= 1.0 && competitor.is_none() && !finished {
            competitor = Some(
                std::process::Command::new(std::env::current_exe()?)
                    .arg("competitor")
                    .env("PARTITA_NAME", "competitor")
                    .spawn()?,
            );
            println!("-- a competitor starts (1.5 s of work)");
        }
        if let Some(c) = competitor.as_mut() {
            if c.try_wait()?.is_some() {
                competitor = None;
                finished = true;
                println!("-- the competitor exited");
            }
        }
        let apps: Vec<String> = manager
            .status()
            .applications
            .iter()
            .map(|a| format!("{} ({})", a.name, a.target))
            .collect();
        println!(
            "{t:>6.1}  {:>6} {:>6}  {}",
            pool.target_workers(),
            pool.active_workers(),
            apps.join(", ")
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, Ordering::Relaxed);
    let _ = busy.join();
    if let Some(mut c) = competitor {
        let _ = c.kill();
        let _ = c.wait();
    }
    manager.shutdown()?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// Rounds of short tasks on `pool` until `stop`: a pool with work for every worker.
fn keep_busy(
    pool: Arc<partita_runtime::ThreadPool>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let tasks = 4 * pool.current_num_threads();
        while !stop.load(Ordering::Relaxed) {
            pool.install(|| {
                partita_runtime::scope(|s| {
                    for _ in 0..tasks {
                        s.spawn(|_| spin(Duration::from_micros(200)));
                    }
                })
            });
        }
    })
}

fn spin(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// The second program: a pool as wide as the machine, busy for 1.5 s.
fn competitor() -> Result<(), BoxError> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let pool = Arc::new(
        partita_runtime::ThreadPoolBuilder::new()
            .num_threads(cpus)
            .build()?,
    );
    let stop = Arc::new(AtomicBool::new(false));
    let busy = keep_busy(pool, stop.clone());
    std::thread::sleep(Duration::from_millis(1500));
    stop.store(true, Ordering::Relaxed);
    busy.join().map_err(|_| "the busy thread panicked")?;
    Ok(())
}
