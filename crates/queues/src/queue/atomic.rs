//! The production multi-access queue: atomic ready and occupied bitmaps.
//!
//! Post: reserve a free slot with `occupied.fetch_or(bit)` (acquire: the consumer that last
//! emptied the slot released it), write the task, publish with `ready.fetch_or(bit)`
//! (release). Claim: `ready.fetch_and(!bit)` (acquire); whoever sees the bit set in the
//! returned value owns the slot, reads the task, and frees the slot with
//! `occupied.fetch_and(!bit)` (release). A bit found already cleared is a lost race.
//!
//! This is the only module with `unsafe`: the slot array is written by the producer that owns
//! the occupied bit and read by the consumer that owns the ready bit.

use std::mem::MaybeUninit;

use crossbeam_utils::CachePadded;

use super::{checked_slots, slot_mask, Claim, ReadyQueue, Scan};
use crate::error::Full;
use crate::sync::{AtomicU64, AtomicUsize, Ordering, UnsafeCell};

/// A multi-access queue with atomic bitmaps (`LockMode::Atomic`): up to 64 slots, any number
/// of concurrent producers and consumers, lock-free post and claim.
///
/// Not FIFO: a claim takes the first ready slot in its scan order.
///
/// ```
/// use partita_queues::{Direction, MultiAccessQueue, ReadyQueue, Scan};
/// let q = MultiAccessQueue::new(8);
/// for t in 10..13 { q.try_post(t).unwrap(); } // slots 0, 1, 2
/// let back = Scan { start: 7, direction: Direction::Backward };
/// assert_eq!(q.claim(back).taken, Some((2, 12)));
/// assert_eq!(q.len(), 2);
/// ```
pub struct MultiAccessQueue<T> {
    /// Both bitmaps and the post hint on one cache line: every post and every claim touches
    /// both bitmaps, so keeping them together moves one line between cores per operation
    /// instead of two or three.
    bits: CachePadded<Bitmaps>,
    mask: u64,
    slots: Box<[UnsafeCell<MaybeUninit<T>>]>,
}

struct Bitmaps {
    ready: AtomicU64,
    occupied: AtomicU64,
    /// Where the next producer starts looking for a free slot (rotates so producers do not
    /// all fight over slot 0).
    hint: AtomicUsize,
}

// SAFETY: the queue moves `T` values between threads (so `T: Send` is required) and never
// hands out shared references to a `T`; each slot is accessed by exactly one thread at a time,
// as arbitrated by the occupied bit (producer) and the ready bit (consumer).
unsafe impl<T: Send> Send for MultiAccessQueue<T> {}
// SAFETY: as above; `&MultiAccessQueue` only allows moving values in and out under the
// bitmap protocol.
unsafe impl<T: Send> Sync for MultiAccessQueue<T> {}

impl<T> MultiAccessQueue<T> {
    /// A queue with `slots` slots.
    ///
    /// # Panics
    /// If `slots` is not in `1..=64` (use [`Config`](crate::Config) for a checked
    /// construction).
    ///
    /// ```
    /// use partita_queues::{MultiAccessQueue, ReadyQueue};
    /// assert_eq!(MultiAccessQueue::<u8>::new(32).capacity(), Some(32));
    /// ```
    pub fn new(slots: usize) -> Self {
        let slots = checked_slots(slots);
        Self {
            bits: CachePadded::new(Bitmaps {
                ready: AtomicU64::new(0),
                occupied: AtomicU64::new(0),
                hint: AtomicUsize::new(0),
            }),
            mask: slot_mask(slots),
            slots: (0..slots)
                .map(|_| UnsafeCell::new(MaybeUninit::uninit()))
                .collect(),
        }
    }

    /// The ready bitmap (bit i ⇔ slot i holds a ready task), read without synchronisation.
    ///
    /// ```
    /// use partita_queues::{MultiAccessQueue, ReadyQueue};
    /// let q = MultiAccessQueue::new(4);
    /// q.try_post(()).unwrap();
    /// assert_eq!(q.ready_bits(), 0b1);
    /// ```
    pub fn ready_bits(&self) -> u64 {
        self.bits.ready.load(Ordering::Relaxed)
    }

    /// The occupied bitmap (bit i ⇔ slot i is reserved or holds a task).
    ///
    /// ```
    /// use partita_queues::{MultiAccessQueue, ReadyQueue};
    /// let q = MultiAccessQueue::new(4);
    /// q.try_post(()).unwrap();
    /// assert_eq!(q.occupied_bits(), 0b1);
    /// ```
    pub fn occupied_bits(&self) -> u64 {
        self.bits.occupied.load(Ordering::Relaxed)
    }
}

impl<T: Send> ReadyQueue<T> for MultiAccessQueue<T> {
    fn try_post(&self, task: T) -> Result<usize, Full<T>> {
        let n = self.slots.len();
        let mut occupied = self.bits.occupied.load(Ordering::Relaxed);
        loop {
            let free = !occupied & self.mask;
            // The hint is one past the last slot taken, so at most `n`: no division needed.
            let hint = self.bits.hint.load(Ordering::Relaxed);
            let scan = Scan {
                start: if hint < n { hint } else { 0 },
                direction: super::Direction::Forward,
            };
            let Some(i) = scan.pick(free) else {
                return Err(Full(task));
            };
            let bit = 1u64 << i;
            let before = self.bits.occupied.fetch_or(bit, Ordering::Acquire);
            if before & bit == 0 {
                // SAFETY: we just set occupied bit i, which was clear: no other producer can
                // reserve slot i until a consumer clears it again, and no consumer reads slot
                // i before we set ready bit i below. The acquire above synchronises with the
                // release by which the last consumer freed the slot, so its read of the old
                // value happened before this write.
                self.slots[i].with_mut(|p| unsafe { (*p).write(task) });
                self.bits.ready.fetch_or(bit, Ordering::Release);
                self.bits.hint.store(i + 1, Ordering::Relaxed);
                return Ok(i);
            }
            occupied = before | bit;
        }
    }

    fn claim(&self, scan: Scan) -> Claim<T> {
        let mut lost_races = 0;
        let mut ready = self.bits.ready.load(Ordering::Relaxed);
        loop {
            let Some(i) = scan.pick(ready & self.mask) else {
                return Claim {
                    taken: None,
                    lost_races,
                };
            };
            let bit = 1u64 << i;
            let before = self.bits.ready.fetch_and(!bit, Ordering::Acquire);
            if before & bit != 0 {
                // SAFETY: we cleared ready bit i, which was set, so we are the only consumer
                // that owns slot i; the acquire synchronises with the producer's release that
                // set the bit after writing the task, so the slot is initialised. We move the
                // task out and only then release the slot (clear occupied bit i), after which
                // we never touch it again.
                let task = self.slots[i].with_mut(|p| unsafe { (*p).assume_init_read() });
                self.bits.occupied.fetch_and(!bit, Ordering::Release);
                return Claim {
                    taken: Some((i, task)),
                    lost_races,
                };
            }
            lost_races += 1;
            ready = before;
        }
    }

    fn len(&self) -> usize {
        (self.bits.ready.load(Ordering::Relaxed) & self.mask).count_ones() as usize
    }

    fn capacity(&self) -> Option<usize> {
        Some(self.slots.len())
    }
}

impl<T> Drop for MultiAccessQueue<T> {
    fn drop(&mut self) {
        // With `&mut self` no post or claim is in flight, so every occupied slot is ready and
        // initialised.
        let mut ready = self.bits.ready.load(Ordering::Relaxed) & self.mask;
        while ready != 0 {
            let i = ready.trailing_zeros() as usize;
            ready &= ready - 1;
            // SAFETY: ready bit i is set and nobody else can access the queue, so slot i holds
            // an initialised task that no one will read again.
            self.slots[i].with_mut(|p| unsafe { (*p).assume_init_drop() });
        }
    }
}

impl<T> std::fmt::Debug for MultiAccessQueue<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MultiAccessQueue")
            .field("slots", &self.slots.len())
            .field("ready", &format_args!("{:#x}", self.ready_bits()))
            .field("occupied", &format_args!("{:#x}", self.occupied_bits()))
            .finish()
    }
}

/// Small enough for Miri (`cargo +nightly miri test -p partita-queues --lib`): boxed tasks
/// make leaks, double drops and reads of uninitialised slots visible.
#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn drop_releases_remaining_tasks() {
        let q = MultiAccessQueue::new(4);
        for i in 0..3 {
            q.try_post(Box::new(i)).unwrap();
        }
        assert_eq!(*q.claim(Scan::from_zero()).taken.unwrap().1, 0);
        drop(q); // two boxes still inside: Miri reports a leak or double free if Drop is wrong
    }

    #[test]
    fn threaded_post_and_claim_move_every_box_once() {
        let q = MultiAccessQueue::new(2);
        let per = if cfg!(miri) { 20 } else { 2_000 };
        let got = std::thread::scope(|s| {
            let q = &q;
            let producer = s.spawn(move || {
                for i in 0..per {
                    let mut t = Box::new(i);
                    while let Err(Full(back)) = q.try_post(t) {
                        t = back;
                        std::thread::yield_now();
                    }
                }
            });
            let consumer = s.spawn(move || {
                let mut got = Vec::new();
                let mut cursor = 1;
                while got.len() < per {
                    match q
                        .claim(Scan::after_cursor(
                            cursor,
                            2,
                            super::super::Direction::Forward,
                        ))
                        .taken
                    {
                        Some((slot, t)) => {
                            cursor = slot;
                            got.push(*t);
                        }
                        None => std::thread::yield_now(),
                    }
                }
                got
            });
            producer.join().unwrap();
            consumer.join().unwrap()
        });
        let mut sorted = got;
        sorted.sort_unstable();
        assert_eq!(sorted, (0..per).collect::<Vec<_>>());
        assert!(q.is_empty());
    }
}
