//! A worker's wake-up word: what it blocks on while sleeping or suspended (README §1, §7).
//!
//! The pattern of a futex-based condition variable, made explicit so that a suspended worker
//! can block on its own word and the manager's control page word at once: the waiter reads
//! the sequence number [`Event::seq`] while it holds its state mutex and has found no reason
//! to stay up, unlocks, and blocks while the number is unchanged ([`Event::wait`]); a waker
//! changes the state under that mutex, then [`Event::notify`] bumps the number and wakes.
//! A wake that comes after the waiter's read changes the number, so the wait does not block;
//! one that comes before it changed the state, which the waiter saw under the mutex.
//!
//! Under loom the word is a loom mutex and condition variable (loom models no futex and no
//! second process), and a page word is never given.

#[cfg(not(loom))]
use std::sync::atomic::Ordering;

/// A second word to wait on: the control page's `wake` word and the value it had when the
/// waiter last looked at the page.
pub(crate) struct PageWord<'a> {
    pub(crate) word: &'a std::sync::atomic::AtomicU32,
    pub(crate) seen: u32,
}

/// A worker's wake-up word.
#[cfg(not(loom))]
#[derive(Default)]
pub(crate) struct Event {
    seq: std::sync::atomic::AtomicU32,
}

#[cfg(not(loom))]
impl Event {
    /// The current sequence number (read with the worker's state mutex held).
    pub(crate) fn seq(&self) -> u32 {
        // Relaxed: the futex compares the word itself; the state is ordered by the mutex.
        self.seq.load(Ordering::Relaxed)
    }

    /// Wake the waiter (the state change it is waiting for is already made).
    pub(crate) fn notify(&self) {
        self.seq.fetch_add(1, Ordering::Release);
        // A failed wake (impossible for a valid word) leaves the waiter to the next one; the
        // state still carries this one.
        let _ = super::futex::wake_private(&self.seq, 1);
    }

    /// Block while the number is still `seen` and, if `page` is given, the page word still
    /// holds its `seen` value. Returns early on a signal or spuriously: callers loop on their
    /// state. Without `futex_waitv` the page word is not watched.
    pub(crate) fn wait(&self, seen: u32, page: Option<PageWord<'_>>) {
        if let Some(p) = page {
            if super::futex::waitv_supported() {
                match super::futex::waitv(&self.seq, seen, p.word, p.seen) {
                    Err(e) if e.unsupported() => {}
                    _ => return,
                }
            }
        }
        let _ = super::futex::wait_private(&self.seq, seen);
    }
}

/// A worker's wake-up word (loom: a mutex and a condition variable).
#[cfg(loom)]
#[derive(Default)]
pub(crate) struct Event {
    seq: loom::sync::Mutex<u32>,
    cond: loom::sync::Condvar,
}

#[cfg(loom)]
impl Event {
    pub(crate) fn seq(&self) -> u32 {
        *crate::sync::lock(&self.seq)
    }

    pub(crate) fn notify(&self) {
        *crate::sync::lock(&self.seq) += 1;
        self.cond.notify_all();
    }

    pub(crate) fn wait(&self, seen: u32, page: Option<PageWord<'_>>) {
        debug_assert!(page.is_none(), "loom models no control page");
        let mut g = crate::sync::lock(&self.seq);
        while *g == seen {
            g = crate::sync::wait(&self.cond, g);
        }
    }
}
