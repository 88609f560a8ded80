//! Loom model checks of the concurrency core. Run with
//! `RUSTFLAGS="--cfg loom" cargo test -p partita-queues --test loom`
//! (scripts/test.d/20-queues.sh does, with its own target dir). Without `--cfg loom` this file
//! is empty.
#![cfg(loom)]

use loom::sync::Arc;
use loom::thread;
use partita_queues::{
    Config, Direction, Full, LockMode, MultiAccessQueue, PaperQueue, ReadyQueue, Scan,
};

fn fwd() -> Scan {
    Scan::from_zero()
}

fn back() -> Scan {
    Scan {
        start: 1,
        direction: Direction::Backward,
    }
}

/// Exclusive claim: one ready task, two racing consumers: exactly one gets it, in every
/// interleaving.
#[test]
fn atomic_one_task_two_consumers() {
    loom::model(|| {
        let q = Arc::new(MultiAccessQueue::new(2));
        q.try_post(7u32).unwrap();
        let q2 = Arc::clone(&q);
        let t = thread::spawn(move || q2.claim(back()).taken.map(|(_, t)| t));
        let mine = q.claim(fwd()).taken.map(|(_, t)| t);
        let theirs = t.join().unwrap();
        assert_eq!(mine.is_some() as u8 + theirs.is_some() as u8, 1);
        assert_eq!(mine.or(theirs), Some(7));
        assert!(q.is_empty());
    });
}

/// Publication: a concurrent post and claim never read an unwritten slot; the task is either
/// claimed or still there.
#[test]
fn atomic_post_races_claim() {
    loom::model(|| {
        let q = Arc::new(MultiAccessQueue::new(1));
        let q2 = Arc::clone(&q);
        let t = thread::spawn(move || q2.try_post(Box::new(5u32)).is_ok());
        let got = q.claim(fwd()).taken.map(|(_, t)| *t);
        assert!(t.join().unwrap());
        match got {
            Some(v) => assert_eq!(v, 5),
            None => assert_eq!(q.claim(fwd()).taken.map(|(_, t)| *t), Some(5)),
        }
    });
}

/// Slot reuse: a consumer frees a slot while a producer waits for it; the new task is never
/// overwritten or read early, and Full is returned only while the slot is occupied.
#[test]
fn atomic_slot_reuse() {
    loom::model(|| {
        let q = Arc::new(MultiAccessQueue::new(1));
        q.try_post(1u32).unwrap();
        let q2 = Arc::clone(&q);
        let producer = thread::spawn(move || match q2.try_post(2) {
            Ok(_) => true,
            Err(Full(2)) => false,
            Err(Full(other)) => panic!("handed back the wrong task {other}"),
        });
        let first = q.claim(fwd()).taken.map(|(_, t)| t);
        let posted = producer.join().unwrap();
        assert_eq!(first, Some(1));
        let second = q.claim(fwd()).taken.map(|(_, t)| t);
        assert_eq!(second, posted.then_some(2));
    });
}

/// Two producers into a two-slot queue: they get different slots.
#[test]
fn atomic_two_producers_distinct_slots() {
    loom::model(|| {
        let q = Arc::new(MultiAccessQueue::new(2));
        let q2 = Arc::clone(&q);
        let t = thread::spawn(move || q2.try_post(1u32).unwrap());
        let a = q.try_post(2u32).unwrap();
        let b = t.join().unwrap();
        assert_ne!(a, b);
        let mut got = [
            q.claim(fwd()).taken.unwrap().1,
            q.claim(fwd()).taken.unwrap().1,
        ];
        got.sort();
        assert_eq!(got, [1, 2]);
    });
}

/// The paper's two-level locking: racing consumers, exclusive claim.
#[test]
fn paper_one_task_two_consumers() {
    loom::model(|| {
        let q = Arc::new(PaperQueue::new(2));
        q.try_post(7u32).unwrap();
        let q2 = Arc::clone(&q);
        let t = thread::spawn(move || q2.claim(back()).taken.is_some());
        let mine = q.claim(fwd()).taken.is_some();
        assert!(mine ^ t.join().unwrap());
    });
}

/// The set: a post that overflows (every slot full) racing a poll; conservation.
#[test]
fn set_post_overflow_races_poll() {
    loom::model(|| {
        let set = Arc::new(
            Config::new(2)
                .slots(1)
                .cutoff(1)
                .lock_mode(LockMode::Atomic)
                .build::<u32>()
                .unwrap(),
        );
        set.try_post_to(0, 0).unwrap();
        set.try_post_to(1, 1).unwrap();
        let s2 = Arc::clone(&set);
        let t = thread::spawn(move || {
            let mut p = s2.producer(0);
            s2.post(&mut p, 2);
        });
        let mut c = set.consumer(0);
        let mut got = Vec::new();
        got.extend(set.poll(&mut c));
        t.join().unwrap();
        while let Some(x) = set.poll(&mut c) {
            got.push(x);
        }
        got.sort();
        assert_eq!(got, [0, 1, 2]);
    });
}
