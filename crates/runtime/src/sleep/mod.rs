// The protocol this module implements, with its correctness argument and the loom models
// that check it, is in README.md beside this file (also this module's rustdoc).
#![doc = include_str!("README.md")]

use crossbeam_utils::CachePadded;

use crate::sync::{fence, lock, AtomicBool, AtomicU64, Mutex};
use std::sync::atomic::Ordering;

mod event;
#[cfg(not(loom))]
#[cfg_attr(not(partita_linux), path = "futex_portable.rs")]
pub(crate) mod futex;

use event::Event;
pub(crate) use event::PageWord;

/// Whether a suspended worker can wait on the manager's page word as well as its own
/// (`futex_waitv`; never under loom, which models no page).
pub(crate) fn page_wait_supported() -> bool {
    #[cfg(not(loom))]
    return futex::waitv_supported();
    #[cfg(loom)]
    return false;
}

/// One sleeping worker in `counters`.
const SLEEPER: u64 = 1;
/// One searching worker in `counters`.
const SEARCHER: u64 = 1 << 16;
const COUNT_MASK: u64 = 0xFFFF;

/// Rounds an idle searcher spins (yielding the CPU each round) before it sleeps.
pub(crate) const SPIN_ROUNDS: u32 = 32;

/// Largest pool the counters can describe.
pub(crate) const THREADS_MAX: usize = COUNT_MASK as usize;

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum State {
    Awake,
    /// Blocked until woken (in its main loop, or inside a job waiting for a latch).
    Sleeping,
    /// Parked by process control (at a safe point, or inside a job until its latch is set).
    Suspended,
}

struct WorkerSleep {
    state: Mutex<State>,
    /// What the worker blocks on (`event.rs`): notified after every state change a waiter
    /// waits for.
    event: Event,
    /// `state` is `Sleeping` (a hint for wakers scanning for a sleeper; the state is the truth).
    sleeping: AtomicBool,
}

/// How a [`Sleep::sleep`] call ended.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Slept {
    /// The re-check found work or a reason to stay up; the worker is no longer counted as a
    /// searcher or sleeper.
    Declined,
    /// Slept and was woken; the waker counted the worker as a searcher.
    Woken,
    /// Slept and was suspended there by a target change ([`Sleep::suspend_sleeper`]); no
    /// longer counted. The worker must finish the suspension
    /// (wait for its resume predicate) before doing anything else.
    Suspended,
}

/// Sleep and wake-up bookkeeping for one pool.
pub(crate) struct Sleep {
    counters: CachePadded<AtomicU64>,
    max_searchers: u64,
    workers: Box<[CachePadded<WorkerSleep>]>,
}

fn sleepers(c: u64) -> u64 {
    c & COUNT_MASK
}

fn searchers(c: u64) -> u64 {
    (c >> 16) & COUNT_MASK
}

impl Sleep {
    pub(crate) fn new(n_threads: usize) -> Sleep {
        Sleep {
            counters: CachePadded::new(AtomicU64::new(0)),
            max_searchers: (n_threads as u64 / 2).max(2),
            workers: (0..n_threads)
                .map(|_| {
                    CachePadded::new(WorkerSleep {
                        state: Mutex::new(State::Awake),
                        event: Event::default(),
                        sleeping: AtomicBool::new(false),
                    })
                })
                .collect(),
        }
    }

    /// Try to become a searcher; fails when `max_searchers` already search.
    pub(crate) fn start_searching(&self) -> bool {
        // Relaxed: only a first guess for the CAS below, which re-reads on failure.
        let mut c = self.counters.load(Ordering::Relaxed);
        loop {
            if searchers(c) >= self.max_searchers {
                return false;
            }
            // SeqCst: a poster that reads `counters` after this sees a searcher and leaves
            // the wake to it (README §2); the bound needs the CAS, not a blind add.
            match self.counters.compare_exchange_weak(
                c,
                c + SEARCHER,
                Ordering::SeqCst,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(actual) => c = actual,
            }
        }
    }

    /// Stop searching (found work or the awaited latch is set). Returns true if this was the
    /// last searcher while some worker sleeps: the caller should wake one if work remains.
    pub(crate) fn stop_searching(&self) -> bool {
        // SeqCst RMW: the returned counts decide the cascade (README §2); a poster that reads
        // after this no longer counts on us to search.
        let old = self.counters.fetch_sub(SEARCHER, Ordering::SeqCst);
        debug_assert!(searchers(old) > 0);
        searchers(old) == 1 && sleepers(old) > 0
    }

    /// Block worker `index` until woken, unless `recheck` (run after registering as a
    /// sleeper) finds a reason to stay up. `was_searcher`: the caller is counted as a
    /// searcher; the registration converts it.
    pub(crate) fn sleep(
        &self,
        index: usize,
        was_searcher: bool,
        recheck: impl FnOnce() -> bool,
    ) -> Slept {
        let w = &self.workers[index];
        let mut st = lock(&w.state);
        debug_assert_eq!(*st, State::Awake);
        *st = State::Sleeping;
        // Relaxed hint: wakers confirm under our mutex (README §1).
        w.sleeping.store(true, Ordering::Relaxed);
        let delta = if was_searcher {
            SLEEPER.wrapping_sub(SEARCHER)
        } else {
            SLEEPER
        };
        // One add converts searcher → sleeper, so no poster reads us as neither (README §7).
        self.counters.fetch_add(delta, Ordering::SeqCst);
        // The sleeper's half of the Dekker pair: registration, fence, re-check. Pairs with
        // the fence in `new_jobs` (README §7, "post vs sleep").
        fence(Ordering::SeqCst);
        if recheck() {
            *st = State::Awake;
            w.sleeping.store(false, Ordering::Relaxed);
            // Undo the registration; we are now neither searcher nor sleeper (running).
            self.counters.fetch_sub(SLEEPER, Ordering::SeqCst);
            return Slept::Declined;
        }
        while *st == State::Sleeping {
            // Read under our mutex, after seeing `Sleeping`: a waker that changes the state
            // after we unlock bumps the number first, so the wait cannot miss it (README §7).
            let seq = w.event.seq();
            drop(st);
            w.event.wait(seq, None);
            st = lock(&w.state);
        }
        if *st == State::Suspended {
            Slept::Suspended
        } else {
            Slept::Woken
        }
    }

    /// A job was published. `shared`: it is visible only through shared queues (not the
    /// poster's own deque), so the poster's fence is required for the no-lost-wake argument.
    #[inline]
    pub(crate) fn new_jobs(&self, shared: bool) {
        if shared {
            // The poster's half of the Dekker pair: job published, fence, read `counters`.
            // Pairs with the fence in `sleep` (README §7, "post vs sleep").
            fence(Ordering::SeqCst);
        }
        let c = self.counters.load(Ordering::SeqCst);
        if sleepers(c) > 0 && searchers(c) == 0 {
            self.wake_any();
        }
    }

    /// Wake one sleeping worker (lowest index first, where process control keeps the active
    /// workers). Returns whether one was woken.
    pub(crate) fn wake_any(&self) -> bool {
        // Fast pass over the hints, then (rarely: the hint may not be visible yet) a pass
        // over the states themselves, which are the truth.
        for w in self.workers.iter() {
            // A hint only; `try_wake` decides under the worker's mutex.
            if w.sleeping.load(Ordering::Acquire) && self.try_wake(w) {
                return true;
            }
        }
        self.workers.iter().any(|w| self.try_wake(w))
    }

    fn try_wake(&self, w: &WorkerSleep) -> bool {
        let mut st = lock(&w.state);
        if *st == State::Sleeping {
            self.mark_woken(w, &mut st);
            drop(st);
            // Notify after unlocking, so the sleeper does not wake into a held mutex. The
            // state (not the notification) carries the wake, so this order loses nothing.
            w.event.notify();
            true
        } else {
            false
        }
    }

    /// Turn a sleeper into a searcher (under its mutex); the caller notifies.
    fn mark_woken(&self, w: &WorkerSleep, st: &mut State) {
        *st = State::Awake;
        w.sleeping.store(false, Ordering::Relaxed);
        // The waker counts the woken worker as a searcher in one add, so the next post sees
        // a searcher and does not wake a second worker (README §2).
        self.counters
            .fetch_add(SEARCHER.wrapping_sub(SLEEPER), Ordering::SeqCst);
    }

    /// Something worker `index` waits for happened (its latch, a broadcast job for it,
    /// termination): wake it if it sleeps, and let it re-check if it is suspended.
    pub(crate) fn notify_worker(&self, index: usize) {
        let w = &self.workers[index];
        let mut st = lock(&w.state);
        let notify = match *st {
            State::Sleeping => {
                self.mark_woken(w, &mut st);
                true
            }
            State::Suspended => true,
            State::Awake => false,
        };
        drop(st);
        if notify {
            w.event.notify();
        }
    }

    /// The target dropped below `index`: if the worker sleeps, suspend it where it is (its
    /// deque is empty: it went to sleep after finding no work, and only its owner pushes to
    /// it). A worker asleep inside a job stays marked on its latch, so the latch's setter
    /// still notifies it and it resumes to finish that job (README §5). Returns true if it
    /// did; the caller then does the suspension's bookkeeping. `wake`: also wake it, so that
    /// it moves on to the suspended wait, which watches the manager's page (README §5);
    /// without a page to watch it is left asleep. A running worker suspends itself at its
    /// next safe point or wait instead.
    pub(crate) fn suspend_sleeper(&self, index: usize, wake: bool) -> bool {
        let w = &self.workers[index];
        let mut st = lock(&w.state);
        if *st == State::Sleeping {
            *st = State::Suspended;
            w.sleeping.store(false, Ordering::Relaxed);
            // A suspended worker is in neither count: posts must not count on it (README §4).
            self.counters.fetch_sub(SLEEPER, Ordering::SeqCst);
            drop(st);
            if wake {
                w.event.notify();
            }
            true
        } else {
            false
        }
    }

    /// Wake every suspended worker to re-evaluate its wait (not its resume predicate's
    /// inputs): the page it should watch changed. Sleepers are left alone.
    pub(crate) fn nudge_suspended(&self) {
        for w in self.workers.iter() {
            if *lock(&w.state) == State::Suspended {
                w.event.notify();
            }
        }
    }

    /// Park worker `index` as suspended until `resume()` (evaluated under the worker's mutex)
    /// is true. Callers that make `resume()` true do so before calling [`Sleep::notify_worker`].
    ///
    /// Before each wait, `look()` runs outside the mutex (it may apply the manager's page,
    /// which may notify this very worker) and may return a second word to wait on with the
    /// value it read *before* looking: the wait then also ends when that word changes (the
    /// manager's `FUTEX_WAKE` of the control page, README §5).
    pub(crate) fn suspend<P: std::ops::Deref<Target = std::sync::atomic::AtomicU32>>(
        &self,
        index: usize,
        mut resume: impl FnMut() -> bool,
        mut look: impl FnMut() -> Option<(P, u32)>,
    ) {
        let w = &self.workers[index];
        let mut st = lock(&w.state);
        *st = State::Suspended;
        while !resume() {
            // Read under our mutex after the predicate was false: a resumer makes it true,
            // takes this mutex, then bumps the number, so the wait below cannot miss it.
            let seq = w.event.seq();
            drop(st);
            let page = look();
            w.event.wait(
                seq,
                page.as_ref()
                    .map(|(word, seen)| PageWord { word, seen: *seen }),
            );
            st = lock(&w.state);
        }
        *st = State::Awake;
    }

    /// (sleepers, searchers) right now: a snapshot for tests.
    #[cfg(test)]
    pub(crate) fn snapshot(&self) -> (usize, usize) {
        // Relaxed: a statistic, not part of the protocol.
        let c = self.counters.load(Ordering::Relaxed);
        (sleepers(c) as usize, searchers(c) as usize)
    }
}

#[cfg(all(test, not(loom)))]
mod unit_tests {
    use super::*;

    /// The futex layer's contract, whichever implementation is built (the Linux calls or the
    /// portable emulation): a word that already differs returns at once with an error naming
    /// the call, and `waitv` either works or says it is unsupported, as `waitv_supported` says.
    #[test]
    fn a_changed_word_returns_at_once_and_names_the_call() {
        let w = std::sync::atomic::AtomicU32::new(1);
        let e = futex::wait_private(&w, 0).unwrap_err();
        assert!(e.call.starts_with("futex") && !e.unsupported(), "{e}");
        let other = std::sync::atomic::AtomicU32::new(0);
        let e = futex::waitv(&w, 0, &other, 0).unwrap_err();
        assert_eq!(e.call, "futex_waitv");
        assert_eq!(e.unsupported(), !futex::waitv_supported(), "{e}");
    }

    /// No second word to wait on.
    fn no_page() -> Option<(&'static std::sync::atomic::AtomicU32, u32)> {
        None
    }

    #[test]
    fn searchers_are_bounded_to_half_the_pool() {
        let s = Sleep::new(8);
        for _ in 0..4 {
            assert!(s.start_searching());
        }
        assert!(!s.start_searching(), "a fifth searcher in a pool of 8");
        assert!(!s.stop_searching()); // nobody sleeps: nothing to hand over
        assert!(s.start_searching());
        assert_eq!(s.snapshot(), (0, 4));
        // Small pools: at least two may search.
        let two = Sleep::new(2);
        assert!(two.start_searching());
        assert!(two.start_searching());
        assert!(!two.start_searching());
    }

    #[test]
    fn sleeper_registration_converts_a_searcher() {
        let s = Sleep::new(2);
        assert!(s.start_searching());
        // The re-check finds work: the worker is neither searcher nor sleeper afterwards.
        assert_eq!(s.sleep(0, true, || true), Slept::Declined);
        assert_eq!(s.snapshot(), (0, 0));
    }

    #[test]
    fn sleeper_is_suspended_in_place() {
        let s = std::sync::Arc::new(Sleep::new(2));
        let resume = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let t = {
            let (s, resume) = (s.clone(), resume.clone());
            std::thread::spawn(move || {
                let r = s.sleep(1, false, || false);
                s.suspend(1, || resume.load(Ordering::SeqCst), no_page);
                r
            })
        };
        while s.snapshot() != (1, 0) {
            std::thread::yield_now();
        }
        assert!(s.suspend_sleeper(1, false));
        assert_eq!(s.snapshot(), (0, 0));
        // A job posted now does not wake a suspended worker.
        assert!(!s.wake_any());
        resume.store(true, Ordering::SeqCst);
        s.notify_worker(1);
        assert_eq!(t.join().unwrap(), Slept::Suspended);
        // A running worker is not suspended in place (it parks itself).
        assert!(!s.suspend_sleeper(0, true));
    }

    #[test]
    fn post_wakes_a_sleeper_when_nobody_searches() {
        let s = std::sync::Arc::new(Sleep::new(2));
        let t = {
            let s = s.clone();
            std::thread::spawn(move || s.sleep(1, false, || false))
        };
        while s.snapshot() != (1, 0) {
            std::thread::yield_now();
        }
        s.new_jobs(true);
        assert_eq!(t.join().unwrap(), Slept::Woken);
        // The woken worker is counted as a searcher by its waker.
        assert_eq!(s.snapshot(), (0, 1));
    }
}

#[cfg(all(test, loom))]
mod tests {
    //! Model checks of the protocol with loom: a job is a flag, a worker is a thread that
    //! searches (checks the flag), then sleeps with the flag as its re-check.
    use super::*;
    use crate::latch::CoreLatch;
    use loom::sync::atomic::{AtomicBool as LBool, AtomicUsize as LUsize};

    /// Loom models no control page.
    fn no_page() -> Option<(&'static std::sync::atomic::AtomicU32, u32)> {
        None
    }
    use loom::sync::Arc;
    use loom::thread;

    /// One idle episode of worker `index`: search (bounded), sleep, until the job is taken by
    /// anyone; the taker releases `other` (as termination does in the pool).
    fn worker(sleep: &Sleep, index: usize, other: Option<usize>, job: &LBool, taken: &LUsize) {
        let mut searching = sleep.start_searching();
        loop {
            // Claim the job (a CAS, as a queue's claim is); only after seeing it posted.
            let claimed = job.load(Ordering::SeqCst)
                && job
                    .compare_exchange(true, false, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok();
            if claimed {
                taken.fetch_add(1, Ordering::SeqCst);
                if searching {
                    let _ = sleep.stop_searching();
                }
                if let Some(o) = other {
                    sleep.notify_worker(o);
                }
                return;
            }
            if taken.load(Ordering::SeqCst) > 0 {
                if searching {
                    let _ = sleep.stop_searching();
                }
                return;
            }
            let recheck = || job.load(Ordering::SeqCst) || taken.load(Ordering::SeqCst) > 0;
            match sleep.sleep(index, searching, recheck) {
                Slept::Declined => searching = sleep.start_searching(),
                Slept::Woken => searching = true,
                Slept::Suspended => unreachable!("no target changes in this model"),
            }
        }
    }

    /// A job posted while the only worker goes to sleep is always taken (else loom reports a
    /// deadlock: the worker would wait forever).
    #[test]
    fn loom_no_lost_wakeup_one_worker() {
        loom::model(|| {
            let sleep = Arc::new(Sleep::new(1));
            let job = Arc::new(LBool::new(false));
            let taken = Arc::new(LUsize::new(0));
            let w = {
                let (sleep, job, taken) = (sleep.clone(), job.clone(), taken.clone());
                thread::spawn(move || worker(&sleep, 0, None, &job, &taken))
            };
            job.store(true, Ordering::SeqCst);
            sleep.new_jobs(true);
            w.join().unwrap();
            assert_eq!(taken.load(Ordering::SeqCst), 1);
            assert_eq!(sleep.snapshot(), (0, 0));
        });
    }

    /// Two workers, one job: whichever worker the poster wakes (or neither, if one is still
    /// searching), the job is taken exactly once and nobody is left asleep.
    #[test]
    fn loom_no_lost_wakeup_two_workers() {
        loom::model(|| {
            let sleep = Arc::new(Sleep::new(2));
            let job = Arc::new(LBool::new(false));
            let taken = Arc::new(LUsize::new(0));
            let spawn = |i: usize, o: usize| {
                let (sleep, job, taken) = (sleep.clone(), job.clone(), taken.clone());
                thread::spawn(move || worker(&sleep, i, Some(o), &job, &taken))
            };
            let w0 = spawn(0, 1);
            let w1 = spawn(1, 0);
            job.store(true, Ordering::SeqCst);
            sleep.new_jobs(true);
            w0.join().unwrap();
            w1.join().unwrap();
            assert_eq!(taken.load(Ordering::SeqCst), 1);
            assert_eq!(sleep.snapshot(), (0, 0));
        });
    }

    /// A target change races with a worker going to sleep at a safe point: it may be
    /// suspended in place, resumed, and finally released; it never stays blocked.
    #[test]
    fn loom_suspend_in_place_then_resume() {
        loom::model(|| {
            let sleep = Arc::new(Sleep::new(2));
            let target = Arc::new(LUsize::new(2));
            let done = Arc::new(LBool::new(false));
            let w = {
                let (sleep, target, done) = (sleep.clone(), target.clone(), done.clone());
                thread::spawn(move || {
                    let resume =
                        || 1 < target.load(Ordering::SeqCst) || done.load(Ordering::SeqCst);
                    loop {
                        if done.load(Ordering::SeqCst) {
                            return;
                        }
                        if target.load(Ordering::SeqCst) <= 1 {
                            sleep.suspend(1, resume, no_page);
                            continue;
                        }
                        let recheck =
                            || done.load(Ordering::SeqCst) || target.load(Ordering::SeqCst) <= 1;
                        if sleep.sleep(1, false, recheck) == Slept::Suspended {
                            sleep.suspend(1, resume, no_page);
                        }
                    }
                })
            };
            // Lower the target (suspending the sleeper in place if it sleeps), raise it, finish.
            target.store(1, Ordering::SeqCst);
            let _ = sleep.suspend_sleeper(1, true);
            target.store(2, Ordering::SeqCst);
            sleep.notify_worker(1);
            done.store(true, Ordering::SeqCst);
            sleep.notify_worker(1);
            w.join().unwrap();
        });
    }

    /// A suspended worker resumes when its predicate became true before the notify.
    #[test]
    fn loom_suspend_resume() {
        loom::model(|| {
            let sleep = Arc::new(Sleep::new(1));
            let target = Arc::new(LBool::new(false));
            let w = {
                let (sleep, target) = (sleep.clone(), target.clone());
                thread::spawn(move || sleep.suspend(0, || target.load(Ordering::SeqCst), no_page))
            };
            target.store(true, Ordering::SeqCst);
            sleep.notify_worker(0);
            w.join().unwrap();
        });
    }

    /// What `WorkerThread::wait_suspended` does for a worker parked inside a job: mark the
    /// latch, park until the latch is set or the target includes worker 1, unmark.
    fn park_waiting_on(sleep: &Sleep, latch: &CoreLatch, target: &LUsize) {
        latch.get_sleepy();
        sleep.suspend(
            1,
            || latch.probe() || 1 < target.load(Ordering::SeqCst),
            no_page,
        );
        latch.wake_up();
    }

    /// Set the latch as `SpinLatch::set` does: swap, and notify the waiter if it was marked.
    fn set_latch(sleep: &Sleep, latch: &CoreLatch) {
        // SAFETY: the latch lives in an `Arc` the caller holds.
        if unsafe { CoreLatch::set(latch) } {
            sleep.notify_worker(1);
        }
    }

    /// A worker parked inside a job resumes when its latch is set, whatever the order of the
    /// setter's swap and notify against the worker's marking, park and wait (README §5, §7
    /// "latch vs suspended wait"): else loom reports a deadlock.
    #[test]
    fn loom_parked_waiter_resumes_for_its_latch() {
        loom::model(|| {
            let sleep = Arc::new(Sleep::new(2));
            let latch = Arc::new(CoreLatch::new());
            let target = Arc::new(LUsize::new(1));
            let w = {
                let (sleep, latch, target) = (sleep.clone(), latch.clone(), target.clone());
                thread::spawn(move || {
                    park_waiting_on(&sleep, &latch, &target);
                    assert!(latch.probe());
                })
            };
            set_latch(&sleep, &latch);
            w.join().unwrap();
        });
    }

    /// A worker asleep inside a job while the target drops below it: it may be suspended in
    /// place (`suspend_sleeper`), decline, or park itself; whichever, setting its latch
    /// brings it back to finish the job (README §4 step 5, §5).
    #[test]
    fn loom_sleeper_inside_a_job_suspended_then_latch_set() {
        loom::model(|| {
            let sleep = Arc::new(Sleep::new(2));
            let latch = Arc::new(CoreLatch::new());
            let target = Arc::new(LUsize::new(2));
            let w = {
                let (sleep, latch, target) = (sleep.clone(), latch.clone(), target.clone());
                let mut searching = false;
                thread::spawn(move || loop {
                    // The wait loop of `wait_until_cold` with idle's sleep, reduced.
                    if searching {
                        // Woken by the latch's setter, which counted us as a searcher.
                        let _ = sleep.stop_searching();
                        searching = false;
                    }
                    if latch.probe() {
                        return;
                    }
                    if target.load(Ordering::SeqCst) <= 1 {
                        park_waiting_on(&sleep, &latch, &target);
                        continue;
                    }
                    if !latch.get_sleepy() {
                        continue;
                    }
                    let recheck = || latch.probe() || target.load(Ordering::SeqCst) <= 1;
                    let slept = sleep.sleep(1, false, recheck);
                    latch.wake_up();
                    match slept {
                        Slept::Suspended => park_waiting_on(&sleep, &latch, &target),
                        Slept::Woken => searching = true,
                        Slept::Declined => {}
                    }
                })
            };
            target.store(1, Ordering::SeqCst);
            let _ = sleep.suspend_sleeper(1, true);
            set_latch(&sleep, &latch);
            w.join().unwrap();
            assert_eq!(sleep.snapshot(), (0, 0));
        });
    }

    /// A suspended worker applies the manager's page itself from its wait (`look`, outside
    /// its mutex): the applier raises the target and notifies the worker — itself — while the
    /// worker may be between reading its wake-up number and waiting. The page's futex wake
    /// is modelled by `nudge_suspended` (it wakes a worker whose state is `Suspended`, as the
    /// page word wakes a worker that read it before looking). The worker always resumes.
    #[test]
    fn loom_suspended_worker_applies_the_page_itself() {
        loom::model(|| {
            let sleep = Arc::new(Sleep::new(2));
            let target = Arc::new(LUsize::new(1));
            let page = Arc::new(LBool::new(false));
            let w = {
                let (sleep, target, page) = (sleep.clone(), target.clone(), page.clone());
                thread::spawn(move || {
                    let s2 = sleep.clone();
                    sleep.suspend(
                        1,
                        || 1 < target.load(Ordering::SeqCst),
                        || {
                            // Apply the page (as `ManagerPage::catch_up` would): raise, notify.
                            if page.load(Ordering::SeqCst) && target.load(Ordering::SeqCst) < 2 {
                                target.store(2, Ordering::SeqCst);
                                s2.notify_worker(1);
                            }
                            no_page()
                        },
                    )
                })
            };
            // The manager: publish, then wake the page's waiters.
            page.store(true, Ordering::SeqCst);
            sleep.nudge_suspended();
            w.join().unwrap();
            assert_eq!(target.load(Ordering::SeqCst), 2);
        });
    }
}
