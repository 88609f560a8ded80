//! The session's liveness watch: a thread blocked in `poll` on the manager's socket, so that
//! the manager's death (EOF) or an error report ends the session at once, not at the client's
//! next tick. The tick is slow while the pool asks for all its workers or is suspended whole
//! (100 ms), and a killed manager's programs must be standalone well within that (issue 12's
//! chaos test: 100 ms); this keeps the two apart.
//!
//! After the welcome the manager only ever writes an error report before it closes, so any
//! readiness ends the session: the thread sets [`Liveness::take_spoke`]'s flag, wakes the
//! client thread from whichever wait it is in (`wake`), and repeats the wake until the session
//! is over (a wake that lands between the client's last check and its wait is lost). The
//! session's end shuts the socket down, which makes `poll` return, and the thread exits.

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How often the wake is repeated until the client thread has ended the session, and for how
/// long at most (the client ends it at its first look; this only bounds a thread that could
/// otherwise outlive a stuck session).
const REWAKE: Duration = Duration::from_millis(2);
const REWAKES: u32 = 2500;

#[derive(Debug, Default)]
struct Flags {
    /// The socket became readable (an error report or EOF).
    spoke: AtomicBool,
    /// The session is over: stop watching.
    done: AtomicBool,
}

/// The watch of one session; dropping it stops the thread (with the socket's shutdown).
#[derive(Debug)]
pub(crate) struct Liveness {
    flags: Arc<Flags>,
}

impl Liveness {
    /// Watch `stream` (a clone of the session's socket) on a thread of its own; `start` runs
    /// first on that thread (the session pins it to the allocation); `wake` must get the
    /// client thread out of its wait.
    pub(crate) fn spawn(
        stream: &UnixStream,
        start: impl FnOnce() + Send + 'static,
        wake: impl Fn() + Send + 'static,
    ) -> std::io::Result<Liveness> {
        let sock = stream.try_clone()?;
        let flags = Arc::new(Flags::default());
        let f = flags.clone();
        std::thread::Builder::new()
            .name("partita-client-live".into())
            .stack_size(64 * 1024)
            .spawn(move || {
                start();
                watch(&sock, &f, &wake);
            })?;
        Ok(Liveness { flags })
    }

    /// Whether the manager spoke or hung up since the last call.
    pub(crate) fn take_spoke(&self) -> bool {
        self.flags.spoke.swap(false, Ordering::AcqRel)
    }
}

impl Drop for Liveness {
    fn drop(&mut self) {
        // The session's guard shuts the socket down, which ends the thread's poll.
        self.flags.done.store(true, Ordering::Release);
    }
}

fn watch(sock: &UnixStream, flags: &Flags, wake: &dyn Fn()) {
    // EOF reads as POLLIN; a hang-up is reported whatever is asked.
    let events = PollFlags::POLLIN;
    loop {
        let mut fds = [PollFd::new(sock.as_fd(), events)];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) => break,
            Err(nix::errno::Errno::EINTR) => continue,
            // Cannot watch (ENOMEM): the client's tick still reads the socket.
            Err(_) => return,
        }
    }
    if flags.done.load(Ordering::Acquire) {
        return;
    }
    flags.spoke.store(true, Ordering::Release);
    for _ in 0..REWAKES {
        if flags.done.load(Ordering::Acquire) {
            return;
        }
        wake();
        std::thread::sleep(REWAKE);
    }
}
