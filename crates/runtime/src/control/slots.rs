//! Which workers the target counts in: the target is a number of active workers, and each
//! worker holds a *place* in the order the target counts (worker `i` starts in place `i`).
//! The target includes the workers whose place is below it; the others suspend at their next
//! safe point or wait.
//!
//! Places move so that the worker that parks is the one with nothing to lose. A worker the
//! target excludes, about to park inside a job (its stack holds a job that others may wait
//! for: the `install` loop of a program, a `join` whose other half was stolen), first trades
//! places with an included worker that is between top-level jobs ([`partner`]); that one
//! parks at its next safe point, or at once if it sleeps, and the worker with the job goes
//! on. A worker that found no such partner parks; when it is resumed to continue its own
//! job (its latch was set) while still excluded, it takes the place of any included worker,
//! which gives it up at its next safe point, so the job's next steps do not park again.
//! Without it, a program whose main loop ran on the excluded worker parked and was
//! woken once per step of its own job: 19,328 parks in one 0.4 s run of four tiny-phase
//! programs under `partita serve` (issue 26). The count of included workers never changes,
//! so the active count still exceeds the target for at most one task.
//!
//! Places change only under `Control::change` (with the target); workers read their own
//! place (Relaxed) at safe points, and their resume predicate re-reads it under their
//! mutex, as for the target (`../sleep/README.md` §5, §8).

use crossbeam_utils::CachePadded;

use crate::sync::{lock, AtomicBool, AtomicUsize, Mutex};
use std::sync::atomic::Ordering;

/// The places of a pool's workers, and which of them are between top-level jobs.
pub(crate) struct Slots {
    /// Worker → place.
    place: Box<[CachePadded<AtomicUsize>]>,
    /// Place → worker (the inverse of `place`; written under `Control::change`).
    at: Mutex<Vec<usize>>,
    /// Whether each worker is between top-level jobs (its stack holds nothing).
    between: Box<[CachePadded<AtomicBool>]>,
}

impl Slots {
    /// `n` workers in places `0..n`, all between jobs.
    pub(crate) fn new(n: usize) -> Slots {
        Slots {
            place: (0..n)
                .map(|i| CachePadded::new(AtomicUsize::new(i)))
                .collect(),
            at: Mutex::new((0..n).collect()),
            between: (0..n)
                .map(|_| CachePadded::new(AtomicBool::new(true)))
                .collect(),
        }
    }

    /// Worker `index`'s place.
    #[inline]
    pub(crate) fn place(&self, index: usize) -> usize {
        // Relaxed, as the target's read at a safe point: a late read only delays a
        // suspension to the next one; the resume predicate re-reads under the worker's mutex.
        self.place[index].load(Ordering::Relaxed)
    }

    /// The workers in places `places`, in that order.
    pub(crate) fn workers_at(&self, places: std::ops::Range<usize>) -> Vec<usize> {
        let at = lock(&self.at);
        places.filter_map(|p| at.get(p).copied()).collect()
    }

    /// Worker `index` starts (`false`) or ends (`true`) a top-level job.
    #[inline]
    pub(crate) fn set_between(&self, index: usize, between: bool) {
        // Relaxed: a hint for the choice of who parks; a stale value only picks a partner
        // that has just taken a job, which then parks at its next wait or safe point.
        self.between[index].store(between, Ordering::Relaxed);
    }

    /// Give worker `excluded` (whose place is at or above `target`) the place of an included
    /// worker between jobs, never `fixed` (a pool's borrowed worker 0) nor one for which
    /// `bound(w)` holds (a broadcast job waits for it: it runs that job wherever its place
    /// is, so it would not park). Returns the worker that now holds the excluded place, or
    /// `None` (no such partner: `excluded` parks). The caller holds `Control::change`.
    pub(crate) fn trade(
        &self,
        excluded: usize,
        target: usize,
        fixed: Option<usize>,
        resumed: bool,
        bound: impl Fn(usize) -> bool,
    ) -> Option<usize> {
        let mut at = lock(&self.at);
        // A worker resumed to continue its own job takes a place from any included worker
        // (which gives it up at its next safe point) when none is between jobs.
        // The queue first: a worker clears `between` before it takes its broadcast job, so
        // once its queue is seen empty, `between` is read after its clearing (loom below).
        let between = |w: usize| !bound(w) && self.between[w].load(Ordering::Relaxed);
        let j = match partner(excluded, target, &at, between, fixed) {
            None if resumed => partner(excluded, target, &at, |w| !bound(w), fixed),
            found => found,
        }?;
        let (p, q) = (self.place(excluded), self.place(j));
        at.swap(p, q);
        // SeqCst, under `change`, as the target's store: the pair a resume predicate reads.
        self.place[excluded].store(q, Ordering::SeqCst);
        self.place[j].store(p, Ordering::SeqCst);
        Some(j)
    }
}

/// The included worker (place below `target` in `at`, place → worker) that gives its place
/// to `excluded`: one between top-level jobs, the highest placed first (the next a lower
/// target would exclude anyway), never `excluded` itself or `fixed`. `None` if every
/// included worker holds a job: then `excluded` parks.
///
/// ```ignore
/// // Two workers, target 1: worker 1 runs the program's loop, worker 0 is idle.
/// assert_eq!(partner(1, 1, &[0, 1], |_| true, None), Some(0));
/// ```
pub(crate) fn partner(
    excluded: usize,
    target: usize,
    at: &[usize],
    between: impl Fn(usize) -> bool,
    fixed: Option<usize>,
) -> Option<usize> {
    at.iter()
        .take(target)
        .rev()
        .copied()
        .find(|&w| w != excluded && Some(w) != fixed && between(w))
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_worker_between_jobs_gives_its_place_not_the_one_holding_a_job() {
        // Target 1 of 2: worker 1 holds the program's loop, worker 0 is between jobs.
        assert_eq!(partner(1, 1, &[0, 1], |_| true, None), Some(0));
        // Worker 0 holds a job too: nobody to trade with, worker 1 parks.
        assert_eq!(partner(1, 1, &[0, 1], |w| w != 0, None), None);
        // A borrowed worker 0 (the user's thread) never gives its place.
        assert_eq!(partner(1, 1, &[0, 1], |_| true, Some(0)), None);
        // The highest placed idle worker first: places 0..3 included, 0 and 2 idle.
        assert_eq!(
            partner(3, 3, &[0, 1, 2, 3], |w| w == 0 || w == 2, None),
            Some(2)
        );
    }

    #[test]
    fn a_trade_swaps_two_places_and_keeps_the_count() {
        let s = Slots::new(3);
        s.set_between(1, false);
        // Target 2: worker 2 is excluded and about to park inside a job; worker 1 holds a
        // job, worker 0 is between jobs.
        assert_eq!(s.trade(2, 2, None, false, |_| false), Some(0));
        assert_eq!((s.place(0), s.place(1), s.place(2)), (2, 1, 0));
        assert_eq!(s.workers_at(0..2), vec![2, 1]);
        assert_eq!(s.workers_at(2..3), vec![0]);
    }

    #[test]
    fn a_worker_a_broadcast_waits_for_is_no_partner() {
        // Target 1 of 2: worker 0 is between jobs but has a broadcast job to run, which it
        // runs wherever its place is: trading would leave two workers running. Worker 1
        // parks instead (a_revoked_worker_parks_inside_a_join_tree, tests/process_control.rs).
        let s = Slots::new(2);
        s.set_between(1, false);
        assert_eq!(s.trade(1, 1, None, false, |w| w == 0), None);
        // Resumed to continue its own job, worker 1 does not take it either.
        assert_eq!(s.trade(1, 1, None, true, |w| w == 0), None);
        assert_eq!((s.place(0), s.place(1)), (0, 1));
        // Once the broadcast job is taken (and done), worker 0 is a partner again.
        assert_eq!(s.trade(1, 1, None, false, |_| false), Some(0));
    }

    proptest! {
        /// Whatever the trades, places stay a permutation (each worker one place, each place
        /// one worker), so the target always includes exactly `target` workers; a partner is
        /// always an included worker between jobs.
        #[test]
        fn places_stay_a_permutation(
            n in 1usize..8,
            steps in proptest::collection::vec((0usize..8, 0usize..9, proptest::bool::ANY), 0..40),
        ) {
            let s = Slots::new(n);
            for (w, t, idle) in steps {
                let (w, t) = (w % n, t % (n + 1));
                s.set_between(w, idle);
                if s.place(w) < t {
                    continue; // only an excluded worker trades
                }
                let before: Vec<bool> = (0..n).map(|i| s.between[i].load(Ordering::Relaxed)).collect();
                if let Some(j) = s.trade(w, t, None, false, |_| false) {
                    prop_assert!(before[j] && j != w);
                    prop_assert!(s.place(w) < t && s.place(j) >= t);
                }
                let mut seen = vec![false; n];
                for i in 0..n {
                    let p = s.place(i);
                    prop_assert!(p < n && !seen[p]);
                    seen[p] = true;
                    prop_assert_eq!(s.workers_at(p..p + 1), vec![i]);
                }
            }
        }
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! The hand-over of a place against the sleep protocol (`../sleep/README.md`): the
    //! trade's stores come before the partner's mutex is taken in `suspend_sleeper`, as a
    //! target change's store does, so the partner is suspended in place or reads its new
    //! place in its sleep's re-check.
    use super::*;
    use crate::sleep::{Sleep, Slept};
    use loom::sync::Arc;
    use loom::thread;
    use std::sync::atomic::Ordering::SeqCst;

    fn no_page() -> Option<(&'static std::sync::atomic::AtomicU32, u32)> {
        None
    }

    /// Worker 1, excluded by target 1 and holding a job, trades places with worker 0, which
    /// is between jobs and going to sleep at the same time. Whatever the interleaving,
    /// worker 1 is included at once (it never parks), and worker 0 ends suspended (in place,
    /// or by itself at its next look): the main thread waits for that before it finishes the
    /// pool, so a worker 0 left asleep as if included would be reported by loom (as a model
    /// that exceeds its branches: the wait would never end).
    #[test]
    fn loom_a_trade_suspends_the_partner_whatever_it_was_doing() {
        loom::model(|| {
            let sleep = Arc::new(Sleep::new(2));
            let slots = Arc::new(Slots::new(2));
            let change = Arc::new(Mutex::new(()));
            let done = Arc::new(AtomicBool::new(false));
            let suspended = Arc::new(AtomicBool::new(false));
            let w0 = {
                let (sleep, slots) = (sleep.clone(), slots.clone());
                let (done, suspended) = (done.clone(), suspended.clone());
                thread::spawn(move || {
                    let excluded = || slots.place(0) >= 1;
                    let resume = || !excluded() || done.load(SeqCst);
                    let park = || {
                        suspended.store(true, SeqCst);
                        sleep.suspend(0, resume, no_page);
                    };
                    while !done.load(SeqCst) {
                        if excluded() {
                            park();
                            continue;
                        }
                        let recheck = || done.load(SeqCst) || excluded();
                        if sleep.sleep(0, false, recheck) == Slept::Suspended {
                            park();
                        }
                    }
                })
            };
            let traded = {
                let _g = lock(&change);
                let j = slots.trade(1, 1, None, false, |_| false);
                // Suspended in place: the pool's bookkeeping counts it (`Registry::suspended`).
                if j.is_some_and(|j| sleep.suspend_sleeper(j, false)) {
                    suspended.store(true, SeqCst);
                }
                j
            };
            assert_eq!(traded, Some(0));
            assert_eq!(slots.place(1), 0, "worker 1 is included: it goes on");
            while !suspended.load(SeqCst) {
                thread::yield_now();
            }
            done.store(true, SeqCst);
            sleep.notify_worker(0);
            w0.join().unwrap();
        });
    }

    /// Worker 0 takes the broadcast job addressed to it (`WorkerThread::take_broadcast`:
    /// clear `between`, then steal from its queue, a CAS as crossbeam's), while worker 1,
    /// excluded inside a job, looks for a partner (`Registry::take_place`: under `change`,
    /// the queue must be empty, as crossbeam's `is_empty` reads it, and `between` set). A
    /// worker running a broadcast job runs it wherever its place is: whatever the
    /// interleaving, worker 0 does not both take its broadcast job and lose its place.
    #[test]
    fn loom_a_worker_taking_its_broadcast_job_is_no_partner() {
        loom::model(|| {
            let slots = Arc::new(Slots::new(2));
            // The broadcast queue's length: one job addressed to worker 0.
            let queued = Arc::new(AtomicUsize::new(1));
            let w0 = {
                let (slots, queued) = (slots.clone(), queued.clone());
                thread::spawn(move || {
                    slots.set_between(0, false);
                    queued
                        .compare_exchange(1, 0, SeqCst, std::sync::atomic::Ordering::Relaxed)
                        .is_ok()
                })
            };
            let traded = slots
                .trade(1, 1, None, false, |_| queued.load(SeqCst) != 0)
                .is_some();
            assert!(w0.join().unwrap(), "only worker 0 takes its broadcast job");
            assert!(
                !traded,
                "worker 0 lost its place while taking its broadcast job"
            );
        });
    }
}
