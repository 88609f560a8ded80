//! The revocation hand-over (pure): a CPU revoked from a controlled application goes to its
//! new owner only once the application has let go of it.
//!
//! When a reallocation lowers an application's target, the worker that must park may still
//! be running a task on the CPU it gives up. Narrowing the application's affinity at once
//! migrates that worker onto one of its remaining CPUs, and granting the CPU at once wakes
//! the new owner's worker onto it: either way some worker is runnable but not running until
//! the task ends (docs/bench/manager.md §2). So a revoked CPU is *in transit* while its
//! application is *releasing*: its reported active workers exceed its new target and the
//! hand-over deadline `D` (`handover_us`) has not passed since the lowered target was
//! published. Meanwhile the lowered target is published at once (revocation stays
//! immediate), the releasing application keeps the CPU in its page and affinity, and no
//! other application's page or affinity includes it. Once the active count reaches the
//! target (the runtime sends a demand change when its worker parks) or the deadline passes,
//! the next round hands it over.
//!
//! Never withheld: CPUs that were idle, CPUs of uncontrolled processes (whose sets follow
//! the allocation at once), CPUs an application gave up itself (its own demand fell to what
//! it gets: its workers are going idle), CPUs of applications whose active count cannot be
//! read (partition-only and jobserver applications), anything when `D` is 0.

use super::{AppView, PlanInput, Share};
use crate::alloc::AppId;
use partita_protocol::CpuSet;
use std::collections::BTreeMap;

/// The CPUs in transit under one allocation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Transit {
    /// Every releasing application: when its pending revocation was published (monotonic
    /// ns) and the CPUs it still holds (published to it, no longer allocated to it).
    pub releasing: BTreeMap<AppId, (u64, CpuSet)>,
    /// The union of the held CPUs: given to no other application.
    pub held: CpuSet,
}

impl Transit {
    /// The earliest hand-over deadline (monotonic ns), when a round must run even if no
    /// round is requested.
    pub(crate) fn deadline(&self, handover_ns: u64) -> Option<u64> {
        self.releasing
            .values()
            .map(|&(since, _)| since.saturating_add(handover_ns))
            .min()
    }
}

/// Which applications are releasing under the allocation (`shares`, aligned with
/// `input.apps`), and the CPUs they hold.
pub(crate) fn transit(input: &PlanInput, shares: &[Share]) -> Transit {
    let mut t = Transit::default();
    if input.handover_ns == 0 {
        return t;
    }
    for (app, share) in input.apps.iter().zip(shares) {
        if let Some(since) = releasing_since(app, share, input) {
            let held = app
                .published
                .map_or(CpuSet::new(), |(_, cpus)| cpus.without(&share.cpus));
            t.held.union_with(&held);
            t.releasing.insert(app.id, (since, held));
        }
    }
    t
}

/// When `app`'s pending revocation was published, if it is releasing: controlled, its
/// active count readable and above its allocated count, the CPUs taken from it (its own
/// demand exceeds what it gets: a CPU it gave up itself, its demand having fallen, is
/// handed over at once, as its workers are going idle), revoked (earlier, or by this round
/// lowering its published target: then now), and the deadline not passed. A second
/// lowering while one is pending keeps the first one's time: the deadline never moves out.
fn releasing_since(app: &AppView, share: &Share, input: &PlanInput) -> Option<u64> {
    if app.partition_only {
        return None;
    }
    let active = app.active?;
    let (published_target, _) = app.published?;
    let count = share.count;
    if active <= count || app.demand <= count {
        return None;
    }
    let since = match app.revoked_at {
        Some(t) => t,
        None if published_target > count => input.now_ns,
        None => return None,
    };
    (input.now_ns < since.saturating_add(input.handover_ns)).then_some(since)
}

/// What a controlled (not partition-only) application's page should say: its allocation
/// less the CPUs in transit to it (a grantee waits for them, its target counts only what
/// it gets now), plus, while it is releasing, the CPUs it holds. A zero target keeps the
/// previous confinement. An application on its partition's shared CPUs keeps its count
/// while any of them is not in transit.
pub(crate) fn controlled_page(app: &AppView, share: &Share, t: &Transit) -> (u32, CpuSet) {
    let (count, set) = (share.count, share.cpus);
    let mut cpus = set.without(&t.held);
    let withheld = if share.shared {
        0
    } else {
        (set.len() - cpus.len()) as u32
    };
    let target = match t.releasing.get(&app.id) {
        Some((_, held)) => {
            cpus.union_with(held);
            count
        }
        None => count.saturating_sub(withheld),
    };
    if target == 0 || cpus.is_empty() {
        // A zero quantum, or nothing granted yet: workers suspend; keep the confinement.
        (0, app.published.map_or(CpuSet::new(), |p| p.1))
    } else {
        (target, cpus)
    }
}
