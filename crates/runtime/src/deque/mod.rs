//! The workers' own work-stealing deque: Chase & Lev (SPAA 2005) with the C11 orderings of
//! Lê, Pop, Cohen and Zappa Nardelli (PPoPP 2013). The owner pushes and pops at the back
//! (LIFO flavour) or pops at the front (FIFO flavour, `breadth_first` pools and the broadcast
//! queues); thieves take from the front. The protocol and the reason for every ordering are in
//! `README.md` beside this file; each fence and CAS below says which pairing it is.
//!
//! Why not crossbeam-deque (which this replaces, and whose `deque.rs` is the style model):
//! its shared half (indices and buffers) is allocated by whoever builds the deque and exposes
//! no address, so the NUMA follower could neither place nor move it (issue 14). Here the
//! shared state ([`Inner`]: `front`, `back` and the buffer pointer, each on its own cache line)
//! is one page-aligned page of its own and every buffer is whole pages of its own
//! (`buffer.rs`); [`Stealer::pages`] lists them so a worker registers them as part of its
//! *home* (`numa/home.rs`), and the deque is built on its owner's thread (`worker.rs`), so
//! the owner touches every page first.
//!
//! **Old buffers are kept, not retired through crossbeam-epoch.** When the ring is full the
//! owner doubles it; the old buffer stays linked behind the new one (`Buffer::prev`) until
//! the last handle of the deque is dropped. Why: (1) a thief then never needs to pin an epoch
//! — crossbeam's `steal` pins, which is one more locked instruction per steal on x86-64; (2)
//! the buffers are registered pages that the follower thread moves (`numa/mover.rs`), so a
//! buffer freed at an arbitrary time by the epoch collector would first have to leave its
//! worker's home under the follower's lock, from inside the collector; with kept buffers the
//! list of pages only grows and [`Stealer::pages`] can walk it from any thread; (3) capacities
//! double, so all old buffers together are smaller than the current one: keeping them at most
//! doubles the deque's memory, and the deque never shrinks (a worker that once held 10^5 jobs
//! keeps its 2 MiB ring for the pool's life; crossbeam would shrink it). (4) loom checks the
//! exact retirement the code uses.
//!
//! Items are [`Item`]s: `Copy` values of two machine words, so slots are atomics and a thief
//! reading a slot the owner overwrites is not a data race (`buffer.rs`). All `unsafe` of the
//! deque is in this module and `buffer.rs`.

mod buffer;
#[cfg(test)]
mod tests;

use std::cell::Cell;
use std::marker::PhantomData;
use std::ptr::{self, NonNull};
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release, SeqCst};

use crossbeam_utils::CachePadded;

use self::buffer::Buffer;
use crate::sync::{fence, AtomicIsize, AtomicPtr, AtomicUsize};

/// Capacity of a new deque's first buffer: header and slots fill one page.
const MIN_CAP: usize = 128;

/// A value the deque can hold: two machine words, copied in and out.
pub(crate) trait Item: Copy {
    /// The two words of `self`.
    fn into_words(self) -> [*mut (); 2];
    /// Rebuilds a value from [`Item::into_words`]' output.
    ///
    /// # Safety
    /// `w` is exactly what `into_words` returned for some value of this type.
    unsafe fn from_words(w: [*mut (); 2]) -> Self;
}

/// The outcome of [`Stealer::steal`] (as crossbeam's).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Steal<T> {
    /// The deque was empty.
    Empty,
    /// An item was taken.
    Success(T),
    /// Lost a race with another taker; the deque may still hold items.
    Retry,
}

/// Which end the owner pops from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Flavor {
    /// The back: the newest item first (depth first, the default).
    Lifo,
    /// The front: the oldest item first, like a thief (breadth first).
    Fifo,
}

/// The state every handle shares, alone in its page.
///
/// `front` is where thieves (and a FIFO owner) take; `back` is where the owner pushes. The
/// items are the logical indices `front..back` of the current buffer.
#[repr(C, align(4096))]
struct Inner {
    front: CachePadded<AtomicIsize>,
    back: CachePadded<AtomicIsize>,
    /// The current buffer; replaced (only by the owner) when it grows.
    buffer: CachePadded<AtomicPtr<Buffer>>,
    /// Live handles (the worker and its stealers); the last one frees everything.
    handles: CachePadded<AtomicUsize>,
}

/// Drops one handle of `inner`; the last frees the buffers and the shared page.
fn release(inner: NonNull<Inner>) {
    // SAFETY: the caller is a live handle, so `inner` is allocated.
    let handles = unsafe { &inner.as_ref().handles };
    // AcqRel (as `Arc`): our accesses happen before the last handle's frees (Release), and
    // the last handle sees everyone's (Acquire).
    if handles.fetch_sub(1, AcqRel) != 1 {
        return;
    }
    // SAFETY: we were the last handle: nobody else can reach `inner` or its buffers. `inner`
    // came from `Box::leak` in `Worker::new`; the buffer chain from `Buffer::alloc`, each
    // buffer linked exactly once.
    unsafe {
        let inner = Box::from_raw(inner.as_ptr());
        Buffer::free_chain(inner.buffer.load(Relaxed));
    }
}

/// The owner's end of a deque: push, and pop at the end its [`Flavor`] says. One thread at a
/// time (`Send`, not `Sync`).
pub(crate) struct Worker<T: Item> {
    inner: NonNull<Inner>,
    /// The owner's copy of `Inner::buffer` (only the owner replaces it), read without atomics.
    buffer: Cell<*mut Buffer>,
    flavor: Flavor,
    /// `*mut ()`: not `Sync`; `T`: the items.
    _marker: PhantomData<(*mut (), T)>,
}

// SAFETY: a worker handle may move to another thread (the broadcast queues are pushed from
// any thread under a mutex); its items are `Send`. It is not `Sync`: `push`/`pop` assume a
// single caller.
unsafe impl<T: Item + Send> Send for Worker<T> {}

impl<T: Item> Worker<T> {
    /// A deque whose owner pops the newest item.
    pub(crate) fn new_lifo() -> Self {
        Self::new(Flavor::Lifo, MIN_CAP)
    }

    /// A deque whose owner pops the oldest item.
    pub(crate) fn new_fifo() -> Self {
        Self::new(Flavor::Fifo, MIN_CAP)
    }

    /// A deque with a first buffer of at least `min_cap` slots (tests use tiny ones to grow).
    /// Its pages are first touched here, by the calling thread.
    pub(crate) fn new(flavor: Flavor, min_cap: usize) -> Self {
        let cap = min_cap.max(1).next_power_of_two();
        let buffer = Buffer::alloc(cap, ptr::null_mut()).as_ptr();
        let inner = Box::new(Inner {
            front: CachePadded::new(AtomicIsize::new(0)),
            back: CachePadded::new(AtomicIsize::new(0)),
            buffer: CachePadded::new(AtomicPtr::new(buffer)),
            handles: CachePadded::new(AtomicUsize::new(1)),
        });
        Worker {
            inner: NonNull::from(Box::leak(inner)),
            buffer: Cell::new(buffer),
            flavor,
            _marker: PhantomData,
        }
    }

    #[inline]
    fn inner(&self) -> &Inner {
        // SAFETY: `self` is a live handle, so `inner` is allocated (freed by the last one).
        unsafe { self.inner.as_ref() }
    }

    /// A thieves' handle of this deque.
    pub(crate) fn stealer(&self) -> Stealer<T> {
        // Relaxed (as `Arc::clone`): a new handle is made from a live one, which keeps the
        // count above zero; no data is published by the count.
        self.inner().handles.fetch_add(1, Relaxed);
        Stealer {
            inner: self.inner,
            _marker: PhantomData,
        }
    }

    /// Whether the deque is empty (exact for the owner, up to concurrent steals).
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Items in the deque (up to concurrent steals).
    pub(crate) fn len(&self) -> usize {
        let inner = self.inner();
        // Relaxed: `back` is ours; a stale `front` only over-counts by items being stolen.
        let b = inner.back.load(Relaxed);
        let f = inner.front.load(Relaxed);
        b.wrapping_sub(f).max(0) as usize
    }

    /// Pushes `item` at the back.
    #[inline]
    pub(crate) fn push(&self, item: T) {
        let inner = self.inner();
        // Relaxed: only the owner writes `back`.
        let b = inner.back.load(Relaxed);
        // Acquire: pairs with the thieves' CAS on `front`. A thief reads its slot before its
        // CAS; seeing the CAS's value makes that read happen before our write of the same
        // slot one lap later, so the thief cannot read our new item as the old one.
        let f = inner.front.load(Acquire);
        let mut buf = self.buffer.get();
        // SAFETY: `buf` is the current buffer, live while this handle is.
        if b.wrapping_sub(f) >= unsafe { Buffer::cap(buf) } as isize {
            buf = self.grow(f, b);
        }
        // SAFETY: as above; the slot of index `b` is free (`b - f < cap`).
        unsafe { Buffer::at(buf, b) }.write(item.into_words());
        // Release: pairs with the thieves' Acquire load of `back`: the slot we wrote (and a
        // buffer we grew into) is visible to whoever sees the new `back`.
        inner.back.store(b.wrapping_add(1), Release);
    }

    /// Doubles the buffer, copying the items `f..b`. Cold: a deque grows O(log n) times.
    #[cold]
    fn grow(&self, f: isize, b: isize) -> *mut Buffer {
        let old = self.buffer.get();
        // SAFETY: `old` is the current buffer, live while this handle is.
        let cap = unsafe { Buffer::cap(old) };
        let new = Buffer::alloc(cap * 2, old).as_ptr();
        let mut i = f;
        while i != b {
            // SAFETY: both buffers are live; the indices wrap inside each.
            unsafe { Buffer::at(new, i).write(Buffer::at(old, i).read()) };
            i = i.wrapping_add(1);
        }
        // Release: pairs with the thieves' Acquire load of `buffer`: a thief that sees the
        // new buffer sees the copies. (The old one stays valid: see the module doc.)
        self.inner().buffer.store(new, Release);
        self.buffer.set(new);
        new
    }

    /// Pops an item: the newest ([`Flavor::Lifo`]) or the oldest ([`Flavor::Fifo`]).
    #[inline]
    pub(crate) fn pop(&self) -> Option<T> {
        let inner = self.inner();
        // Relaxed, both: a fast exit for an empty deque, with no fence. `back` is ours and
        // `front` only grows, so a stale `front` can only make the deque look fuller.
        let b = inner.back.load(Relaxed);
        let f = inner.front.load(Relaxed);
        if b.wrapping_sub(f) <= 0 {
            return None;
        }
        match self.flavor {
            Flavor::Lifo => self.pop_back(b),
            Flavor::Fifo => self.pop_front(b),
        }
    }

    fn pop_back(&self, b: isize) -> Option<T> {
        let inner = self.inner();
        let b = b.wrapping_sub(1);
        // SeqCst swap, then a SeqCst load of `front`: pairs with the fence in `steal`
        // between its loads of `front` and `back` (store-load, Dekker). Either the thief's
        // `back` load sees this decrement, or our `front` load sees the thief's CAS — never
        // neither, so the thief and we cannot both take index `b` unless both go to the CAS.
        // An RMW and an SC load instead of `store; fence(SeqCst); load`: the same guarantee
        // by C++20's rules for SC operations against an SC fence (README §3 b gives the
        // proof), and cheaper on x86-64 (`xchg` against a store and `lock or`: 5.5 against
        // 9.2 ns here), where this barrier was ~40 % of a join. The swap is also a release
        // (a thief that reads it sees the slots pushed before it: README §3 a).
        inner.back.swap(b, SeqCst);
        // loom treats SC accesses as AcqRel (its README: false alarms), so the model puts
        // an SC fence between them: what C++20 guarantees of this pair, and no more.
        #[cfg(loom)]
        fence(SeqCst);
        let f = inner.front.load(SeqCst);
        let len = b.wrapping_sub(f);
        if len < 0 {
            // Thieves emptied it meanwhile: restore `back`. Release: a thief whose Acquire
            // load of `back` reads this store, not the push's, must still see the slots pushed
            // before it; since C++20 a relaxed store would end the push's release sequence
            // (loom caught it: README §3 a). Free on x86-64, where every store is a release.
            inner.back.store(b.wrapping_add(1), Release);
            return None;
        }
        // SAFETY: the current buffer, live while this handle is.
        let words = unsafe { Buffer::at(self.buffer.get(), b) }.read();
        if len == 0 {
            // The last item: a thief may be taking it too. SeqCst CAS on `front`, the same
            // word and ordering as the thieves' CAS: exactly one of us moves it past `f`.
            let won = inner
                .front
                .compare_exchange(f, f.wrapping_add(1), SeqCst, Relaxed)
                .is_ok();
            // `back = f + 1 = front`, empty either way (Release, as above).
            inner.back.store(b.wrapping_add(1), Release);
            if !won {
                return None;
            }
        }
        // SAFETY: `words` is the slot of index `b`, written by our own `push` of a `T`, and
        // we own the index (no thief's CAS can reach it, see above).
        Some(unsafe { T::from_words(words) })
    }

    fn pop_front(&self, b: isize) -> Option<T> {
        let inner = self.inner();
        // SeqCst read-modify-write: claims index `f` against the thieves' CAS on the same
        // word (like a thief that cannot lose: whoever moves `front` past `f` owns it).
        let f = inner.front.fetch_add(1, SeqCst);
        if b.wrapping_sub(f) <= 0 {
            // Thieves emptied it first: put `front` back. No thief can move `front`
            // meanwhile: `back` (ours, unchanged in this flavour except by our pushes) is at
            // most `f`, so every thief sees the deque empty. Release: a plain store ends the
            // release sequence of the CASes before it, so it must carry their release itself.
            inner.front.store(f, Release);
            return None;
        }
        // SAFETY: the current buffer, live while this handle is; index `f` was pushed by us.
        let words = unsafe { Buffer::at(self.buffer.get(), f) }.read();
        // SAFETY: `words` is the slot of index `f`, which we own after the fetch_add.
        Some(unsafe { T::from_words(words) })
    }
}

impl<T: Item> Drop for Worker<T> {
    fn drop(&mut self) {
        release(self.inner);
    }
}

impl<T: Item> std::fmt::Debug for Worker<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("flavor", &self.flavor)
            .field("len", &self.len())
            .finish()
    }
}

/// The thieves' end of a deque: steal from the front. Shared by any number of threads.
pub(crate) struct Stealer<T: Item> {
    inner: NonNull<Inner>,
    _marker: PhantomData<T>,
}

// SAFETY: every operation of a stealer is atomic on the shared state; items are `Send`.
unsafe impl<T: Item + Send> Send for Stealer<T> {}
// SAFETY: as above: `steal`, `len` and `pages` may run on many threads at once.
unsafe impl<T: Item + Send> Sync for Stealer<T> {}

impl<T: Item> Clone for Stealer<T> {
    fn clone(&self) -> Self {
        // Relaxed: see `Worker::stealer`.
        self.inner().handles.fetch_add(1, Relaxed);
        Stealer {
            inner: self.inner,
            _marker: PhantomData,
        }
    }
}

impl<T: Item> Drop for Stealer<T> {
    fn drop(&mut self) {
        release(self.inner);
    }
}

impl<T: Item> Stealer<T> {
    #[inline]
    fn inner(&self) -> &Inner {
        // SAFETY: `self` is a live handle, so `inner` is allocated (freed by the last one).
        unsafe { self.inner.as_ref() }
    }

    /// Whether the deque looks empty (a hint: no fence; the sleep protocol's re-check has
    /// its own `SeqCst` fence before it calls this, `sleep/README.md` §7).
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Items in the deque (a hint, as [`Stealer::is_empty`]).
    pub(crate) fn len(&self) -> usize {
        let inner = self.inner();
        // Acquire, both: as in `steal`, without the fence (a hint only).
        let f = inner.front.load(Acquire);
        let b = inner.back.load(Acquire);
        b.wrapping_sub(f).max(0) as usize
    }

    /// Takes the oldest item.
    pub(crate) fn steal(&self) -> Steal<T> {
        let inner = self.inner();
        // Acquire: pairs with another thief's (or a FIFO owner's) update of `front`.
        let f = inner.front.load(Acquire);
        // SeqCst fence: pairs with the fence in `pop_back` (see there): we see the owner's
        // decremented `back`, or it sees our CAS.
        fence(SeqCst);
        // Acquire: pairs with `push`'s Release store: the slot of `f` (and the buffer it is
        // in) are visible once `back > f`.
        let b = inner.back.load(Acquire);
        if b.wrapping_sub(f) <= 0 {
            return Steal::Empty;
        }
        // Acquire: pairs with `grow`'s Release store: a newer buffer comes with its copies.
        // Any buffer we load holds index `f` if our CAS below can succeed (README §3).
        let buf = inner.buffer.load(Acquire);
        // SAFETY: buffers live as long as the deque's last handle, and we are one.
        let words = unsafe { Buffer::at(buf, f) }.read();
        // SeqCst CAS (Lê et al.): the one point where thieves and a popping owner agree on
        // who takes index `f`. Relaxed on failure: we only report the lost race.
        if inner
            .front
            .compare_exchange(f, f.wrapping_add(1), SeqCst, Relaxed)
            .is_err()
        {
            return Steal::Retry;
        }
        // SAFETY: `words` is the slot of index `f`, pushed as a `T`; our CAS made it ours, and
        // it could not have been overwritten before our read (`push` acquires `front`).
        Steal::Success(unsafe { T::from_words(words) })
    }

    /// `(address, bytes)` of every page range of the deque: the shared state first, then its
    /// buffers, newest first. Whole pages, each holding nothing but this deque's memory.
    /// The list is a snapshot: the owner may grow the deque right after (new pages are then
    /// first touched by the owner, on its node).
    pub(crate) fn pages(&self) -> Vec<(usize, usize)> {
        let inner = self.inner();
        let mut out = vec![(inner as *const Inner as usize, std::mem::size_of::<Inner>())];
        // Acquire: pairs with `grow`'s Release store: the new buffer's header is visible.
        let mut b = inner.buffer.load(Acquire);
        while !b.is_null() {
            // SAFETY: `b` is the current buffer or one it replaced: all live until the last
            // handle (we are one) drops; headers are immutable once published.
            unsafe {
                out.push(Buffer::pages(b));
                b = Buffer::prev(b);
            }
        }
        out
    }
}

impl<T: Item> std::fmt::Debug for Stealer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stealer").field("len", &self.len()).finish()
    }
}
