//! Connection limits: at most `max_connections` open at once and `max_connections_per_uid` per
//! user, counted by RAII slots; the fd limit raised to fit; and the accept loop's back-off
//! when the process runs out of descriptors anyway.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Open connections, total and per uid.
#[derive(Debug)]
pub(crate) struct ConnLimits {
    max: usize,
    per_uid: usize,
    open: Mutex<(usize, HashMap<u32, usize>)>,
}

/// One open connection's place in the counts; released on drop.
#[derive(Debug)]
pub(crate) struct Slot {
    limits: Arc<ConnLimits>,
    uid: u32,
}

impl ConnLimits {
    pub(crate) fn new(max: usize, per_uid: usize) -> Arc<ConnLimits> {
        Arc::new(ConnLimits {
            max,
            per_uid,
            open: Mutex::new((0, HashMap::new())),
        })
    }

    /// Take a slot for a connection from `uid`, or say which limit is reached.
    pub(crate) fn acquire(self: &Arc<Self>, uid: u32) -> Result<Slot, String> {
        let mut g = crate::sync::lock(&self.open);
        let (total, per) = &mut *g;
        if *total >= self.max {
            return Err(format!("{} connections are open (max_connections)", *total));
        }
        let mine = per.entry(uid).or_default();
        if *mine >= self.per_uid {
            return Err(format!(
                "uid {uid} has {} connections open (max_connections_per_uid)",
                *mine
            ));
        }
        *mine += 1;
        *total += 1;
        Ok(Slot {
            limits: self.clone(),
            uid,
        })
    }
}

impl ConnLimits {
    /// Connections holding a slot now.
    pub(crate) fn open(&self) -> usize {
        crate::sync::lock(&self.open).0
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut g = crate::sync::lock(&self.limits.open);
        let (total, per) = &mut *g;
        *total = total.saturating_sub(1);
        if let Some(n) = per.get_mut(&self.uid) {
            *n -= 1;
            if *n == 0 {
                per.remove(&self.uid);
            }
        }
    }
}

/// Descriptors a manager needs for `connections` open connections and `apps` applications
/// (socket, pidfd and the page's memfd each), plus slack for the runtime and /proc reads.
pub(crate) fn fds_needed(connections: usize, apps: usize) -> u64 {
    (connections * 2 + apps + 128) as u64
}

/// Raise RLIMIT_NOFILE's soft limit to `want` (at most the hard limit); returns the new soft
/// limit.
pub(crate) fn raise_nofile(want: u64) -> Result<u64, nix::Error> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE)?;
    let target = want.min(hard);
    if target > soft {
        setrlimit(Resource::RLIMIT_NOFILE, target, hard)?;
        return Ok(target);
    }
    Ok(soft)
}

/// Back-off of the accept loop after errors: doubling from 10 ms to 1 s, reset by a
/// successful accept; a log line at most once per second (with the count suppressed).
#[derive(Debug)]
pub(crate) struct AcceptBackoff {
    delay: Duration,
    last_log: Option<Instant>,
    suppressed: u64,
}

impl AcceptBackoff {
    pub(crate) fn new() -> AcceptBackoff {
        AcceptBackoff {
            delay: Duration::ZERO,
            last_log: None,
            suppressed: 0,
        }
    }

    /// A successful accept.
    pub(crate) fn reset(&mut self) {
        self.delay = Duration::ZERO;
    }

    /// An accept error: whether to log now (with how many were suppressed), and how long to
    /// sleep.
    pub(crate) fn failed(&mut self, now: Instant) -> (Option<u64>, Duration) {
        self.delay = (self.delay * 2).clamp(Duration::from_millis(10), Duration::from_secs(1));
        let log = match self.last_log {
            Some(t) if now.duration_since(t) < Duration::from_secs(1) => {
                self.suppressed += 1;
                None
            }
            _ => {
                self.last_log = Some(now);
                Some(std::mem::take(&mut self.suppressed))
            }
        };
        (log, self.delay)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_count_total_and_per_uid_and_release_on_drop() {
        let l = ConnLimits::new(3, 2);
        let a = l.acquire(1).unwrap();
        let _b = l.acquire(1).unwrap();
        assert!(l
            .acquire(1)
            .unwrap_err()
            .contains("max_connections_per_uid"));
        let _c = l.acquire(2).unwrap();
        assert!(l.acquire(3).unwrap_err().contains("max_connections"));
        drop(a);
        assert!(l.acquire(1).is_ok());
    }

    #[test]
    fn accept_backoff_grows_and_logs_at_most_once_a_second() {
        let mut b = AcceptBackoff::new();
        let t0 = Instant::now();
        let mut logs = 0;
        let mut last = Duration::ZERO;
        for i in 0..100 {
            let (log, d) = b.failed(t0 + Duration::from_millis(i * 10));
            logs += log.is_some() as u32;
            assert!(d >= last && d <= Duration::from_secs(1));
            last = d;
        }
        assert_eq!(logs, 1, "100 failures within 1 s log once");
        let (log, _) = b.failed(t0 + Duration::from_millis(1500));
        assert_eq!(log, Some(99));
        b.reset();
        assert_eq!(
            b.failed(t0 + Duration::from_secs(3)).1,
            Duration::from_millis(10)
        );
    }

    #[test]
    fn the_fd_limit_is_raised_to_fit() {
        use nix::sys::resource::{getrlimit, setrlimit, Resource};
        let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
        let want = fds_needed(4096 + 64, 4096).min(hard);
        // Start from a low soft limit (the common default of 1024) and expect it raised.
        setrlimit(Resource::RLIMIT_NOFILE, soft.min(1024), hard).unwrap();
        assert_eq!(raise_nofile(want).unwrap(), want.max(soft.min(1024)));
        assert!(getrlimit(Resource::RLIMIT_NOFILE).unwrap().0 >= want);
    }
}
