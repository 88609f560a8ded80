//! What the mover did, shared with `partita status` and `/metrics`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Counters of the manager's page migration (all applications) and each application's line.
///
/// ```
/// let s = partita_manager::memfollow::Stats::default();
/// assert_eq!(s.snapshot().calls, 0);
/// ```
#[derive(Debug, Default)]
pub struct Stats {
    /// System calls made on applications' memory (`move_pages`, `numa_maps` reads).
    pub calls: AtomicU64,
    /// Bytes found on the destination after a move.
    pub moved_bytes: AtomicU64,
    /// Placements whose memory started to move.
    pub migrations: AtomicU64,
    /// Placements the cost rule made wait (counted once each).
    pub deferred: AtomicU64,
    /// Failed calls (EPERM, ENOMEM, ESRCH, …).
    pub errors: AtomicU64,
    /// Mover rounds.
    pub rounds: AtomicU64,
    /// Whether the mover thread runs.
    pub running: AtomicBool,
    /// NUMA nodes online (set when the daemon starts).
    pub nodes: AtomicUsize,
    /// Why the mover does not run (empty while it runs).
    pub off_reason: Mutex<String>,
    apps: Mutex<BTreeMap<u32, AppReport>>,
}

/// One application's migration, for `partita status`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AppReport {
    /// Node-set changes of its CPUs seen since it registered.
    pub moves: u64,
    /// Bytes of its memory moved.
    pub moved_bytes: u64,
    /// What the mover is doing for it, or why nothing.
    pub state: String,
}

/// A copy of the global counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// See [`Stats::calls`].
    pub calls: u64,
    /// See [`Stats::moved_bytes`].
    pub moved_bytes: u64,
    /// See [`Stats::migrations`].
    pub migrations: u64,
    /// See [`Stats::deferred`].
    pub deferred: u64,
    /// See [`Stats::errors`].
    pub errors: u64,
    /// See [`Stats::rounds`].
    pub rounds: u64,
}

impl Stats {
    /// The global counters now.
    pub fn snapshot(&self) -> Totals {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Totals {
            calls: l(&self.calls),
            moved_bytes: l(&self.moved_bytes),
            migrations: l(&self.migrations),
            deferred: l(&self.deferred),
            errors: l(&self.errors),
            rounds: l(&self.rounds),
        }
    }

    /// Application `id`'s line, if the mover has seen it.
    pub fn app(&self, id: u32) -> Option<AppReport> {
        self.lock().get(&id).cloned()
    }

    pub(crate) fn set_app(&self, id: u32, report: AppReport) {
        self.lock().insert(id, report);
    }

    pub(crate) fn forget(&self, keep: impl Fn(u32) -> bool) {
        self.lock().retain(|id, _| keep(*id));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u32, AppReport>> {
        crate::sync::lock(&self.apps)
    }
}
