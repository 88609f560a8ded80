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
//!    minus the known processes' CPU time, in CPUs, at least
//!    [`MIN_OUTSIDE_CPUS_NOW`](outside::MIN_OUTSIDE_CPUS_NOW) since the last sample or
//!    [`MIN_OUTSIDE_CPUS`](outside::MIN_OUTSIDE_CPUS) on average (`OutsideUse`, `gate`,
//!    in `daemon/outside.rs`). A phantom
//!    of the readings uses no CPU; a process that wants a CPU uses a good part of one even
//!    when it has to share it. Two thresholds because the ticks are coarse (10 ms; a 50 ms
//!    sample of two CPUs holds 10) and read a moment apart: beside a busy program one
//!    sample shows up to ±2 ticks (0.4 CPU) of nothing (docs/bench/manager.md §9). The
//!    average keeps a real load counted for about 400 ms after it ends (0.25 weight per
//!    50 ms sample), which let a phantom right after real outside work count: a program
//!    started 10 ms after a busy process exited was lowered to 1 CPU of 2 within its first
//!    three allocations in 3 of 20 quiet workspace runs (`tests/registration.rs`). So when
//!    the gate is open only by the average of a load that stopped (`OutsideUse::fading`),
//!    a walk of `/proc` (`outside_runnable_now`) decides: no outside thread at nice ≤ 0
//!    wants a CPU, and the average is forgotten (`OutsideUse::forget`). A steady light
//!    load is never fading, so it costs no walk.
//!
//! **Niced processes are background, not outside demand.** Only CPU time of tasks at nice ≤
//! 0 is outside use, and the count that stands is capped at that use rounded up
//! (`daemon/outside.rs` has the reasoning: CFS weights give a nice-10 task ~10 % of a CPU it
//! shares with a nice-0 one, a nice-19 task ~1.4 %). Before, one `nice -n 19` loop beside a
//! managed program on 2 CPUs counted as a CPU of outside demand: the program got 1 CPU of 2
//! where the kernel alone gives it ~98 % of both (`tests/niced.rs`), and every niced build
//! on a shared machine lowered every managed program. What stays: the system time of niced
//! processes is in `/proc/stat`'s `system` column with everyone's; it is attributed in
//! proportion to the outside user time (a niced build's ~18 % of system time is then not
//! outside use either). At a registration, the count is lowered to a fresh one
//! (`outside_runnable_now`) from walks of `/proc` that see each thread's state and nice:
//! runnable threads at nice ≤ 0 of processes that are not known (`outside::foreground_outside`).
//! `procs_running` cannot tell niced threads apart, and beside a dozen runnable niced build
//! threads a departed nice-0 loop stayed counted (`tests/registration.rs` failed 6 runs of
//! 8 with a plain minimum of it, 2 of 6 comparing it with the last sample's).
//!
//! **What a sample costs.** The gate zeroes the count whenever outside threads used too
//! little CPU, which is nearly always beside managed programs alone, so the CPU ticks (one
//! `/proc/stat` read, one `/proc/<pid>/stat` per application and the manager's own) are read
//! first and the per-thread state reads that count runnable threads are made only when the
//! gate is open. `/proc` files are read with one large buffer (`sys::read_proc`), and the
//! manager's own threads once a count, not twice. Beside one busy program a sample took
//! 22–33 `/proc` opens and 100–170 `read` calls; one whose gate is closed now takes 4 and
//! about 8, and the manager's CPU fell from ~1.4 % to ~0.9 % of a CPU on a loaded machine
//! where the gate was open in a third of the samples (docs/bench/manager.md §15).

use super::outside::{self, comparable, gate, CpuTicks, OutsideUse};
use super::Shared;
use crate::enforce::Enforcer;
use crate::registry::SampleRequest;
use crate::sys::{self, CpuSplit};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Weight of a new sample in the runnable and outside-use averages.
const ALPHA: f64 = 0.25;

/// What the system-wide estimate keeps from one sample to the next.
#[derive(Copy, Clone, Debug)]
struct Outside {
    hz: f64,
    /// The last CPU-time reading, and when it was taken.
    last: Option<(Instant, CpuTicks)>,
    used: OutsideUse,
}

impl Outside {
    /// Fold in a reading taken `at`; the use to gate this sample's count with. After the
    /// first reading nothing is known of outside use yet, so no count stands: the first
    /// sample used to pass ungated, and with a dozen niced build threads runnable it set
    /// the outside average to 3 at the manager's start.
    fn fold(&mut self, t: CpuTicks, at: Instant) -> OutsideUse {
        let Some((then, before)) = self.last.replace((at, t)) else {
            return self.used;
        };
        // A known process that left (or came, or exited before the manager saw it go)
        // between the readings takes its ticks out of (or brings them into) the known sum:
        // the difference then says nothing about outside threads, and would count a
        // departed program's whole CPU time as outside use. Such a sample is not folded in.
        if comparable(before, t) {
            let secs = at.duration_since(then).as_secs_f64();
            let now = outside::outside_cpus(before, t, secs, self.hz);
            self.used = self.used.update(now, ALPHA);
        }
        self.used
    }
}

/// Sample runnable threads of uncontrolled processes and reap exited ones.
pub(super) async fn sampler(shared: Arc<Shared>, period: Duration) {
    let mut iv = tokio::time::interval(period);
    iv.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut state = Outside {
        hz: sys::ticks_per_second() as f64,
        last: None,
        used: OutsideUse::default(),
    };
    loop {
        iv.tick().await;
        let req = shared.lock().sample_request();
        let (now, gone) = if nothing_to_measure(&shared, &req) {
            // No thread hop, no /proc read: with tracked processes only and none tracked, a
            // sample costs the lock it takes (the averages still decay to 0).
            (vec![0; req.partitions], Vec::new())
        } else {
            let s = shared.clone();
            let mut st = state;
            match tokio::task::spawn_blocking(move || (measure(&s, req, &mut st), st)).await {
                Ok((m, st)) => {
                    state = st;
                    m
                }
                Err(_) => continue,
            }
        };
        let mut r = shared.lock();
        let reaped = r.untrack(&gone);
        let changed = r.update_runnable(&now, ALPHA);
        drop(r);
        if changed || reaped {
            shared.request_round();
        }
    }
}

/// Whether a sample would find nothing: no tracked process, no system-wide count, and no
/// confined process tree or application to keep inside its CPUs. An enforcer busy applying a reallocation
/// counts as having trees (the sample then measures, as it always did).
pub(super) fn nothing_to_measure(shared: &Shared, req: &SampleRequest) -> bool {
    req.tracked.is_empty() && !req.system_wide && !shared.may_have_confined()
}

/// How many readings [`outside_runnable_now`] takes, and how far apart: a thread that is
/// runnable in all of them wants a CPU; one caught in one reading (a short-lived process, a
/// shell, the status request of whoever watches) is not load.
const FRESH_READINGS: u32 = 3;
const FRESH_SPACING: Duration = Duration::from_millis(2);

/// How long a registration's fresh count serves the registrations after it.
const FRESH_REUSE: Duration = Duration::from_millis(20);

/// The last fresh count a registration took, and when: registrations less than
/// [`FRESH_REUSE`] apart share it. A stream of registrations that exit at once, hundreds a
/// second beside a busy outside process, walked `/proc` three times each and cost the
/// manager 8.5 ms of CPU per registration in a debug build (`tests/churn.rs`: 509 ticks for
/// 600); shared, at most one count per 20 ms is taken, whatever the rate.
#[derive(Debug, Default, Clone)]
pub(crate) struct FreshCount(Arc<std::sync::Mutex<Option<(Instant, u32)>>>);

impl FreshCount {
    /// The count taken less than [`FRESH_REUSE`] ago, else a new one from `count`.
    pub(crate) fn get(&self, count: impl FnOnce() -> u32) -> u32 {
        let last = *crate::sync::lock(&self.0);
        if let Some((_, n)) = last.filter(|(at, _)| at.elapsed() < FRESH_REUSE) {
            return n;
        }
        let n = count();
        *crate::sync::lock(&self.0) = Some((Instant::now(), n));
        n
    }
}

/// The system's runnable threads at nice ≤ 0 outside every application, tracked process and
/// the manager itself, now: the least of [`FRESH_READINGS`] walks of `/proc`
/// ([`sys::foreground_runnable`]) [`FRESH_SPACING`] apart (system-wide accounting; see the
/// module's notes). What a registration lowers the last sample's count to
/// ([`crate::registry::Registry::lower_outside`]).
pub(crate) fn outside_runnable_now(req: &SampleRequest) -> u32 {
    let mut known: Vec<(i32, bool)> = req.app_pids.clone();
    known.extend(req.tracked.iter().map(|&(_, pid, _)| (pid, true)));
    known.push((std::process::id() as i32, false));
    let once = || outside::foreground_outside(&sys::foreground_runnable(), &known);
    let mut least = once();
    for _ in 1..FRESH_READINGS {
        if least == 0 {
            break;
        }
        std::thread::sleep(FRESH_SPACING);
        least = least.min(once());
    }
    least
}

/// The applications' runnable threads.
fn apps_runnable(req: &SampleRequest) -> u32 {
    req.app_pids
        .iter()
        .map(|&(pid, tree)| sys::runnable_in(pid, tree))
        .sum()
}

/// The manager's own runnable threads (the calling thread included), read once a count: its
/// threads do not flicker with an application's tasks, and reading them twice was a third of
/// a sample's `/proc` reads.
fn own_runnable() -> u32 {
    sys::runnable_in(std::process::id() as i32, false)
}

/// Outside every lock but the enforcer's (briefly, for cgroup membership and to keep confined
/// process trees inside their CPUs, see [`Enforcer::reconfine`]): runnable threads per
/// partition, and the tracked processes whose process tree is gone. System-wide, the CPU
/// ticks are read first: when they show no outside use the gate would zero the default
/// partition's count whatever it is, so the per-thread reads that count it are skipped.
fn measure(shared: &Shared, req: SampleRequest, state: &mut Outside) -> (Vec<u32>, Vec<i32>) {
    let mut now = vec![0u32; req.partitions];
    let mut tracked_total = 0;
    let mut tracked_ticks = CpuSplit::default();
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
            tracked_ticks = tracked_ticks + sys::cpu_split_in(p, false);
        }
    }
    // A child that moved itself out of its program's CPUs, or a thread an application created
    // after its confinement, goes back within one period.
    shared.unless_stopped(Enforcer::reconfine);
    if !req.system_wide {
        return (now, gone);
    }
    let mut used = cpu_ticks(&req, tracked_ticks).map(|t| state.fold(t, Instant::now()));
    if shared.outside_gone.swap(false, Ordering::Relaxed) {
        // A registration's walk just found no outside thread: this sample's interval may
        // span a load that exited before it (a killed loop's last ticks), which would open
        // the gate by its last reading for one period. Outside use starts again from 0.
        state.used = OutsideUse::default();
        used = used.map(|_| state.used);
    }
    if used.is_some_and(OutsideUse::fading) && outside_runnable_now(&req) == 0 {
        // The load that opened the gate has exited: it stops counting now, not once the
        // average has decayed.
        state.used = state.used.forget();
        used = Some(state.used);
    }
    if used.is_some_and(|u| !u.real()) {
        shared.outside_seen.store(0, Ordering::Relaxed);
        now[0] = 0;
        return (now, gone);
    }
    // The applications' runnable threads, read just before and just after the system-wide
    // count.
    let mine = own_runnable();
    let before = apps_runnable(&req);
    let all = sys::procs_running().unwrap_or(0);
    let after = apps_runnable(&req);
    let outside = outside_runnable(all, before + mine, after + mine, tracked_total);
    shared.outside_seen.store(outside, Ordering::Relaxed);
    let runnable = now[0] + outside;
    now[0] = used.map_or(runnable, |u| gate(runnable, u));
    tracing::trace!(
        runnable,
        used_now = used.map(|u| u.now),
        used_avg = used.map(|u| u.avg),
        counted = now[0],
        "outside load sampled"
    );
    (now, gone)
}

/// The system's busy ticks and the known processes' (applications, tracked processes whose
/// ticks are `tracked`, the manager), one `/proc/<pid>/stat` read a process; `None` when
/// `/proc/stat` cannot be read.
fn cpu_ticks(req: &SampleRequest, tracked: CpuSplit) -> Option<CpuTicks> {
    let me = std::process::id() as i32;
    let known = req
        .app_pids
        .iter()
        .map(|&(pid, tree)| sys::cpu_split_in(pid, tree))
        .fold(tracked + sys::cpu_split_in(me, false), |a, b| a + b);
    let system = sys::system_cpu().ok()?;
    Some(CpuTicks {
        system,
        known,
        known_set: outside::known_set(req),
    })
}

/// Runnable threads outside every application, tracked process and the manager itself,
/// from the system-wide count `all` and the known threads read `before` and `after` it:
/// the larger reading is subtracted.
pub(crate) fn outside_runnable(all: u32, before: u32, after: u32, tracked: u32) -> u32 {
    all.saturating_sub(before.max(after) + tracked)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_larger_known_reading_is_subtracted() {
        // Two app workers seen at `all`'s instant, one of them asleep at the first reading.
        assert_eq!(outside_runnable(3, 1, 2, 0), 1);
        assert_eq!(outside_runnable(3, 2, 2, 0), 1);
        assert_eq!(outside_runnable(2, 3, 1, 0), 0);
        assert_eq!(outside_runnable(5, 1, 1, 2), 2);
    }
}
