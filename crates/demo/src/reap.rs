//! Reaping a child with its resource usage (`wait4`): the exact CPU time and context switches
//! of the whole process — every thread, and every descendant it reaped itself — which `/proc`
//! can no longer show once the process is gone. The demo's only `unsafe`.

use std::io;
use std::time::Duration;

/// Resource usage of a reaped child.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    /// User + system CPU time.
    pub cpu: Duration,
    /// Voluntary context switches (the process blocked).
    pub vcsw: u64,
    /// Involuntary context switches (the process was preempted).
    pub ivcsw: u64,
}

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Exit {
    /// Exit code, or `None` when killed by a signal.
    pub code: Option<i32>,
    /// Signal that killed it, if any.
    pub signal: Option<i32>,
    /// Its resource usage.
    pub usage: Usage,
}

fn tv(t: libc::timeval) -> Duration {
    Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
}

/// Wait for child `pid` to exit and reap it (blocking; retried on `EINTR`).
///
/// ```
/// let child = std::process::Command::new("true").spawn().unwrap();
/// let exit = partita_demo::reap::wait(child.id() as i32).unwrap();
/// assert_eq!(exit.code, Some(0));
/// assert!(exit.usage.cpu < std::time::Duration::from_secs(5));
/// ```
pub fn wait(pid: i32) -> io::Result<Exit> {
    let mut status: libc::c_int = 0;
    // SAFETY: rusage is plain data; all-zero is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: both pointers are valid for writes for the duration of the call.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
        if r >= 0 {
            break;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    let (code, signal) = if libc::WIFEXITED(status) {
        (Some(libc::WEXITSTATUS(status)), None)
    } else if libc::WIFSIGNALED(status) {
        (None, Some(libc::WTERMSIG(status)))
    } else {
        (None, None)
    };
    Ok(Exit {
        code,
        signal,
        usage: Usage {
            cpu: tv(ru.ru_utime) + tv(ru.ru_stime),
            vcsw: ru.ru_nvcsw.max(0) as u64,
            ivcsw: ru.ru_nivcsw.max(0) as u64,
        },
    })
}

/// Send SIGKILL to child `pid` (its waiter reaps it). Errors are ignored: it may have exited.
pub fn kill(pid: i32) {
    // SAFETY: kill has no memory-safety preconditions. The caller only kills children whose
    // waiter has not reaped them yet, so the pid cannot have been reused.
    unsafe { libc::kill(pid, libc::SIGKILL) };
}
