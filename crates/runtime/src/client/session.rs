//! One registered session: follow the page, report, notice the manager's departure.

use super::register::Connection;
use super::Controlled;
use partita_protocol::page::monotonic_ns;
use partita_protocol::wire::{frame_len, ClientMessage, ManagerMessage, MAX_MANAGER_FRAME};
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Weak;
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

pub(crate) fn run(
    pool: &Weak<dyn Controlled>,
    mut conn: Connection,
    stop: &AtomicBool,
    busy_tick: Duration,
) -> End {
    let page = &conn.page;
    let mut applied_epoch: Option<u64> = None;
    let mut applied_cpus = partita_protocol::CpuSet::new();
    let mut last_demand: Option<u32> = None;
    let mut applied_expired = false;
    let mut last_busy = Instant::now();
    loop {
        if stop.load(Ordering::Acquire) {
            let _ = conn.stream.write_all(&ClientMessage::Goodbye.encode());
            return End::Stopped;
        }
        let Some(p) = pool.upgrade() else {
            return End::PoolGone;
        };
        let seen_wake = page.manager.wake.load(Ordering::Acquire);
        let a = page.manager.read();
        // A zero quantum whose end passed with no update from the manager: resume on our own
        // (a hung manager cannot starve us); the next update applies as usual.
        let expired = zero_quantum_expired(
            a.target,
            page.manager.quantum_end.load(Ordering::Acquire),
            monotonic_ns(),
        );
        if applied_epoch != Some(a.epoch) || expired != applied_expired {
            let target = if expired {
                p.pool_size()
            } else {
                a.target as usize
            };
            if !a.partition_only && p.target_workers() != target {
                p.set_target_workers(target);
            }
            if !a.cpus.is_empty() && a.cpus != applied_cpus {
                p.set_cpus(Some(a.cpus.to_vec()));
                applied_cpus = a.cpus;
            }
            applied_epoch = Some(a.epoch);
            applied_expired = expired;
        }
        let demand = p.demand();
        let side = &page.app;
        side.demand.store(demand, Ordering::Relaxed);
        side.active
            .store(p.active_workers() as u32, Ordering::Relaxed);
        side.tasks_run.store(p.tasks_run(), Ordering::Relaxed);
        side.idle_ns.store(p.idle_ns(), Ordering::Relaxed);
        side.bandwidth
            .store(crate::traffic::reported_bytes(), Ordering::Relaxed);
        side.heartbeat.store(monotonic_ns(), Ordering::Release);
        drop(p);
        if last_demand != Some(demand) {
            // The doorbell: the demand itself is in the page. A full socket buffer only delays
            // the manager's reaction to its next periodic reallocation.
            match conn.stream.write(&ClientMessage::DemandChanged.encode()) {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => return End::Lost(format!("send: {e}")),
            }
            last_demand = Some(demand);
        }
        if demand > 0 {
            last_busy = Instant::now();
        }
        // Anything from the manager after the welcome is an error report, or EOF.
        let mut buf = [0u8; 2048];
        match conn.stream.read(&mut buf) {
            Ok(0) => return End::Lost("the manager closed the connection".into()),
            Ok(n) => return End::Lost(describe(&buf[..n])),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return End::Lost(format!("recv: {e}")),
        }
        let tick = if last_busy.elapsed() > IDLE_AFTER {
            IDLE_TICK
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
