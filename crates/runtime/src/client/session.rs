//! One registered session: follow the page, report, notice the manager's departure.

use super::register::Connection;
use super::Controlled;
use crate::control::Doorbell;
use partita_protocol::page::{monotonic_ns, PageMap};
use partita_protocol::wire::{frame_len, ClientMessage, ManagerMessage, MAX_MANAGER_FRAME};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
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
/// Doorbells are rung at most this often (ns); a change inside the interval is in the page at
/// once and rung by the next tick.
const MIN_RING_NS: u64 = 200_000;

/// The session's connection, shared with the pool's events: the page's demand word and the
/// doorbell. Whoever publishes (the client's tick or a pool event) stores the demand in the
/// page, then rings if the value differs from the last one rung and the rate bound allows.
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
}

impl Bell {
    fn new(conn: Connection) -> Bell {
        Bell {
            stream: conn.stream,
            page: conn.page,
            ring: ClientMessage::DemandChanged.encode(),
            rung: AtomicU32::new(u32::MAX),
            last_ring_ns: AtomicU64::new(0),
            base: Instant::now(),
            broken: AtomicBool::new(false),
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
        // A full socket buffer only delays the manager's reaction to its next periodic
        // reallocation.
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
}

/// Takes the doorbell back from the pool when the session ends, however it ends.
struct Lend<'a>(&'a Weak<dyn Controlled>);

impl Drop for Lend<'_> {
    fn drop(&mut self) {
        if let Some(p) = self.0.upgrade() {
            p.set_doorbell(None);
        }
    }
}

pub(crate) fn run(
    pool: &Weak<dyn Controlled>,
    conn: Connection,
    stop: &AtomicBool,
    busy_tick: Duration,
) -> End {
    let bell = Arc::new(Bell::new(conn));
    let _lend = Lend(pool);
    match pool.upgrade() {
        Some(p) => p.set_doorbell(Some(bell.clone() as Arc<dyn Doorbell>)),
        None => return End::PoolGone,
    }
    let page = &bell.page;
    let mut applied_epoch: Option<u64> = None;
    let mut applied_cpus = partita_protocol::CpuSet::new();
    let mut applied_expired = false;
    let mut last_busy = Instant::now();
    loop {
        if stop.load(Ordering::Acquire) {
            let _ = (&bell.stream).write_all(&ClientMessage::Goodbye.encode());
            return End::Stopped;
        }
        let Some(p) = pool.upgrade() else {
            return End::PoolGone;
        };
        let seen_wake = page.manager.wake.load(Ordering::Acquire);
        let woke = monotonic_ns();
        let a = page.manager.read();
        // A zero quantum whose end passed with no update from the manager: resume on our own
        // (a hung manager cannot starve us); the next update applies as usual.
        let expired = zero_quantum_expired(
            a.target,
            page.manager.quantum_end.load(Ordering::Acquire),
            woke,
        );
        if applied_epoch != Some(a.epoch) || expired != applied_expired {
            let target = if expired {
                p.pool_size()
            } else {
                a.target as usize
            };
            if !a.partition_only && p.target_workers() != target {
                crate::control::hop!("client_apply", target = target, woke = woke);
                p.set_target_workers(target);
            }
            if !a.cpus.is_empty() && a.cpus != applied_cpus {
                p.set_cpus(Some(a.cpus.to_vec()));
                applied_cpus = a.cpus;
            }
            applied_epoch = Some(a.epoch);
            applied_expired = expired;
        }
        // Samples the pool and publishes the demand through the doorbell (see `Bell`).
        let demand = p.demand();
        let side = &page.app;
        side.active
            .store(p.active_workers() as u32, Ordering::Relaxed);
        side.tasks_run.store(p.tasks_run(), Ordering::Relaxed);
        side.idle_ns.store(p.idle_ns(), Ordering::Relaxed);
        side.bandwidth
            .store(crate::traffic::published_bytes(), Ordering::Relaxed);
        side.traffic_status.store(
            crate::traffic::measured_traffic_status().code(),
            Ordering::Relaxed,
        );
        side.heartbeat.store(monotonic_ns(), Ordering::Release);
        drop(p);
        if bell.broken.load(Ordering::Relaxed) {
            return End::Lost("send: the doorbell could not be rung".into());
        }
        if demand > 0 {
            last_busy = Instant::now();
        }
        // Anything from the manager after the welcome is an error report, or EOF.
        let mut buf = [0u8; 2048];
        match (&bell.stream).read(&mut buf) {
            Ok(0) => return End::Lost("the manager closed the connection".into()),
            Ok(n) => return End::Lost(describe(&buf[..n])),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return End::Lost(format!("recv: {e}")),
        }
        // An idle pool never ticks faster than a busy one; its events still ring at once.
        let tick = if last_busy.elapsed() > IDLE_AFTER {
            IDLE_TICK.max(busy_tick)
        } else {
            busy_tick
        };
        page.manager.wait_for_change(seen_wake, tick);
    }
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

#[cfg(test)]
mod tests {
    use super::zero_quantum_expired;

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
