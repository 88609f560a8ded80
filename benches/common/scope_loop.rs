//! The program the multiprogramming benchmarks run as separate processes: a partita-runtime
//! pool looping over `scope`s of short spinning tasks (the executable re-run as
//! `<bench> child …`). Every task must run exactly once, or the copy exits non-zero, which
//! fails the benchmark.

use clap::Parser;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

pub type BoxError = Box<dyn std::error::Error>;

/// The tasks' options, shared by the benchmarks.
#[derive(Debug, Clone, clap::Args)]
pub struct TaskArgs {
    /// Tasks per round (default: 4 per CPU).
    #[arg(long)]
    pub tasks: Option<u64>,
    /// Spin per task, µs.
    #[arg(long, default_value_t = 50)]
    pub task_us: u64,
    /// Passed by `cargo bench`; ignored.
    #[arg(long, hide = true)]
    pub bench: bool,
}

/// Options of one copy.
#[derive(Debug, Parser)]
pub struct ChildArgs {
    #[arg(long)]
    pub threads: usize,
    #[arg(long)]
    pub rounds: u64,
    #[arg(long)]
    pub tasks: u64,
    #[arg(long)]
    pub task_us: u64,
    /// Print the pool's park and unpark counts on exit (`parks P unparks U`).
    #[arg(long)]
    pub print_stats: bool,
}

/// What a copy runs.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub threads: usize,
    pub rounds: u64,
    pub tasks: u64,
    pub task_us: u64,
}

/// Start one copy of `exe` (`exe child …`) with this shape, registered with the manager at
/// `socket` or, without one, never registering (`PARTITA=off`).
pub fn copy(
    exe: &Path,
    shape: Shape,
    name: &str,
    socket: Option<&Path>,
    print_stats: bool,
) -> Result<std::process::Child, BoxError> {
    let mut c = Command::new(exe);
    c.arg("child")
        .args(["--threads", &shape.threads.to_string()])
        .args(["--rounds", &shape.rounds.to_string()])
        .args(["--tasks", &shape.tasks.to_string()])
        .args(["--task-us", &shape.task_us.to_string()])
        .env("PARTITA_NAME", name)
        .stdin(Stdio::null());
    if print_stats {
        c.arg("--print-stats").stdout(Stdio::piped());
    }
    match socket {
        Some(s) => c.env("PARTITA_SOCKET", s).env_remove("PARTITA"),
        None => c.env("PARTITA", "off").env_remove("PARTITA_SOCKET"),
    };
    Ok(c.spawn()?)
}

/// Busy for `d` of this thread's CPU time. Not wall time: a task spinning on the wall clock
/// "finishes" while it is descheduled, so oversubscription (time-sharing two busy workers on
/// one CPU) made its tasks cheaper and its makespan could fall below the work's CPU time
/// divided by the CPUs — a reward for exactly what process control removes.
fn spin(d: Duration) {
    let cpu = || {
        nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
            .map(Duration::from)
            // This thread's own CPU clock always exists; a zero would only end the spin.
            .unwrap_or_default()
    };
    let start = cpu();
    // The clock is a system call (not in the vDSO): read it every ~1 µs of arithmetic.
    let mut x = 1u64;
    while cpu().saturating_sub(start) < d {
        for _ in 0..256 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
}

/// One copy: `rounds` scopes of `tasks` short tasks; every task must run exactly once.
pub fn child(a: &ChildArgs) -> Result<(), BoxError> {
    let pool = partita_runtime::ThreadPoolBuilder::new()
        .num_threads(a.threads)
        .build()?;
    let ran = AtomicU64::new(0);
    let work = Duration::from_micros(a.task_us);
    for _ in 0..a.rounds {
        pool.install(|| {
            partita_runtime::scope(|s| {
                for _ in 0..a.tasks {
                    s.spawn(|_| {
                        spin(work);
                        ran.fetch_add(1, Ordering::Relaxed);
                    });
                }
            })
        });
    }
    let ran = ran.into_inner();
    if ran != a.rounds * a.tasks {
        return Err(format!("{ran} tasks ran, {} spawned", a.rounds * a.tasks).into());
    }
    if a.print_stats {
        let s = pool.stats();
        println!(
            "parks {} unparks {} suspended_ms {:.1} idle_ms {:.1}",
            s.parks,
            s.unparks,
            s.suspended_time.as_secs_f64() * 1e3,
            s.idle_time.as_secs_f64() * 1e3
        );
    }
    Ok(())
}
