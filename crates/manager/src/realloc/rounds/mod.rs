//! What triggers a round: [`Rounds`] coalesces requests (a demand change, a registration, a
//! departure, the periodic tick, a hand-over deadline) so that at most one round is in
//! flight, run by the reallocator thread ([`spawn`]) or claimed by the requester
//! ([`Rounds::request_or_claim`]).

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The `Instant` of a monotonic-clock time in ns (both are `CLOCK_MONOTONIC`; a past time
/// is now).
pub(crate) fn instant_at(ns: u64) -> Instant {
    let now = partita_protocol::page::monotonic_ns();
    Instant::now() + Duration::from_nanos(ns.saturating_sub(now))
}

/// Coalescing rounds: any number of requests while a round is in flight make one more round.
///
/// A round runs on the reallocator thread, or on the thread that requested it when it may run it
/// at once ([`Rounds::request_or_claim`]); either way at most one is in flight.
#[derive(Debug, Default)]
pub(crate) struct Rounds {
    state: Mutex<RoundState>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct RoundState {
    /// Requests so far (a request's number is the round that will serve it, at the latest).
    requested: u64,
    /// The last request number a finished round covered.
    served: u64,
    /// Rounds run.
    rounds: u64,
    stop: bool,
    /// A round is running (on the reallocator thread or on a thread that claimed it).
    in_flight: bool,
    /// When the round in flight started.
    started: Option<Instant>,
    /// When the last round finished and how long it took.
    last: Option<(Instant, Duration)>,
    /// A round must start by then even if nothing requests one (a hand-over deadline); a round
    /// that starts at or after it covers it.
    timer: Option<Instant>,
}

impl RoundState {
    /// A round starts now: it covers a timer that has come.
    fn start(&mut self, now: Instant) {
        self.in_flight = true;
        self.started = Some(now);
        if self.timer.is_some_and(|t| t <= now) {
            self.timer = None;
        }
    }
}

/// A caller may run a round itself only if the last one finished at least this long ago
/// (requests are rare: a storm of them is coalesced by the reallocator thread instead)…
pub(crate) const CLAIM_QUIET: Duration = Duration::from_millis(1);
/// …and took at most this long (a large registry's round stays off the caller's thread).
pub(crate) const CLAIM_MAX_ROUND: Duration = Duration::from_micros(300);

/// Whether a requester may run the round itself at `now`, given when the last round finished
/// and how long it took (`None`: no round yet), and whether a hand-over is pending (a round
/// is scheduled at its deadline): then the request is most likely the releasing application's
/// worker that parked, and its CPU's new owner waits for this round, so the quiet spell is
/// not required.
pub(crate) fn may_claim(last: Option<(Instant, Duration)>, now: Instant, handover: bool) -> bool {
    last.is_none_or(|(end, took)| {
        (handover || now.saturating_duration_since(end) >= CLAIM_QUIET) && took <= CLAIM_MAX_ROUND
    })
}

/// A round claimed by [`Rounds::request_or_claim`]'s caller: run it, then drop the claim,
/// which records the round as finished (also if the round panicked), or give it back to the
/// reallocator thread with [`Claim::hand_over`].
#[derive(Debug)]
pub(crate) struct Claim<'a> {
    rounds: &'a Rounds,
    covered: u64,
}

impl Claim<'_> {
    /// The caller cannot run the round now: the reallocator thread runs it.
    pub(crate) fn hand_over(self) {
        let mut b = self.rounds.state();
        b.in_flight = false;
        b.started = None;
        self.rounds.changed.notify_all();
        drop(b);
        std::mem::forget(self);
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.rounds.finished(self.covered);
    }
}

impl Rounds {
    fn state(&self) -> MutexGuard<'_, RoundState> {
        // Nothing panics while holding this lock; if something did, the counters are still
        // consistent (each update is one statement), so keep using them.
        crate::sync::lock(&self.state)
    }

    /// Ask for a reallocation; returns the request's number (for [`Rounds::wait_served`]).
    pub(crate) fn request(&self) -> u64 {
        let mut b = self.state();
        b.requested += 1;
        self.changed.notify_all();
        b.requested
    }

    /// Request; when no round is in flight and rounds have been rare and short lately
    /// ([`CLAIM_QUIET`], [`CLAIM_MAX_ROUND`]), claim the round that serves this request instead
    /// of waking the reallocator thread: the caller runs it now. Requests that arrive meanwhile
    /// wait for it and are merged into the next round, as with the thread.
    pub(crate) fn request_or_claim(&self) -> Option<Claim<'_>> {
        let mut b = self.state();
        b.requested += 1;
        let now = Instant::now();
        if !b.in_flight && !b.stop && may_claim(b.last, now, b.timer.is_some()) {
            b.start(now);
            return Some(Claim {
                rounds: self,
                covered: b.requested,
            });
        }
        self.changed.notify_all();
        None
    }

    /// Block until a round that started after request `n` has finished (or rounds stopped).
    pub(crate) fn wait_served(&self, n: u64) {
        let mut b = self.state();
        while b.served < n && !b.stop {
            b = self.changed.wait(b).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Rounds run so far.
    #[cfg(test)]
    pub(crate) fn completed(&self) -> u64 {
        self.state().rounds
    }

    /// Whether [`Rounds::stop`] was called (the manager is shutting down).
    pub(crate) fn is_stopped(&self) -> bool {
        self.state().stop
    }

    /// Stop the reallocator thread after its current round.
    pub(crate) fn stop(&self) {
        self.state().stop = true;
        self.changed.notify_all();
    }

    /// Run a round at `at` at the latest, even if nothing requests one (the earliest of the
    /// scheduled times counts).
    pub(crate) fn schedule(&self, at: Instant) {
        let mut b = self.state();
        b.timer = Some(b.timer.map_or(at, |t| t.min(at)));
        self.changed.notify_all();
    }

    /// The reallocator's side: wait for unserved requests (or a scheduled time that has come)
    /// and no round in flight; the request number a round started now covers, or `None` when
    /// stopped.
    fn next(&self) -> Option<u64> {
        let mut b = self.state();
        loop {
            if b.stop {
                return None;
            }
            let now = Instant::now();
            let due = b.timer.is_some_and(|t| t <= now);
            if !b.in_flight && (b.requested != b.served || due) {
                b.start(now);
                return Some(b.requested);
            }
            b = match b.timer {
                Some(t) if !b.in_flight && t > now => {
                    let r = self.changed.wait_timeout(b, t - now);
                    r.map_or_else(|p| p.into_inner().0, |r| r.0)
                }
                _ => self.changed.wait(b).unwrap_or_else(|p| p.into_inner()),
            };
        }
    }

    fn finished(&self, covered: u64) {
        let mut b = self.state();
        b.served = b.served.max(covered);
        b.rounds += 1;
        b.in_flight = false;
        let now = Instant::now();
        b.last = b
            .started
            .take()
            .map(|s| (now, now.saturating_duration_since(s)));
        self.changed.notify_all();
    }
}

/// The time slice the manager's reacting threads ask for (see [`react_quickly`]).
const REACT_SLICE: Duration = Duration::from_micros(100);

/// Let the calling thread preempt CPU-bound threads as soon as it is woken (a short EEVDF
/// slice; no extra CPU share): the connections' demand-change handlers and the reallocator sleep almost always,
/// and every wake-up they wait for is on a reaction's path. On a machine whose CPUs are all
/// busy with workers, a woken thread could otherwise wait up to a full default slice
/// (milliseconds). Best effort. Measured (docs/bench/manager.md §2, 3 alternating runs each at
/// load 11-14): no change the noise let show; kept because it asks for no CPU share.
pub(crate) fn react_quickly() {
    if let Err(e) = partita_protocol::sys::request_short_slice(REACT_SLICE) {
        tracing::debug!(error = %e, "sched_setattr: no short slice for this thread");
    }
}

/// Start the reallocator thread: it runs `round` once per batch of requests until
/// [`Rounds::stop`].
pub(crate) fn spawn(
    rounds: Arc<Rounds>,
    mut round: impl FnMut() + Send + 'static,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("partita-realloc".into())
        .spawn(move || {
            react_quickly();
            while let Some(covered) = rounds.next() {
                round();
                rounds.finished(covered);
            }
        })
}

#[cfg(test)]
mod tests;
