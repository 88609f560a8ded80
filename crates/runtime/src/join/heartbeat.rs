//! Heartbeat promotion (issue 29; the protocol is in `README.md` beside this file): `join`'s
//! second half waits on a worker-local list, and only when the worker's heartbeat has fired
//! is the oldest waiting half moved to the worker's deque, where thieves can take it.
//!
//! The heartbeat is the worker's own clock, read at `join` entry every `stride` joins (the
//! stride adapts so that the clock is read a few times per interval: one read per join when
//! joins are coarse, one per up to [`MAX_STRIDE`] joins when they are a few nanoseconds
//! apart). No timer thread, no signal: an idle pool does nothing at all.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::job::JobRef;
use crate::registry::WorkerThread;

/// The interval of a pool that turns heartbeat on without naming one (`PARTITA_HEARTBEAT_US=on`),
/// chili's and Spice's, from the measurements in docs/bench/runtime.md (issue 29).
///
/// Heartbeat is **off by default** (README.md §5, "What differs"): a first half that blocks
/// outside the pool on its own pending second half, deeper inside a job, hangs where
/// rayon-core with two or more threads happens to work, and coarse programs through rayon
/// (`par_sort`, map-reduce) were not shown to be no slower than rayon-core with it. A user
/// who wants fine-grained joins fast turns it on, per pool or per process.
pub(crate) const DEFAULT_INTERVAL: Duration = Duration::from_micros(100);
/// The accepted range of intervals: below 1 µs the clock reads cost more than the joins
/// they would save; above 100 ms a program would run sequentially for human-visible time.
pub(crate) const MIN_INTERVAL: Duration = Duration::from_micros(1);
/// See [`MIN_INTERVAL`].
pub(crate) const MAX_INTERVAL: Duration = Duration::from_millis(100);
/// The environment variable that sets the interval of pools whose builder does not.
pub(crate) const ENV: &str = "PARTITA_HEARTBEAT_US";
/// At most this many joins between two clock reads.
const MAX_STRIDE: u32 = 1024;
/// A join below this many un-promoted ones runs inline when no clock read is due (as in
/// chili): promotion takes the oldest first, so its half would not be offered before them.
const INLINE_BELOW: usize = 3;

/// Is `interval` a usable heartbeat interval? The error names the accepted range.
pub(crate) fn check_interval(interval: Duration) -> Result<(), String> {
    if (MIN_INTERVAL..=MAX_INTERVAL).contains(&interval) {
        Ok(())
    } else {
        Err(format!(
            "heartbeat_interval: {interval:?} is out of range ({MIN_INTERVAL:?} to \
             {MAX_INTERVAL:?}; None makes every join stealable at once)"
        ))
    }
}

/// The interval `PARTITA_HEARTBEAT_US` asks for: `Ok(None)` for `off`, [`DEFAULT_INTERVAL`]
/// for `on`, or the error to warn about (naming the variable).
pub(crate) fn parse_env(value: &str) -> Result<Option<Duration>, String> {
    let value = value.trim();
    if value == "off" {
        return Ok(None);
    }
    if value == "on" {
        return Ok(Some(DEFAULT_INTERVAL));
    }
    let bad = |why: String| {
        format!(
            "{ENV}={value:?} is not a heartbeat interval ({why}); expected microseconds \
             from {} to {}, `on` ({} µs) or `off`; heartbeat stays off",
            MIN_INTERVAL.as_micros(),
            MAX_INTERVAL.as_micros(),
            DEFAULT_INTERVAL.as_micros()
        )
    };
    let us: u64 = value.parse().map_err(|e| bad(format!("{e}")))?;
    let d = Duration::from_micros(us);
    check_interval(d).map_err(|_| bad("out of range".into()))?;
    Ok(Some(d))
}

/// The interval for a pool: the builder's choice, else the environment's, else none (off by
/// default, see [`DEFAULT_INTERVAL`]). A bad environment value is reported once per process
/// on stderr and ignored.
pub(crate) fn resolve(builder: Option<Option<Duration>>) -> Option<Duration> {
    if let Some(choice) = builder {
        return choice;
    }
    let value = std::env::var_os(ENV)?;
    match parse_env(&value.to_string_lossy()) {
        Ok(choice) => choice,
        Err(why) => {
            static SAID: std::sync::Once = std::sync::Once::new();
            SAID.call_once(|| eprintln!("partita: {why}"));
            None
        }
    }
}

/// The local list: un-promoted halves, oldest at the front. Only its worker touches it
/// (README.md §2); no borrow outlives a method, so the `RefCell` never panics.
/// Its length is kept beside it, so `join`'s inline test reads one cell, not the list.
pub(crate) struct Pending<T> {
    list: RefCell<VecDeque<T>>,
    len: Cell<usize>,
}

impl<T: Copy> Pending<T> {
    pub(crate) fn new() -> Self {
        Pending {
            list: RefCell::new(VecDeque::new()),
            len: Cell::new(0),
        }
    }

    #[inline]
    pub(crate) fn push(&self, t: T) {
        let mut list = self.list.borrow_mut();
        list.push_back(t);
        self.len.set(list.len());
    }

    /// Remove the newest entry if `is` says it is the caller's.
    #[inline]
    pub(crate) fn pop_back_if(&self, is: impl Fn(&T) -> bool) -> bool {
        let mut list = self.list.borrow_mut();
        match list.back() {
            Some(t) if is(t) => {
                list.pop_back();
                self.len.set(list.len());
                true
            }
            _ => false,
        }
    }

    /// Remove the oldest entry (to promote it).
    #[inline]
    pub(crate) fn pop_oldest(&self) -> Option<T> {
        let mut list = self.list.borrow_mut();
        let t = list.pop_front();
        self.len.set(list.len());
        t
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len.get()
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.len.get() == 0
    }

    /// Remove every entry, oldest first.
    pub(crate) fn take_all(&self) -> Vec<T> {
        self.len.set(0);
        self.list.borrow_mut().drain(..).collect()
    }
}

/// A worker's heartbeat state and its list of un-promoted `join` halves. Touched only by its
/// worker thread (`WorkerThread` is not `Sync`; see README.md §2).
pub(crate) struct Heartbeat {
    /// The interval in ns; 0: no heartbeat, every join half goes to the deque at once.
    interval_ns: u64,
    /// Un-promoted second halves of this worker's joins, oldest at the front.
    pending: Pending<JobRef>,
    /// Joins left until the next clock read.
    countdown: Cell<u32>,
    /// Joins between two clock reads (adapted at each read).
    stride: Cell<u32>,
    /// When the clock was last read, and when the heartbeat next fires (pool clock, ns).
    last_read: Cell<u64>,
    next_beat: Cell<u64>,
}

impl Heartbeat {
    pub(crate) fn new(interval: Option<Duration>) -> Heartbeat {
        Heartbeat {
            interval_ns: interval.map_or(0, |d| d.as_nanos() as u64),
            pending: Pending::new(),
            // 0 without heartbeat: `join_inline` never says yes.
            countdown: Cell::new(u32::from(interval.is_some())),
            stride: Cell::new(1),
            last_read: Cell::new(0),
            next_beat: Cell::new(0),
        }
    }

    /// This worker starts a job taken from elsewhere (stolen, injected, popped): its first
    /// join offers its second half at once, as rayon-core's would be (the top of a tree is
    /// where coarse halves are, and a first half that blocks outside the pool on its second
    /// half — a producer and a consumer on a bounded channel — then still has it stolen).
    #[inline]
    pub(crate) fn rearm(&self) {
        if self.interval_ns != 0 {
            self.stride.set(1);
            self.countdown.set(1);
            self.next_beat.set(0);
        }
    }

    /// The next stride: aim at four clock reads per interval.
    fn adapt(&self, now: u64) {
        let since = now.saturating_sub(self.last_read.get()).max(1);
        let want = (self.stride.get() as u64 * (self.interval_ns / 4).max(1)) / since;
        let stride = want.clamp(1, MAX_STRIDE as u64) as u32;
        self.stride.set(stride);
        self.countdown.set(stride);
        self.last_read.set(now);
    }
}

impl WorkerThread {
    /// `join` offers its second half: on the local list (heartbeat), or at once on the deque
    /// (no heartbeat: `breadth_first` pools and `heartbeat_interval(None)`).
    #[inline]
    pub(crate) fn push_join(&self, job: JobRef) {
        let hb = &self.heartbeat;
        if hb.interval_ns == 0 {
            self.push(job);
            return;
        }
        hb.pending.push(job);
        let left = hb.countdown.get();
        if left > 1 {
            hb.countdown.set(left - 1);
        } else {
            self.read_heartbeat();
        }
    }

    /// This join may run both halves inline: un-promoted joins wait above it and no clock
    /// read is due (that read counts this join).
    #[inline]
    pub(crate) fn join_inline(&self) -> bool {
        let hb = &self.heartbeat;
        // Without heartbeat the countdown stays 0.
        let left = hb.countdown.get();
        if left > 1 && hb.pending.len() >= INLINE_BELOW {
            hb.countdown.set(left - 1);
            return true;
        }
        false
    }

    /// Take `id` back from the local list if it is still there (always at the back: every
    /// join inside its first half has taken its own half back or lost it to promotion, which
    /// takes the oldest first).
    #[inline]
    pub(crate) fn pop_pending(&self, id: impl Fn(&JobRef) -> bool) -> bool {
        self.heartbeat.pending.pop_back_if(id)
    }

    /// Any un-promoted join half on this worker.
    #[inline]
    pub(crate) fn has_pending(&self) -> bool {
        !self.heartbeat.pending.is_empty()
    }

    /// Move every un-promoted half to the deque, oldest first (the deque then holds what it
    /// would hold without heartbeat). Before this worker waits, yields or parks: there it
    /// runs or hands over what its deque holds, exactly as rayon-core's worker does.
    #[inline]
    pub(crate) fn promote_all(&self) {
        if self.has_pending() {
            self.promote_all_cold();
        }
    }

    #[cold]
    fn promote_all_cold(&self) {
        for job in self.heartbeat.pending.take_all() {
            self.push(job);
        }
    }

    /// The clock read of `push_join`: adapt the stride; when the heartbeat has fired,
    /// promote the oldest pending half (if the deque is empty: a half nobody took is not
    /// joined by another) and follow the manager (a safe point: a revocation's target is
    /// set here without waiting for the client thread; the worker parks at its next wait).
    #[cold]
    #[inline(never)]
    fn read_heartbeat(&self) {
        let hb = &self.heartbeat;
        let now = self.registry.now_ns(Instant::now());
        hb.adapt(now);
        if now < hb.next_beat.get() {
            return;
        }
        hb.next_beat.set(now + hb.interval_ns);
        if self.worker.is_empty() {
            if let Some(job) = hb.pending.pop_oldest() {
                self.push(job);
            }
        }
        self.apply_page();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_values() {
        assert_eq!(parse_env("off"), Ok(None));
        assert_eq!(parse_env("on"), Ok(Some(DEFAULT_INTERVAL)));
        assert_eq!(parse_env(" 250 "), Ok(Some(Duration::from_micros(250))));
        for bad in ["0", "100001", "-5", "1e3", "", "fast"] {
            let err = parse_env(bad).unwrap_err();
            assert!(
                err.contains(ENV) && err.contains("heartbeat stays off"),
                "{err}"
            );
        }
    }

    #[test]
    fn interval_range() {
        assert!(check_interval(Duration::ZERO).is_err());
        assert!(check_interval(Duration::from_secs(3600)).is_err());
        assert!(check_interval(MIN_INTERVAL).is_ok());
        assert!(check_interval(MAX_INTERVAL).is_ok());
        assert!(check_interval(DEFAULT_INTERVAL).is_ok());
    }

    #[test]
    fn stride_follows_join_spacing() {
        // Four reads per 100 µs: a read every 25 µs of joins.
        let hb = Heartbeat::new(Some(Duration::from_micros(100)));
        hb.adapt(1_000_000);
        assert_eq!(hb.stride.get(), 1, "a long pause: read at every join");
        // 100 joins in 1 µs: as many as allowed between reads.
        hb.stride.set(100);
        hb.adapt(1_001_000);
        assert_eq!(hb.stride.get(), MAX_STRIDE);
        // 1024 joins in 1 ms (~1 µs each): 25 joins per 25 µs.
        hb.adapt(2_001_000);
        assert_eq!(hb.stride.get(), 25);
        // 25 joins in 125 µs (5 µs each): 5.
        hb.adapt(2_126_000);
        assert_eq!(hb.stride.get(), 5);
        // 5 joins in 10 ms: every join reads the clock.
        hb.adapt(12_126_000);
        assert_eq!(hb.stride.get(), 1);
        assert_eq!(hb.countdown.get(), 1);
    }
}
