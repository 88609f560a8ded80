//! Short programs beside a long one (issue 11: "a program that lives less than one period
//! does not disturb the others"): a long-running fine-grained program L, and a stream of
//! short programs started one after another for as long as L runs, each living a fraction of
//! the manager's reallocation period (300 ms) — the shape of a test suite or a shell loop of
//! rayon tools beside a long job.
//!
//! `cargo bench --bench short_programs` (short: 3 runs)
//! `cargo bench --bench short_programs -- --runs 7 --long-rounds 10000 --short-rounds 250`
//!
//! Two ways to share, run interleaved (every run does each mode once, in turn), median of
//! the runs:
//!
//! - `uncontrolled`: every pool as wide as the machine, no manager (`PARTITA=off`);
//! - `process control`: the same pools registered with a real `partita serve` started as
//!   README says (no config: the shipped defaults, system-wide accounting; a private
//!   `--socket`), one per run.
//!
//! Per mode: L's time alone and beside the stream (the ratio is how much the stream slowed
//! it), the short programs completed meanwhile and their median lifetime, and how often L's
//! workers parked (each short program's arrival and departure may move a CPU). Both programs
//! are `benches/common/scope_loop.rs`; every task is checked to run exactly once.

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
use std::path::Path;
use std::time::Instant;

/// Options (after `--` with `cargo bench`).
#[derive(Debug, Clone, Parser)]
struct Args {
    /// Repetitions of every mode (median reported).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Scope rounds of the long program.
    #[arg(long, default_value_t = 5000)]
    long_rounds: u64,
    /// Scope rounds of each short program.
    #[arg(long, default_value_t = 250)]
    short_rounds: u64,
    #[command(flatten)]
    task: TaskArgs,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    Uncontrolled,
    ProcessControl,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Uncontrolled => "uncontrolled",
            Mode::ProcessControl => "process control",
        }
    }
}

/// One run of one mode.
#[derive(Debug, Clone, Default)]
struct Sample {
    long_alone: f64,
    /// Where the CPU time went while L ran alone (`benches/common/cpu_account.rs`).
    alone_usage: Usage,
    long_beside: f64,
    shorts: usize,
    short_median: f64,
    parks: u64,
    /// The `partita serve` child's CPU time over the whole run (L alone, then beside the
    /// stream), s.
    manager_cpu: f64,
}

fn main() -> Result<(), BoxError> {
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some("child") {
        return child(&ChildArgs::parse_from(&argv[1..]));
    }
    let args = Args::parse();
    if args.runs == 0 || args.long_rounds == 0 || args.short_rounds == 0 {
        return Err("--runs, --long-rounds and --short-rounds must be at least 1".into());
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let shape = |rounds| Shape {
        threads: cpus,
        rounds,
        tasks: args.task.tasks.unwrap_or(4 * cpus as u64),
        task_us: args.task.task_us,
    };
    let (long, short) = (shape(args.long_rounds), shape(args.short_rounds));
    println!(
        "long program: {} rounds, short programs: {} rounds ({} tasks of {} µs per round), \
         pools of {cpus} on {cpus} CPUs, {} runs",
        long.rounds, short.rounds, long.tasks, long.task_us, args.runs
    );
    let modes = [Mode::Uncontrolled, Mode::ProcessControl];
    let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); modes.len()];
    for run in 0..args.runs {
        for (mode, v) in modes.iter().zip(&mut samples) {
            let s = run_mode(*mode, long, short)?;
            eprintln!(
                "run {}/{}: {:<16} L alone {:.3} s, beside {:.3} s, {} shorts (median {:.1} ms), {} parks",
                run + 1,
                args.runs,
                mode.name(),
                s.long_alone,
                s.long_beside,
                s.shorts,
                s.short_median * 1e3,
                s.parks
            );
            v.push(s);
        }
    }
    print_table(&modes, &samples);
    Ok(())
}

fn print_table(modes: &[Mode], samples: &[Vec<Sample>]) {
    let med = |v: &[Sample], f: fn(&Sample) -> f64| median(&v.iter().map(f).collect::<Vec<_>>());
    println!(
        "| mode | L alone s | L beside the stream s | slowdown | shorts done | short lifetime ms \
         | L parks per short | L alone: its CPU s | idle CPU s | manager CPU s (whole run) |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (mode, v) in modes.iter().zip(samples) {
        let ratio = med(v, |s| s.long_beside / s.long_alone);
        println!(
            "| {} | {:.3} | {:.3} | {:.2}× | {:.0} | {:.1} | {:.2} | {:.3} | {:.3} | {:.3} |",
            mode.name(),
            med(v, |s| s.long_alone),
            med(v, |s| s.long_beside),
            ratio,
            med(v, |s| s.shorts as f64),
            med(v, |s| s.short_median) * 1e3,
            med(v, |s| s.parks as f64 / s.shorts.max(1) as f64),
            med(v, |s| s.alone_usage.children.as_secs_f64()),
            med(v, |s| s.alone_usage.idle.as_secs_f64()),
            med(v, |s| s.manager_cpu),
        );
    }
}

/// L alone, then L beside a stream of short programs, in `mode`.
fn run_mode(mode: Mode, long: Shape, short: Shape) -> Result<Sample, BoxError> {
    let dir = std::env::temp_dir().join(format!("partita-short-bench-{}", std::process::id()));
    let manager = if mode == Mode::ProcessControl {
        Some(serve::Serve::start(&dir)?)
    } else {
        None
    };
    let socket = manager.as_ref().map(|m| m.socket().to_path_buf());
    let cpu0 = manager.as_ref().map(|m| m.cpu_time()).unwrap_or_default();
    let mut sample = measure(long, short, socket.as_deref());
    if let (Ok(s), Some(m)) = (&mut sample, &manager) {
        s.manager_cpu = m.cpu_time().saturating_sub(cpu0).as_secs_f64();
    }
    if let Some(m) = manager {
        m.stop()?;
    }
    let _ = std::fs::remove_dir_all(&dir);
    sample.map_err(|e| format!("{}: {e}", mode.name()).into())
}

fn measure(long: Shape, short: Shape, socket: Option<&Path>) -> Result<Sample, BoxError> {
    let exe = std::env::current_exe()?;
    let before = Snapshot::take();
    let t = Instant::now();
    let (ok, _) = finish(copy(&exe, long, "long", socket, true)?)?;
    let long_alone = t.elapsed().as_secs_f64();
    let alone_usage = before.until(Snapshot::take());
    if !ok {
        return Err("the long program failed alone".into());
    }
    let t = Instant::now();
    let mut l = copy(&exe, long, "long", socket, true)?;
    let mut lifetimes = Vec::new();
    while l.try_wait()?.is_none() {
        let s = Instant::now();
        let status = copy(&exe, short, "short", socket, false)?.wait()?;
        if !status.success() {
            return Err(format!("a short program failed ({status})").into());
        }
        lifetimes.push(s.elapsed().as_secs_f64());
    }
    let long_beside = t.elapsed().as_secs_f64();
    let (ok, parks) = finish(l)?;
    if !ok {
        return Err("the long program failed beside the stream".into());
    }
    Ok(Sample {
        long_alone,
        alone_usage,
        long_beside,
        shorts: lifetimes.len(),
        short_median: if lifetimes.is_empty() {
            0.0
        } else {
            median(&lifetimes)
        },
        parks,
        manager_cpu: 0.0,
    })
}

/// Wait for a copy started with `print_stats`: whether it succeeded, and its parks.
fn finish(c: std::process::Child) -> Result<(bool, u64), BoxError> {
    let out = c.wait_with_output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let parks = text
        .split_whitespace()
        .skip_while(|w| *w != "parks")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    Ok((out.status.success(), parks))
}
