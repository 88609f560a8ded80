//! The portable build's futex: the same calls as `futex.rs` (the Linux syscalls), emulated
//! with std's `Mutex` and `Condvar` so that the sleep protocol (`event.rs`) has one definition
//! everywhere. A word's waiters wait on one of [`BUCKETS`] condition variables chosen by the
//! word's address: [`wait_private`] re-checks the word under the bucket's mutex before it
//! blocks, and [`wake_private`] takes that mutex before it notifies, so a wake that follows
//! the change of the word cannot fall between a waiter's check and its wait. Unrelated words
//! sharing a bucket only cause spurious returns, which every caller loops on anyway.
//!
//! There is no control page to watch (the manager client is Linux-only), so `futex_waitv`
//! does not exist here: [`waitv_supported`] is false and [`waitv`] answers "unsupported".

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};

/// Number of condition variables words are spread over.
const BUCKETS: usize = 64;

struct Bucket {
    lock: Mutex<()>,
    cond: Condvar,
}

static TABLE: [Bucket; BUCKETS] = [const {
    Bucket {
        lock: Mutex::new(()),
        cond: Condvar::new(),
    }
}; BUCKETS];

fn bucket(word: &AtomicU32) -> &'static Bucket {
    // Words are 4-byte aligned and the workers' words are cache-padded: drop the low bits.
    &TABLE[(word.as_ptr() as usize >> 6) % BUCKETS]
}

fn lock(b: &Bucket) -> MutexGuard<'_, ()> {
    // The mutex guards no data: a poisoned one is as good as any.
    b.lock.lock().unwrap_or_else(|p| p.into_inner())
}

/// A futex call that returned an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{call} failed: {why}")]
pub(crate) struct FutexError {
    /// The call.
    pub(crate) call: &'static str,
    /// Why.
    why: &'static str,
}

impl FutexError {
    /// The call does not exist here (`futex_waitv`): wait on the own word instead.
    pub(crate) fn unsupported(&self) -> bool {
        self.why == UNSUPPORTED
    }
}

const UNSUPPORTED: &str = "not supported on this platform";

/// Block while `*word == expected`, until a [`wake_private`] on it or a spurious return.
/// `Err` (as `EAGAIN` on Linux) when the word already differs.
pub(crate) fn wait_private(word: &AtomicU32, expected: u32) -> Result<(), FutexError> {
    let b = bucket(word);
    let g = lock(b);
    // Relaxed, as the kernel's compare: the caller's state is ordered by its own mutex.
    if word.load(Ordering::Relaxed) != expected {
        return Err(FutexError {
            call: "futex wait",
            why: "the word changed",
        });
    }
    drop(b.cond.wait(g).unwrap_or_else(|p| p.into_inner()));
    Ok(())
}

/// Wake the threads blocked on `word` by [`wait_private`] (all of them: a bucket is shared,
/// and a woken thread that was not meant re-checks and waits again).
pub(crate) fn wake_private(word: &AtomicU32, _n: i32) -> Result<(), FutexError> {
    let b = bucket(word);
    drop(lock(b));
    b.cond.notify_all();
    Ok(())
}

/// `futex_waitv` (Linux ≥ 5.16): not here.
pub(crate) fn waitv(
    _own: &AtomicU32,
    _own_seen: u32,
    _shared: &AtomicU32,
    _shared_seen: u32,
) -> Result<(), FutexError> {
    Err(FutexError {
        call: "futex_waitv",
        why: UNSUPPORTED,
    })
}

/// Whether [`waitv`] may work here: never.
pub(crate) fn waitv_supported() -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A waker that changes the word and wakes always ends the wait, however the two
    /// threads interleave (the waiter loops on the word, as `event.rs` does).
    #[test]
    fn a_wake_after_the_change_is_never_lost() {
        for _ in 0..200 {
            let w = Arc::new(AtomicU32::new(0));
            let t = {
                let w = w.clone();
                std::thread::spawn(move || {
                    while w.load(Ordering::Acquire) == 0 {
                        let _ = wait_private(&w, 0);
                    }
                })
            };
            w.store(1, Ordering::Release);
            wake_private(&w, 1).unwrap();
            t.join().unwrap();
        }
    }
}
