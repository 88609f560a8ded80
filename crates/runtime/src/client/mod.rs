//! Manager client: registers the pool with a co-located `partita` manager and makes the pool
//! follow the allocation published in the shared control page.
//!
//! The pool side and the client side meet only through [`Controlled`] and [`attach`]; the pool
//! never sees the socket or the control page, and the client never sees the pool's internals.
//!
//! Contract:
//! - The pool calls [`attach`] once, at build time, when its process-control mode is
//!   `Manager` (the default) and `PARTITA` is not `off`. It keeps the returned guard for its
//!   lifetime; dropping the guard disconnects and stops the client thread.
//! - The client calls [`Controlled::set_target_workers`] when the manager's target changes
//!   (0 means a granted zero quantum), [`Controlled::set_cpus`] when the CPU set changes, and
//!   reverts to `set_target_workers(pool_size)` / `set_cpus(None)` when the manager goes away.
//! - The client reads demand and counters through the other methods to fill the
//!   application→manager half of the control page.
#![allow(dead_code)] // Until the client lands, the pool is the only user of this seam.

use std::sync::Weak;

/// What the manager client may do to a pool.
pub(crate) trait Controlled: Send + Sync + 'static {
    /// Number of worker threads (stable for the pool's lifetime).
    fn pool_size(&self) -> usize;
    /// Set the number of workers that should be active. `0` is honoured only as a granted
    /// zero quantum (bandwidth time-slicing); values above the pool size are clamped.
    fn set_target_workers(&self, n: usize);
    /// The current target.
    fn target_workers(&self) -> usize;
    /// Workers currently active (not suspended by process control).
    fn active_workers(&self) -> usize;
    /// Confine the workers to these CPUs (`None`: no confinement). Workers re-pin themselves at
    /// their next safe point.
    fn set_cpus(&self, cpus: Option<Vec<usize>>);
    /// Demand to report: `min(pool size, max(1, runnable tasks observed))`, smoothed, capped
    /// by the application's own `set_demand`; `0` when the pool has no work.
    fn demand(&self) -> u32;
    /// Tasks run since the pool started.
    fn tasks_run(&self) -> u64;
    /// Nanoseconds workers spent idle (searching or sleeping) since the pool started.
    fn idle_ns(&self) -> u64;
}

/// Keeps the client connected; dropping it disconnects.
pub(crate) struct ClientGuard {
    _private: (),
}

/// Connect `pool` to a manager if one is reachable. Returns `None` (standalone) when no
/// manager socket exists, `PARTITA=off`, or registration fails (after one warning).
pub(crate) fn attach(_pool: Weak<dyn Controlled>, _name: &str) -> Option<ClientGuard> {
    // The client implementation lands with partita-manager (issue 4); until then every pool
    // is standalone, which is the documented behaviour when no manager is reachable.
    None
}
