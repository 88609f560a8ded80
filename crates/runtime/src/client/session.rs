//! One registered session: follow the page, report, notice the manager's departure.

use super::liveness::Liveness;
use super::register::Connection;
use super::{Controlled, Stop};
use crate::control::{Doorbell, Watch};
use partita_protocol::page::{monotonic_ns, PageMap};
use partita_protocol::wire::{frame_len, ClientMessage, ManagerMessage, MAX_MANAGER_FRAME};
use partita_protocol::CpuSet;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError, Weak};
use std::time::{Duration, Instant};

/// How a session ended.
pub(crate) enum End {
    /// The guard was dropped.
    Stopped,
    /// The pool is gone.
    PoolGone,
    /// The manager went away or misbehaved.
    Lost(String),
}

/// Idle tick: used after demand has been 0 for [`IDLE_AFTER`].
const IDLE_TICK: Duration = Duration::from_millis(10);
const IDLE_AFTER: Duration = Duration::from_millis(100);
/// Tick while the pool reports its whole size, unless the manager's page sets how stale the
/// reports may get (`report_period_us`: 100 ms, or a twentieth of the bandwidth policy's
/// quantum). Its demand cannot rise, and a fall is held for the estimate's hold time
/// (100 ms) before it is reported, so a 1 ms tick would learn nothing sooner; it would only
/// wake this thread, with its short slice, onto a CPU a busy worker holds a thousand times a
/// second: 6 % of a lone fine-grained program's time, and 0.5 % at 10 ms
/// (docs/bench/manager.md §10, §11).
const FULL_TICK: Duration = Duration::from_millis(10);
/// Tick while the manager has suspended every worker (a zero target: another program's turn
/// in a rotation, or a zero quantum). Nothing runs, so nothing is there to sample; its tick
/// only woke a thread onto a CPU another program's worker holds. Work injected meanwhile
/// still rings at once, the manager's next publish wakes the suspended workers itself, and a
/// zero quantum's end bounds the wait ([`wait_for`]). What it delays: noticing a dead
/// manager (the pool resumes on its own up to this much later) and the heartbeat in
/// `partita status`.
const SUSPENDED_TICK: Duration = Duration::from_millis(100);
/// Doorbells are rung at most this often (ns); a change inside the interval is in the page at
/// once and rung by the next tick.
const MIN_RING_NS: u64 = 200_000;

/// The session's connection, shared with the pool: the page's demand word and the doorbell,
/// and the page's allocation. Whoever publishes (the client's tick or a pool event) stores
/// the demand in the page, then rings if the value differs from the last one rung and the
/// rate bound allows. Whoever notices a new allocation (the client thread woken by the
/// manager, or a worker at a safe point: `control/page.rs`) applies it under `applied`.
pub(crate) struct Bell {
    stream: UnixStream,
    page: PageMap,
    ring: Vec<u8>,
    /// Demand last rung (`u32::MAX`: none yet).
    rung: AtomicU32,
    /// When the doorbell last rang (ns since `base`; 0: never).
    last_ring_ns: AtomicU64,
    base: Instant,
    /// A ring failed with an error other than a full buffer: the session ends at its tick.
    broken: AtomicBool,
    /// The pool the allocation is applied to.
    pool: Weak<dyn Controlled>,
    /// What the pool last took from the page. The client thread locks it; workers only
    /// `try_lock` it (a safe point never blocks).
    applied: Mutex<Applied>,
}

/// The allocation in force in the pool, as far as this session is concerned.
#[derive(Default)]
struct Applied {
    /// The page epoch last applied (`None`: nothing yet).
    epoch: Option<u64>,
    cpus: CpuSet,
    /// The zero quantum's end had passed when it was applied.
    expired: bool,
    /// The session is over: nothing more is applied (the client reverts the pool to
    /// standalone right after).
    closed: bool,
    /// The session's own threads (the client's and the socket watch's ids): they follow the
    /// allocation with the workers. A thread created after the manager confined the process
    /// inherits its creator's mask, which may be the old one; the manager's periodic walk
    /// would narrow it within a sampling period, this does it at once.
    threads: Vec<i32>,
}

impl Bell {
    fn new(conn: Connection, pool: Weak<dyn Controlled>) -> Bell {
        Bell {
            stream: conn.stream,
            page: conn.page,
            ring: ClientMessage::DemandChanged.encode(),
            rung: AtomicU32::new(u32::MAX),
            last_ring_ns: AtomicU64::new(0),
            base: Instant::now(),
            broken: AtomicBool::new(false),
            pool,
            applied: Mutex::new(Applied::default()),
        }
    }

    fn applied(&self) -> MutexGuard<'_, Applied> {
        // Every update of `Applied` is a few plain assignments after the pool calls: a panic
        // in between leaves a state that is at worst re-applied.
        self.applied.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Apply the page's allocation to `p` if it changed since it was last applied, or a zero
    /// quantum expired (`now`: the time the caller noticed, monotonic ns). The page is read
    /// under `applied`'s lock, so whoever applies last applies the newest allocation.
    fn apply(&self, p: &dyn Controlled, applied: &mut Applied, now: u64, by_worker: bool) {
        if applied.closed {
            return;
        }
        let page = &self.page;
        let a = page.manager.read();
        // A zero quantum whose end passed with no update from the manager: resume on our own
        // (a hung manager cannot starve us); the next update applies as usual.
        let expired = zero_quantum_expired(
            a.target,
            page.manager.quantum_end.load(Ordering::Acquire),
            now,
        );
        if applied.epoch == Some(a.epoch) && expired == applied.expired {
            return;
        }
        let target = if expired {
            p.pool_size()
        } else {
            a.target as usize
        };
        if !a.partition_only && p.target_workers() != target {
            crate::control::hop!(
                "client_apply",
                target = target,
                woke = now,
                by_worker = u64::from(by_worker)
            );
            p.set_target_workers(target);
        }
        if !a.cpus.is_empty() && a.cpus != applied.cpus {
            let cpus = a.cpus.to_vec();
            let allowed = p.allowed_cpus();
            for &tid in &applied.threads {
                pin_session_thread(tid, &cpus, &allowed);
            }
            p.set_cpus(Some(cpus));
            applied.cpus = a.cpus;
        }
        applied.epoch = Some(a.epoch);
        applied.expired = expired;
    }

    /// Thread `tid` of this session follows the allocation from now on: it is pinned to the
    /// one applied (if any) at once, and again at every change.
    fn follow_thread(&self, tid: i32) {
        let mut applied = self.applied();
        if applied.closed {
            return;
        }
        if !applied.cpus.is_empty() {
            if let Some(p) = self.pool.upgrade() {
                pin_session_thread(tid, &applied.cpus.to_vec(), &p.allowed_cpus());
            }
        }
        applied.threads.push(tid);
    }

    /// The client's sample: the demand, published through the doorbell; the page's reports
    /// (active workers, tasks, idle time, traffic, heartbeat); what the next sample can learn
    /// and whether a suspended worker watches the page.
    fn sample(&self, p: &dyn Controlled) -> (u32, Sampling, bool) {
        let demand = p.demand();
        let side = &self.page.app;
        store_active(&side.active, &|| p.active_workers() as u32);
        side.tasks_run.store(p.tasks_run(), Ordering::Relaxed);
        side.idle_ns.store(p.idle_ns(), Ordering::Relaxed);
        side.bandwidth
            .store(crate::traffic::published_bytes(), Ordering::Relaxed);
        side.traffic_status.store(
            crate::traffic::measured_traffic_status().code(),
            Ordering::Relaxed,
        );
        side.heartbeat.store(monotonic_ns(), Ordering::Release);
        let state = if p.active_workers() == 0 && p.target_workers() == 0 {
            Sampling::Suspended
        } else if demand as usize >= p.pool_size() {
            Sampling::Full
        } else {
            Sampling::MayRise
        };
        (demand, state, p.page_watched())
    }

    /// How the session ends if the manager said anything: after the welcome, that is an
    /// error report, or EOF.
    fn manager_said(&self) -> Option<End> {
        let mut buf = [0u8; 2048];
        match (&self.stream).read(&mut buf) {
            Ok(0) => Some(End::Lost("the manager closed the connection".into())),
            Ok(n) => Some(End::Lost(describe(&buf[..n]))),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => None,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => None,
            Err(e) => Some(End::Lost(format!("recv: {e}"))),
        }
    }

    /// Publish `demand`; a socket error other than a full buffer is returned.
    fn publish_checked(&self, demand: u32) -> std::io::Result<()> {
        // The page first: the doorbell only says "look at the page".
        self.page.app.demand.store(demand, Ordering::Relaxed);
        if self.rung.load(Ordering::Relaxed) == demand {
            return Ok(());
        }
        let now = (self.base.elapsed().as_nanos() as u64).max(1);
        let last = self.last_ring_ns.load(Ordering::Relaxed);
        if last != 0 && now < last + MIN_RING_NS {
            crate::control::hop!("held", demand = demand);
            return Ok(()); // rate bound: the next tick rings
        }
        // One ringer per interval.
        if self
            .last_ring_ns
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            return Ok(());
        }
        self.rung.store(demand, Ordering::Relaxed);
        // Stamped before the write: the manager may read it before the write returns.
        crate::control::hop!("ring", demand = demand);
        self.send_ring()
    }

    /// Write the doorbell message. A full socket buffer is not an error: the manager reads
    /// the page at its next periodic reallocation (or, for a park, at the hand-over deadline).
    fn send_ring(&self) -> std::io::Result<()> {
        match (&self.stream).write(&self.ring) {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(()),
            Err(e) => Err(e),
        }
    }
}

impl Doorbell for Bell {
    /// Called by the pool (its tick-time `demand()` and its events) with its estimate locked.
    /// A send error marks the session broken; the session loop ends it.
    fn publish(&self, demand: u32) {
        if self.publish_checked(demand).is_err() {
            self.broken.store(true, Ordering::Relaxed);
        }
    }

    /// Called by a worker that parked (or by the thread that parked it in place). The page
    /// first: the doorbell only says "look at the page".
    fn parked(&self, active: &dyn Fn() -> u32, at_target: bool) {
        store_active(&self.page.app.active, active);
        if at_target && self.ring_parked().is_err() {
            self.broken.store(true, Ordering::Relaxed);
        }
    }
}

impl Bell {
    /// Ring for a hand-over: not rate-bounded (one ring per lowered target, and the manager
    /// waits for it before it grants the CPU) and not counted as a demand ring.
    fn ring_parked(&self) -> std::io::Result<()> {
        crate::control::hop!("ring_parked");
        self.send_ring()
    }
}

impl Watch for Bell {
    fn word(&self) -> &AtomicU64 {
        &self.page.manager.epoch
    }

    fn futex(&self) -> &AtomicU32 {
        &self.page.manager.wake
    }

    /// A worker at a safe point saw the epoch move.
    fn catch_up(&self) -> bool {
        let mut applied = match self.applied.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return false,
        };
        // The worker's own registry keeps the pool alive: the upgrade fails only while the
        // pool is being torn down, when there is nothing left to apply.
        if let Some(p) = self.pool.upgrade() {
            self.apply(&*p, &mut applied, monotonic_ns(), true);
        }
        true
    }

    fn resumed(&self, active: &dyn Fn() -> u32) {
        store_active(&self.page.app.active, active);
    }
}

/// Takes the doorbell and the watch back from the pool when the session ends, however it
/// ends; from then on nothing of this session's page is applied. The socket is shut down
/// here: a worker may hold the session (its watch) until its next safe point.
struct Lend<'a>(&'a Weak<dyn Controlled>, &'a Bell, &'a Stop);

impl Drop for Lend<'_> {
    fn drop(&mut self) {
        self.2.set_waker(None);
        self.1.applied().closed = true;
        let _ = self.1.stream.shutdown(std::net::Shutdown::Both);
        if let Some(p) = self.0.upgrade() {
            p.set_doorbell(None);
            p.set_watch(None);
        }
    }
}

pub(crate) fn run(
    pool: &Weak<dyn Controlled>,
    conn: Connection,
    stop: &Stop,
    busy_tick: Duration,
) -> End {
    let bell = Arc::new(Bell::new(conn, pool.clone()));
    let _lend = Lend(pool, &bell, stop);
    let b = bell.clone();
    stop.set_waker(Some(Box::new(move || b.page.manager.wake_waiters())));
    match pool.upgrade() {
        Some(p) => {
            p.set_doorbell(Some(bell.clone() as Arc<dyn Doorbell>));
            p.set_watch(Some(bell.clone() as Arc<dyn Watch>));
        }
        None => return End::PoolGone,
    }
    bell.follow_thread(crate::affinity::current_tid());
    let client = std::thread::current();
    let b = bell.clone();
    let b2 = bell.clone();
    // Declared after `_lend`, so dropped before it: the watch is told the session is over,
    // then `Lend` shuts the socket down, which ends its poll.
    let live = Liveness::spawn(
        &bell.stream,
        move || b2.follow_thread(crate::affinity::current_tid()),
        move || {
            b.page.manager.wake_waiters();
            client.unpark();
        },
    )
    .ok();
    let page = &bell.page;
    let mut last_busy = Instant::now();
    loop {
        if stop.requested() {
            let _ = (&bell.stream).write_all(&ClientMessage::Goodbye.encode());
            return End::Stopped;
        }
        let Some(p) = pool.upgrade() else {
            return End::PoolGone;
        };
        let seen_wake = page.manager.wake.load(Ordering::Acquire);
        bell.apply(&*p, &mut bell.applied(), monotonic_ns(), false);
        let (demand, state, watched) = bell.sample(&*p);
        drop(p);
        if bell.broken.load(Ordering::Relaxed) {
            return End::Lost("send: the doorbell could not be rung".into());
        }
        if demand > 0 {
            last_busy = Instant::now();
        }
        if let Some(end) = bell.manager_said() {
            return end;
        }
        let state = match state {
            Sampling::MayRise if last_busy.elapsed() > IDLE_AFTER => Sampling::Idle,
            s => s,
        };
        let report = match page.manager.report_period_us.load(Ordering::Relaxed) {
            0 => None,
            us => Some(Duration::from_micros(us.into())),
        };
        let tick = wait_for(
            tick_for(busy_tick, state, report),
            page.manager.read().target,
            page.manager.quantum_end.load(Ordering::Acquire),
            monotonic_ns(),
        );
        // Just before the wait: a stop requested, or a manager that spoke or hung up, since
        // the loop's top woke nobody. The loop's top ends the session then.
        if stop.requested() || live.as_ref().is_some_and(Liveness::take_spoke) {
            continue;
        }
        if watched {
            // A suspended worker wakes on the page and applies it: waking this thread too
            // would only add a thread competing for a CPU at the moment a grow needs one.
            std::thread::park_timeout(tick);
        } else {
            page.manager.wait_for_change(seen_wake, tick);
        }
    }
}

/// Pin one of the session's threads to `cpus` by the workers' rule; a thread that exited
/// meanwhile (ESRCH) is nothing to pin.
fn pin_session_thread(tid: i32, cpus: &[usize], allowed: &[usize]) {
    if let Err(e) = crate::affinity::pin_thread(tid, Some(cpus), allowed) {
        tracing::debug!(tid, error = %e, "partita: could not pin a client thread");
    }
}

/// What the client's next sample can learn, which sets how soon it is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sampling {
    /// The demand may rise: sample every `busy_tick`.
    MayRise,
    /// The pool reports its whole size (the page's `report_period_us`, else [`FULL_TICK`]).
    Full,
    /// Demand 0 for [`IDLE_AFTER`] ([`IDLE_TICK`]).
    Idle,
    /// Every worker suspended by a zero target ([`SUSPENDED_TICK`]).
    Suspended,
}

/// How long the client sleeps before its next sample; `report`: the manager's
/// `report_period_us`, if it set one. Never faster than a busy pool's `busy_tick`; events
/// still ring at once.
fn tick_for(busy_tick: Duration, state: Sampling, report: Option<Duration>) -> Duration {
    match state {
        Sampling::MayRise => busy_tick,
        Sampling::Full => report.unwrap_or(FULL_TICK).max(busy_tick),
        Sampling::Idle => IDLE_TICK.max(busy_tick),
        Sampling::Suspended => SUSPENDED_TICK.max(busy_tick),
    }
}

/// `tick`, cut short to wake just after a zero quantum ends (`quantum_end`, monotonic ns;
/// 0: no deadline), so that the pool resumes on its own then if the manager has not.
fn wait_for(tick: Duration, target: u32, quantum_end: u64, now: u64) -> Duration {
    if target != 0 || quantum_end == 0 {
        return tick;
    }
    // +1 µs: `zero_quantum_expired` needs a time after the end, not at it.
    tick.min(Duration::from_nanos(quantum_end.saturating_sub(now)) + Duration::from_micros(1))
}

/// Whether a zero target is a quantum that has ended (`quantum_end` is monotonic ns; 0: the
/// manager sets no deadline, the zero stands until changed).
fn zero_quantum_expired(target: u32, quantum_end: u64, now: u64) -> bool {
    target == 0 && quantum_end != 0 && now > quantum_end
}

fn describe(frame: &[u8]) -> String {
    if frame.len() >= 4 {
        if let Ok(len) = frame_len([frame[0], frame[1], frame[2], frame[3]], MAX_MANAGER_FRAME) {
            if frame.len() >= 4 + len {
                if let Ok(ManagerMessage::Error { code, message }) =
                    ManagerMessage::decode(&frame[4..4 + len])
                {
                    return format!("manager error {code:?}: {message}");
                }
            }
        }
    }
    "unexpected message from the manager".into()
}

/// Write the pool's active-worker count into the page. Two writers (the client's tick and
/// a parking worker) each read the count, then store it; the one that read first may store
/// last. So every writer reads again after storing and stores again if the count moved: the
/// last store is then always followed by a read that matched it, and the page ends on the
/// current count (the manager's hand-over waits for it to reach the target).
fn store_active(slot: &AtomicU32, read: &dyn Fn() -> u32) {
    let mut v = read();
    loop {
        slot.store(v, Ordering::SeqCst);
        let now = read();
        if now == v {
            return;
        }
        v = now;
    }
}

#[cfg(test)]
mod tests {
    use super::{
        store_active, tick_for, wait_for, zero_quantum_expired, Sampling, FULL_TICK, IDLE_TICK,
        SUSPENDED_TICK,
    };
    use std::cell::Cell;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    #[test]
    fn a_count_that_moves_while_it_is_stored_is_stored_again() {
        // The writer reads 2; another worker parks before its store lands (the count is 1
        // from the second read on): the page must end on 1, not on the stale 2.
        let reads = Cell::new(0);
        let read = || {
            reads.set(reads.get() + 1);
            if reads.get() == 1 {
                2
            } else {
                1
            }
        };
        let slot = AtomicU32::new(2);
        store_active(&slot, &read);
        assert_eq!(slot.load(Ordering::SeqCst), 1);
        assert_eq!(reads.get(), 3, "stored 2, saw 1, stored 1, saw 1");
    }

    #[test]
    fn a_pool_asking_for_all_its_workers_ticks_slowly() {
        let ms = Duration::from_millis;
        assert_eq!(
            tick_for(ms(1), Sampling::MayRise, Some(ms(100))),
            ms(1),
            "demand may rise: sample often"
        );
        // The manager says how stale its reports may get; a manager that predates the field
        // leaves it 0 (None): the client's own default.
        assert_eq!(tick_for(ms(1), Sampling::Full, Some(ms(100))), ms(100));
        assert_eq!(tick_for(ms(1), Sampling::Full, Some(ms(10))), ms(10));
        assert_eq!(tick_for(ms(1), Sampling::Full, None), FULL_TICK);
        assert_eq!(tick_for(ms(1), Sampling::Idle, None), IDLE_TICK);
        // A tick the user slowed down is never sped up.
        assert_eq!(
            tick_for(ms(60_000), Sampling::Full, Some(ms(10))),
            ms(60_000)
        );
        assert_eq!(tick_for(ms(60_000), Sampling::Idle, None), ms(60_000));
        assert_eq!(tick_for(ms(60_000), Sampling::Suspended, None), ms(60_000));
    }

    #[test]
    fn a_suspended_pool_ticks_slowest_but_wakes_when_its_zero_quantum_ends() {
        let ms = Duration::from_millis;
        let t = tick_for(ms(1), Sampling::Suspended, Some(ms(10)));
        assert_eq!(t, SUSPENDED_TICK);
        assert!(SUSPENDED_TICK > FULL_TICK && SUSPENDED_TICK > IDLE_TICK);
        let now = 1_000_000_000;
        // A rotation's zero target has no deadline: the manager's publish wakes the workers.
        assert_eq!(wait_for(t, 0, 0, now), t);
        // A zero quantum ending in 30 ms: wake just after it (`zero_quantum_expired` then).
        let end = now + 30_000_000;
        let w = wait_for(t, 0, end, now);
        assert_eq!(w, ms(30) + Duration::from_micros(1));
        assert!(zero_quantum_expired(0, end, now + w.as_nanos() as u64));
        // An ended quantum: wake at once. A running pool: its own tick.
        assert_eq!(wait_for(t, 0, now - 1, now), Duration::from_micros(1));
        assert_eq!(wait_for(ms(10), 1, end, now), ms(10));
    }

    #[test]
    fn only_an_ended_zero_quantum_expires() {
        assert!(zero_quantum_expired(0, 100, 101));
        assert!(!zero_quantum_expired(0, 100, 100), "not before its end");
        assert!(
            !zero_quantum_expired(0, 0, u64::MAX),
            "no deadline: stays parked"
        );
        assert!(!zero_quantum_expired(2, 100, 200), "not a zero quantum");
    }
}
