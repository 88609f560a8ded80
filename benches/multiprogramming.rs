//! End-to-end multiprogramming benchmark: several copies of a fine-grained parallel program
//! (partita-runtime, `scope` loops of short tasks) share the machine as separate processes.
//!
//! `cargo bench --bench multiprogramming` (short: 3 runs of a small problem)
//! `cargo bench --bench multiprogramming -- --runs 7 --rounds 3000` (the long run)
//!
//! Three ways to share, run interleaved (every run does each mode once, in turn, so slow
//! drifts of the machine hit all of them), median of the runs, ratios to process control:
//!
//! - `uncontrolled`: every copy has a pool as wide as the machine, no manager (`PARTITA=off`);
//! - `static split`: the best fixed split without a manager: each copy gets
//!   `max(1, CPUs / copies)` workers;
//! - `process control`: pools as wide as the machine, registered with a manager running in
//!   this process (`partita_manager::spawn_in_process`), which sets each pool's target.
//!
//! The copies are this executable re-run as `multiprogramming child …`; each checks that every
//! task ran exactly once and exits non-zero otherwise, which fails the benchmark.

#[path = "common/scope_loop.rs"]
mod scope_loop;

use clap::Parser;
use partita_stats::median;
use scope_loop::{child, copy, BoxError, ChildArgs, Shape, TaskArgs};
use std::time::Instant;

/// Options (after `--` with `cargo bench`).
#[derive(Debug, Clone, Parser)]
struct Args {
    /// Repetitions of every mode (median reported).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Copies of the program running together.
    #[arg(long, default_value_t = 4)]
    copies: usize,
    /// Scope rounds per copy.
    #[arg(long, default_value_t = 300)]
    rounds: u64,
    /// The manager's reallocation period in process-control mode, ms.
    #[arg(long, default_value_t = partita_manager::Config::default().realloc_period_ms)]
    realloc_ms: u64,
    #[command(flatten)]
    task: TaskArgs,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    Uncontrolled,
    StaticSplit,
    ProcessControl,
}

impl Mode {
    const ALL: [Mode; 3] = [Mode::Uncontrolled, Mode::StaticSplit, Mode::ProcessControl];

    fn name(self) -> &'static str {
        match self {
            Mode::Uncontrolled => "uncontrolled",
            Mode::StaticSplit => "static split",
            Mode::ProcessControl => "process control",
        }
    }
}

fn main() -> Result<(), BoxError> {
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some("child") {
        return child(&ChildArgs::parse_from(&argv[1..]));
    }
    let args = Args::parse();
    if args.runs == 0 || args.copies == 0 || args.rounds == 0 {
        return Err("--runs, --copies and --rounds must be at least 1".into());
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let tasks = args.task.tasks.unwrap_or(4 * cpus as u64);
    println!(
        "{} copies of a scope loop ({} rounds × {tasks} tasks of {} µs) on {cpus} CPUs, {} runs",
        args.copies, args.rounds, args.task.task_us, args.runs
    );
    let mut times: Vec<(Mode, Vec<f64>)> = Mode::ALL.iter().map(|&m| (m, Vec::new())).collect();
    for run in 0..args.runs {
        for (mode, v) in &mut times {
            let t = run_mode(*mode, &args, cpus, tasks)?;
            eprintln!(
                "run {}/{}: {:<16} {t:.3} s",
                run + 1,
                args.runs,
                mode.name()
            );
            v.push(t);
        }
    }
    print_table(&times);
    Ok(())
}

fn print_table(times: &[(Mode, Vec<f64>)]) {
    let pc = times
        .iter()
        .find(|(m, _)| *m == Mode::ProcessControl)
        .map_or(f64::NAN, |(_, v)| median(v));
    println!("| mode | makespan s (median) | runs (s) | vs process control |");
    println!("|---|---:|---|---:|");
    for (mode, v) in times {
        let runs: Vec<String> = v.iter().map(|t| format!("{t:.2}")).collect();
        println!(
            "| {} | {:.3} | {} | {:.2}× |",
            mode.name(),
            median(v),
            runs.join(" "),
            median(v) / pc
        );
    }
}

/// Run the copies together in `mode`; the makespan in seconds.
fn run_mode(mode: Mode, args: &Args, cpus: usize, tasks: u64) -> Result<f64, BoxError> {
    let dir = std::env::temp_dir().join(format!("partita-mp-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let socket = dir.join("m.sock");
    let manager = if mode == Mode::ProcessControl {
        let config = partita_manager::Config {
            // Only the copies count, not whatever else the machine runs.
            uncontrolled: partita_manager::config::Uncontrolled::Tracked,
            realloc_period_ms: args.realloc_ms,
            ..Default::default()
        };
        Some(partita_manager::spawn_in_process(config, socket.clone())?)
    } else {
        None
    };
    let threads = match mode {
        Mode::StaticSplit => (cpus / args.copies).max(1),
        Mode::Uncontrolled | Mode::ProcessControl => cpus,
    };
    let exe = std::env::current_exe()?;
    let t0 = Instant::now();
    let mut children = Vec::new();
    let shape = Shape {
        threads,
        rounds: args.rounds,
        tasks,
        task_us: args.task.task_us,
    };
    for _ in 0..args.copies {
        let socket = manager.as_ref().map(|m| m.socket());
        children.push(copy(&exe, shape, "scope-loop", socket, false)?);
    }
    let mut failed = None;
    for mut c in children {
        let status = c.wait()?;
        if !status.success() {
            failed = Some(status);
        }
    }
    let makespan = t0.elapsed().as_secs_f64();
    if let Some(m) = manager {
        m.shutdown()?;
    }
    let _ = std::fs::remove_dir_all(&dir);
    match failed {
        Some(s) => Err(format!("{}: a copy failed ({s})", mode.name()).into()),
        None => Ok(makespan),
    }
}
