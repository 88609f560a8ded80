//! The crate's `unsafe`: `FIONREAD`, clearing close-on-exec in a forked child, and a signal
//! handler that only records the signal.

use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::sync::atomic::{AtomicI32, Ordering};

/// Bytes readable from a pipe or fifo without blocking.
pub(crate) fn fionread(fd: BorrowedFd<'_>) -> nix::Result<u32> {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one c_int through the pointer, which points to a live local.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), libc::FIONREAD, &mut n as *mut libc::c_int) };
    if r < 0 {
        return Err(nix::errno::Errno::last());
    }
    Ok(n.max(0) as u32)
}

/// Let `fds` survive `exec` (to be called in the child between fork and exec).
///
/// # Safety
/// Only async-signal-safe calls (`fcntl`) are made, as `pre_exec` requires.
pub(crate) fn keep_across_exec(fds: &[RawFd]) -> std::io::Result<()> {
    for &fd in fds {
        // SAFETY: fcntl on an fd number has no memory effects; an invalid fd returns EBADF.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
        if flags < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: as above.
        if unsafe { libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Last termination signal received (0: none).
static PENDING: AtomicI32 = AtomicI32::new(0);

extern "C" fn record(sig: libc::c_int) {
    PENDING.store(sig, Ordering::Relaxed);
}

/// While the command runs: SIGINT and SIGQUIT (sent by the terminal to the whole foreground
/// group, so the command gets them too) are ignored here; SIGTERM and SIGHUP are recorded for
/// the server to forward, so it outlives the command and cleans up.
pub(crate) fn catch_termination() -> nix::Result<()> {
    use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
    let ignore = SigAction::new(SigHandler::SigIgn, SaFlags::empty(), SigSet::empty());
    let rec = SigAction::new(
        SigHandler::Handler(record),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for (sig, act) in [
        (Signal::SIGINT, &ignore),
        (Signal::SIGQUIT, &ignore),
        (Signal::SIGTERM, &rec),
        (Signal::SIGHUP, &rec),
    ] {
        // SAFETY: the handler only stores into an atomic (async-signal-safe); SIG_IGN is safe.
        unsafe { sigaction(sig, act) }?;
    }
    Ok(())
}

/// Take the recorded termination signal, if any.
pub(crate) fn take_pending_signal() -> Option<i32> {
    match PENDING.swap(0, Ordering::Relaxed) {
        0 => None,
        s => Some(s),
    }
}
