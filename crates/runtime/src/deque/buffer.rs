//! A deque's ring buffer: a power-of-two array of two-word slots in page-aligned memory of its
//! own, so that the pages it covers hold nothing else and can be placed and moved with its
//! worker (`numa/home.rs`).
//!
//! Layout of one allocation: `[Buffer header | slot 0 | slot 1 | … | slot cap-1]`, rounded up
//! to whole pages. The header (capacity, the buffer this one replaced) is written once, before
//! the buffer is published, and never changes, so any handle of the deque may read it.
//!
//! Slots are atomics (relaxed), not `UnsafeCell<T>`: a thief may read a slot that the owner is
//! overwriting after the ring wrapped around (it then loses its CAS on `front` and discards
//! what it read). With atomic words that read is a race on atomics, defined behaviour (and
//! what Lê et al. 2013 prescribe), instead of a data race that Miri and loom would rightly
//! reject; on x86-64 a relaxed load or store is a plain `mov`.

use std::alloc::{self, Layout};
use std::ptr::{self, NonNull};

use std::sync::atomic::Ordering;

use crate::sync::AtomicPtr;

/// The page granularity of the allocations (the x86-64 page; on machines with larger pages a
/// buffer shares its page only with its own deque's other memory or its allocator's).
pub(crate) const PAGE: usize = 4096;

/// One item: two machine words, each an atomic pointer so that pointers keep their
/// provenance.
pub(super) struct Slot([AtomicPtr<()>; 2]);

impl Slot {
    fn empty() -> Slot {
        Slot([
            AtomicPtr::new(ptr::null_mut()),
            AtomicPtr::new(ptr::null_mut()),
        ])
    }

    /// Relaxed: publication is `back`'s release store (push) or `buffer`'s (growth).
    #[inline]
    pub(super) fn write(&self, w: [*mut (); 2]) {
        self.0[0].store(w[0], Ordering::Relaxed);
        self.0[1].store(w[1], Ordering::Relaxed);
    }

    /// Relaxed: the reader acquired `back` or `buffer` first. A thief's read may be torn by an
    /// owner overwriting the slot; such a thief always fails its CAS and drops the words.
    #[inline]
    pub(super) fn read(&self) -> [*mut (); 2] {
        [
            self.0[0].load(Ordering::Relaxed),
            self.0[1].load(Ordering::Relaxed),
        ]
    }
}

/// The header of one buffer allocation; the slots follow it.
#[repr(C)]
pub(super) struct Buffer {
    /// Number of slots, a power of two.
    cap: usize,
    /// The buffer this one replaced when the deque grew (null for the first). Old buffers are
    /// kept until the deque is dropped (see the module doc of `deque`).
    prev: *mut Buffer,
}

impl Buffer {
    /// Byte offset of slot 0 from the header.
    const SLOTS_AT: usize = {
        let h = std::mem::size_of::<Buffer>();
        let a = std::mem::align_of::<Slot>();
        h.div_ceil(a) * a
    };

    fn layout(cap: usize) -> Layout {
        let bytes = Self::SLOTS_AT + cap * std::mem::size_of::<Slot>();
        // A capacity this large (2^58 slots) cannot be reached: growth would have failed to
        // allocate long before.
        Layout::from_size_align(bytes.div_ceil(PAGE) * PAGE, PAGE)
            .expect("deque buffer size overflows a Layout")
    }

    /// Allocates a buffer of `cap` (a power of two) empty slots, linked to `prev`. Every slot
    /// is written here, so the calling thread (the deque's owner) touches its pages first and
    /// the kernel places them on that thread's node.
    pub(super) fn alloc(cap: usize, prev: *mut Buffer) -> NonNull<Buffer> {
        debug_assert!(cap.is_power_of_two());
        let layout = Self::layout(cap);
        // SAFETY: the layout has a non-zero size (at least one page).
        let raw = unsafe { alloc::alloc(layout) }.cast::<Buffer>();
        let Some(b) = NonNull::new(raw) else {
            alloc::handle_alloc_error(layout)
        };
        // SAFETY: `b` is a fresh allocation of `layout`, aligned to a page (enough for the
        // header and the slots), large enough for the header at 0 and `cap` slots from
        // SLOTS_AT; we write each once before anyone else can see the pointer.
        unsafe {
            b.as_ptr().write(Buffer { cap, prev });
            let slots = Self::slots(b.as_ptr());
            for i in 0..cap {
                slots.add(i).write(Slot::empty());
            }
        }
        b
    }

    /// Frees `b` and, through its `prev` links, every buffer it replaced.
    ///
    /// # Safety
    /// `b` came from [`Buffer::alloc`], no handle of the deque is left, and no buffer of the
    /// chain is freed twice.
    pub(super) unsafe fn free_chain(mut b: *mut Buffer) {
        while !b.is_null() {
            // SAFETY: by the contract, `b` is a live allocation of `alloc` that nobody else
            // uses; its header is initialised and its `cap` slots too.
            unsafe {
                let Buffer { cap, prev } = b.read();
                let slots = Self::slots(b);
                for i in 0..cap {
                    ptr::drop_in_place(slots.add(i));
                }
                alloc::dealloc(b.cast(), Self::layout(cap));
                b = prev;
            }
        }
    }

    fn slots(b: *mut Buffer) -> *mut Slot {
        b.cast::<u8>().wrapping_add(Self::SLOTS_AT).cast()
    }

    /// Capacity of the live buffer `b`.
    ///
    /// # Safety
    /// `b` came from [`Buffer::alloc`] and is not freed (the deque has a handle left).
    #[inline]
    pub(super) unsafe fn cap(b: *const Buffer) -> usize {
        // SAFETY: by the contract the header is initialised and immutable.
        unsafe { (*b).cap }
    }

    /// The buffer `b` replaced, or null.
    ///
    /// # Safety
    /// As [`Buffer::cap`].
    pub(super) unsafe fn prev(b: *const Buffer) -> *mut Buffer {
        // SAFETY: by the contract the header is initialised and immutable.
        unsafe { (*b).prev }
    }

    /// The slot of logical index `index` (wrapped around the ring).
    ///
    /// # Safety
    /// As [`Buffer::cap`]; the returned reference must not outlive the deque's last handle.
    #[inline]
    pub(super) unsafe fn at<'a>(b: *const Buffer, index: isize) -> &'a Slot {
        // SAFETY: by the contract `b` is live with `cap` initialised slots after the header;
        // the mask keeps the offset below `cap` (a power of two).
        unsafe {
            let cap = (*b).cap;
            &*Self::slots(b.cast_mut()).add(index as usize & (cap - 1))
        }
    }

    /// `(address, bytes)` of the allocation holding `b`: whole pages.
    ///
    /// # Safety
    /// As [`Buffer::cap`].
    pub(super) unsafe fn pages(b: *const Buffer) -> (usize, usize) {
        // SAFETY: forwarded.
        let cap = unsafe { Self::cap(b) };
        (b as usize, Self::layout(cap).size())
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_whole_pages_of_their_own() {
        for cap in [1usize, 2, 128, 256, 1 << 12] {
            let b = Buffer::alloc(cap, ptr::null_mut());
            // SAFETY: `b` is live until `free_chain` below.
            let (addr, len) = unsafe { Buffer::pages(b.as_ptr()) };
            assert_eq!(addr % PAGE, 0, "cap {cap}");
            assert_eq!(len % PAGE, 0, "cap {cap}");
            assert!(len >= Buffer::SLOTS_AT + cap * 16, "cap {cap}");
            // SAFETY: as above; the last slot is inside the allocation.
            let last = unsafe { Buffer::at(b.as_ptr(), cap as isize - 1) } as *const Slot as usize;
            assert!(last + std::mem::size_of::<Slot>() <= addr + len);
            // SAFETY: allocated above, freed once.
            unsafe { Buffer::free_chain(b.as_ptr()) };
        }
    }

    #[test]
    fn slots_wrap_around_the_ring() {
        let b = Buffer::alloc(4, ptr::null_mut());
        // SAFETY: `b` is live until `free_chain` below.
        unsafe {
            let w = [
                ptr::without_provenance_mut(7),
                ptr::without_provenance_mut(9),
            ];
            Buffer::at(b.as_ptr(), 5).write(w);
            assert_eq!(Buffer::at(b.as_ptr(), 1).read(), w);
            assert_eq!(Buffer::at(b.as_ptr(), -3).read(), w);
            Buffer::free_chain(b.as_ptr());
        }
    }

    #[test]
    fn the_chain_frees_every_predecessor() {
        let a = Buffer::alloc(2, ptr::null_mut());
        let b = Buffer::alloc(4, a.as_ptr());
        let c = Buffer::alloc(8, b.as_ptr());
        // SAFETY: all three are live; `free_chain` frees each once (Miri checks no leak).
        unsafe {
            assert_eq!(Buffer::prev(c.as_ptr()), b.as_ptr());
            assert_eq!(Buffer::prev(a.as_ptr()), ptr::null_mut());
            Buffer::free_chain(c.as_ptr());
        }
    }
}
