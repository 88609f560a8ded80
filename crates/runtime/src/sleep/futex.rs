//! The futex calls a worker blocks and wakes with (all the `unsafe` of the sleep protocol).
//!
//! - A worker's own word is a private futex (`FUTEX_WAIT_PRIVATE` / `FUTEX_WAKE_PRIVATE`).
//! - A suspended worker under a manager also waits on the control page's `wake` word, a
//!   *shared* futex (the page is a `MAP_SHARED` memfd mapping written by the manager, which
//!   `FUTEX_WAKE`s it without the private flag), with `futex_waitv` (Linux ≥ 5.16): one call
//!   that returns when either word changes. Kernels without it answer `ENOSYS`; the first
//!   such answer is remembered ([`waitv_supported`]) and workers then wait on their own word
//!   only (the manager client's thread then wakes them, as before).
//!
//! nix has no futex wrappers, so these are raw `syscall`s. Errors name the call; `EAGAIN`
//! (the word already differs), `EINTR` and `ETIMEDOUT` are not failures for a caller that
//! loops on its own condition, and callers treat every error as "look again".

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

/// A futex call that returned an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{call} failed: {errno}")]
pub(crate) struct FutexError {
    /// The call, with its operation (`futex(FUTEX_WAIT_PRIVATE)`, `futex_waitv`, ...).
    pub(crate) call: &'static str,
    /// What the kernel answered.
    pub(crate) errno: nix::errno::Errno,
}

impl FutexError {
    /// The kernel has no such call (`ENOSYS`): wait on the own word instead.
    pub(crate) fn unsupported(&self) -> bool {
        self.errno == nix::errno::Errno::ENOSYS
    }
}

fn check(ret: libc::c_long, call: &'static str) -> Result<libc::c_long, FutexError> {
    if ret < 0 {
        Err(FutexError {
            call,
            errno: nix::errno::Errno::last(),
        })
    } else {
        Ok(ret)
    }
}

/// Block while `*word == expected` (a private futex: the word is in this process's memory),
/// until a [`wake_private`] on it, a signal, or a spurious return.
pub(crate) fn wait_private(word: &AtomicU32, expected: u32) -> Result<(), FutexError> {
    // SAFETY: `word` is a valid, aligned u32 that outlives the call; a null timeout means
    // "no timeout"; FUTEX_WAIT reads the word and touches nothing else.
    let r = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            std::ptr::null::<libc::timespec>(),
        )
    };
    check(r, "futex(FUTEX_WAIT_PRIVATE)").map(drop)
}

/// Wake up to `n` threads blocked on `word` by [`wait_private`] or [`waitv`] (as the own word).
pub(crate) fn wake_private(word: &AtomicU32, n: i32) -> Result<(), FutexError> {
    // SAFETY: `word` is a valid, aligned u32; FUTEX_WAKE does not dereference anything else.
    let r = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            n,
        )
    };
    check(r, "futex(FUTEX_WAKE_PRIVATE)").map(drop)
}

/// One entry of `futex_waitv`'s array (`struct futex_waitv`, include/uapi/linux/futex.h).
#[repr(C)]
struct FutexWaitv {
    val: u64,
    uaddr: u64,
    flags: u32,
    reserved: u32,
}

/// `FUTEX2_SIZE_U32`.
const FUTEX2_SIZE_U32: u32 = 0x02;
/// `FUTEX2_PRIVATE` (the same bit as `FUTEX_PRIVATE_FLAG`).
const FUTEX2_PRIVATE: u32 = 128;

/// Block while `*own == own_seen` (private) and `*shared == shared_seen` (a shared futex, e.g.
/// in a `MAP_SHARED` page another process wakes), until either is woken or differs.
/// `ENOSYS` (a kernel older than 5.16) is remembered: see [`waitv_supported`].
pub(crate) fn waitv(
    own: &AtomicU32,
    own_seen: u32,
    shared: &AtomicU32,
    shared_seen: u32,
) -> Result<(), FutexError> {
    let waiters = [
        FutexWaitv {
            val: u64::from(own_seen),
            uaddr: own.as_ptr() as u64,
            flags: FUTEX2_SIZE_U32 | FUTEX2_PRIVATE,
            reserved: 0,
        },
        FutexWaitv {
            val: u64::from(shared_seen),
            uaddr: shared.as_ptr() as u64,
            flags: FUTEX2_SIZE_U32,
            reserved: 0,
        },
    ];
    // SAFETY: `waiters` is a valid array of 2 `struct futex_waitv` (repr(C), reserved zero)
    // whose addresses are valid, aligned u32s that outlive the call; flags 0 and a null
    // timeout (no timeout; the clock id is then ignored).
    let r = unsafe {
        libc::syscall(
            libc::SYS_futex_waitv,
            waiters.as_ptr(),
            waiters.len() as libc::c_uint,
            0 as libc::c_uint,
            std::ptr::null::<libc::timespec>(),
            libc::CLOCK_MONOTONIC,
        )
    };
    let r = check(r, "futex_waitv");
    if let Err(FutexError {
        errno: nix::errno::Errno::ENOSYS,
        ..
    }) = r
    {
        NO_WAITV.store(true, Ordering::Relaxed);
    }
    r.map(drop)
}

/// Set once `futex_waitv` answered `ENOSYS`.
static NO_WAITV: AtomicBool = AtomicBool::new(false);

/// Whether [`waitv`] may work here: false once the kernel answered `ENOSYS`.
pub(crate) fn waitv_supported() -> bool {
    // Relaxed: a stale `true` costs one more ENOSYS answer, which the caller survives.
    !NO_WAITV.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn a_changed_word_returns_at_once_and_names_the_call() {
        let w = AtomicU32::new(1);
        let e = wait_private(&w, 0).unwrap_err();
        assert_eq!(e.errno, nix::errno::Errno::EAGAIN);
        assert!(e
            .to_string()
            .starts_with("futex(FUTEX_WAIT_PRIVATE) failed"));
        let other = AtomicU32::new(0);
        if waitv_supported() {
            let e = waitv(&w, 0, &other, 0).unwrap_err();
            assert_eq!(
                (e.call, e.errno),
                ("futex_waitv", nix::errno::Errno::EAGAIN)
            );
        }
    }

    /// Either word wakes a `waitv`: the private one with a private wake, the shared one with
    /// a shared (non-private) wake, as the manager gives the control page's word.
    #[test]
    fn waitv_returns_on_either_word() {
        if !waitv_supported() {
            return;
        }
        for shared_side in [false, true] {
            let words = Arc::new((AtomicU32::new(0), AtomicU32::new(0)));
            let t = {
                let words = words.clone();
                std::thread::spawn(move || {
                    // Loop on the condition: a return may be spurious.
                    while words.0.load(Ordering::SeqCst) == 0 && words.1.load(Ordering::SeqCst) == 0
                    {
                        let _ = waitv(&words.0, 0, &words.1, 0);
                    }
                })
            };
            std::thread::sleep(Duration::from_millis(10));
            if shared_side {
                words.1.store(1, Ordering::SeqCst);
                // SAFETY: a valid aligned u32; a shared FUTEX_WAKE as the manager sends it.
                unsafe { libc::syscall(libc::SYS_futex, words.1.as_ptr(), libc::FUTEX_WAKE, 1) };
            } else {
                words.0.store(1, Ordering::SeqCst);
                wake_private(&words.0, 1).unwrap();
            }
            t.join().unwrap();
        }
    }
}
