//! `partita probe` (hidden): small programs that register with a manager, for the manager's
//! integration tests and benchmarks.
//!
//! - default: a partita-runtime pool of `--pool` workers kept busy by self-respawning spin
//!   tasks, its demand capped at `--demand` (`Need::Absolute`). It prints
//!   `active=N target=T t=NS` whenever its active workers or target change (polled every
//!   200 µs; `t` is `CLOCK_MONOTONIC`, comparable across processes), and obeys stdin lines
//!   `demand N` (prints `demand-set N t=NS` just before applying it) and `quit`.
//! - `--raw`: speaks the protocol directly (no pool): registers, reports a fixed demand, and
//!   prints every allocation it sees as `alloc target=N cpus=LIST` on stdout. It stands for an
//!   application that does not (or cannot) shrink.

use partita_protocol::page::monotonic_ns;
use partita_protocol::wire::{ClientMessage, Hello};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Options of `partita probe`.
///
/// ```
/// use clap::Parser;
/// #[derive(Parser)] struct Cli { #[command(flatten)] p: partita_demo::probe::ProbeArgs }
/// let c = Cli::parse_from(["x", "--raw", "--pool", "4"]);
/// assert!(c.p.raw && c.p.pool == 4);
/// ```
#[derive(Debug, Clone, clap::Args)]
pub struct ProbeArgs {
    /// Manager socket (default: what the runtime would use).
    #[arg(long)]
    pub socket: Option<PathBuf>,
    /// Application name.
    #[arg(long, default_value = "probe")]
    pub name: String,
    /// Pool size announced.
    #[arg(long, default_value_t = 2)]
    pub pool: u32,
    /// Demand reported.
    #[arg(long, default_value_t = 2)]
    pub demand: u32,
    /// Partition hint.
    #[arg(long, default_value = "")]
    pub partition: String,
    /// Exit after this many seconds (0: never; `--raw` also exits when the manager goes away).
    #[arg(long, default_value_t = 0.0)]
    pub seconds: f64,
    /// Speak the protocol directly instead of using a pool.
    #[arg(long)]
    pub raw: bool,
    /// How often the main thread looks at the pool's active workers, in microseconds.
    #[arg(long, default_value_t = 200)]
    pub poll_us: u64,
    /// Length of each spinning task of the workload, in microseconds (a worker reaches a safe
    /// point, where it can park, only between tasks).
    #[arg(long, default_value_t = 500)]
    pub task_us: u64,
    /// Also create threads of its own after registering, one after another, each of which
    /// pins itself back to the mask the probe started with and lives this many milliseconds
    /// (0: ends at once, a tight create-and-end loop); at most 8 live at a time. It stands
    /// for an application whose later threads would escape its allocation.
    #[arg(long)]
    pub churn_threads_ms: Option<u64>,
}

/// Run the probe.
///
/// ```no_run
/// let args = partita_demo::probe::ProbeArgs { socket: None, name: "p".into(), pool: 2, demand: 2, partition: String::new(), seconds: 1.0, raw: false, poll_us: 200, task_us: 500, churn_threads_ms: None };
/// partita_demo::probe::run(&args).unwrap();
/// ```
pub fn run(args: &ProbeArgs) -> Result<(), Box<dyn std::error::Error>> {
    if args.raw {
        run_raw(args)
    } else {
        run_pool(args)
    }
}

fn spin_for(d: Duration) {
    let t = std::time::Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// What the pool's client reads: the socket, partition and name given on the command line.
fn export_to_client(args: &ProbeArgs) {
    // SAFETY: the probe is its own process and this runs on its main thread before the pool
    // (the first other thread) is built, so nothing reads the environment concurrently.
    unsafe {
        if let Some(s) = &args.socket {
            std::env::set_var("PARTITA_SOCKET", s);
        }
        if !args.partition.is_empty() {
            std::env::set_var("PARTITA_PARTITION", &args.partition);
        }
        std::env::set_var("PARTITA_NAME", &args.name);
    }
}

fn run_pool(args: &ProbeArgs) -> Result<(), Box<dyn std::error::Error>> {
    export_to_client(args);
    // The mask the program started with, read before the pool registers: a manager that
    // confines it at registration may already have narrowed this thread by the time the
    // churn starts (in a quiet workspace run the churn's threads then pinned themselves
    // inside, and tests/processes.rs never saw one to narrow).
    let started_on = partita_manager::sys::get_affinity(0).ok();
    let pool = partita_runtime::ThreadPoolBuilder::new()
        .num_threads(args.pool as usize)
        .build()?;
    pool.set_demand(partita_runtime::Need::Absolute(args.demand as usize));
    let stop = Arc::new(AtomicBool::new(false));
    let checks = Arc::new((AtomicU64::new(0), AtomicU64::new(0)));
    let pool = Arc::new(pool);
    let driver = drive(
        pool.clone(),
        args.pool as usize * 2,
        Duration::from_micros(args.task_us),
        checks.clone(),
        stop.clone(),
    );
    if let Some(ms) = args.churn_threads_ms {
        churn_threads(started_on, Duration::from_millis(ms), stop.clone());
    }
    let rx = stdin_lines();
    let mut out = std::io::stdout();
    writeln!(out, "ready pid={}", std::process::id())?;
    out.flush()?;
    let start = std::time::Instant::now();
    let mut last = None;
    loop {
        let now = (pool.active_workers(), pool.target_workers());
        if last != Some(now) {
            writeln!(
                out,
                "active={} target={} t={}",
                now.0,
                now.1,
                monotonic_ns()
            )?;
            out.flush()?;
            last = Some(now);
        }
        match rx.try_recv() {
            Ok(cmd) => {
                let mut it = cmd.split_whitespace();
                match (it.next(), it.next().and_then(|v| v.parse::<usize>().ok())) {
                    (Some("demand"), Some(n)) => {
                        writeln!(out, "demand-set {n} t={}", monotonic_ns())?;
                        out.flush()?;
                        pool.set_demand(partita_runtime::Need::Absolute(n));
                    }
                    (Some("quit"), _) => break,
                    _ => eprintln!("probe: unknown command {cmd:?}"),
                }
            }
            Err(
                std::sync::mpsc::TryRecvError::Empty | std::sync::mpsc::TryRecvError::Disconnected,
            ) => {}
        }
        if args.seconds > 0.0 && start.elapsed().as_secs_f64() > args.seconds {
            break;
        }
        std::thread::sleep(Duration::from_micros(args.poll_us));
    }
    stop.store(true, Ordering::Relaxed);
    if driver.join().is_err() {
        checks.1.fetch_add(1, Ordering::Relaxed);
    }
    writeln!(
        out,
        "checks={} failures={}",
        checks.0.load(Ordering::Relaxed),
        checks.1.load(Ordering::Relaxed)
    )?;
    out.flush()?;
    Ok(())
}

/// The workload, and at the same time the "no task lost" check: rounds of short spinning
/// tasks (`tasks`, 2 per worker, so demand is the whole pool, each spinning for `task`) joined with a recursive
/// computation checked against its known value, again and again through every change of
/// target. A lost task would hang the round; a task run twice would change the value.
/// `checks.0` counts correct rounds, `checks.1` wrong ones.
fn drive(
    pool: Arc<partita_runtime::ThreadPool>,
    tasks: usize,
    task: Duration,
    checks: Arc<(AtomicU64, AtomicU64)>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            let v = pool.install(|| {
                let ((), v) = partita_runtime::join(
                    || {
                        partita_runtime::scope(|s| {
                            for _ in 0..tasks {
                                s.spawn(move |_| spin_for(task));
                            }
                        })
                    },
                    || fib(18),
                );
                v
            });
            let slot = if v == 2584 { &checks.0 } else { &checks.1 };
            slot.fetch_add(1, Ordering::Relaxed);
        }
    })
}

/// `--churn-threads-ms`: threads created one after another until `stop`, each pinned back to
/// `start`, the mask the process started with (read before the pool registered), and living
/// `life`; at most 8 at a time.
fn churn_threads(start: Option<partita_protocol::CpuSet>, life: Duration, stop: Arc<AtomicBool>) {
    std::thread::spawn(move || {
        let mut live = std::collections::VecDeque::new();
        while !stop.load(Ordering::Relaxed) {
            if live.len() >= 8 {
                let oldest: std::thread::JoinHandle<()> = live.pop_front().expect("8 live");
                let _ = oldest.join();
            }
            live.push_back(std::thread::spawn(move || {
                if let Some(m) = &start {
                    let _ = partita_manager::sys::set_affinity(0, m);
                }
                std::thread::sleep(life);
            }));
        }
        for t in live {
            let _ = t.join();
        }
    });
}

/// Lines of stdin, trimmed, on a channel (read on their own thread).
fn stdin_lines() -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        let mut line = String::new();
        while std::io::stdin().read_line(&mut line).is_ok_and(|n| n > 0) {
            if tx.send(line.trim().to_string()).is_err() {
                break;
            }
            line.clear();
        }
    });
    rx
}

fn fib(n: u32) -> u64 {
    if n < 2 {
        return n as u64;
    }
    let (a, b) = partita_runtime::join(|| fib(n - 1), || fib(n - 2));
    a + b
}

fn run_raw(args: &ProbeArgs) -> Result<(), Box<dyn std::error::Error>> {
    let socket = args
        .socket
        .clone()
        .unwrap_or_else(partita_protocol::socket_path);
    let mut hello = Hello::new(args.pool, &args.name);
    hello.partition_hint = args.partition.clone();
    // The one registration path every client takes (listener's owner, seals, page owner);
    // the stream comes back non-blocking.
    let (mut s, page) = partita_protocol::client::register(&socket, hello)?;
    page.app.demand.store(args.demand, Ordering::Relaxed);
    s.write_all(&ClientMessage::DemandChanged.encode())?;
    let start = std::time::Instant::now();
    let mut last = None;
    let mut out = std::io::stdout();
    loop {
        let a = page.manager.read();
        if last != Some((a.target, a.cpus)) {
            writeln!(out, "alloc target={} cpus={}", a.target, a.cpus)?;
            out.flush()?;
            last = Some((a.target, a.cpus));
        }
        page.app.active.store(a.target, Ordering::Relaxed);
        page.app.heartbeat.store(monotonic_ns(), Ordering::Relaxed);
        let seen = page.manager.wake.load(Ordering::Acquire);
        page.manager.wait_for_change(seen, Duration::from_millis(5));
        let mut b = [0u8; 64];
        match std::io::Read::read(&mut s, &mut b) {
            Ok(0) => {
                writeln!(out, "manager gone")?;
                return Ok(());
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e.into()),
        }
        if args.seconds > 0.0 && start.elapsed().as_secs_f64() > args.seconds {
            return Ok(());
        }
    }
}
