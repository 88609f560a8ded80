//! The paper's multi-access queue: one lock for the bitmap, one lock per slot.
//!
//! The ready bitmap is scanned without the lock (an atomic mirror written only under the
//! bitmap lock); on a set bit the consumer takes the bitmap lock, re-checks, clears and
//! releases, then takes the slot under the slot's lock. A producer reserves a slot under the
//! slot's lock, then sets the ready bit under the bitmap lock. No `unsafe`.

use super::{checked_slots, slot_mask, Claim, Direction, ReadyQueue, Scan};
use crate::error::Full;
use crate::sync::{lock, AtomicU64, AtomicUsize, Mutex, Ordering};

/// A multi-access queue with the paper's two-level locking (`LockMode::Paper`).
///
/// ```
/// use partita_queues::{PaperQueue, ReadyQueue, Scan};
/// let q = PaperQueue::new(32);
/// q.try_post("task").unwrap();
/// assert_eq!(q.claim(Scan::from_zero()).taken, Some((0, "task")));
/// assert!(q.is_empty());
/// ```
#[derive(Debug)]
pub struct PaperQueue<T> {
    bitmap_lock: Mutex<()>,
    /// Written only while holding `bitmap_lock`; read freely by scans.
    ready: AtomicU64,
    /// Bit i mirrors `slots[i].is_some()`; written only while holding slot i's lock.
    occupied: AtomicU64,
    hint: AtomicUsize,
    mask: u64,
    slots: Box<[Mutex<Option<T>>]>,
}

impl<T> PaperQueue<T> {
    /// A queue with `slots` slots.
    ///
    /// # Panics
    /// If `slots` is not in `1..=64`.
    ///
    /// ```
    /// use partita_queues::{PaperQueue, ReadyQueue};
    /// assert_eq!(PaperQueue::<u8>::new(32).capacity(), Some(32));
    /// ```
    pub fn new(slots: usize) -> Self {
        let slots = checked_slots(slots);
        Self {
            bitmap_lock: Mutex::new(()),
            ready: AtomicU64::new(0),
            occupied: AtomicU64::new(0),
            hint: AtomicUsize::new(0),
            mask: slot_mask(slots),
            slots: (0..slots).map(|_| Mutex::new(None)).collect(),
        }
    }

    /// The ready bitmap.
    ///
    /// ```
    /// use partita_queues::{PaperQueue, ReadyQueue};
    /// let q = PaperQueue::new(4);
    /// q.try_post(()).unwrap();
    /// assert_eq!(q.ready_bits(), 1);
    /// ```
    pub fn ready_bits(&self) -> u64 {
        self.ready.load(Ordering::Relaxed)
    }

    /// The occupied bitmap.
    ///
    /// ```
    /// use partita_queues::{PaperQueue, ReadyQueue};
    /// let q = PaperQueue::new(4);
    /// q.try_post(()).unwrap();
    /// assert_eq!(q.occupied_bits(), 1);
    /// ```
    pub fn occupied_bits(&self) -> u64 {
        self.occupied.load(Ordering::Relaxed)
    }
}

impl<T: Send> ReadyQueue<T> for PaperQueue<T> {
    fn try_post(&self, task: T) -> Result<usize, Full<T>> {
        let n = self.slots.len();
        let mut free = !self.occupied.load(Ordering::Acquire) & self.mask;
        let hint = self.hint.load(Ordering::Relaxed);
        let start = if hint < n { hint } else { 0 };
        let scan = Scan {
            start,
            direction: Direction::Forward,
        };
        while let Some(i) = scan.pick(free) {
            let bit = 1u64 << i;
            free &= !bit;
            let mut slot = lock(&self.slots[i]);
            if slot.is_some() {
                continue; // another producer got there first
            }
            *slot = Some(task);
            self.occupied.fetch_or(bit, Ordering::Release);
            drop(slot);
            let guard = lock(&self.bitmap_lock);
            self.ready.fetch_or(bit, Ordering::Release);
            drop(guard);
            self.hint.store(i + 1, Ordering::Relaxed);
            return Ok(i);
        }
        Err(Full(task))
    }

    fn claim(&self, scan: Scan) -> Claim<T> {
        let mut lost_races = 0;
        let mut seen = self.ready.load(Ordering::Acquire) & self.mask;
        while let Some(i) = scan.pick(seen) {
            let bit = 1u64 << i;
            let guard = lock(&self.bitmap_lock);
            let now = self.ready.load(Ordering::Relaxed);
            if now & bit == 0 {
                drop(guard);
                lost_races += 1;
                seen = now & self.mask;
                continue;
            }
            self.ready.store(now & !bit, Ordering::Relaxed);
            drop(guard);
            let mut slot = lock(&self.slots[i]);
            // The ready bit was set by the producer after filling the slot under this lock,
            // and only the consumer that cleared the bit (us) empties it.
            let task = slot.take();
            self.occupied.fetch_and(!bit, Ordering::Release);
            drop(slot);
            if let Some(task) = task {
                return Claim {
                    taken: Some((i, task)),
                    lost_races,
                };
            }
            // Unreachable under the protocol above; treat as a lost race rather than panic.
            lost_races += 1;
            seen = self.ready.load(Ordering::Acquire) & self.mask;
        }
        Claim {
            taken: None,
            lost_races,
        }
    }

    fn len(&self) -> usize {
        (self.ready.load(Ordering::Relaxed) & self.mask).count_ones() as usize
    }

    fn capacity(&self) -> Option<usize> {
        Some(self.slots.len())
    }
}
