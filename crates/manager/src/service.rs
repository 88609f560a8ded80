//! The manager as a systemd service: the listening socket handed over by socket activation
//! (`LISTEN_FDS`/`LISTEN_PID`, from `partita.socket`) or bound by the manager itself,
//! readiness (`READY=1` once the socket listens and the allocation loop runs) and the
//! watchdog (`WATCHDOG=1` from the reallocation rounds), through the `sd-notify` crate.
//! Outside systemd (no `NOTIFY_SOCKET`, no `LISTEN_FDS`) all of it is a no-op.

use crate::Error;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The socket the manager serves and who owns its file.
#[derive(Debug)]
pub(crate) struct Listening {
    /// Listening, non-blocking.
    pub listener: UnixListener,
    /// Its path (for the log and, when the manager bound it, removal at shutdown).
    pub path: PathBuf,
    /// Handed over by systemd: the file is the socket unit's, left in place at shutdown so
    /// that connections made while the manager restarts wait in its backlog.
    pub activated: bool,
    /// Tell systemd `READY=1` / `STOPPING=1` (only `partita serve` does).
    pub notify: bool,
}

impl Listening {
    /// A socket the manager bound itself (removed at shutdown), without notifications.
    pub(crate) fn bound(listener: UnixListener, path: PathBuf) -> Listening {
        Listening {
            listener,
            path,
            activated: false,
            notify: false,
        }
    }
}

/// The descriptors systemd passed (`LISTEN_FDS`, for this process per `LISTEN_PID`). Taken
/// before the manager starts any thread: taking them unsets those variables, which is sound
/// only while the process is single-threaded.
pub(crate) fn passed() -> Result<Vec<RawFd>, Error> {
    Ok(sd_notify::listen_fds()
        .map_err(|source| Error::Io {
            context: "read LISTEN_FDS/LISTEN_PID (socket activation)".into(),
            source,
        })?
        .collect())
}

/// The socket for `partita serve`: the one systemd passed (`fds`, from [`passed`]) when
/// there is one, else `socket` bound here (0660 and group `partita` when `system`).
pub(crate) fn listen(fds: &[RawFd], socket: &Path, system: bool) -> Result<Listening, Error> {
    let Some(&fd) = fds.first() else {
        let listener = crate::daemon::bind(socket, system)?;
        if system {
            crate::chgrp_partita(socket);
        }
        let mut l = Listening::bound(listener, socket.to_path_buf());
        l.notify = true;
        return Ok(l);
    };
    if fds.len() > 1 {
        tracing::warn!(
            count = fds.len(),
            "systemd passed several sockets; serving the first"
        );
    }
    // SAFETY: systemd (or whoever set LISTEN_PID to this process) passed `fd` to this process
    // for it to own; `listen_fds` checked LISTEN_PID and set FD_CLOEXEC, and nothing else in
    // the manager uses descriptors from LISTEN_FDS, so this is the only owner.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    let path = check_listening(&owned).map_err(|why| Error::Io {
        context: format!("the socket passed by systemd (fd {fd}) {why}"),
        source: std::io::Error::from(std::io::ErrorKind::InvalidInput),
    })?;
    if path != socket {
        tracing::warn!(passed = %path.display(), configured = %socket.display(), "serving the socket systemd passed, not the configured path");
    }
    let listener = UnixListener::from(owned);
    listener.set_nonblocking(true).map_err(|source| Error::Io {
        context: "set_nonblocking on the socket passed by systemd".into(),
        source,
    })?;
    tracing::info!(socket = %path.display(), "socket passed by systemd (socket activation)");
    Ok(Listening {
        listener,
        path,
        activated: true,
        notify: true,
    })
}

/// The path of a listening Unix stream socket, or why `fd` is not one.
fn check_listening(fd: &OwnedFd) -> Result<PathBuf, String> {
    use nix::sys::socket::{getsockname, getsockopt, sockopt, SockType, UnixAddr};
    let kind = getsockopt(fd, sockopt::SockType).map_err(|e| format!("getsockopt SO_TYPE: {e}"))?;
    if kind != SockType::Stream {
        return Err(format!("is a {kind:?} socket, not a stream socket"));
    }
    let listening = getsockopt(fd, sockopt::AcceptConn)
        .map_err(|e| format!("getsockopt SO_ACCEPTCONN: {e}"))?;
    if !listening {
        return Err("is not listening".into());
    }
    let addr: UnixAddr = getsockname(std::os::fd::AsRawFd::as_raw_fd(fd))
        .map_err(|e| format!("is not a Unix socket (getsockname: {e})"))?;
    addr.path()
        .map(Path::to_path_buf)
        .ok_or_else(|| "is not bound to a path (ListenStream= must be a file path)".into())
}

/// Tell systemd something (`READY=1`, `STOPPING=1`, `STATUS=`); a no-op outside a
/// `Type=notify` service. A failure is only logged: the manager works without it.
pub(crate) fn notify(state: &[sd_notify::NotifyState]) {
    if let Err(e) = sd_notify::notify(false, state) {
        tracing::warn!(error = %e, "cannot notify systemd (NOTIFY_SOCKET)");
    }
}

/// The service watchdog (`WatchdogSec=`): the reallocation rounds ping it, at most every
/// half period, so a manager whose allocation loop is stuck (a deadlock, a wedged cgroup
/// write) is killed and restarted by systemd, and its journal undone by the next one.
#[derive(Debug)]
pub(crate) struct Watchdog {
    every_ns: u64,
    last_ns: AtomicU64,
}

impl Watchdog {
    /// The watchdog systemd asks for (`WATCHDOG_USEC`, `WATCHDOG_PID`), if any.
    pub(crate) fn from_env() -> Option<Watchdog> {
        let mut usec = 0;
        if !sd_notify::watchdog_enabled(false, &mut usec) || usec == 0 {
            return None;
        }
        tracing::info!(watchdog_ms = usec / 1000, "systemd watchdog enabled");
        Some(Watchdog::every(usec.saturating_mul(1000) / 2))
    }

    fn every(every_ns: u64) -> Watchdog {
        Watchdog {
            every_ns,
            last_ns: AtomicU64::new(0),
        }
    }

    /// The allocation loop is alive: send `WATCHDOG=1` when half a period has passed.
    pub(crate) fn ping(&self) {
        if self.due(partita_protocol::page::monotonic_ns()) {
            notify(&[sd_notify::NotifyState::Watchdog]);
        }
    }

    /// Whether a ping is due at `now` (and claim it).
    fn due(&self, now: u64) -> bool {
        let last = self.last_ns.load(Ordering::Relaxed);
        (last == 0 || now.saturating_sub(last) >= self.every_ns)
            && self
                .last_ns
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watchdog_pings_once_per_half_period() {
        let w = Watchdog::every(1_000);
        assert!(w.due(10_000), "the first round pings");
        assert!(!w.due(10_500), "not again within the period");
        assert!(w.due(11_000));
        assert!(!w.due(11_999));
        assert!(w.due(12_000));
    }

    #[test]
    fn a_bound_socket_is_recognised_and_a_datagram_one_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let l = UnixListener::bind(&path).unwrap();
        assert_eq!(check_listening(&OwnedFd::from(l)).unwrap(), path);
        let d = std::os::unix::net::UnixDatagram::bind(dir.path().join("d.sock")).unwrap();
        let why = check_listening(&OwnedFd::from(d)).unwrap_err();
        assert!(why.contains("not a stream socket"), "{why}");
    }
}
