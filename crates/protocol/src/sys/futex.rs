//! The futex calls (`futex` `FUTEX_WAIT` / `FUTEX_WAKE`, `futex_waitv`): the one set of
//! wrappers of the workspace. The control page's `wake` word is a *shared* futex (the page is
//! a `MAP_SHARED` memfd mapping two processes see: the manager wakes it, the client and a
//! suspended worker wait on it); the runtime's workers block on a *private* word of their own,
//! and a suspended worker waits on both at once with `futex_waitv` (Linux ≥ 5.16; older
//! kernels answer `ENOSYS`).
//!
//! nix has no futex wrappers, so these are raw `syscall`s. Errors name the call; `EAGAIN`
//! (the word already differs), `EINTR` and `ETIMEDOUT` are not failures for a caller that
//! loops on its own condition, which every caller does: a return means "look again".

use std::sync::atomic::AtomicU32;
use std::time::Duration;

/// Who may wake a futex word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FutexScope {
    /// Threads of this process only (`FUTEX_PRIVATE_FLAG`: the kernel skips the shared
    /// mapping lookup).
    Private,
    /// Any process that maps the word (the control page's `wake`).
    Shared,
}

impl FutexScope {
    fn flag(self) -> libc::c_int {
        match self {
            FutexScope::Private => libc::FUTEX_PRIVATE_FLAG,
            FutexScope::Shared => 0,
        }
    }
}

/// A futex call that returned an error.
///
/// ```
/// use partita_protocol::sys::{futex_wait, FutexScope};
/// let w = std::sync::atomic::AtomicU32::new(1);
/// let e = futex_wait(&w, 0, FutexScope::Private, None).unwrap_err();
/// assert_eq!(e.errno, libc::EAGAIN);
/// assert!(e.to_string().starts_with("futex(FUTEX_WAIT_PRIVATE) failed: "), "{e}");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{call} failed: {}", std::io::Error::from_raw_os_error(*.errno))]
pub struct FutexError {
    /// The call, with its operation (`futex(FUTEX_WAIT_PRIVATE)`, `futex_waitv`, ...).
    pub call: &'static str,
    /// What the kernel answered (`errno`).
    pub errno: i32,
}

impl FutexError {
    /// The kernel has no such call (`ENOSYS`: `futex_waitv` before Linux 5.16).
    pub fn unsupported(&self) -> bool {
        self.errno == libc::ENOSYS
    }
}

fn check(ret: libc::c_long, call: &'static str) -> Result<libc::c_long, FutexError> {
    if ret < 0 {
        Err(FutexError {
            call,
            errno: std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EINVAL),
        })
    } else {
        Ok(ret)
    }
}

/// Block while `*word == expected`, until a [`futex_wake`] of the same scope on it, a signal,
/// `timeout` (`None`: none), or a spurious return.
pub fn futex_wait(
    word: &AtomicU32,
    expected: u32,
    scope: FutexScope,
    timeout: Option<Duration>,
) -> Result<(), FutexError> {
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: t.subsec_nanos() as libc::c_long,
    });
    let ts_ptr = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `word` is a valid, aligned u32 that outlives the call; `ts_ptr` is null (no
    // timeout) or points to `ts`, alive until the call returns; FUTEX_WAIT reads the word
    // and touches nothing else.
    let r = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | scope.flag(),
            expected,
            ts_ptr,
        )
    };
    let call = match scope {
        FutexScope::Private => "futex(FUTEX_WAIT_PRIVATE)",
        FutexScope::Shared => "futex(FUTEX_WAIT)",
    };
    check(r, call).map(drop)
}

/// Wake up to `n` threads blocked on `word` by a [`futex_wait`] of the same scope (or a
/// [`futex_waitv`] whose entry for `word` has that scope).
pub fn futex_wake(word: &AtomicU32, n: i32, scope: FutexScope) -> Result<(), FutexError> {
    // SAFETY: `word` is a valid, aligned u32; FUTEX_WAKE does not dereference anything else.
    let r = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | scope.flag(),
            n,
        )
    };
    let call = match scope {
        FutexScope::Private => "futex(FUTEX_WAKE_PRIVATE)",
        FutexScope::Shared => "futex(FUTEX_WAKE)",
    };
    check(r, call).map(drop)
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

/// Block while `*own == own_seen` (a private word) and `*shared == shared_seen` (a shared
/// word, e.g. in a `MAP_SHARED` page another process wakes), until either is woken or
/// differs. `ENOSYS` ([`FutexError::unsupported`]) on kernels older than 5.16.
pub fn futex_waitv(
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
    check(r, "futex_waitv").map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;
    use std::sync::Arc;

    #[test]
    fn a_changed_word_returns_at_once_and_names_the_call() {
        let w = AtomicU32::new(1);
        for (scope, call) in [
            (FutexScope::Private, "futex(FUTEX_WAIT_PRIVATE)"),
            (FutexScope::Shared, "futex(FUTEX_WAIT)"),
        ] {
            let e = futex_wait(&w, 0, scope, None).unwrap_err();
            assert_eq!((e.call, e.errno), (call, libc::EAGAIN));
        }
        let other = AtomicU32::new(0);
        match futex_waitv(&w, 0, &other, 0) {
            Err(e) if e.unsupported() => {}
            r => assert_eq!(r.unwrap_err().errno, libc::EAGAIN),
        }
    }

    #[test]
    fn an_unchanged_word_waits_for_the_timeout() {
        let w = AtomicU32::new(0);
        let t = std::time::Instant::now();
        let e = futex_wait(&w, 0, FutexScope::Shared, Some(Duration::from_millis(20)));
        assert!(t.elapsed() >= Duration::from_millis(20));
        assert_eq!(e.unwrap_err().errno, libc::ETIMEDOUT);
    }

    /// Either word wakes a `futex_waitv`: the private one with a private wake, the shared one
    /// with a shared wake, as the manager gives the control page's word.
    #[test]
    fn waitv_returns_on_either_word() {
        let probe = AtomicU32::new(1);
        if futex_waitv(&probe, 0, &probe, 0).is_err_and(|e| e.unsupported()) {
            return;
        }
        for (side, scope) in [(0, FutexScope::Private), (1, FutexScope::Shared)] {
            let words = Arc::new([AtomicU32::new(0), AtomicU32::new(0)]);
            let t = {
                let words = words.clone();
                std::thread::spawn(move || {
                    // Loop on the condition: a return may be spurious.
                    while words.iter().all(|w| w.load(Ordering::SeqCst) == 0) {
                        let _ = futex_waitv(&words[0], 0, &words[1], 0);
                    }
                })
            };
            std::thread::sleep(Duration::from_millis(10));
            words[side].store(1, Ordering::SeqCst);
            futex_wake(&words[side], 1, scope).unwrap();
            t.join().unwrap();
        }
    }
}
