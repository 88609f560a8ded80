//! One value alone in its page(s): per-worker state that must be movable per worker (the
//! counters slots, `Registry::counters`). On Linux the NUMA follower moves a worker's slot
//! with its home (`numa/home.rs`); on every platform no two workers' counters share a page
//! or a cache line.

use std::ops::{Deref, DerefMut};

/// One value alone in its page(s). 4096 is the x86-64 page; on a machine with larger pages,
/// slots share a page but still never a cache line.
#[repr(C, align(4096))]
#[derive(Default)]
pub(crate) struct PageAligned<T>(pub(crate) T);

impl<T> Deref for PageAligned<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> DerefMut for PageAligned<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_aligned_slots_do_not_share_pages() {
        let slots: Box<[PageAligned<u64>]> = (0..3).map(|_| PageAligned::default()).collect();
        for w in slots.windows(2) {
            let (a, b) = (&*w[0] as *const u64 as usize, &*w[1] as *const u64 as usize);
            assert!(b - a >= 4096 && a % 4096 == 0);
        }
    }
}
