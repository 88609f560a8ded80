//! Process control: the pure policies (how a requested target, a declared need and an
//! observation become numbers) and the public types that select them. The plumbing that
//! applies them — workers suspending at safe points, unparking, re-pinning — lives in
//! [`target`]; the protocol that keeps it safe is in `../sleep/README.md`.
//!
//! The model is Tucker's (1993, §6.2): the pool holds a `target` number of active workers;
//! growing is *pushed* (whoever raises the target unparks suspended workers at once, lowest
//! index first), shrinking is *polled* (a worker whose index is at or above the target
//! suspends itself at its next safe point — between two tasks of its main loop — or at its
//! next wait inside a job, `join` or `scope`, until that wait's latch is set). Changes that
//! cancel out before anyone reaches such a point do nothing — Tucker's damping.

/// Stamp one hop of a reaction: [`partita_protocol::hop!`] (the manager stamps the same
/// way, with the same clock). It sits on the park, resume and client paths, never on a task's
/// safe point (the `reaction` example enables it, to break its latency down by hop).
pub(crate) use partita_protocol::hop;

pub(crate) mod demand;
pub(crate) mod manager_page;
mod page;
mod report;
mod slots;
mod target;

pub(crate) use manager_page::ManagerPage;
pub(crate) use page::PageView;
pub(crate) use report::BusyClock;
pub(crate) use target::Control;

/// Who decides how many workers of a pool are active.
///
/// ```
/// use partita_runtime::{ProcessControl, ThreadPoolBuilder};
/// let pool = ThreadPoolBuilder::new()
///     .num_threads(2)
///     .process_control(ProcessControl::Manual)
///     .build()
///     .unwrap();
/// pool.set_target_workers(1);
/// assert_eq!(pool.target_workers(), 1);
/// ```
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum ProcessControl {
    /// Never changes size: `set_target_workers` is ignored, no manager is contacted.
    Standalone,
    /// Follow a co-located manager if one is reachable (`PARTITA=off` disables it);
    /// `set_target_workers` also works. The default.
    #[default]
    Manager,
    /// Only `set_target_workers` changes the number of active workers; no manager.
    Manual,
}

/// The application's own limit on the workers it can use (Tucker's `PR_PSETNEED`): the
/// demand reported to a manager never exceeds it.
///
/// ```
/// use partita_runtime::{Need, ThreadPoolBuilder};
/// let pool = ThreadPoolBuilder::new().num_threads(2).build().unwrap();
/// pool.set_demand(Need::Relative(-1)); // "one fewer than the pool size"
/// pool.set_demand(Need::Unlimited);
/// ```
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum Need {
    /// At most this many workers.
    Absolute(usize),
    /// At most pool size + n (n may be negative).
    Relative(isize),
    /// No limit beyond the pool size. The default.
    #[default]
    Unlimited,
}

/// The target actually applied for a request: at most the pool size, and at least one worker
/// unless a manager grants a zero quantum (`allow_zero`).
pub(crate) fn clamp_target(requested: usize, size: usize, allow_zero: bool) -> usize {
    let low = if allow_zero { 0 } else { 1 };
    requested.clamp(low.min(size), size)
}

/// The worker limit a [`Need`] stands for in a pool of `size`.
pub(crate) fn need_limit(need: Need, size: usize) -> usize {
    match need {
        Need::Absolute(n) => n.min(size),
        Need::Relative(d) => {
            let v = size as isize + d;
            (v.max(0) as usize).min(size)
        }
        Need::Unlimited => size,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn clamp_examples() {
        assert_eq!(clamp_target(0, 4, false), 1);
        assert_eq!(clamp_target(0, 4, true), 0);
        assert_eq!(clamp_target(9, 4, false), 4);
        assert_eq!(clamp_target(3, 4, false), 3);
    }

    #[test]
    fn need_examples() {
        assert_eq!(need_limit(Need::Absolute(2), 4), 2);
        assert_eq!(need_limit(Need::Absolute(9), 4), 4);
        assert_eq!(need_limit(Need::Relative(-1), 4), 3);
        assert_eq!(need_limit(Need::Relative(-9), 4), 0);
        assert_eq!(need_limit(Need::Relative(3), 4), 4);
        assert_eq!(need_limit(Need::Unlimited, 4), 4);
    }

    proptest! {
        #[test]
        fn clamp_stays_in_range(req in 0usize..1000, size in 1usize..256, zero: bool) {
            let t = clamp_target(req, size, zero);
            prop_assert!(t <= size);
            let low = if zero { 0 } else { 1 };
            prop_assert!(t >= low);
            if req >= 1 && req <= size { prop_assert_eq!(t, req); }
        }

    }
}
