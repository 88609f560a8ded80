//! The sampler: runnable threads of uncontrolled processes per partition (Tucker's default
//! set gets CPUs for them), and the tracked processes that exited.
//!
//! System-wide ("uncontrolled = system"), the default partition's count is the system's
//! runnable threads (`procs_running`) minus the applications', the tracked processes' and
//! the manager's own. That difference is of two readings taken at different instants, and a
//! fine-grained program's workers sleep and wake every few hundred µs, so beside a lone
//! program on an idle machine it often read one runnable thread "outside". Any outside
//! runnable thread claims a CPU at once (`alloc::uncontrolled_demand`): the lone program held
//! both CPUs in 11 of 40 status snapshots and ran 1.7–1.85× slower than without the manager
//! (`tests/processes.rs::a_lone_fine_grained_program_is_not_its_own_outside_load`;
//! docs/bench/manager.md §9). Two checks keep the count honest:
//!
//! 1. the known threads are read just before and just after `procs_running`, and the larger
//!    reading is subtracted (`outside_runnable`);
//! 2. the count stands only if outside threads also *used* CPU: busy time from `/proc/stat`
//!    minus the known processes' CPU time, in CPUs, at least [`MIN_OUTSIDE_CPUS_NOW`] since
//!    the last sample or [`MIN_OUTSIDE_CPUS`] on average (`OutsideUse`, `gate`). A phantom
//!    of the readings uses no CPU; a process that wants a CPU uses a good part of one even
//!    when it has to share it. Two thresholds because the ticks are coarse (10 ms; a 50 ms
//!    sample of two CPUs holds 10) and read a moment apart: beside a busy program one
//!    sample shows up to ±2 ticks (0.4 CPU) of nothing (docs/bench/manager.md §9). The
//!    average keeps a real load counted for about 400 ms after it ends (0.25 weight per
//!    50 ms sample), so a phantom right after real outside work still counts: the parks
//!    once blamed on this gate came from runs started just after a `PARTITA=off` run
//!    (docs/bench/manager.md §10).

use super::Shared;
use crate::enforce::Enforcer;
use crate::registry::SampleRequest;
use crate::sys;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Weight of a new sample in the runnable and outside-use averages.
const ALPHA: f64 = 0.25;

/// Outside threads that used at least this much CPU since the last sample (in CPUs) count
/// at once: a process that starts spinning beside busy applications gets about 2/3 of a CPU.
pub(crate) const MIN_OUTSIDE_CPUS_NOW: f64 = 0.5;
/// Or at least this much on average ([`OutsideUse`], the weight of the runnable average).
pub(crate) const MIN_OUTSIDE_CPUS: f64 = 0.25;

/// The outside CPU use, last sample and average.
#[derive(Copy, Clone, Debug, Default, PartialEq)]
pub(crate) struct OutsideUse {
    pub now: f64,
    pub avg: f64,
}

impl OutsideUse {
    /// Fold in a sample's use, with the runnable average's weight `alpha`.
    pub(crate) fn update(self, now: f64, alpha: f64) -> OutsideUse {
        OutsideUse {
            now,
            avg: self.avg * (1.0 - alpha) + now * alpha,
        }
    }

    /// Whether outside threads used enough CPU for their runnable count to stand.
    pub(crate) fn real(self) -> bool {
        self.now >= MIN_OUTSIDE_CPUS_NOW || self.avg >= MIN_OUTSIDE_CPUS
    }
}

/// Sample runnable threads of uncontrolled processes and reap exited ones.
pub(super) async fn sampler(shared: Arc<Shared>, period: Duration) {
    let mut iv = tokio::time::interval(period);
    iv.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let hz = sys::ticks_per_second() as f64;
    let mut last: Option<(Instant, CpuTicks)> = None;
    let mut used = OutsideUse::default();
    loop {
        iv.tick().await;
        let req = shared.lock().sample_request();
        let (mut now, gone, ticks) = if nothing_to_measure(&shared, &req) {
            // No thread hop, no /proc read: with tracked processes only and none tracked, a
            // sample costs the lock it takes (the averages still decay to 0).
            (vec![0; req.partitions], Vec::new(), None)
        } else {
            let s = shared.clone();
            match tokio::task::spawn_blocking(move || measure(&s, req)).await {
                Ok(m) => m,
                Err(_) => continue,
            }
        };
        if let Some(t) = ticks {
            let at = Instant::now();
            if let (Some((then, before)), Some(first)) = (last, now.first_mut()) {
                let secs = at.duration_since(then).as_secs_f64();
                // A known process that left (or came, or exited before the manager saw it
                // go) between the readings takes its ticks out of (or brings them into) the
                // known sum: the difference then says nothing about outside threads, and
                // would count a departed program's whole CPU time as outside use. Such a
                // sample is not folded in.
                if comparable(before, t) {
                    used = used.update(outside_cpus(before, t, secs, hz), ALPHA);
                }
                let runnable = *first;
                *first = gate(runnable, used);
                tracing::trace!(
                    runnable,
                    used_now = used.now,
                    used_avg = used.avg,
                    counted = *first,
                    "outside load sampled"
                );
            }
            last = Some((at, t));
        }
        let mut r = shared.lock();
        let reaped = r.untrack(&gone);
        let changed = r.update_runnable(&now, ALPHA);
        drop(r);
        if changed || reaped {
            shared.ring();
        }
    }
}

/// Whether a sample would find nothing: no tracked process, no system-wide count, and no
/// confined process tree or application to keep inside its CPUs. An enforcer busy applying a reallocation
/// counts as having trees (the sample then measures, as it always did).
pub(super) fn nothing_to_measure(shared: &Shared, req: &SampleRequest) -> bool {
    req.tracked.is_empty() && !req.system_wide && !shared.may_have_confined()
}

/// Cumulative CPU ticks: the whole system busy, and the known processes (applications,
/// tracked processes, the manager), with a fingerprint of which processes those were.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct CpuTicks {
    pub busy: u64,
    pub known: u64,
    /// [`known_set`] of the processes `known` sums.
    pub known_set: u64,
}

/// Whether two readings of the known ticks can be subtracted: the same processes, and a sum
/// that did not fall (a known process that exited is read as 0 until it is unregistered).
pub(crate) fn comparable(before: CpuTicks, now: CpuTicks) -> bool {
    before.known_set == now.known_set && now.known >= before.known
}

/// A fingerprint of the known processes (the request's applications and live tracked
/// processes): two readings of the known ticks can be subtracted only when it is the same.
pub(crate) fn known_set(req: &SampleRequest) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut pids: Vec<i32> = req.app_pids.iter().map(|&(pid, _)| pid).collect();
    pids.extend(req.tracked.iter().filter(|t| t.2).map(|t| t.1));
    pids.sort_unstable();
    let mut h = std::collections::hash_map::DefaultHasher::new();
    pids.hash(&mut h);
    h.finish()
}

/// How many readings [`outside_runnable_now`] takes, and how far apart: a thread that is
/// runnable in all of them wants a CPU; one caught in one reading (a short-lived process, a
/// shell, the status request of whoever watches) is not load.
const FRESH_READINGS: u32 = 3;
const FRESH_SPACING: Duration = Duration::from_millis(2);

/// The system's runnable threads outside every application, tracked process and the manager
/// itself, now: the least of [`FRESH_READINGS`] readings [`FRESH_SPACING`] apart, ungated
/// (system-wide accounting; see the module's notes). What a registration lowers the last
/// sample's count to ([`crate::registry::Registry::lower_outside`]).
pub(crate) fn outside_runnable_now(req: &SampleRequest) -> u32 {
    let mut least = outside_runnable_once(req);
    for _ in 1..FRESH_READINGS {
        if least == 0 {
            break;
        }
        std::thread::sleep(FRESH_SPACING);
        least = least.min(outside_runnable_once(req));
    }
    least
}

fn outside_runnable_once(req: &SampleRequest) -> u32 {
    let tracked: u32 = req
        .tracked
        .iter()
        .filter(|t| t.2)
        .map(|&(_, pid, _)| sys::runnable_in(pid, true))
        .sum();
    let me = std::process::id() as i32;
    let before = known_runnable(req, me);
    let all = sys::procs_running().unwrap_or(0);
    let after = known_runnable(req, me);
    outside_runnable(all, before, after, tracked)
}

/// The applications' and the manager's own runnable threads (the calling thread included).
fn known_runnable(req: &SampleRequest, me: i32) -> u32 {
    let apps: u32 = req
        .app_pids
        .iter()
        .map(|&(pid, tree)| sys::runnable_in(pid, tree))
        .sum();
    apps + sys::runnable_in(me, false)
}

/// Outside every lock but the enforcer's (briefly, for cgroup membership and to keep confined
/// process trees inside their CPUs, see [`Enforcer::reconfine`]): runnable threads per
/// partition, the tracked processes whose process tree is gone, and (system-wide) the CPU
/// ticks for the gate.
fn measure(shared: &Shared, req: SampleRequest) -> (Vec<u32>, Vec<i32>, Option<CpuTicks>) {
    let mut now = vec![0u32; req.partitions];
    let mut tracked_total = 0;
    let mut tracked_ticks = 0;
    let mut gone = Vec::new();
    for &(k, pid, alive) in &req.tracked {
        // Dead (by its pidfd, zombies included) and nothing left in its partition's cgroup:
        // it is gone. Its pid may have been reused, so it is not measured.
        if !alive {
            if shared.enforcer().cgroup_pids(&req.names[k]).is_empty() {
                gone.push(pid);
            }
            continue;
        }
        let mut pids = vec![pid];
        pids.extend(sys::descendants(pid));
        for p in pids {
            let x = sys::runnable_threads(p);
            now[k] += x;
            tracked_total += x;
            tracked_ticks += sys::cpu_ticks_in(p, false);
        }
    }
    // A child that moved itself out of its program's CPUs, or a thread an application created
    // after its confinement, goes back within one period.
    shared.unless_stopped(Enforcer::reconfine);
    if !req.system_wide {
        return (now, gone, None);
    }
    let me = std::process::id() as i32;
    // The known runnable threads, read just before and just after the system-wide count.
    let before = known_runnable(&req, me);
    let all = sys::procs_running().unwrap_or(0);
    let after = known_runnable(&req, me);
    now[0] += outside_runnable(all, before, after, tracked_total);
    let app_ticks: u64 = req
        .app_pids
        .iter()
        .map(|&(pid, tree)| sys::cpu_ticks_in(pid, tree))
        .sum();
    let ticks = sys::busy_ticks().ok().map(|busy| CpuTicks {
        busy,
        known: app_ticks + tracked_ticks + sys::cpu_ticks_in(me, false),
        known_set: known_set(&req),
    });
    (now, gone, ticks)
}

/// Runnable threads outside every application, tracked process and the manager itself,
/// from the system-wide count `all` and the known threads read `before` and `after` it:
/// the larger reading is subtracted.
pub(crate) fn outside_runnable(all: u32, before: u32, after: u32, tracked: u32) -> u32 {
    all.saturating_sub(before.max(after) + tracked)
}

/// CPUs' worth of time that outside threads used between two samples `secs` apart (`hz`
/// ticks per second). A known process that exited or reaped a child moves the difference
/// below the truth for one sample; it never goes below 0.
pub(crate) fn outside_cpus(before: CpuTicks, now: CpuTicks, secs: f64, hz: f64) -> f64 {
    if secs <= 0.0 || hz <= 0.0 {
        return 0.0;
    }
    let busy = now.busy.saturating_sub(before.busy);
    let known = now.known.saturating_sub(before.known);
    busy.saturating_sub(known) as f64 / hz / secs
}

/// The outside runnable count, or 0 when outside threads did not use enough CPU.
pub(crate) fn gate(runnable: u32, used: OutsideUse) -> u32 {
    if used.real() {
        runnable
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn t(busy: u64, known: u64) -> CpuTicks {
        CpuTicks {
            busy,
            known,
            known_set: 0,
        }
    }

    #[test]
    fn a_reading_artefact_is_gated_and_a_hog_is_not() {
        // 100 Hz, 50 ms: 10 ticks on two CPUs. The known processes used all of them: the
        // one "outside" runnable thread used nothing.
        let none = outside_cpus(t(1000, 500), t(1010, 510), 0.05, 100.0);
        assert_eq!(gate(1, OutsideUse::default().update(none, ALPHA)), 0);
        // Two ticks read a moment apart: 0.4 CPU of nothing, once, is not enough.
        let skew = outside_cpus(t(1000, 500), t(1010, 508), 0.05, 100.0);
        assert!((skew - 0.4).abs() < 1e-9);
        assert_eq!(gate(1, OutsideUse::default().update(skew, ALPHA)), 0);
        // A hog sharing the machine got 3 of the 10 ticks: 0.6 CPU, at once.
        let hog = outside_cpus(t(1000, 500), t(1010, 507), 0.05, 100.0);
        assert_eq!(gate(1, OutsideUse::default().update(hog, ALPHA)), 1);
        // A lighter steady process (0.3 CPU) counts once its average gets there, not at once.
        let first = OutsideUse::default().update(0.3, ALPHA);
        assert_eq!(gate(1, first), 0);
        let settled = (1..20).fold(first, |u, _| u.update(0.3, ALPHA));
        assert_eq!(gate(1, settled), 1);
    }

    #[test]
    fn a_known_process_that_leaves_is_not_outside_use() {
        // Two CPUs busy for 50 ms, all of it a known program's: outside use 0.
        assert_eq!(outside_cpus(t(1000, 500), t(1010, 510), 0.05, 100.0), 0.0);
        // The program exits: its 510 ticks leave the known sum. Subtracted anyway, the whole
        // busy interval would read as 2 CPUs of outside use (and open the gate for ~200 ms).
        let gone = t(1010, 0);
        assert_eq!(outside_cpus(t(1000, 500), gone, 0.05, 100.0), 2.0);
        assert!(
            !comparable(t(1000, 500), gone),
            "a falling sum is not compared"
        );
        // A new program registers: another set of processes, not compared either.
        let other = CpuTicks {
            known_set: 1,
            ..t(1010, 520)
        };
        assert!(!comparable(t(1000, 500), other));
        assert!(comparable(t(1000, 500), t(1010, 505)));
    }

    #[test]
    fn the_larger_known_reading_is_subtracted() {
        // Two app workers seen at `all`'s instant, one of them asleep at the first reading.
        assert_eq!(outside_runnable(3, 1, 2, 0), 1);
        assert_eq!(outside_runnable(3, 2, 2, 0), 1);
        assert_eq!(outside_runnable(2, 3, 1, 0), 0);
        assert_eq!(outside_runnable(5, 1, 1, 2), 2);
    }

    proptest! {
        /// Never negative, never more than the busy time allows, 0 for a bad interval.
        #[test]
        fn outside_use_is_bounded(b0 in 0u64..1_000_000, db in 0u64..1000,
                                  k0 in 0u64..1_000_000, dk in 0u64..2000,
                                  secs in 0.0f64..2.0) {
            let used = outside_cpus(t(b0, k0), t(b0 + db, k0 + dk), secs, 100.0);
            prop_assert!(used >= 0.0);
            if secs > 0.0 {
                prop_assert!(used <= db as f64 / 100.0 / secs + 1e-9);
            } else {
                prop_assert_eq!(used, 0.0);
            }
            // Counters that went backwards (a process gone) are not outside use.
            prop_assert_eq!(outside_cpus(t(b0 + db, k0), t(b0, k0), 1.0, 100.0), 0.0);
        }

        /// The gate only ever lowers the count, and only to 0; the average stays between
        /// the smallest and largest use folded in.
        #[test]
        fn gate_passes_or_zeroes(n in 0u32..64, uses in prop::collection::vec(0.0f64..4.0, 1..20)) {
            let u = uses.iter().fold(OutsideUse::default(), |u, &x| u.update(x, ALPHA));
            let g = gate(n, u);
            prop_assert!(g == n || g == 0);
            prop_assert_eq!(g == n, n == 0 || u.real());
            let hi = uses.iter().cloned().fold(0.0, f64::max);
            prop_assert!(u.avg >= 0.0 && u.avg <= hi + 1e-9);
        }
    }
}
