//! The two-NUMA-node guest's manager-and-application scenario (issue 14): a partita manager
//! (in this process) and two applications (this binary again, `app NAME`, talking over
//! stdin/stdout). The manager places application A on node 0, where A allocates registered
//! pool memory; A idles, B takes node 0, A wakes and is placed on node 1, and A's memory
//! must follow: ≥ 95% of its pages on node 1 within 1 s, with the runtime's
//! `numa-follow: …` line. Output: `PARTITA-NUMA CHECK follow_* PASS|FAIL detail`,
//! `PARTITA-NUMA INFO …`, and `PARTITA-NUMA FOLLOW-DONE checks=N failed=F`.

use partita_stats::median;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use partita_runtime::{PoolVec, ThreadPool, ThreadPoolBuilder};

mod process;

/// CLOCK_MONOTONIC in ns (comparable across the guest's processes).
fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a live timespec the call fills in.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// When A's worker first ran on node 1 (CLOCK_MONOTONIC ns; 0: not yet).
static ON_CPU1_AT: AtomicU64 = AtomicU64::new(0);
/// When A's worker, on node 1, first found ≥ 95% of its registered pages there (0: not yet).
static FOLLOWED_AT: AtomicU64 = AtomicU64::new(0);

/// Pages of A's registered region (1 MiB: about 25 ms of moves at TCG's ~100 µs per page).
const PAGES: usize = 256;
/// Pages of A's cold region (hinted once, then never touched).
const COLD_PAGES: usize = 32;
const WAIT: Duration = Duration::from_secs(30);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("app") => app(),
        _ => manager_side(),
    }
}

// ------------------------------------------------------------------------------------------
// The application side: a one-worker pool following the manager, driven by line commands.

fn app() {
    let pool = Arc::new(
        ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .expect("pool builds"),
    );
    let busy = Arc::new(AtomicBool::new(true));
    let data: Arc<std::sync::Mutex<Option<Arc<PoolVec<u64>>>>> = Arc::default();
    // A region hinted once and never touched again: the cost rule must leave it.
    let mut cold: Option<PoolVec<u64>> = None;
    {
        let (pool, busy, data) = (pool.clone(), busy.clone(), data.clone());
        std::thread::spawn(move || work(&pool, &busy, &data));
    }
    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        let reply = match line.trim() {
            "busy" => {
                busy.store(true, Ordering::Relaxed);
                "ok".to_string()
            }
            "idle" => {
                busy.store(false, Ordering::Relaxed);
                "ok".to_string()
            }
            "alloc" => match (
                pool.node_vec(PAGES * 512, |i| i as u64),
                pool.node_vec(COLD_PAGES * 512, |i| i as u64),
            ) {
                (Ok(v), Ok(c)) => {
                    let start = v.as_ptr() as usize;
                    c.hint(0..1, false);
                    cold = Some(c);
                    *data.lock().unwrap() = Some(Arc::new(v));
                    format!("ok {start}")
                }
                (Err(e), _) | (_, Err(e)) => format!("error {e}"),
            },
            "nodes" => nodes_line(&data),
            "cold" => match cold.as_ref().map(|c| c.page_nodes()) {
                Some(Ok(st)) => {
                    let on = |n| st.iter().filter(|s| s.node() == Some(n)).count();
                    format!("nodes {} {} {}", on(0), on(1), st.len())
                }
                Some(Err(e)) => format!("error {e}"),
                None => "error nothing allocated".into(),
            },
            "homes" => homes_line(&pool),
            "report" | "costs" | "decisions" => report_line(&pool, line.trim()),
            _ => break,
        };
        println!("{reply}");
        let _ = std::io::stdout().flush();
    }
}

/// Keeps the pool busy (demand 1) while `busy`, reading the registered memory.
fn work(pool: &ThreadPool, busy: &AtomicBool, data: &std::sync::Mutex<Option<Arc<PoolVec<u64>>>>) {
    loop {
        if !busy.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(5));
            continue;
        }
        let v = data.lock().unwrap().clone();
        pool.install(|| {
            if partita_numa::current_node() == Some(1) {
                if ON_CPU1_AT.load(Ordering::Relaxed) == 0 {
                    ON_CPU1_AT.store(mono_ns(), Ordering::Relaxed);
                }
                let local = v
                    .as_ref()
                    .and_then(|v| v.page_nodes().ok())
                    .is_some_and(|st| {
                        st.iter().filter(|s| s.node() == Some(1)).count() * 100 >= st.len() * 95
                    });
                if local && FOLLOWED_AT.load(Ordering::Relaxed) == 0 {
                    FOLLOWED_AT.store(mono_ns(), Ordering::Relaxed);
                }
            }
            let t = Instant::now();
            let mut s = 0u64;
            while t.elapsed() < Duration::from_millis(20) {
                if let Some(v) = &v {
                    s = s.wrapping_add(v.iter().step_by(512).sum::<u64>());
                    // One touch per page per sweep: the follower's cost rule sees a hot region.
                    v.hint(0..v.len(), false);
                }
                std::hint::spin_loop();
            }
            std::hint::black_box(s);
        });
    }
}

/// A's answers about its pool's NUMA state (`report`, `costs`, `decisions`).
fn report_line(pool: &ThreadPool, what: &str) -> String {
    match what {
        "report" => {
            let r = pool.numa_report();
            match r.last_follow {
                Some(f) => format!(
                    "follow {f} (worker on node 1 at {} ns, its memory at {} ns)",
                    ON_CPU1_AT.load(Ordering::Relaxed),
                    FOLLOWED_AT.load(Ordering::Relaxed)
                ),
                None => format!("none trigger={:?} why={:?}", r.trigger, r.inactive_reason),
            }
        }
        "costs" => {
            // Calibration runs once per process beside the pool: wait for it (≤ 20 s).
            let t = Instant::now();
            let mut r = pool.numa_report();
            while r.measured_costs.is_none() && t.elapsed() < Duration::from_secs(20) {
                std::thread::sleep(Duration::from_millis(50));
                r = pool.numa_report();
            }
            format!("costs {:?} trigger {:?}", r.measured_costs, r.trigger)
        }
        "decisions" => {
            let r = pool.numa_report();
            // The first decision after the move (the hot region's) and the latest.
            format!(
                "decisions moved={} deferred={} never={} first={:?} last={:?} homes={:?}",
                r.decisions_moved,
                r.decisions_deferred,
                r.decisions_never,
                r.recent_decisions.first(),
                r.recent_decisions.last(),
                r.last_home_follow.map(|f| f.to_string())
            )
        }
        _ => format!("error unknown {what}"),
    }
}

/// `homes W:PART:ON0/ON1/PRESENT ...` for every worker's own structures.
fn homes_line(pool: &ThreadPool) -> String {
    match pool.worker_homes() {
        Ok(h) if h.is_empty() => "error no worker homes registered".into(),
        Ok(h) => {
            let mut line = "homes".to_string();
            for w in &h {
                for p in &w.parts {
                    line += &format!(
                        " {}:{}:{}/{}/{}",
                        w.worker,
                        p.what,
                        p.on(0),
                        p.on(1),
                        p.present
                    );
                }
            }
            line
        }
        Err(e) => format!("error {e}"),
    }
}

/// Parses `homes_line`: (part, on node 0, on node 1, present) per part.
fn parse_homes(line: &str) -> Option<Vec<(String, usize, usize, usize)>> {
    line.strip_prefix("homes ")?
        .split(' ')
        .map(|p| {
            let mut it = p.split(':');
            let (_, part, counts) = (it.next()?, it.next()?, it.next()?);
            let mut c = counts.split('/').map(|x| x.parse().ok());
            Some((part.to_string(), c.next()??, c.next()??, c.next()??))
        })
        .collect()
}

/// The `homes` line of a `wait_homes` outcome, reached or not.
fn homes_of(r: &Result<String, String>) -> &str {
    match r {
        Ok(l) | Err(l) => l,
    }
}

/// The workers' deques (partita-runtime's own: a shared page, `deque`, and its rings,
/// `deque-ring`) are registered parts of their homes and every present page of them is on
/// `node`: at least one of each part, each with pages present.
fn deques_on(line: &str, node: usize) -> Result<String, String> {
    let parts = parse_homes(line).ok_or_else(|| format!("no homes: {line}"))?;
    let deque: Vec<_> = parts.iter().filter(|p| p.0.starts_with("deque")).collect();
    let shared = deque.iter().filter(|p| p.0 == "deque").count();
    let rings = deque.len() - shared;
    let present: usize = deque.iter().map(|p| p.3).sum();
    let there: usize = deque.iter().map(|p| [p.1, p.2][node]).sum();
    if shared == 0 || rings == 0 || deque.iter().any(|p| p.3 == 0) || there != present {
        return Err(format!(
            "deque pages: {shared} shared, {rings} rings, {there} of {present} present pages \
             on node {node}: {line}"
        ));
    }
    Ok(format!(
        "{shared} workers' deques ({rings} rings): {there} of {present} pages on node {node}"
    ))
}

/// Asks A for its workers' homes until every present page is on `node` (or `limit` passes).
fn wait_homes(a: &mut App, node: usize, limit: Duration) -> (Result<String, String>, u128) {
    let t = Instant::now();
    loop {
        let line = a.ask("homes");
        let parts = parse_homes(&line);
        let all_there = parts.as_ref().is_some_and(|ps| {
            !ps.is_empty()
                && ps
                    .iter()
                    .all(|(_, n0, n1, present)| *present > 0 && [*n0, *n1][node] == *present)
        });
        if all_there {
            return (Ok(line), t.elapsed().as_millis());
        }
        if t.elapsed() > limit {
            return (Err(line), t.elapsed().as_millis());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn nodes_line(data: &std::sync::Mutex<Option<Arc<PoolVec<u64>>>>) -> String {
    let Some(v) = data.lock().unwrap().clone() else {
        return "error nothing allocated".into();
    };
    match v.page_nodes() {
        Ok(st) => {
            let on = |n| st.iter().filter(|s| s.node() == Some(n)).count();
            format!("nodes {} {} {}", on(0), on(1), st.len())
        }
        Err(e) => format!("error {e}"),
    }
}

// ------------------------------------------------------------------------------------------
// The manager side.

struct App {
    child: Child,
    to: ChildStdin,
    from: BufReader<ChildStdout>,
}

impl App {
    /// This binary as application `name` (`app` mode: a partita-runtime pool).
    fn start(name: &str, socket: &std::path::Path) -> std::io::Result<App> {
        let mut cmd = Command::new(std::env::current_exe()?);
        cmd.arg("app");
        App::run(cmd, name, socket, &[])
    }

    /// `cmd` as application `name` of the manager at `socket`, with `env` added, driven over
    /// its stdin and stdout.
    fn run(
        mut cmd: Command,
        name: &str,
        socket: &std::path::Path,
        env: &[(&str, &str)],
    ) -> std::io::Result<App> {
        let mut child = cmd
            .envs(env.iter().copied())
            .env("PARTITA_SOCKET", socket)
            .env("PARTITA_NAME", name)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let to = child.stdin.take().ok_or(std::io::ErrorKind::BrokenPipe)?;
        let from = BufReader::new(child.stdout.take().ok_or(std::io::ErrorKind::BrokenPipe)?);
        Ok(App { child, to, from })
    }

    fn ask(&mut self, cmd: &str) -> String {
        let _ = writeln!(self.to, "{cmd}");
        let _ = self.to.flush();
        let mut line = String::new();
        let _ = self.from.read_line(&mut line);
        line.trim().to_string()
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }
}

impl Drop for App {
    fn drop(&mut self) {
        let _ = writeln!(self.to, "exit");
        let _ = self.child.wait();
    }
}

struct Checks {
    run: u32,
    failed: u32,
}

impl Checks {
    fn check(&mut self, name: &str, r: Result<String, String>) {
        self.run += 1;
        match r {
            Ok(d) => println!("PARTITA-NUMA CHECK {name} PASS {d}"),
            Err(d) => {
                self.failed += 1;
                println!("PARTITA-NUMA CHECK {name} FAIL {d}");
            }
        }
    }
}

/// Waits until the manager's view of the application with `pid` satisfies `what`.
fn wait_app(
    m: &partita_manager::ManagerHandle,
    pid: i32,
    desc: &str,
    what: impl Fn(&partita_manager::status::AppStatus) -> bool,
) -> Result<(), String> {
    let t = Instant::now();
    loop {
        let s = m.status();
        let app = s.app_by_pid(pid);
        if app.is_some_and(&what) {
            return Ok(());
        }
        if t.elapsed() > WAIT {
            return Err(format!(
                "app {pid} never got {desc} (has {:?})",
                app.map(|a| (a.target, &a.cpus))
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits until the manager publishes `cpus` for the application with `pid`.
fn wait_cpus(m: &partita_manager::ManagerHandle, pid: i32, cpus: &[usize]) -> Result<(), String> {
    wait_app(m, pid, &format!("CPUs {cpus:?}"), |a| {
        a.target > 0 && a.cpus == cpus
    })
}

/// Where the `pages` pages from `start` of process `pid` are: (on node 0, on node 1, all).
fn query_nodes(pid: i32, start: usize, pages: usize) -> Result<(usize, usize, usize), String> {
    let ptrs: Vec<*mut libc::c_void> = (0..pages)
        .map(|p| (start + p * partita_numa::page_size()) as *mut libc::c_void)
        .collect();
    let mut status = vec![0 as libc::c_int; pages];
    // SAFETY: `ptrs` and `status` are live arrays of `pages` entries; with a null node array
    // the kernel only writes `status` (a query; nothing moves).
    let rc = unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            pid,
            pages as libc::c_ulong,
            ptrs.as_ptr(),
            std::ptr::null::<libc::c_int>(),
            status.as_mut_ptr(),
            0,
        )
    };
    if rc < 0 {
        return Err(format!(
            "move_pages({pid}): {}",
            std::io::Error::last_os_error()
        ));
    }
    let on = |n| status.iter().filter(|&&s| s == n).count();
    Ok((on(0), on(1), pages))
}

fn parse_nodes(line: &str) -> Option<(usize, usize, usize)> {
    let mut it = line
        .strip_prefix("nodes ")?
        .split(' ')
        .map(|x| x.parse().ok());
    Some((it.next()??, it.next()??, it.next()??))
}

fn manager_side() {
    let mut c = Checks { run: 0, failed: 0 };
    // Only the unmodified program's scenarios (run.sh's NUMA_VM_ONLY_PROCESS=1, for quicker
    // iteration on them; the host test then reports the missing checks).
    if std::env::var_os("PARTITA_VM_ONLY_PROCESS").is_some() {
        process::scenarios(&mut c);
        println!(
            "PARTITA-NUMA FOLLOW-DONE checks={} failed={}",
            c.run, c.failed
        );
        return;
    }
    let r = scenario(&mut c);
    c.check("follow_scenario", r.map(|()| "completed".into()));
    process::scenarios(&mut c);
    policy_scenarios(&mut c);
    fault_scenario(&mut c);
    c.check("follow_bench", bench());
    println!(
        "PARTITA-NUMA FOLLOW-DONE checks={} failed={}",
        c.run, c.failed
    );
}

/// A on node 0 with its memory; A idles, B takes node 0; A wakes on node 1; its memory follows.
fn scenario(c: &mut Checks) -> Result<(), String> {
    let online = partita_numa::online_nodes();
    if online.len() < 2 {
        return Err(format!("needs two NUMA nodes, has {online}"));
    }
    let cfg = partita_manager::Config {
        uncontrolled: partita_manager::config::Uncontrolled::Tracked,
        ..Default::default()
    };
    let sock = std::path::PathBuf::from("/tmp/partita-follow.sock");
    let m = partita_manager::spawn_in_process(cfg, sock.clone()).map_err(|e| e.to_string())?;
    let mut a = App::start("A", &sock).map_err(|e| e.to_string())?;
    wait_cpus(&m, a.pid(), &[0])?;
    let start = placed(c, &mut a)?;
    a.ask("idle");
    // A zero quantum: its workers suspend (the manager keeps the old confinement).
    wait_app(&m, a.pid(), "a zero quantum", |x| x.target == 0)?;
    let mut b = App::start("B", &sock).map_err(|e| e.to_string())?;
    // B stays busy, so it keeps CPU 0 and A's growth has to come from node 1 (an idle B would
    // release CPU 0 within its demand window, and A would simply get it back).
    b.ask("busy");
    wait_cpus(&m, b.pid(), &[0])?;
    a.ask("busy");
    wait_cpus(&m, a.pid(), &[1])?;
    // Watch A's pages from here (move_pages query on A's pid): asking A itself would wait
    // for A's main thread, which shares A's one CPU with its busy worker.
    let t0 = Instant::now();
    let t0_mono = mono_ns();
    let mut last = None;
    while t0.elapsed() < Duration::from_secs(5) {
        last = query_nodes(a.pid(), start, PAGES).ok();
        if last.is_some_and(|(_, n1, all)| n1 * 100 >= all * 95) {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let ms = t0.elapsed().as_millis();
    let (line, lag_ms) = follower_report(&mut a, t0, t0_mono);
    println!("PARTITA-NUMA INFO follow_lag_ms app_view {lag_ms:?} observer_view {ms}");
    // The bound is judged on the runtime's own clock: from its client seeing the manager's new
    // CPU set to the pass that left ≥ 95% on node 1 (the `after T ms` of its log line), with the
    // 95% confirmed from outside by move_pages on A's pid. The app-view lag (from a worker's
    // first run on node 1) is printed, not judged: under TCG on a loaded host that first run
    // was seen 620-755 ms before this harness's status poll saw the move (2 of 6 boots), and
    // which of the two clocks lagged cannot be told from inside the guest.
    let follow_ms = follow_after_ms(&line);
    c.check(
        "follow_cpus",
        match last {
            Some((_, n1, all))
                if n1 * 100 >= all * 95
                    && follow_ms.is_some_and(|t| t <= 1000)
                    && line.starts_with("follow numa-follow:") =>
            {
                Ok(format!(
                    "A moved to CPU 1: {n1} of {all} pages on node 1 {} ms after its client saw \
                     the move (app view from its worker's first run there: {lag_ms:?} ms; \
                     observer saw it after {ms} ms); {}",
                    follow_ms.unwrap_or(0),
                    &line[7..]
                ))
            }
            other => Err(format!(
                "after {ms} ms: nodes {other:?}; runtime says {line:?}"
            )),
        },
    );
    after_move(c, &mut a);
    drop((a, b));
    m.shutdown().map_err(|e| e.to_string())
}

/// A on CPU 0 allocates: its memory and its workers' own pages are on node 0. Returns the
/// address of A's registered region.
fn placed(c: &mut Checks, a: &mut App) -> Result<usize, String> {
    let reply = a.ask("alloc");
    let start: usize = reply
        .strip_prefix("ok ")
        .and_then(|x| x.parse().ok())
        .ok_or_else(|| format!("alloc: {reply}"))?;
    let placed = parse_nodes(&a.ask("nodes"));
    c.check(
        "follow_placement",
        match placed {
            Some((n0, _, all)) if n0 == all && all == PAGES => Ok(format!(
                "A on CPU 0: {n0} of {all} registered pages on node 0"
            )),
            other => Err(format!("alloc {reply:?}, nodes {other:?}")),
        },
    );
    check_homes(c, a, 0, "placed");
    Ok(start)
}

/// A's workers' own pages (deques included) on `node`: the `follow_deque_<what>` and
/// `follow_homes_<what>` checks.
fn check_homes(c: &mut Checks, a: &mut App, node: usize, what: &str) {
    let (homes, ms) = wait_homes(a, node, Duration::from_secs(5));
    c.check(
        &format!("follow_deque_{what}"),
        deques_on(homes_of(&homes), node),
    );
    c.check(
        &format!("follow_homes_{what}"),
        homes
            .map(|l| format!("A's worker structures on node {node} after {ms} ms: {l}"))
            .map_err(|l| format!("not all on node {node} after {ms} ms: {l}")),
    );
}

/// After A's move to node 1: its workers' own pages followed, and the cost rule left its
/// cold region behind.
fn after_move(c: &mut Checks, a: &mut App) {
    check_homes(c, a, 1, "moved");
    println!("PARTITA-NUMA INFO follow_{}", a.ask("costs"));
    let cold = parse_nodes(&a.ask("cold"));
    let decisions = a.ask("decisions");
    println!("PARTITA-NUMA INFO follow_decisions {decisions}");
    c.check(
        "follow_cost_rule",
        match cold {
            Some((n0, _, all))
                if n0 == all && all == COLD_PAGES && !decisions.contains("deferred=0") =>
            {
                Ok(format!(
                    "cold region left on node 0 ({n0} of {all} pages), hot one moved; {decisions}"
                ))
            }
            other => Err(format!("cold region {other:?}; {decisions}")),
        },
    );
}

/// The `T` of a `numa-follow: N of M pages on node X after T ms` line.
fn follow_after_ms(line: &str) -> Option<u64> {
    let rest = line.split(" after ").nth(1)?;
    rest.split(" ms").next()?.trim().parse().ok()
}

/// A's `numa-follow:` line, asked for until it is there, and the lag it reports from its worker
/// running on node 1 to that worker finding its memory there.
fn follower_report(a: &mut App, t0: Instant, t0_mono: u64) -> (String, Option<u64>) {
    // The follower logs its line after verifying where the pages are: allow it that moment.
    let mut line = a.ask("report");
    while !line.starts_with("follow ") && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
        line = a.ask("report");
    }
    println!("PARTITA-NUMA INFO {}", line.trim_start_matches("follow "));
    // The app's own view: from its worker first running on node 1 (or the manager's move,
    // if earlier) to that worker finding its memory there (CLOCK_MONOTONIC across the guest);
    // the observer's view above is slower, its polling shares the two busy vCPUs.
    let nums: Vec<u64> = line
        .split(|ch: char| !ch.is_ascii_digit())
        .filter_map(|x| x.parse().ok())
        .collect();
    if let [.., cpu_at, _] = nums.as_slice() {
        // Where the lag below starts: the worker's first run on node 1 relative to the
        // observer's start (negative: before the manager's status showed the move).
        println!(
            "PARTITA-NUMA INFO follow_worker_on_node1_vs_observer_ms {}",
            (*cpu_at as i64 - t0_mono as i64) / 1_000_000
        );
    }
    let lag_ms = match nums.as_slice() {
        [.., cpu_at, mem_at] if *cpu_at > 0 && *mem_at >= *cpu_at => {
            Some((mem_at - (*cpu_at).min(t0_mono)) / 1_000_000)
        }
        _ => None,
    };
    (line, lag_ms)
}
// ------------------------------------------------------------------------------------------
// Verghese's policy at run time (the opt-in sampler), no manager needed.

const POLICY_PAGES: usize = 64;

/// Pages of `v` on `node`.
fn on_node(v: &PoolVec<AtomicU64>, node: u32) -> usize {
    v.page_nodes()
        .map(|st| st.iter().filter(|s| s.node() == Some(node)).count())
        .unwrap_or(0)
}

/// Two threads sweeping in lockstep: a barrier per sweep, and a stop decision taken by the
/// barrier's leader so both threads stop after the same sweep.
struct Lockstep {
    barrier: std::sync::Barrier,
    stop: AtomicBool,
}

/// Touches every page of `v` (writing if `write`) with hints, from a thread on `node`, until
/// `done` says so or `limit` passes; returns the elapsed time. With `lockstep`, every sweep
/// waits for the other thread's (fine-grain sharing: both nodes' counts grow together).
fn touch_from(
    node: u32,
    v: &PoolVec<AtomicU64>,
    write: bool,
    limit: Duration,
    done: &(dyn Fn() -> bool + Sync),
    lockstep: Option<&Lockstep>,
) -> Result<Duration, String> {
    partita_numa::placement::first_touch_on(node, || {
        let t = Instant::now();
        let mut last_check = Instant::now();
        loop {
            let check = last_check.elapsed() > Duration::from_millis(20);
            if check {
                last_check = Instant::now();
            }
            match lockstep {
                Some(l) => {
                    if l.barrier.wait().is_leader() {
                        l.stop
                            .store(t.elapsed() >= limit || check && done(), Ordering::SeqCst);
                    }
                    l.barrier.wait();
                    if l.stop.load(Ordering::SeqCst) {
                        break;
                    }
                }
                None if t.elapsed() >= limit || check && done() => break,
                None => {}
            }
            for page in 0..POLICY_PAGES {
                let x = &v[page * 512];
                if write {
                    x.fetch_add(1, Ordering::Relaxed);
                } else {
                    std::hint::black_box(x.load(Ordering::Relaxed));
                }
            }
            v.hint(0..v.len(), write);
        }
        t.elapsed()
    })
    .map_err(|e| e.to_string())
}

fn policy_scenarios(c: &mut Checks) {
    let pool = match ThreadPoolBuilder::new()
        .num_threads(1)
        .process_control(partita_runtime::ProcessControl::Manual)
        .numa_follow(false)
        .build()
    {
        Ok(p) => p,
        Err(e) => return c.check("policy_hot_page", Err(e.to_string())),
    };
    let alloc = || pool.node_vec(POLICY_PAGES * 512, |_| AtomicU64::new(0));
    let (hot, shared) = match (alloc(), alloc()) {
        (Ok(h), Ok(s)) => (h, s),
        (Err(e), _) | (_, Err(e)) => return c.check("policy_hot_page", Err(e.to_string())),
    };
    let params = partita_runtime::SamplerParams {
        interval: Duration::from_millis(100),
        // The low end of the thesis' trigger sweep (32…256): under TCG on a loaded host the
        // lockstep threads below make only ~130–250 sweeps per 100 ms interval, too close
        // to the default 128 for the read-write-shared case to decide every time.
        trigger: Some(32),
        source: partita_runtime::SamplerSource::AccessHints,
    };
    if let Err(e) = pool.start_numa_sampler(params) {
        return c.check("policy_hot_page", Err(e.to_string()));
    }
    // Hot pages: homed on node 0, used only from node 1.
    let start0 = on_node(&hot, 0);
    let done = || on_node(&hot, 1) * 100 >= POLICY_PAGES * 95;
    let r = touch_from(1, &hot, false, Duration::from_secs(5), &done, None);
    let n1 = on_node(&hot, 1);
    c.check(
        "policy_hot_page",
        match r {
            Ok(t) if start0 == POLICY_PAGES && n1 * 100 >= POLICY_PAGES * 95 => Ok(format!(
                "{n1} of {POLICY_PAGES} pages used from node 1 moved there from node 0 in {} ms",
                t.as_millis()
            )),
            other => Err(format!(
                "started {start0} on node 0; now {n1} on node 1 ({other:?})"
            )),
        },
    );
    // Read-write shared: both nodes write every page; the policy must leave it alone.
    let before = on_node(&shared, 0);
    // Long enough for several sampler rounds to see both nodes' counts.
    let rounds0 = pool.numa_report().sampler.unwrap_or_default().rounds;
    let enough = || pool.numa_report().sampler.unwrap_or_default().rounds >= rounds0 + 4;
    let l = Lockstep {
        barrier: std::sync::Barrier::new(2),
        stop: AtomicBool::new(false),
    };
    let limit = Duration::from_secs(10);
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| touch_from(0, &shared, true, limit, &enough, Some(&l)));
        let b = s.spawn(|| touch_from(1, &shared, true, limit, &enough, Some(&l)));
        (a.join(), b.join())
    });
    let after = on_node(&shared, 0);
    let rep = pool.numa_report().sampler.unwrap_or_default();
    c.check(
        "policy_shared_left_alone",
        match (a, b) {
            (Ok(Ok(_)), Ok(Ok(_))) if before == POLICY_PAGES && after == before && rep.left_shared_written > 0 => Ok(format!(
                "{after} of {POLICY_PAGES} pages still on node 0; {} shared-written decisions left alone; sampler {rep:?}",
                rep.left_shared_written
            )),
            other => Err(format!("before {before}, after {after} on node 0; {rep:?}; threads {other:?}")),
        },
    );
}

/// The sampler with page-fault sampling (no hints): a region homed on node 0 and read only
/// from node 1 moves to node 1.
fn fault_scenario(c: &mut Checks) {
    const CHECK: &str = "policy_fault_hot_page";
    let pool = match ThreadPoolBuilder::new()
        .num_threads(1)
        .process_control(partita_runtime::ProcessControl::Manual)
        .numa_follow(false)
        .build()
    {
        Ok(p) => p,
        Err(e) => return c.check(CHECK, Err(e.to_string())),
    };
    let hot = match pool.node_vec(POLICY_PAGES * 512, |_| AtomicU64::new(0)) {
        Ok(v) => v,
        Err(e) => return c.check(CHECK, Err(e.to_string())),
    };
    let params = partita_runtime::SamplerParams {
        interval: Duration::from_millis(100),
        trigger: None,
        source: partita_runtime::SamplerSource::FaultSampling,
    };
    if let Err(e) = pool.start_numa_sampler(params) {
        return c.check(CHECK, Err(e.to_string()));
    }
    let start0 = on_node(&hot, 0);
    let r = partita_numa::placement::first_touch_on(1, || {
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(5) && on_node(&hot, 1) < POLICY_PAGES {
            for page in 0..POLICY_PAGES {
                std::hint::black_box(hot[page * 512].load(Ordering::Relaxed));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        t.elapsed()
    });
    // Armed pages are invisible to move_pages queries: stop the sampler (it opens them).
    let stopped = pool.stop_numa_sampler();
    let n1 = on_node(&hot, 1);
    let rep = pool.numa_report().sampler.unwrap_or_default();
    c.check(
        CHECK,
        match r {
            Ok(t) if stopped && start0 == POLICY_PAGES && n1 == POLICY_PAGES && rep.faults > 0 => {
                Ok(format!(
                "{n1} of {POLICY_PAGES} pages read from node 1 moved there in {} ms, counted by \
                 {} sampled faults, no hints; sampler {rep:?}",
                t.as_millis(),
                rep.faults
            ))
            }
            other => Err(format!(
                "started {start0} on node 0; now {n1} on node 1 ({other:?}); sampler {rep:?}"
            )),
        },
    );
}

// ------------------------------------------------------------------------------------------
// Migration throughput per page: the pool's `migrate_memory` (locate, move in chunks,
// re-point the policy, verify) against one raw `move_pages(2)` call, interleaved.

fn raw_move(addrs: &[usize], node: i32) -> Result<(), String> {
    let ptrs: Vec<*mut libc::c_void> = addrs.iter().map(|&a| a as *mut libc::c_void).collect();
    let nodes = vec![node; addrs.len()];
    let mut status = vec![0 as libc::c_int; addrs.len()];
    // SAFETY: the three arrays are live and of equal length; the kernel writes only `status`;
    // the addresses are pages of a live PoolVec (moving pages never changes their contents).
    let rc = unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            0,
            ptrs.len() as libc::c_ulong,
            ptrs.as_ptr(),
            nodes.as_ptr(),
            status.as_mut_ptr(),
            2, // MPOL_MF_MOVE
        )
    };
    if rc < 0 {
        return Err(format!("move_pages: {}", std::io::Error::last_os_error()));
    }
    Ok(())
}

fn bench() -> Result<String, String> {
    const N: usize = 256;
    const RUNS: usize = 5;
    let pool = ThreadPoolBuilder::new()
        .num_threads(1)
        .process_control(partita_runtime::ProcessControl::Manual)
        .numa_follow(false)
        .build()
        .map_err(|e| e.to_string())?;
    let v = pool
        .node_vec(N * 512, |i| i as u64)
        .map_err(|e| e.to_string())?;
    let addrs: Vec<usize> = (0..N).map(|p| &v[p * 512] as *const u64 as usize).collect();
    let (mut pool_ns, mut raw_ns) = (Vec::new(), Vec::new());
    for run in 0..RUNS {
        // Each measurement moves all N pages across: the pool's call 0 -> 1, the raw call back.
        let to = 1;
        let t = Instant::now();
        let out = pool.migrate_memory(&v, to).map_err(|e| e.to_string())?;
        pool_ns.push(t.elapsed().as_nanos() as f64 / N as f64);
        if out.on_node != N {
            return Err(format!(
                "migrate_memory left {} of {N} on node {to}",
                out.on_node
            ));
        }
        let back = 1 - to;
        let t = Instant::now();
        raw_move(&addrs, back as i32)?;
        raw_ns.push(t.elapsed().as_nanos() as f64 / N as f64);
        println!(
            "PARTITA-NUMA INFO follow_bench run={run} pages={N} pool_ns_per_page={:.0} raw_ns_per_page={:.0}",
            pool_ns[run], raw_ns[run]
        );
    }
    let (p, r) = (median(&pool_ns), median(&raw_ns));
    Ok(format!(
        "median of {RUNS}: migrate_memory {p:.0} ns/page, raw move_pages {r:.0} ns/page, ratio {:.2}",
        p / r
    ))
}
