//! The manager client against a scripted manager (a Unix socket and a control page made here
//! with partita-protocol): registration never delays the pool, a pool built before the
//! manager registers when it appears, demand changes ring the manager at once, and a loop of
//! short scopes reports a steady demand.
//!
//! The client reads its environment when a pool is built, so each test holds `ENV` while it
//! sets `PARTITA_SOCKET` and builds its pool. Assertions are on counts and values; the only
//! times are generous timeouts that a passing run never reaches.
#![cfg(partita_linux)] // the manager client: Linux-only (crates/runtime/build.rs)

use partita_protocol::client::read_frame;
use partita_protocol::page::PageMap;
use partita_protocol::sys::send_with_fd;
use partita_protocol::wire::{
    ClientMessage, Hello, ManagerMessage, MAX_CLIENT_FRAME, PROTOCOL_VERSION,
};
use partita_runtime::{Need, ThreadPool, ThreadPoolBuilder};
use std::io::{ErrorKind, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

static ENV: Mutex<()> = Mutex::new(());

const LONG: Duration = Duration::from_secs(10);

fn env_lock() -> MutexGuard<'static, ()> {
    ENV.lock().unwrap_or_else(|p| p.into_inner())
}

/// A socket path in a fresh directory that is removed when this is dropped.
struct TestSocket {
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl std::ops::Deref for TestSocket {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        &self.path
    }
}

impl AsRef<std::path::Path> for TestSocket {
    fn as_ref(&self) -> &std::path::Path {
        &self.path
    }
}

fn socket_path(tag: &str) -> TestSocket {
    let dir = tempfile::Builder::new()
        .prefix(&format!("partita-client-{tag}-"))
        .tempdir()
        .expect("create a temp dir"); // a test cannot run without it
    TestSocket {
        path: dir.path().join("m.sock"),
        _dir: dir,
    }
}

/// Build a pool of `n` in the default (manager) mode while `PARTITA_SOCKET` points at `socket`.
fn pool_for(socket: &std::path::Path, n: usize, tick_us: Option<u64>) -> ThreadPool {
    // SAFETY: every reader of the environment in this test process is Rust code going through
    // std::env, which takes std's environment lock; no C library call here reads it
    // concurrently. (The runtime reads these variables; it has no builder option for them.)
    unsafe {
        std::env::set_var("PARTITA_SOCKET", socket);
        match tick_us {
            Some(us) => std::env::set_var("PARTITA_CLIENT_TICK_US", us.to_string()),
            None => std::env::remove_var("PARTITA_CLIENT_TICK_US"),
        }
        std::env::remove_var("PARTITA");
    }
    ThreadPoolBuilder::new().num_threads(n).build().unwrap()
}

fn accept(listener: &UnixListener) -> UnixStream {
    listener.set_nonblocking(true).unwrap();
    let deadline = Instant::now() + LONG;
    loop {
        match listener.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false).unwrap();
                s.set_read_timeout(Some(LONG)).unwrap();
                return s;
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                assert!(Instant::now() < deadline, "no client connected");
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => panic!("accept: {e}"),
        }
    }
}

fn read_message(s: &mut UnixStream) -> ClientMessage {
    let payload = read_frame(s, MAX_CLIENT_FRAME).expect("a frame from the client");
    ClientMessage::decode(&payload).unwrap()
}

fn read_hello(s: &mut UnixStream) -> Hello {
    match read_message(s) {
        ClientMessage::Hello(h) => h,
        other => panic!("expected a hello, got {other:?}"),
    }
}

/// Answer a hello: a page for `app_id`, sent with the welcome.
fn welcome(s: &UnixStream, app_id: u32, pool_size: u32) -> PageMap {
    let page = PageMap::create(app_id, pool_size).unwrap();
    let msg = ManagerMessage::Welcome {
        version: PROTOCOL_VERSION,
        app_id,
        partition: String::new(),
    }
    .encode();
    send_with_fd(s.as_fd(), &msg, page.fd()).unwrap();
    page
}

/// The six parts of a fake manager that has welcomed a pool of 2 (`tick_us`:
/// `PARTITA_CLIENT_TICK_US`) as application `app_id`: the environment lock, the socket's
/// directory, the listener, the pool, the manager's end of the connection and the page. Bound
/// in this order by `let`, they drop page first and the lock last, as the tests need.
type Welcomed = (
    MutexGuard<'static, ()>,
    TestSocket,
    UnixListener,
    ThreadPool,
    UnixStream,
    PageMap,
);

fn welcomed(tag: &str, tick_us: Option<u64>, app_id: u32) -> Welcomed {
    let env = env_lock();
    let path = socket_path(tag);
    let listener = UnixListener::bind(&path).unwrap();
    let pool = pool_for(&path, 2, tick_us);
    let mut s = accept(&listener);
    read_hello(&mut s);
    let page = welcome(&s, app_id, 2);
    (env, path, listener, pool, s, page)
}

fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + LONG;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Read rings until `cond` holds on the page's demand; returns how many rang.
fn rings_until(s: &mut UnixStream, page: &PageMap, cond: impl Fn(u32) -> bool) -> usize {
    let mut rings = 0;
    loop {
        match read_message(s) {
            ClientMessage::DemandChanged => rings += 1,
            other => panic!("unexpected {other:?}"),
        }
        if cond(page.app.demand.load(Ordering::Relaxed)) {
            return rings;
        }
    }
}

fn spin(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

#[test]
fn registration_never_delays_the_pool() {
    let _env = env_lock();
    let path = socket_path("delay");
    let listener = UnixListener::bind(&path).unwrap();
    let pool = pool_for(&path, 2, None);
    // The manager has the hello but has not answered: the pool already runs, at full size.
    let mut s = accept(&listener);
    let hello = read_hello(&mut s);
    assert_eq!(hello.pool_size, 2);
    let (a, b) = pool.install(|| partita_runtime::join(|| 1, || 2));
    assert_eq!(a + b, 3);
    assert_eq!((pool.target_workers(), pool.active_workers()), (2, 2));
    // Once it answers, the pool follows the page.
    let page = welcome(&s, 1, 2);
    page.manager.publish(1, &partita_protocol::CpuSet::new());
    wait_until("the pool to follow target 1", || pool.active_workers() == 1);
    drop(pool);
    // The client says goodbye when the pool goes.
    loop {
        match read_message(&mut s) {
            ClientMessage::Goodbye => break,
            ClientMessage::DemandChanged => {}
            other => panic!("unexpected {other:?}"),
        }
    }
}

#[test]
fn a_pool_built_before_the_manager_registers_when_it_appears() {
    let _env = env_lock();
    let path = socket_path("late");
    let pool = pool_for(&path, 2, None);
    assert_eq!(pool.install(|| 40 + 2), 42);
    // Let the client look for the socket a few times (its backoff grows meanwhile).
    std::thread::sleep(Duration::from_millis(50));
    let listener = UnixListener::bind(&path).unwrap();
    let mut s = accept(&listener);
    assert_eq!(read_hello(&mut s).pool_size, 2);
    let page = welcome(&s, 7, 2);
    page.manager.publish(1, &partita_protocol::CpuSet::new());
    wait_until("the late-registered pool to follow target 1", || {
        pool.active_workers() == 1
    });
    // The client's heartbeat shows it follows the page.
    wait_until("a heartbeat", || {
        page.app.heartbeat.load(Ordering::Acquire) != 0
    });
}

#[test]
fn demand_changes_ring_without_waiting_for_a_tick() {
    // A 60 s tick: within this test only the pool's own events can ring.
    let (_env, _path, _listener, pool, mut s, page) = welcomed("ring", Some(60_000_000), 3);
    // The session's first tick reports the new pool.
    assert!(rings_until(&mut s, &page, |_| true) >= 1);
    // Once the workers' start-up has left the estimate's window (and its hold), a
    // `set_demand` (an event, not a tick) publishes the idle pool's 0 at once.
    wait_until("an idle pool's demand of 0", || {
        std::thread::sleep(Duration::from_millis(20));
        pool.set_demand(Need::Unlimited);
        page.app.demand.load(Ordering::Relaxed) == 0
    });
    // Work injected into a pool reporting 0 rings at once (a millisecond after the 0 rang:
    // rings are rate-bounded, see below).
    std::thread::sleep(Duration::from_millis(1));
    let stop = Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    pool.spawn_broadcast(move |_| {
        while !st.load(Ordering::Relaxed) {
            spin(Duration::from_micros(100));
        }
    });
    rings_until(&mut s, &page, |d| d >= 1);
    // The application lowers its need, then lifts it: each rung at once, with its value.
    // (Demand rings are at most one per 200 µs — a change inside that interval is in the page
    // at once and rung by the next tick — so the steps are a millisecond apart.)
    std::thread::sleep(Duration::from_millis(1));
    pool.set_demand(Need::Absolute(0));
    rings_until(&mut s, &page, |d| d == 0);
    std::thread::sleep(Duration::from_millis(1));
    pool.set_demand(Need::Unlimited);
    rings_until(&mut s, &page, |d| d >= 1);
    stop.store(true, Ordering::Relaxed);
    // The client thread waits on the page for up to 60 s: dropping the pool wakes it, so
    // the drop does not wait for that tick (every program that drops its pool before it
    // exits used to pay up to one tick).
    let t = Instant::now();
    drop(pool);
    assert!(
        t.elapsed() < Duration::from_secs(20),
        "dropping the pool waited {:?} for the client's tick",
        t.elapsed()
    );
}

#[test]
fn a_loop_of_short_scopes_reports_a_steady_demand() {
    let (_env, _path, listener, pool, s, page) = welcomed("steady", None, 4);
    // Count the rings from a reader thread while the program loops over short scopes.
    let done = Arc::new(AtomicBool::new(false));
    let rings = Arc::new(Mutex::new(Vec::<(Instant, u32)>::new()));
    let page = Arc::new(page);
    let reader = {
        let (done, rings, page) = (done.clone(), rings.clone(), page.clone());
        let mut s = s.try_clone().unwrap();
        s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        std::thread::spawn(move || {
            let mut buf = [0u8; 256];
            while !done.load(Ordering::Relaxed) {
                match s.read(&mut buf) {
                    // Each ring is one small frame; count frames by their fixed size.
                    Ok(n) => {
                        let one = ClientMessage::DemandChanged.encode().len();
                        let d = page.app.demand.load(Ordering::Relaxed);
                        let mut r = rings.lock().unwrap();
                        for _ in 0..n / one {
                            r.push((Instant::now(), d));
                        }
                    }
                    Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                    Err(e) => panic!("read: {e}"),
                }
            }
        })
    };
    let start = Instant::now();
    let mut regions = 0u64;
    while start.elapsed() < Duration::from_millis(1200) {
        pool.scope(|sc| {
            for _ in 0..2 {
                sc.spawn(|_| spin(Duration::from_micros(150)));
            }
        });
        // A short serial gap between regions, as a program's own code would have.
        spin(Duration::from_micros(50));
        regions += 1;
    }
    done.store(true, Ordering::Relaxed);
    reader.join().unwrap();
    // After the first 200 ms (the estimate's window filling up), the demand settles: a
    // handful of rings in a second (a machine loaded by other work can stall the pool
    // for longer than the estimate's hold), not one per region or per tick (hundreds).
    let settled: Vec<_> = rings
        .lock()
        .unwrap()
        .iter()
        .filter(|(t, _)| t.duration_since(start) > Duration::from_millis(200))
        .copied()
        .collect();
    assert!(regions > 200, "only {regions} regions ran");
    assert!(
        settled.len() <= 6,
        "{} rings in a second of short scopes: {:?}",
        settled.len(),
        settled.iter().map(|r| r.1).collect::<Vec<_>>()
    );
    // And the demand it settled on is not 0.
    assert!(page.app.demand.load(Ordering::Relaxed) >= 1);
    drop(s);
    drop(listener);
    let _ = Write::flush(&mut std::io::stdout());
}

/// A pool whose demand is its whole size cannot ask for more: its client samples every
/// 10 ms, not every millisecond, so it does not preempt a busy worker a thousand times a
/// second (a lone fine-grained program paid 6 % for it). Counted by the heartbeat, which
/// the client writes once per tick; a loaded machine can only make it tick less.
#[test]
fn a_pool_asking_for_all_its_workers_ticks_slowly() {
    // 500 ms of the client's own 10 ms tick is 50 (a 1 ms tick gave about 500).
    let ticks = heartbeats_at_full_demand("full", 0);
    assert!(ticks <= 100, "{ticks} ticks in 500 ms at full demand");
    // The manager lets the reports get 100 ms stale: about 5.
    let ticks = heartbeats_at_full_demand("full-100", 100_000);
    assert!(ticks <= 10, "{ticks} ticks in 500 ms, 100 ms report period");
}

/// Heartbeats written in 500 ms by the client of a pool kept at full demand, with the page's
/// `report_period_us` set to `report_us`.
fn heartbeats_at_full_demand(name: &str, report_us: u32) -> usize {
    let (_env, _path, _listener, pool, mut s, page) = welcomed(name, None, 6);
    page.manager
        .report_period_us
        .store(report_us, Ordering::Relaxed);
    let stop = Arc::new(AtomicBool::new(false));
    busy_chains(&pool, 2, &stop);
    rings_until(&mut s, &page, |d| d == 2);
    let (mut ticks, mut last) = (0, page.app.heartbeat.load(Ordering::Acquire));
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(500) {
        std::thread::sleep(Duration::from_micros(200));
        let hb = page.app.heartbeat.load(Ordering::Acquire);
        if hb != last {
            (ticks, last) = (ticks + 1, hb);
        }
    }
    stop.store(true, Ordering::Relaxed);
    assert_eq!(
        page.app.demand.load(Ordering::Relaxed),
        2,
        "the demand fell"
    );
    drop(s);
    ticks
}

#[test]
fn a_dead_manager_is_noticed_at_once_whatever_the_tick() {
    let (_env, _path, listener, pool, mut s, page) = welcomed("dead", None, 7);
    // Reports may be 60 s stale: a pool at full demand ticks once a minute.
    page.manager
        .report_period_us
        .store(60_000_000, Ordering::Relaxed);
    let stop = Arc::new(AtomicBool::new(false));
    busy_chains(&pool, 2, &stop);
    rings_until(&mut s, &page, |d| d == 2);
    page.manager.publish(1, &partita_protocol::CpuSet::new());
    wait_until("the pool to follow target 1", || pool.target_workers() == 1);
    // Let the client settle into its slow wait, then die as a SIGKILLed manager does.
    std::thread::sleep(Duration::from_millis(50));
    let t = Instant::now();
    drop(s);
    drop(listener);
    wait_until("the pool to go standalone", || pool.target_workers() == 2);
    let took = t.elapsed();
    stop.store(true, Ordering::Relaxed);
    // The session's socket watch wakes the client at once (a tick would take 60 s).
    assert!(took < Duration::from_secs(5), "standalone after {took:?}");
}

/// Publish `target` into the page as the manager does (seqlock write), but without bumping the
/// futex word or waking anyone: the client thread sleeps on, so only a worker that looks at
/// the page at a safe point can notice.
fn publish_without_waking(page: &PageMap, target: u32) {
    let m = &page.manager;
    let e = m.epoch.load(Ordering::Relaxed);
    m.epoch.store(e + 1, Ordering::Relaxed);
    std::sync::atomic::fence(Ordering::Release);
    m.target.store(target, Ordering::Relaxed);
    m.epoch.store(e + 2, Ordering::Release);
}

/// Keep the pool's workers busy with chains of short tasks (each spawns its successor), so
/// that they pass safe points, until `stop`.
fn busy_chains(pool: &ThreadPool, chains: usize, stop: &Arc<AtomicBool>) {
    fn link(stop: Arc<AtomicBool>) {
        spin(Duration::from_micros(50));
        if !stop.load(Ordering::Relaxed) {
            partita_runtime::spawn(move || link(stop));
        }
    }
    for _ in 0..chains {
        let stop = stop.clone();
        pool.spawn(move || link(stop));
    }
}

#[test]
fn workers_follow_the_page_at_safe_points_without_the_client_thread() {
    // A 60 s tick: the client thread wakes only for the page's futex, which this test never
    // wakes after the welcome.
    let (_env, _path, _listener, pool, mut s, page) = welcomed("follow", Some(60_000_000), 5);
    // The session's first tick: the client has applied the page (target 2) and reported.
    assert!(rings_until(&mut s, &page, |_| true) >= 1);
    let stop = Arc::new(AtomicBool::new(false));
    busy_chains(&pool, 2, &stop);
    // Let the client thread go back to its (60 s) wait.
    std::thread::sleep(Duration::from_millis(20));
    // Shrink: the worker above the new target parks at its next safe point.
    publish_without_waking(&page, 1);
    wait_until("a worker to apply target 1 from its safe point", || {
        pool.target_workers() == 1 && pool.active_workers() == 1
    });
    // The parked worker wrote the count into the page for the manager's hand-over.
    wait_until("the page to read 1 active", || {
        page.app.active.load(Ordering::Relaxed) == 1
    });
    // Grow: the running worker applies it and resumes the other.
    publish_without_waking(&page, 2);
    wait_until("a worker to apply target 2 from its safe point", || {
        pool.target_workers() == 2 && pool.active_workers() == 2
    });
    // And the resumed one writes it too: with no tick, nothing else would, and a revocation
    // reading the stale 1 would hand its CPU over while it still runs there.
    wait_until("the page to read 2 active", || {
        page.app.active.load(Ordering::Relaxed) == 2
    });
    // The page's futex word never moved: the client thread was not woken for either change.
    assert_eq!(page.manager.wake.load(Ordering::Relaxed), 0);
    stop.store(true, Ordering::Relaxed);
    drop(pool); // wakes the client from its 60 s wait (see above)
}

/// The CPU masks (as CPU lists) of this process's threads whose names start with `prefix`.
fn masks_of_threads_named(prefix: &str) -> Vec<Vec<usize>> {
    let mut masks = Vec::new();
    for t in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if !comm.starts_with(prefix) {
            continue;
        }
        let status = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
        if let Some(list) = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        {
            let set: partita_protocol::CpuSet = list.trim().parse().unwrap();
            masks.push(set.iter().collect());
        }
    }
    masks
}

/// Issue 32: the session's own threads (the client's, and the socket watch it starts after
/// the welcome, from a thread that may still have the old mask) follow the allocation with
/// the workers, at once and at every change: none is left on a CPU the program lost.
#[test]
fn the_clients_own_threads_follow_the_allocation() {
    let (_env, _path, _listener, pool, mut s, page) = welcomed("pinned", None, 6);
    let allowed: Vec<usize> = {
        let set: partita_protocol::CpuSet = std::fs::read_to_string("/proc/self/status")
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        set.iter().collect()
    };
    assert!(rings_until(&mut s, &page, |_| true) >= 1);
    for &cpu in allowed.iter().rev().take(2) {
        let one: partita_protocol::CpuSet = [cpu].into_iter().collect();
        page.manager.publish(2, &one);
        wait_until(&format!("both client threads on CPU {cpu}"), || {
            let m = masks_of_threads_named("partita-client");
            m.len() == 2 && m.iter().all(|m| *m == [cpu])
        });
    }
    drop(pool);
}
