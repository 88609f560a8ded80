//! Loom models of heartbeat promotion vs steal (`README.md` §4), on the real local list
//! (`Pending`) and the real deque. A "half" is an index into a table of result cells and
//! done flags, standing for a `StackJob` and its latch: whoever runs half `i` writes its
//! result, then sets `done[i]` with `Release` (as `SpinLatch::set`); the owner reads a result
//! it did not run itself only after an `Acquire` load of the flag (as `probe`).
//!
//! Run by `scripts/test.d/30-runtime.sh` (`loom_` filter, `LOOM_MAX_PREEMPTIONS=3`).

use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;

use super::heartbeat::Pending;
use crate::deque::{Steal, Worker};

/// The shared state of the halves of one model run.
struct Halves {
    result: Vec<UnsafeCell<usize>>,
    done: Vec<AtomicBool>,
    runs: Vec<AtomicUsize>,
}

impl Halves {
    fn new(n: usize) -> Arc<Halves> {
        Arc::new(Halves {
            result: (0..n).map(|_| UnsafeCell::new(0)).collect(),
            done: (0..n).map(|_| AtomicBool::new(false)).collect(),
            runs: (0..n).map(|_| AtomicUsize::new(0)).collect(),
        })
    }

    /// Run half `i`: store its result, then publish it.
    fn run(&self, i: usize) {
        self.runs[i].fetch_add(1, Ordering::Relaxed);
        // SAFETY: only the one taker of half `i` writes its cell.
        self.result[i].with_mut(|r| unsafe { *r = 100 + i });
        self.done[i].store(true, Ordering::Release);
    }

    /// The owner's read of half `i`'s result once it is done.
    fn read(&self, i: usize) -> usize {
        assert!(self.done[i].load(Ordering::Acquire));
        // SAFETY: `done[i]` (Acquire) orders the writer's store before this read.
        self.result[i].with(|r| unsafe { *r })
    }
}

/// The owner's end of a join whose half is `i` (the loop of `join_offered`): pop it back from
/// the local list, else from the deque, else it was stolen: wait until it is done.
fn finish_join(i: usize, pending: &Pending<usize>, deque: &Worker<usize>, halves: &Halves) {
    if pending.pop_back_if(|&j| j == i) {
        halves.run(i);
        return;
    }
    while !halves.done[i].load(Ordering::Acquire) {
        match deque.pop() {
            Some(j) => halves.run(j),
            None => thread::yield_now(),
        }
    }
}

/// Nested joins 0 (outermost) .. n-1 pushed on the local list; the owner promotes the `promote`
/// oldest (heartbeats) while a thief makes `steals` attempts and runs what it takes; then
/// the owner finishes the joins innermost first. Every half runs exactly once and every
/// result the owner reads is the one written.
fn promote_vs_steal(n: usize, promote: usize, steals: usize) {
    loom::model(move || {
        let halves = Halves::new(n);
        let deque = Worker::<usize>::new(crate::deque::Flavor::Lifo, 2);
        let stealer = deque.stealer();
        let thief = {
            let halves = halves.clone();
            thread::spawn(move || {
                for _ in 0..steals {
                    if let Steal::Success(i) = stealer.steal() {
                        halves.run(i);
                    }
                }
            })
        };
        let pending = Pending::new();
        for i in 0..n {
            pending.push(i);
        }
        for _ in 0..promote {
            // `read_heartbeat`: the oldest pending half goes to the deque.
            let oldest = pending.pop_oldest().expect("a pending half");
            deque.push(oldest);
        }
        for i in (0..n).rev() {
            finish_join(i, &pending, &deque, &halves);
            assert_eq!(halves.read(i), 100 + i);
        }
        thief.join().unwrap();
        assert!(pending.is_empty());
        for i in 0..n {
            assert_eq!(halves.runs[i].load(Ordering::Relaxed), 1, "half {i}");
        }
    });
}

#[test]
fn loom_join_promoted_half_vs_steal() {
    // One join: its half promoted, the owner's pop and the thief's steal race for it.
    promote_vs_steal(1, 1, 1);
}

#[test]
fn loom_join_promote_oldest_inner_stays_local() {
    // Two nested joins: the outer half promoted and raced for; the inner one popped back.
    promote_vs_steal(2, 1, 1);
}

#[test]
fn loom_join_two_promotions_vs_two_steals() {
    // Both halves promoted (two heartbeats) while the thief tries twice.
    promote_vs_steal(2, 2, 2);
}

#[test]
fn loom_join_promote_all_before_wait() {
    // `promote_all` before a wait: the owner hands every pending half to the deque at once,
    // then finishes its joins while a thief steals.
    loom::model(|| {
        let halves = Halves::new(3);
        let deque = Worker::<usize>::new(crate::deque::Flavor::Lifo, 2);
        let stealer = deque.stealer();
        let thief = {
            let halves = halves.clone();
            thread::spawn(move || {
                if let Steal::Success(i) = stealer.steal() {
                    halves.run(i);
                }
            })
        };
        let pending = Pending::new();
        (0..3).for_each(|i| pending.push(i));
        for i in pending.take_all() {
            deque.push(i);
        }
        for i in (0..3).rev() {
            finish_join(i, &pending, &deque, &halves);
            assert_eq!(halves.read(i), 100 + i);
        }
        thief.join().unwrap();
        for i in 0..3 {
            assert_eq!(halves.runs[i].load(Ordering::Relaxed), 1, "half {i}");
        }
    });
}
