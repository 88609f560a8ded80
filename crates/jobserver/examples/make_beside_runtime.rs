//! Benchmark: `make -j16` of 16 CPU-bound jobs beside a 2-worker partita-runtime program on a
//! manager with 2 CPUs, plain (`make -j16` time-shares the CPUs with the program) against
//! through the jobserver (`partita run --jobserver -- make -j16`: the build's jobs follow its
//! allocation). Runs alternate (interleaved); the table shows medians and the ratio
//! jobserver / plain (≤ 1.0: no later than plain).
//!
//! `cargo run --release -p partita-jobserver --example make_beside_runtime -- [REPS] [JOB_ITERS] [PROGRAM_TASKS]`
//! (defaults 3, 6000000, 4000). Needs GNU make, awk and 2 CPUs.

use partita_jobserver::stamps;
use partita_manager::{config::Uncontrolled, spawn_in_process, Config};
use std::path::Path;
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

fn spin(iters: u64) -> u64 {
    let mut x = iters;
    for _ in 0..iters {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
    }
    x
}

fn split(lo: u32, hi: u32) -> u64 {
    if hi - lo == 1 {
        return spin(250_000);
    }
    let mid = lo + (hi - lo) / 2;
    let (a, b) = partita_runtime::join(|| split(lo, mid), || split(mid, hi));
    a ^ b
}

#[derive(Clone, Copy)]
struct Run {
    build: Duration,
    program: Duration,
    both: Duration,
}

/// One run: start the build, run the program, wait for both.
fn run_once(
    mode: &str,
    dir: &Path,
    socket: &Path,
    pool: &partita_runtime::ThreadPool,
    tasks: u32,
) -> Run {
    let _ = std::fs::remove_dir_all(dir.join("stamps"));
    std::fs::create_dir_all(dir.join("stamps")).expect("stamp dir");
    let start = Instant::now();
    let mut cmd = if mode == "plain" {
        let mut c = Command::new("make");
        c.arg("-j16");
        c
    } else {
        let mut c = Command::new(std::env::current_exe().expect("own path"));
        c.args(["__jobserver", "--socket"]).arg(socket);
        if mode == "unpinned" {
            c.arg("--no-confine");
        }
        c.args(["--", "make", "-j16"]);
        c
    };
    let mut child = cmd
        .current_dir(dir)
        .env_remove("MAKEFLAGS")
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("start the build");
    let pid = child.id() as i32;
    let sock = socket.to_path_buf();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop2 = stop.clone();
    let sampler = std::thread::spawn(move || {
        let mut v = Vec::new();
        while !stop2.load(std::sync::atomic::Ordering::Relaxed) {
            if let Ok(st) = partita_manager::query_status(&sock) {
                let b = st.app_by_pid(pid).map(|a| (a.target, a.demand, a.active));
                let p = st
                    .applications
                    .iter()
                    .find(|a| a.pid == std::process::id() as i32)
                    .map(|a| (a.target, a.demand));
                v.push((start.elapsed().as_millis(), b, p));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        v
    });
    let waiter = std::thread::spawn(move || {
        let ok = child.wait().map(|s| s.success()).unwrap_or(false);
        (ok, start.elapsed())
    });
    let x = pool.install(|| split(0, tasks));
    std::hint::black_box(x);
    let program = start.elapsed();
    let (ok, build) = waiter.join().expect("waiter");
    assert!(ok, "{mode} build failed");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let samples = sampler.join().expect("sampler");
    if std::env::var_os("PJ_DEBUG").is_some() {
        let mut last = None;
        for (t, b, p) in samples {
            if last != Some((b, p)) {
                eprintln!(
                    "  {t:6} ms build (target, demand, out) {b:?} program (target, demand) {p:?}"
                );
                last = Some((b, p));
            }
        }
    }
    let jobs = stamps::read_intervals(&dir.join("stamps")).map_or(0, |v| v.len());
    assert_eq!(jobs, 16, "{mode}: every job completes");
    Run {
        build,
        program,
        both: build.max(program),
    }
}

/// The median of durations (partita-stats' median, on seconds).
fn median_duration(v: Vec<Duration>) -> Duration {
    let secs: Vec<f64> = v.iter().map(Duration::as_secs_f64).collect();
    Duration::from_secs_f64(partita_stats::median(&secs))
}

/// The `__jobserver` re-invocation: this binary acting as `partita jobserver`.
fn jobserver_child(args: &[String]) -> ExitCode {
    use clap::Parser;
    #[derive(Parser)]
    struct Js {
        #[command(flatten)]
        a: partita_jobserver::JobserverRunArgs,
    }
    let js = Js::parse_from(std::iter::once("jobserver".to_string()).chain(args.iter().cloned()));
    match partita_jobserver::run_jobserver(&js.a) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("partita: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The medians per mode, their ratios to `plain`, and the paired per-repetition ratios.
fn print_table(
    runs: &[(&'static str, Run)],
    modes: &[&'static str],
    iters: u64,
    tasks: u32,
    reps: usize,
) {
    let med = |mode: &str, f: fn(&Run) -> Duration| {
        median_duration(
            runs.iter()
                .filter(|(m, _)| *m == mode)
                .map(|(_, r)| f(r))
                .collect(),
        )
    };
    println!(
        "make -j16 (16 jobs x awk {iters}) beside a 2-worker partita-runtime program ({tasks} tasks), manager on 2 CPUs, median of {reps}"
    );
    println!("| mode | build s | program s | both done s | mean completion s |");
    println!("|---|---|---|---|---|");
    let fields: [fn(&Run) -> Duration; 4] = [
        |r| r.build,
        |r| r.program,
        |r| r.both,
        |r| (r.build + r.program) / 2,
    ];
    for mode in modes.iter().copied() {
        let cells: Vec<String> = fields
            .iter()
            .map(|f| format!("{:.2}", med(mode, *f).as_secs_f64()))
            .collect();
        println!("| {mode} | {} |", cells.join(" | "));
    }
    for mode in modes.iter().copied().filter(|m| *m != "plain") {
        let ratios: Vec<String> = fields
            .iter()
            .map(|f| {
                format!(
                    "{:.2}",
                    med(mode, *f).as_secs_f64() / med("plain", *f).as_secs_f64()
                )
            })
            .collect();
        println!("| ratio {mode}/plain | {} |", ratios.join(" | "));
    }
    // Paired: each repetition's ratio (the two modes ran back to back), then the median.
    for mode in modes.iter().copied().filter(|m| *m != "plain") {
        let of = |m: &'static str| -> Vec<Run> {
            runs.iter()
                .filter(|(x, _)| *x == m)
                .map(|(_, r)| *r)
                .collect()
        };
        let mut paired: Vec<f64> = of(mode)
            .into_iter()
            .zip(of("plain"))
            .map(|(a, b)| a.both.as_secs_f64() / b.both.as_secs_f64())
            .collect();
        paired.sort_by(f64::total_cmp);
        println!(
            "paired {mode}/plain both-done ratios (sorted): {:.2?}; median {:.2}",
            paired,
            paired[paired.len() / 2]
        );
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("__jobserver") {
        return jobserver_child(&args[2..]);
    }
    let reps: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(3);
    let iters: u64 = args
        .get(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(6_000_000);
    let tasks: u32 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(4000);
    // `--no-confine` runs as mode `unpinned` when asked for (PJ_UNPINNED=1).
    let mut modes = vec!["plain", "jobserver"];
    if std::env::var_os("PJ_UNPINNED").is_some() {
        modes.push("unpinned");
    }
    let dir = std::env::temp_dir().join(format!("pj-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    std::fs::write(
        dir.join("Makefile"),
        stamps::cpu_bound_makefile(16, &dir.join("stamps"), iters),
    )
    .expect("Makefile");
    let cfg = Config {
        cpus: "0-1".into(),
        uncontrolled: Uncontrolled::Tracked,
        cgroups: false,
        ..Default::default()
    };
    let socket = dir.join("m.sock");
    // SAFETY: no other thread exists yet (the manager starts on the next line).
    unsafe { std::env::set_var("PARTITA_SOCKET", &socket) };
    let manager = spawn_in_process(cfg, socket.clone()).expect("manager");
    let pool = partita_runtime::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .expect("pool");
    let mut runs: Vec<(&str, Run)> = Vec::new();
    for r in 0..reps {
        // Alternate which mode goes first.
        let mut order = modes.clone();
        order.rotate_left(r % modes.len());
        for mode in order {
            let run = run_once(mode, &dir, &socket, &pool, tasks);
            eprintln!(
                "rep {r} {mode:9} build {:6.2} s  program {:6.2} s  both {:6.2} s",
                run.build.as_secs_f64(),
                run.program.as_secs_f64(),
                run.both.as_secs_f64()
            );
            runs.push((mode, run));
        }
    }
    print_table(&runs, &modes, iters, tasks, reps);
    drop(pool);
    let _ = manager.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
    ExitCode::SUCCESS
}
