//! One registered session: hand the pool its page (`control::ManagerPage`, which owns the
//! allocation applied and the reports), then tick: apply, report, pick the next tick, and
//! notice the manager's departure.

use super::liveness::Liveness;
use super::register::Connection;
use super::ring::Ring;
use super::Stop;
use crate::control::ManagerPage;
use crate::registry::Registry;
use partita_protocol::page::monotonic_ns;
use partita_protocol::wire::{frame_len, ClientMessage, ManagerMessage, MAX_MANAGER_FRAME};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::Ordering;
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

/// Takes the page back from the pool when the session ends, however it ends; from then on
/// nothing of this session's page is applied. The socket is shut down here: a worker may
/// hold the page until its next safe point.
struct Lend<'a>(&'a Weak<Registry>, &'a ManagerPage, &'a Stop);

impl Drop for Lend<'_> {
    fn drop(&mut self) {
        self.2.set_waker(None);
        self.1.close();
        let _ = self.1.ring().socket().shutdown(std::net::Shutdown::Both);
        if let Some(p) = self.0.upgrade() {
            p.set_manager_page(None);
        }
    }
}

pub(crate) fn run(
    pool: &Weak<Registry>,
    conn: Connection,
    stop: &Stop,
    busy_tick: Duration,
) -> End {
    let mp = Arc::new(ManagerPage::new(
        conn.page,
        Ring::new(conn.stream),
        pool.clone(),
    ));
    let _lend = Lend(pool, &mp, stop);
    let m = mp.clone();
    stop.set_waker(Some(Box::new(move || m.page().manager.wake_waiters())));
    match pool.upgrade() {
        Some(p) => p.set_manager_page(Some(mp.clone())),
        None => return End::PoolGone,
    }
    mp.confine_thread(crate::affinity::current_tid());
    // Declared after `_lend`, so dropped before it: the watch is told the session is over,
    // then `Lend` shuts the socket down, which ends its poll.
    let live = watch_liveness(&mp);
    let page = mp.page();
    let mut last_busy = Instant::now();
    loop {
        if stop.requested() {
            let _ = mp
                .ring()
                .socket()
                .write_all(&ClientMessage::Goodbye.encode());
            return End::Stopped;
        }
        let Some(p) = pool.upgrade() else {
            return End::PoolGone;
        };
        let seen_wake = page.manager.wake.load(Ordering::Acquire);
        mp.apply_by_client(&p);
        let demand = mp.write_reports(&p);
        let (state, watched) = sampling(&p, demand);
        drop(p);
        if mp.ring().broken() {
            return End::Lost("send: the ring to the manager failed".into());
        }
        if demand > 0 {
            last_busy = Instant::now();
        }
        if let Some(end) = manager_said(mp.ring().socket()) {
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

/// Start the session's liveness watch: its thread follows the allocation, and wakes the
/// client thread from either of its waits when the manager speaks or hangs up.
fn watch_liveness(mp: &Arc<ManagerPage>) -> Option<Liveness> {
    let client = std::thread::current();
    let (m, m2) = (mp.clone(), mp.clone());
    Liveness::spawn(
        mp.ring().socket(),
        move || m2.confine_thread(crate::affinity::current_tid()),
        move || {
            m.page().manager.wake_waiters();
            client.unpark();
        },
    )
    .ok()
}

/// What the client's next sample can learn (from the pool and the demand it just
/// reported), and whether a suspended worker watches the page.
fn sampling(p: &Registry, demand: u32) -> (Sampling, bool) {
    let state = if p.active() == 0 && p.target() == 0 {
        Sampling::Suspended
    } else if demand as usize >= p.num_threads() {
        Sampling::Full
    } else {
        Sampling::MayRise
    };
    (state, p.control.page.watched_by_a_worker())
}

/// How the session ends if the manager said anything: after the welcome, that is an error
/// report, or EOF.
fn manager_said(mut socket: &UnixStream) -> Option<End> {
    let mut buf = [0u8; 2048];
    match socket.read(&mut buf) {
        Ok(0) => Some(End::Lost("the manager closed the connection".into())),
        Ok(n) => Some(End::Lost(describe(&buf[..n]))),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => None,
        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => None,
        Err(e) => Some(End::Lost(format!("recv: {e}"))),
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
    use super::{tick_for, wait_for, Sampling, FULL_TICK, IDLE_TICK, SUSPENDED_TICK};
    use crate::control::manager_page::zero_quantum_expired;
    use std::time::Duration;

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
}
