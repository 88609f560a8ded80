//! A partition configuration: a manager set up from a TOML file, programs placed in partitions
//! by name, lending and revocation between partitions.
//!
//! `cargo run --release --example partitions [CONFIG.toml]` (default: examples/partitions.toml)
//!
//! The manager runs inside this process with the configuration file; the programs are this
//! executable re-run as `partitions app NAME SECONDS` (separate processes, each a busy
//! partita-runtime pool as wide as the machine; the manager places them by `PARTITA_NAME`).
//! First two batch solvers run alone: the idle `interactive` partition lends them its CPU.
//! Then `ui` starts: its partition takes its CPU back. The manager's status is printed after
//! each step, as `partita status` would show it.

use std::process::{Child, Command};
use std::time::{Duration, Instant};

type BoxError = Box<dyn std::error::Error>;

fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("app") {
        let seconds: f64 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(1.0);
        return app(Duration::from_secs_f64(seconds));
    }
    let path = args.get(1).cloned().unwrap_or_else(|| {
        concat!(env!("CARGO_MANIFEST_DIR"), "/examples/partitions.toml").to_string()
    });
    // Errors name the key and the value, e.g. `partition[0].policy = "lottery"`.
    let config = partita_manager::Config::from_file(std::path::Path::new(&path))?;
    let dir = std::env::temp_dir().join(format!("partita-partitions-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let manager = partita_manager::spawn_in_process(config, dir.join("m.sock"))?;
    let exe = std::env::current_exe()?;
    let start = |name: &str, seconds: f64| -> Result<Child, BoxError> {
        Ok(Command::new(&exe)
            .args(["app", name, &seconds.to_string()])
            .env("PARTITA_SOCKET", manager.socket())
            .env("PARTITA_NAME", name)
            .spawn()?)
    };

    let mut children = vec![start("solver-a", 3.0)?, start("solver-b", 3.0)?];
    settle(&manager, 2);
    println!("== two batch solvers; `interactive` is idle and lends its CPU\n");
    print!("{}", manager.status().to_table());

    children.push(start("ui", 1.5)?);
    settle(&manager, 3);
    println!("\n== `ui` starts: `interactive` takes its CPU back\n");
    print!("{}", manager.status().to_table());

    for mut c in children {
        c.wait()?;
    }
    manager.shutdown()?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// Wait until `n` applications are registered, then for a few reallocation periods.
fn settle(manager: &partita_manager::ManagerHandle, n: usize) {
    let t = Instant::now();
    while manager.status().applications.len() < n && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(500));
}

/// One program: a pool as wide as the machine kept busy for `d`.
fn app(d: Duration) -> Result<(), BoxError> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let pool = partita_runtime::ThreadPoolBuilder::new()
        .num_threads(cpus)
        .build()?;
    let t = Instant::now();
    while t.elapsed() < d {
        pool.install(|| {
            partita_runtime::scope(|s| {
                for _ in 0..4 * cpus {
                    s.spawn(|_| {
                        let t = Instant::now();
                        while t.elapsed() < Duration::from_micros(200) {
                            std::hint::spin_loop();
                        }
                    });
                }
            })
        });
    }
    Ok(())
}
