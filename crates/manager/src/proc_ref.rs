//! A process the manager may act on: a pid together with a pidfd that proves the pid still
//! names the same process. Nothing in the manager sets an affinity or moves a process into a
//! cgroup through a bare pid: a pid is reused as soon as its process is reaped, a pidfd is not.

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use partita_protocol::sys::{pidfd_alive, pidfd_open};
use std::collections::BTreeSet;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

/// A pid with a pidfd for it (cheap to clone).
///
/// ```
/// let me = partita_manager::proc_ref::ProcRef::open(std::process::id() as i32).unwrap();
/// assert!(me.alive());
/// ```
#[derive(Debug, Clone)]
pub struct ProcRef {
    pid: i32,
    fd: Arc<OwnedFd>,
}

impl ProcRef {
    /// Wrap a pidfd known to refer to `pid` (from `SO_PEERPIDFD` or a verified `pidfd_open`).
    pub fn new(pid: i32, pidfd: OwnedFd) -> ProcRef {
        ProcRef {
            pid,
            fd: Arc::new(pidfd),
        }
    }

    /// `pidfd_open(pid)`: for a process this one started or just found as a child of a
    /// process it holds (see [`ProcRef::open_child`]); refuses pid ≤ 0.
    ///
    /// ```
    /// assert!(partita_manager::proc_ref::ProcRef::open(0).is_err());
    /// ```
    pub fn open(pid: i32) -> std::io::Result<ProcRef> {
        if pid <= 0 {
            return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
        }
        Ok(ProcRef::new(pid, pidfd_open(pid)?))
    }

    /// A pidfd for `child`, verified to be a child of `self` after it was opened (its parent
    /// is `self`, which is still alive, so the pid was not reused in between).
    pub fn open_child(&self, child: i32) -> Option<ProcRef> {
        let c = ProcRef::open(child).ok()?;
        let ppid = crate::sys::parent_pid(child)?;
        (ppid == self.pid && self.alive() && c.alive()).then_some(c)
    }

    /// The pid (valid only as long as [`ProcRef::alive`] says so).
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Whether the process still runs (not exited; a zombie counts as exited).
    pub fn alive(&self) -> bool {
        // A pidfd polls readable once the process has exited, zombie or reaped: one syscall,
        // where reading `/proc/<pid>/stat` took four and a parse. The enforcer asks this of
        // every process it holds at every change (docs/bench/manager.md §11).
        let mut fds = [PollFd::new(self.fd.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::ZERO) {
            Ok(ready) => ready == 0,
            // Cannot tell (EINTR, ENOMEM): ask the slower way.
            Err(_) => pidfd_alive(self.fd.as_fd()) && crate::sys::alive(self.pid),
        }
    }

    /// The pidfd (readable when the process exits).
    pub fn pidfd(&self) -> &OwnedFd {
        &self.fd
    }
}

/// Most processes in one walk of a group (a fork bomb must not make the walk unbounded).
const MAX_TREE: usize = 100_000;

/// `start` and all their descendants, each once and each with a pidfd verified against its
/// parent, parents before children; with the pid of the parent each was found under (`None`
/// for those of `start`).
pub(crate) fn walk(start: &[ProcRef]) -> Vec<(ProcRef, Option<i32>)> {
    let mut seen = BTreeSet::new();
    let mut out: Vec<(ProcRef, Option<i32>)> = Vec::new();
    for p in start {
        if seen.insert(p.pid()) {
            out.push((p.clone(), None));
        }
    }
    let mut i = 0;
    while i < out.len() {
        let p = out[i].0.clone();
        i += 1;
        for t in crate::sys::threads(p.pid()).unwrap_or_default() {
            let path = format!("/proc/{}/task/{t}/children", p.pid());
            let text = std::fs::read_to_string(path).unwrap_or_default();
            for c in text
                .split_whitespace()
                .filter_map(|x| x.parse::<i32>().ok())
            {
                if out.len() < MAX_TREE && seen.insert(c) {
                    if let Some(child) = p.open_child(c) {
                        out.push((child, Some(p.pid())));
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::ProcRef;
    use std::time::{Duration, Instant};

    #[test]
    fn a_zombie_is_not_alive_and_a_running_process_is() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("spawn sleep");
        let p = ProcRef::open(child.id() as i32).unwrap();
        assert!(p.alive());
        child.kill().unwrap();
        // Not reaped yet: a zombie, which must count as exited.
        let t0 = Instant::now();
        while p.alive() {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "killed, still alive"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(
            crate::sys::parent_pid(p.pid()),
            Some(std::process::id() as i32)
        );
        child.wait().unwrap();
        assert!(!p.alive(), "reaped");
    }
}
