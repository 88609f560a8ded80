//! The session's ring: the socket to the manager, and the one message the pool sends on it
//! while a session lasts (`DemandChanged`: "look at my half of the page").
//!
//! Two kinds of ring: a *demand* ring when the reported demand changed, at most one per
//! [`MIN_RING_NS`] (a change inside the interval is in the page at once and rung by the
//! client's next tick); and a *hand-over* ring when the pool is down to a lowered target,
//! at once and not counted as a demand ring (one per lowered target, and the manager waits
//! for it before it grants the CPU). A send that fails with anything but a full buffer marks
//! the ring broken; the session ends at its next tick.

use partita_protocol::wire::ClientMessage;
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Instant;

/// Demand rings are sent at most this often (ns).
pub(crate) const MIN_RING_NS: u64 = 200_000;

/// The session's socket and its ring (shared by the client thread and the pool).
pub(crate) struct Ring {
    stream: UnixStream,
    msg: Vec<u8>,
    /// Demand last rung (`u32::MAX`: none yet).
    rung: AtomicU32,
    /// When a demand ring last went (ns since `base`; 0: never).
    last_ring_ns: AtomicU64,
    base: Instant,
    /// A ring failed with an error other than a full buffer.
    broken: AtomicBool,
    /// Hand-over rings sent (tests count them).
    #[cfg(test)]
    pub(crate) handovers: std::sync::atomic::AtomicUsize,
}

impl Ring {
    /// The ring of a registered session's socket (non-blocking).
    pub(crate) fn new(stream: UnixStream) -> Ring {
        Ring {
            stream,
            msg: ClientMessage::DemandChanged.encode(),
            rung: AtomicU32::new(u32::MAX),
            last_ring_ns: AtomicU64::new(0),
            base: Instant::now(),
            broken: AtomicBool::new(false),
            #[cfg(test)]
            handovers: Default::default(),
        }
    }

    /// The session's socket (the client reads the manager's error reports and EOF on it,
    /// watches it, says goodbye and shuts it down).
    pub(crate) fn socket(&self) -> &UnixStream {
        &self.stream
    }

    /// A send failed: the session is to end.
    pub(crate) fn broken(&self) -> bool {
        self.broken.load(Ordering::Relaxed)
    }

    /// The page now says `demand`: ring if it differs from the last one rung and the rate
    /// bound allows.
    pub(crate) fn demand(&self, demand: u32) {
        if self.rung.load(Ordering::Relaxed) == demand {
            return;
        }
        let now = (self.base.elapsed().as_nanos() as u64).max(1);
        let last = self.last_ring_ns.load(Ordering::Relaxed);
        if last != 0 && now < last + MIN_RING_NS {
            crate::control::hop!("held", demand = demand);
            return; // rate bound: the next tick rings
        }
        // One ringer per interval.
        if self
            .last_ring_ns
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            return;
        }
        self.rung.store(demand, Ordering::Relaxed);
        // Stamped before the write: the manager may read it before the write returns.
        crate::control::hop!("ring", demand = demand);
        self.send();
    }

    /// The pool is down to a lowered target: ring at once (not rate-bounded, not a demand
    /// ring).
    pub(crate) fn handover(&self) {
        crate::control::hop!("ring_parked");
        #[cfg(test)]
        self.handovers.fetch_add(1, Ordering::SeqCst);
        self.send();
    }

    /// Write the message. A full socket buffer is not an error: the manager reads the page
    /// at its next periodic reallocation (or, for a park, at the hand-over deadline).
    fn send(&self) {
        match (&self.stream).write(&self.msg) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => self.broken.store(true, Ordering::Relaxed),
        }
    }
}
