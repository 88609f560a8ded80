//! Single queues: the multi-access queue in its two lock modes and the FIFO baseline, all
//! behind the [`ReadyQueue`] trait.
//!
//! A multi-access queue is an array of slots plus a *ready* bitmap (bit i set ⇔ slot i holds
//! a ready task) and an *occupied* bitmap (bit i set ⇔ slot i is reserved by a producer or
//! holds a task). Invariant: ready ⊆ occupied at every instant, because a producer sets the
//! occupied bit before the ready bit and a consumer clears the ready bit before the occupied
//! bit. A claim scans the ready bitmap from a caller-supplied start in a caller-supplied
//! direction (the consumer's cursor and the bidirectional rule live in the caller), so the
//! queue itself holds no per-consumer state.

mod atomic;
mod fifo;
mod paper;

pub use atomic::MultiAccessQueue;
pub use fifo::FifoQueue;
pub use paper::PaperQueue;

use crate::error::Full;

/// The largest number of slots a multi-access queue can have (one bit of a `u64` each).
///
/// ```
/// assert_eq!(partita_queues::MAX_SLOTS, 64);
/// ```
pub const MAX_SLOTS: usize = 64;

/// Which way a claim scans the ready bitmap.
///
/// ```
/// assert_ne!(partita_queues::Direction::Forward, partita_queues::Direction::Backward);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Increasing slot index from the start, wrapping to 0 (primary queues).
    Forward,
    /// Decreasing slot index from the start, wrapping to the last slot (secondary queues when
    /// bidirectional search is on).
    Backward,
}

/// Where and which way a claim scans: the first ready slot at or after (`Forward`) or at or
/// before (`Backward`) `start`, cyclically.
///
/// ```
/// use partita_queues::{Direction, Scan};
/// let s = Scan::after_cursor(3, 8, Direction::Forward);
/// assert_eq!(s.start, 4);
/// assert_eq!(Scan::after_cursor(0, 8, Direction::Backward).start, 7);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Scan {
    /// First slot examined.
    pub start: usize,
    /// Scan direction.
    pub direction: Direction,
}

impl Scan {
    /// A scan starting one past the last-served slot `cursor` in `direction`, over `slots`
    /// slots: this is what bounds how long a ready task can be passed over.
    ///
    /// ```
    /// use partita_queues::{Direction, Scan};
    /// assert_eq!(Scan::after_cursor(7, 8, Direction::Forward).start, 0);
    /// ```
    pub fn after_cursor(cursor: usize, slots: usize, direction: Direction) -> Self {
        // Cursors are always below `slots`, so a compare replaces the division on this hot
        // path; anything out of range is reduced first.
        let slots = slots.max(1);
        let cursor = if cursor < slots {
            cursor
        } else {
            cursor % slots
        };
        let start = match direction {
            Direction::Forward if cursor + 1 == slots => 0,
            Direction::Forward => cursor + 1,
            Direction::Backward if cursor == 0 => slots - 1,
            Direction::Backward => cursor - 1,
        };
        Scan { start, direction }
    }

    /// A forward scan from slot 0 (the start of a fresh search, or the negative control that
    /// forgets the cursor).
    ///
    /// ```
    /// assert_eq!(partita_queues::Scan::from_zero().start, 0);
    /// ```
    pub fn from_zero() -> Self {
        Scan {
            start: 0,
            direction: Direction::Forward,
        }
    }

    /// The slot this scan would pick among the set bits of `bits` (`None` if `bits == 0`).
    ///
    /// ```
    /// use partita_queues::{Direction, Scan};
    /// let bits = 0b1001_0010u64;
    /// assert_eq!(Scan { start: 2, direction: Direction::Forward }.pick(bits), Some(4));
    /// assert_eq!(Scan { start: 2, direction: Direction::Backward }.pick(bits), Some(1));
    /// assert_eq!(Scan { start: 0, direction: Direction::Backward }.pick(bits), Some(7));
    /// ```
    pub fn pick(self, bits: u64) -> Option<usize> {
        if bits == 0 {
            return None;
        }
        let s = self.start % MAX_SLOTS;
        Some(match self.direction {
            Direction::Forward => {
                let upper = bits & (u64::MAX << s);
                if upper != 0 {
                    upper.trailing_zeros() as usize
                } else {
                    bits.trailing_zeros() as usize
                }
            }
            Direction::Backward => {
                let lower = bits & (u64::MAX >> (63 - s));
                if lower != 0 {
                    63 - lower.leading_zeros() as usize
                } else {
                    63 - bits.leading_zeros() as usize
                }
            }
        })
    }
}

/// The result of one claim attempt: the task (with the slot it came from, 0 for a FIFO) and
/// how many races against other consumers it lost on the way.
///
/// ```
/// use partita_queues::{MultiAccessQueue, ReadyQueue, Scan};
/// let q = MultiAccessQueue::new(4);
/// q.try_post('x').unwrap();
/// let c = q.claim(Scan::from_zero());
/// assert_eq!(c.taken, Some((0, 'x')));
/// assert_eq!(c.lost_races, 0);
/// ```
#[derive(Debug, PartialEq, Eq)]
pub struct Claim<T> {
    /// `(slot, task)` if a task was claimed.
    pub taken: Option<(usize, T)>,
    /// Ready bits found cleared by another consumer between the scan and the claim.
    pub lost_races: u32,
}

/// One ready queue: post into a free slot, claim a ready one.
///
/// Implemented by [`MultiAccessQueue`] (atomic bitmaps), [`PaperQueue`] (the paper's
/// two-level locks) and [`FifoQueue`] (the Global and Distributed FCFS baselines). None of
/// them blocks on an empty or full queue: `try_post` hands the task back, `claim` returns
/// nothing.
///
/// ```
/// use partita_queues::{FifoQueue, MultiAccessQueue, PaperQueue, ReadyQueue, Scan};
/// fn round_trip(q: &dyn ReadyQueue<u32>) -> Option<u32> {
///     q.try_post(5).ok()?;
///     q.claim(Scan::from_zero()).taken.map(|(_, t)| t)
/// }
/// assert_eq!(round_trip(&MultiAccessQueue::new(8)), Some(5));
/// assert_eq!(round_trip(&PaperQueue::new(8)), Some(5));
/// assert_eq!(round_trip(&FifoQueue::new()), Some(5));
/// ```
pub trait ReadyQueue<T>: Send + Sync {
    /// Posts `task` into a free slot and returns the slot, or hands the task back when every
    /// slot is occupied.
    ///
    /// ```
    /// use partita_queues::{Full, MultiAccessQueue, ReadyQueue};
    /// let q = MultiAccessQueue::new(2);
    /// assert_eq!(q.try_post('a'), Ok(0));
    /// assert_eq!(q.try_post('b'), Ok(1));
    /// assert_eq!(q.try_post('c'), Err(Full('c')));
    /// ```
    fn try_post(&self, task: T) -> Result<usize, Full<T>>;

    /// Claims one ready task, scanning as `scan` says (FIFOs ignore it and serve in post
    /// order).
    ///
    /// ```
    /// use partita_queues::{Direction, MultiAccessQueue, ReadyQueue, Scan};
    /// let q = MultiAccessQueue::new(4);
    /// for t in 0..4 { q.try_post(t).unwrap(); }
    /// let c = q.claim(Scan { start: 2, direction: Direction::Forward });
    /// assert_eq!(c.taken, Some((2, 2)));
    /// ```
    fn claim(&self, scan: Scan) -> Claim<T>;

    /// Number of ready tasks, read without locks: a hint under concurrency, exact at
    /// quiescence.
    ///
    /// ```
    /// use partita_queues::{PaperQueue, ReadyQueue};
    /// let q = PaperQueue::new(4);
    /// q.try_post(1).unwrap();
    /// assert_eq!(q.len(), 1);
    /// ```
    fn len(&self) -> usize;

    /// Whether [`len`](ReadyQueue::len) is 0.
    ///
    /// ```
    /// use partita_queues::{FifoQueue, ReadyQueue};
    /// assert!(ReadyQueue::<u8>::is_empty(&FifoQueue::new()));
    /// ```
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of slots, `None` for an unbounded queue.
    ///
    /// ```
    /// use partita_queues::{FifoQueue, MultiAccessQueue, ReadyQueue};
    /// assert_eq!(ReadyQueue::<u8>::capacity(&MultiAccessQueue::new(32)), Some(32));
    /// assert_eq!(ReadyQueue::<u8>::capacity(&FifoQueue::new()), None);
    /// ```
    fn capacity(&self) -> Option<usize>;
}

/// Checks a slot count for a multi-access queue.
fn checked_slots(slots: usize) -> usize {
    assert!(
        (1..=MAX_SLOTS).contains(&slots),
        "a multi-access queue has 1..=64 slots, got {slots}"
    );
    slots
}

/// The bitmap with the low `slots` bits set.
fn slot_mask(slots: usize) -> u64 {
    if slots >= MAX_SLOTS {
        u64::MAX
    } else {
        (1u64 << slots) - 1
    }
}
