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
//! - `process control`: pools as wide as the machine, registered with a real `partita serve`
//!   started for the run as README says (no config: the shipped defaults, with system-wide
//!   accounting of outside load; a private `--socket`), which sets each pool's target.
//!
//! The copies are this executable re-run as `multiprogramming child …`; each checks that every
//! task ran exactly once and exits non-zero otherwise, which fails the benchmark.

#[path = "common/cpu_account.rs"]
mod cpu_account;
#[path = "common/scope_loop.rs"]
mod scope_loop;
#[path = "common/serve.rs"]
mod serve;

use clap::Parser;
use cpu_account::{Snapshot, Usage};
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
    let mut times: Vec<(Mode, Vec<Run>)> = Mode::ALL.iter().map(|&m| (m, Vec::new())).collect();
    for run in 0..args.runs {
        for (mode, v) in &mut times {
            let r = run_mode(*mode, &args, cpus, tasks)?;
            eprintln!(
                "run {}/{}: {:<16} {:.3} s (CPU: copies {:.3} s, manager {:.3} s, idle {:.3} s, other {:.3} s)",
                run + 1,
                args.runs,
                mode.name(),
                r.makespan,
                r.usage.children.as_secs_f64(),
                r.manager.as_secs_f64(),
                r.usage.idle.as_secs_f64(),
                other_cpu(&r, cpus),
            );
            v.push(r);
        }
    }
    print_table(&times, cpus);
    Ok(())
}

/// One run of one mode: its makespan (s) and where the machine's CPU time went meanwhile.
struct Run {
    makespan: f64,
    usage: Usage,
    /// The `partita serve` child's CPU time over the run.
    manager: std::time::Duration,
}

/// The table: medians per mode. The CPU columns say where a slower mode lost its time
/// (`benches/common/cpu_account.rs`): the copies' own CPU time, the manager's (the `partita
/// serve` child), and the CPUs' idle time.
fn print_table(times: &[(Mode, Vec<Run>)], cpus: usize) {
    let med = |v: &[Run], f: fn(&Run) -> f64| median(&v.iter().map(f).collect::<Vec<_>>());
    let pc = times
        .iter()
        .find(|(m, _)| *m == Mode::ProcessControl)
        .map_or(f64::NAN, |(_, v)| med(v, |r| r.makespan));
    println!(
        "| mode | makespan s (median) | runs (s) | vs process control \
         | copies' CPU s | manager CPU s | idle CPU s | other CPU s |"
    );
    println!("|---|---:|---|---:|---:|---:|---:|---:|");
    for (mode, v) in times {
        let runs: Vec<String> = v.iter().map(|r| format!("{:.2}", r.makespan)).collect();
        let makespan = med(v, |r| r.makespan);
        println!(
            "| {} | {makespan:.3} | {} | {:.2}× | {:.3} | {:.3} | {:.3} | {:.3} |",
            mode.name(),
            runs.join(" "),
            makespan / pc,
            med(v, |r| r.usage.children.as_secs_f64()),
            med(v, |r| r.manager.as_secs_f64()),
            med(v, |r| r.usage.idle.as_secs_f64()),
            median(&v.iter().map(|r| other_cpu(r, cpus)).collect::<Vec<_>>()),
        );
    }
}

/// Run the copies together in `mode`: the makespan, and the CPU time used from the first
/// copy's start to the last one's exit.
fn run_mode(mode: Mode, args: &Args, cpus: usize, tasks: u64) -> Result<Run, BoxError> {
    let dir = std::env::temp_dir().join(format!("partita-mp-bench-{}", std::process::id()));
    let manager = if mode == Mode::ProcessControl {
        Some(serve::Serve::start(&dir)?)
    } else {
        None
    };
    let manager_cpu0 = manager.as_ref().map(|m| m.cpu_time()).unwrap_or_default();
    let threads = match mode {
        Mode::StaticSplit => (cpus / args.copies).max(1),
        Mode::Uncontrolled | Mode::ProcessControl => cpus,
    };
    let exe = std::env::current_exe()?;
    let before = Snapshot::take();
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
    let usage = before.until(Snapshot::take());
    let manager_cpu = manager
        .as_ref()
        .map(|m| m.cpu_time().saturating_sub(manager_cpu0))
        .unwrap_or_default();
    if let Some(m) = manager {
        m.stop()?;
    }
    let _ = std::fs::remove_dir_all(&dir);
    match failed {
        Some(s) => Err(format!("{}: a copy failed ({s})", mode.name()).into()),
        None => Ok(Run {
            makespan,
            usage,
            manager: manager_cpu,
        }),
    }
}

/// The rest of `cpus × makespan` (s): CPU time neither the copies, the manager, this process
/// nor idle took (other processes, the kernel's own threads). Small negative values are
/// rounding (rusage advances per accounting tick, idle per µs).
fn other_cpu(r: &Run, cpus: usize) -> f64 {
    let u = &r.usage;
    cpus as f64 * r.makespan - (u.idle + u.children + u.own + r.manager).as_secs_f64()
}
