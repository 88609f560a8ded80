//! The deque's checks: behaviour and a sequential model (proptest), a many-thread
//! exactly-once stress, and loom models of the races (`--cfg loom`, `loom_deque_*`, run by
//! `scripts/test.d/30-runtime.sh`).

use super::{Flavor, Item, Steal, Stealer, Worker};

/// Test items: a number in the first word (no provenance: never dereferenced), and its
/// complement in the second, so a torn or mixed-up read would be caught.
impl Item for usize {
    fn into_words(self) -> [*mut (); 2] {
        [
            std::ptr::without_provenance_mut(self),
            std::ptr::without_provenance_mut(!self),
        ]
    }

    unsafe fn from_words(w: [*mut (); 2]) -> Self {
        let (a, b) = (w[0].addr(), w[1].addr());
        assert_eq!(a, !b, "torn item");
        a
    }
}

/// Steal until the deque says empty (retrying lost races).
fn steal_one(s: &Stealer<usize>) -> Option<usize> {
    loop {
        match s.steal() {
            Steal::Success(x) => return Some(x),
            Steal::Empty => return None,
            Steal::Retry => {}
        }
    }
}

#[cfg(not(loom))]
mod behaviour {
    use std::collections::VecDeque;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    use proptest::prelude::*;

    use super::*;
    use crate::deque::buffer::PAGE;

    #[test]
    fn lifo_owner_pops_newest_thief_takes_oldest() {
        let w = Worker::<usize>::new(Flavor::Lifo, 2);
        let s = w.stealer();
        for i in 0..10 {
            w.push(i);
        }
        assert_eq!((w.len(), s.len()), (10, 10));
        assert_eq!(w.pop(), Some(9));
        assert_eq!(s.steal(), Steal::Success(0));
        assert_eq!(w.pop(), Some(8));
        assert_eq!(steal_one(&s), Some(1));
        let rest: Vec<_> = std::iter::from_fn(|| w.pop()).collect();
        assert_eq!(rest, vec![7, 6, 5, 4, 3, 2]);
        assert!(w.is_empty() && s.is_empty());
        assert_eq!(s.steal(), Steal::Empty);
        assert_eq!(w.pop(), None);
    }

    #[test]
    fn fifo_owner_pops_oldest() {
        let w = Worker::<usize>::new_fifo();
        let s = w.stealer();
        for i in 0..300 {
            w.push(i);
        }
        assert_eq!(w.pop(), Some(0));
        assert_eq!(steal_one(&s), Some(1));
        assert_eq!(w.pop(), Some(2));
        assert_eq!(w.len(), 297);
        let rest: Vec<_> = std::iter::from_fn(|| w.pop()).collect();
        assert_eq!(rest, (3..300).collect::<Vec<_>>());
        assert_eq!(w.pop(), None);
        // Pops on an empty FIFO deque leave it usable.
        w.push(7);
        assert_eq!(steal_one(&s), Some(7));
    }

    #[test]
    fn pages_are_whole_and_cover_every_buffer() {
        let w = Worker::<usize>::new(Flavor::Lifo, 128);
        let s = w.stealer();
        assert_eq!(s.pages().len(), 2, "shared page and the first buffer");
        for i in 0..1000 {
            w.push(i);
        }
        let pages = s.pages();
        // 128 → 256 → 512 → 1024: four buffers, all kept.
        assert_eq!(pages.len(), 5);
        for &(addr, len) in &pages {
            assert!(
                addr % PAGE == 0 && len % PAGE == 0 && len > 0,
                "{addr:#x}+{len}"
            );
        }
        let mut sorted = pages.clone();
        sorted.sort_unstable();
        for p in sorted.windows(2) {
            assert!(p[0].0 + p[0].1 <= p[1].0, "ranges overlap: {p:?}");
        }
        // The shared state is one page; the current buffer holds 1024 slots of 16 bytes.
        assert_eq!(pages[0].1, PAGE);
        assert!(pages[1].1 >= 1024 * 16);
    }

    #[test]
    fn a_stealer_outlives_its_worker() {
        let w = Worker::<usize>::new(Flavor::Lifo, 1);
        let s = w.stealer();
        let s2 = s.clone();
        for i in 0..5 {
            w.push(i);
        }
        drop(w);
        assert_eq!(steal_one(&s), Some(0));
        drop(s);
        assert_eq!(steal_one(&s2), Some(1));
        assert_eq!(s2.len(), 3);
    }

    /// Owner pushing and popping (growing from 2 slots) against three thieves: every item
    /// is taken exactly once.
    fn exactly_once(flavor: Flavor, items: usize) {
        let w = Worker::<usize>::new(flavor, 2);
        let done = Arc::new(AtomicBool::new(false));
        let thieves: Vec<_> = (0..3)
            .map(|_| {
                let (s, done) = (w.stealer(), Arc::clone(&done));
                std::thread::spawn(move || {
                    let mut got = Vec::new();
                    while !done.load(Ordering::Acquire) || !s.is_empty() {
                        if let Steal::Success(x) = s.steal() {
                            got.push(x);
                        }
                    }
                    got
                })
            })
            .collect();
        let mut mine = Vec::new();
        for i in 0..items {
            w.push(i);
            if i % 3 == 0 {
                mine.extend(w.pop());
            }
        }
        while let Some(x) = w.pop() {
            mine.push(x);
        }
        done.store(true, Ordering::Release);
        let mut all = mine;
        for t in thieves {
            all.extend(t.join().expect("thief panicked"));
        }
        all.sort_unstable();
        assert_eq!(all, (0..items).collect::<Vec<_>>());
    }

    #[test]
    fn every_item_taken_exactly_once_lifo() {
        exactly_once(Flavor::Lifo, if cfg!(miri) { 200 } else { 200_000 });
    }

    #[test]
    fn every_item_taken_exactly_once_fifo() {
        exactly_once(Flavor::Fifo, if cfg!(miri) { 200 } else { 200_000 });
    }

    #[derive(Clone, Debug)]
    enum Op {
        Push,
        Pop,
        Steal,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![3 => Just(Op::Push), 2 => Just(Op::Pop), 1 => Just(Op::Steal)]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 4 } else { 256 }))]

        /// One thread, any sequence of operations, any first capacity: the deque behaves as
        /// a VecDeque (push at the back; the owner pops its flavour's end; steals take the
        /// front), and its lengths agree.
        #[test]
        fn matches_a_vecdeque(
            ops in proptest::collection::vec(op(), 0..400),
            fifo in any::<bool>(),
            cap_log in 0u32..4,
        ) {
            let flavor = if fifo { Flavor::Fifo } else { Flavor::Lifo };
            let w = Worker::<usize>::new(flavor, 1 << cap_log);
            let s = w.stealer();
            let mut model = VecDeque::new();
            for (i, op) in ops.into_iter().enumerate() {
                match op {
                    Op::Push => {
                        w.push(i);
                        model.push_back(i);
                    }
                    Op::Pop => {
                        let want = if fifo { model.pop_front() } else { model.pop_back() };
                        prop_assert_eq!(w.pop(), want);
                    }
                    Op::Steal => {
                        let want = model.pop_front().map_or(Steal::Empty, Steal::Success);
                        prop_assert_eq!(s.steal(), want);
                    }
                }
                prop_assert_eq!(w.len(), model.len());
                prop_assert_eq!(s.len(), model.len());
                prop_assert_eq!(s.is_empty(), model.is_empty());
            }
        }
    }
}

#[cfg(loom)]
mod loom_models {
    use loom::thread;

    use super::*;

    /// Owner pushes `n` into a deque of `cap` slots, popping `pops` of them; one thief steals
    /// concurrently (`steals` attempts). Every item is taken exactly once.
    fn push_pop_steal(flavor: Flavor, cap: usize, n: usize, pops: usize, steals: usize) {
        loom::model(move || {
            let w = Worker::<usize>::new(flavor, cap);
            let s = w.stealer();
            let thief = thread::spawn(move || {
                let mut got = Vec::new();
                for _ in 0..steals {
                    if let Steal::Success(x) = s.steal() {
                        got.push(x);
                    }
                }
                got
            });
            for i in 0..n {
                w.push(i);
            }
            let mut all: Vec<usize> = (0..pops).filter_map(|_| w.pop()).collect();
            all.extend(thief.join().unwrap());
            while let Some(x) = w.pop() {
                all.push(x);
            }
            all.sort_unstable();
            assert_eq!(all, (0..n).collect::<Vec<_>>());
        });
    }

    #[test]
    fn loom_deque_pop_vs_steal_last_item() {
        // One item: the owner's pop and the thief's steal race for it (the CAS case).
        push_pop_steal(Flavor::Lifo, 2, 1, 1, 1);
    }

    #[test]
    fn loom_deque_pop_vs_steal_two_items() {
        push_pop_steal(Flavor::Lifo, 4, 2, 2, 2);
    }

    #[test]
    fn loom_deque_growth_while_stealing() {
        // A one-slot buffer grows twice (1 → 2 → 4) while the thief reads old buffers.
        push_pop_steal(Flavor::Lifo, 1, 3, 1, 2);
    }

    #[test]
    fn loom_deque_growth_between_pops() {
        // Pops between pushes that grow the ring (1 → 2 → 4) while two steals run: `back`
        // goes down and up across a growth, and the thief may hold any of the three rings.
        loom::model(|| {
            let w = Worker::<usize>::new(Flavor::Lifo, 1);
            let s = w.stealer();
            let thief = thread::spawn(move || {
                (0..2)
                    .filter_map(|_| match s.steal() {
                        Steal::Success(x) => Some(x),
                        _ => None,
                    })
                    .collect::<Vec<_>>()
            });
            w.push(0);
            w.push(1);
            let mut all: Vec<usize> = w.pop().into_iter().collect();
            w.push(2);
            w.push(3);
            all.extend(w.pop());
            all.extend(thief.join().unwrap());
            while let Some(x) = w.pop() {
                all.push(x);
            }
            all.sort_unstable();
            assert_eq!(all, vec![0, 1, 2, 3]);
        });
    }

    #[test]
    fn loom_deque_fifo_pop_vs_steal() {
        push_pop_steal(Flavor::Fifo, 1, 2, 2, 2);
    }

    #[test]
    fn loom_deque_wraparound_reuses_stolen_slots() {
        // Two slots; pushes lap the ring after the thief took the front: a thief reading a
        // slot the owner rewrites must lose its CAS.
        loom::model(|| {
            let w = Worker::<usize>::new(Flavor::Lifo, 2);
            let s = w.stealer();
            w.push(0);
            w.push(1);
            let thief = thread::spawn(move || (0..2).filter_map(|_| steal_one(&s)).collect());
            w.push(2);
            w.push(3);
            let mut all: Vec<usize> = thief.join().unwrap();
            while let Some(x) = w.pop() {
                all.push(x);
            }
            all.sort_unstable();
            assert_eq!(all, vec![0, 1, 2, 3]);
        });
    }

    #[test]
    fn loom_deque_two_thieves_and_owner() {
        loom::model(|| {
            let w = Worker::<usize>::new(Flavor::Lifo, 2);
            let (s1, s2) = (w.stealer(), w.stealer());
            w.push(0);
            w.push(1);
            let t1 = thread::spawn(move || steal_one(&s1));
            let t2 = thread::spawn(move || steal_one(&s2));
            let mut all: Vec<usize> = w.pop().into_iter().collect();
            all.extend(t1.join().unwrap());
            all.extend(t2.join().unwrap());
            while let Some(x) = w.pop() {
                all.push(x);
            }
            all.sort_unstable();
            assert_eq!(all, vec![0, 1]);
        });
    }
}
