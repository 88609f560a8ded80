//! The system-wide outside-load estimate, as pure functions over CPU-time readings: how much
//! CPU outside threads used between two samples ([`outside_cpus`]), its average
//! ([`OutsideUse`]), and what that lets the sampled count of outside runnable threads say
//! ([`gate`]). Why each piece is there: the sampler's notes (`daemon/sample.rs`).
//!
//! **Niced processes are background, not outside demand.** The kernel shares a contended CPU
//! by CFS weight: nice 0 weighs 1024, nice 10 weighs 110, nice 19 weighs 15. A `nice -n 10`
//! build beside a nice-0 program gets about 110 / (1024 + 110) ≈ 10 % of a CPU they share, a
//! `nice -n 19` loop about 1.4 %. Without the manager, a managed program beside them runs at
//! ~90–98 % of its full speed; counting a niced runnable thread as a CPU of outside demand
//! (the manager then keeps one of two CPUs for it) costs the program ~2×. So only CPU time of
//! tasks at nice ≤ 0 is outside *use*: the kernel counts user time of a task at positive nice
//! in `/proc/stat`'s `nice` column and its system time in `system` with everyone's, so the
//! outside busy time is scaled by the share of outside user time that was not niced
//! (`outside_cpus`). A niced outside load then never opens the gate on its own; beside a
//! nice-0 outside load its runnable threads are still in `procs_running`, so the count that
//! stands is capped at the outside use rounded up (`gate`): a niced thread that wants a CPU
//! gets ~1–10 % of one when contended and never lifts that cap; a nice-0 one gets its fair
//! share, so the cap rises to the true count within a few samples.
//!
//! **Managed programs that are themselves niced** (`nice -n 5 my-program`): their user time
//! goes to the `nice` column too. The known processes' ticks are split the same way (by the
//! process's nice, `sys::ProcStat::split`), and subtracted column by column, so a niced
//! program is neither outside use nor a hole that hides real outside use. Each difference
//! saturates at 0, and the result never exceeds the outside busy time, whatever the columns
//! say (a thread niced apart from its process, a renice between samples: the sample whose
//! known columns fell is not compared, `comparable`).

use crate::registry::SampleRequest;
use crate::sys::{CpuSplit, ProcRunnable};
use std::collections::HashMap;

/// Outside threads that used at least this much CPU since the last sample (in CPUs) count
/// at once: a process that starts spinning beside busy applications gets about 2/3 of a CPU.
pub(crate) const MIN_OUTSIDE_CPUS_NOW: f64 = 0.5;
/// Or at least this much on average ([`OutsideUse`], the weight of the runnable average).
pub(crate) const MIN_OUTSIDE_CPUS: f64 = 0.25;
/// The cap on the counted outside threads is the average outside use less this, rounded up
/// (at least 1): one CPU used in full, give or take a tick, is one thread.
const CAP_SLACK: f64 = 0.1;

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

    /// The gate is open only by the average of a load that has stopped: outside threads
    /// used less than [`MIN_OUTSIDE_CPUS_NOW`] in the last sample, under half their average.
    /// Then a walk of `/proc` says whether any outside thread still wants a CPU
    /// ([`OutsideUse::forget`] if none): without it, the ~400 ms the average takes to
    /// decay let any thread caught runnable at a sample (a shell, a status request) count
    /// as a CPU of outside demand right after a busy process exited (issue 26 item 3).
    pub(crate) fn fading(self) -> bool {
        self.real() && self.now < MIN_OUTSIDE_CPUS_NOW && self.now < self.avg / 2.0
    }

    /// The outside load the average remembers is gone (no outside thread wants a CPU): keep
    /// only the last sample's use.
    pub(crate) fn forget(self) -> OutsideUse {
        OutsideUse {
            now: self.now,
            avg: self.now,
        }
    }

    /// How many outside runnable threads this use can stand for: the average use, less a
    /// tick's slack, rounded up; at least 1.
    pub(crate) fn cap(self) -> u32 {
        let c = (self.avg - CAP_SLACK).ceil();
        if c >= 1.0 {
            c.min(f64::from(u32::MAX)) as u32
        } else {
            1
        }
    }
}

/// Cumulative CPU ticks: the whole system busy, and the known processes (applications,
/// tracked processes, the manager), each split by `/proc/stat` column, with a fingerprint of
/// which processes the known ticks sum.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct CpuTicks {
    pub system: CpuSplit,
    pub known: CpuSplit,
    /// [`known_set`] of the processes `known` sums.
    pub known_set: u64,
}

/// Whether two readings of the known ticks can be subtracted: the same processes, and no
/// column of their sum fell (a known process that exited is read as 0 until it is
/// unregistered; one reniced across 0 moves its user time between columns).
pub(crate) fn comparable(before: CpuTicks, now: CpuTicks) -> bool {
    before.known_set == now.known_set && now.known.at_least(&before.known)
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

/// CPUs' worth of time that outside threads at nice ≤ 0 used between two samples `secs`
/// apart (`hz` ticks per second): the outside busy time (the system's less the known
/// processes'), scaled by the part of the outside user time that was not niced (all of it
/// when outside threads used no user time). A known process that exited or reaped a child
/// moves the difference below the truth for one sample; it never goes below 0 nor above the
/// outside busy time.
pub(crate) fn outside_cpus(before: CpuTicks, now: CpuTicks, secs: f64, hz: f64) -> f64 {
    if secs <= 0.0 || hz <= 0.0 {
        return 0.0;
    }
    let d = |a: u64, b: u64| b.saturating_sub(a);
    let outside = |col: fn(&CpuSplit) -> u64| {
        d(col(&before.system), col(&now.system))
            .saturating_sub(d(col(&before.known), col(&now.known)))
    };
    let busy = outside(CpuSplit::total);
    let user = outside(|c| c.user);
    let niced = outside(|c| c.nice);
    let share = if user + niced == 0 {
        1.0
    } else {
        user as f64 / (user + niced) as f64
    };
    busy as f64 * share / hz / secs
}

/// The outside runnable count that stands: 0 when outside threads did not use enough CPU,
/// else at most [`OutsideUse::cap`].
pub(crate) fn gate(runnable: u32, used: OutsideUse) -> u32 {
    if used.real() {
        runnable.min(used.cap())
    } else {
        0
    }
}

/// The runnable threads at nice ≤ 0 of the processes outside `known` ((pid, tree): the
/// process, and its descendants too when `tree` is set), from one walk of `/proc` (`procs`).
/// What a registration lowers the last sample's count to: a thread of a process that has
/// exited is not in the walk, and a niced thread is not counted, so neither can cost the
/// newcomer its first allocation. (`procs_running` counts niced threads too; beside a busy
/// niced build its reading moved by a few threads between the last sample and the
/// registration, and a departed nice-0 loop stayed counted in 2 of 6 runs of
/// `tests/registration.rs` at load 10–12.)
pub(crate) fn foreground_outside(procs: &[ProcRunnable], known: &[(i32, bool)]) -> u32 {
    let parent: HashMap<i32, i32> = procs.iter().map(|p| (p.pid, p.ppid)).collect();
    let is_known = |pid: i32| {
        if known.iter().any(|&(k, _)| k == pid) {
            return true;
        }
        // Walk up to a tree root; a cycle cannot happen in /proc, but the depth is bounded.
        let mut p = pid;
        for _ in 0..procs.len() {
            match parent.get(&p) {
                Some(&q) if q > 1 => {
                    if known.iter().any(|&(k, tree)| tree && k == q) {
                        return true;
                    }
                    p = q;
                }
                _ => return false,
            }
        }
        false
    };
    procs
        .iter()
        .filter(|p| p.foreground > 0 && !is_known(p.pid))
        .map(|p| p.foreground)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const ALPHA: f64 = 0.25;

    /// System and known ticks, all nice 0 and user time.
    fn t(busy: u64, known: u64) -> CpuTicks {
        CpuTicks {
            system: CpuSplit {
                user: busy,
                ..CpuSplit::default()
            },
            known: CpuSplit {
                user: known,
                ..CpuSplit::default()
            },
            known_set: 0,
        }
    }

    fn split(user: u64, nice: u64, other: u64) -> CpuSplit {
        CpuSplit { user, nice, other }
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
    fn a_load_that_stopped_is_fading_and_a_steady_one_is_not() {
        // Two CPUs of outside use for a while, then the process exits: the average keeps
        // the gate open for several samples while the last sample shows nothing.
        let busy = (0..20).fold(OutsideUse::default(), |u, _| u.update(2.0, ALPHA));
        assert!(!busy.fading(), "a load still running is not fading");
        let after = busy.update(0.0, ALPHA);
        assert!(after.real() && after.fading());
        assert_eq!(gate(1, after), 1, "one phantom thread would count as a CPU");
        // Forgotten (the walk found no outside thread that wants a CPU): closed at once.
        let forgotten = after.forget();
        assert!(!forgotten.real());
        assert_eq!(gate(1, forgotten), 0);
        // A steady light load (0.3 CPU) is not fading: no walk, it keeps counting.
        let steady = (0..20).fold(OutsideUse::default(), |u, _| u.update(0.3, ALPHA));
        assert!(steady.real() && !steady.fading());
        // A closed gate is never fading.
        assert!(!OutsideUse::default().fading());
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
    fn niced_outside_time_is_not_outside_use() {
        // A program holds one CPU (5 user ticks in 50 ms); a `nice -n 19` loop holds the
        // other (5 ticks in the nice column): no outside use, whatever it runs.
        let before = CpuTicks {
            system: split(1000, 2000, 300),
            known: split(500, 0, 10),
            known_set: 0,
        };
        let now = CpuTicks {
            system: split(1005, 2005, 300),
            known: split(505, 0, 10),
            ..before
        };
        assert_eq!(outside_cpus(before, now, 0.05, 100.0), 0.0);
        // A niced build: 8 ticks of user time in the nice column, 2 of system time. The
        // system time is the build's too (scaled by the outside user time not niced: none).
        let build = CpuTicks {
            system: split(1005, 2008, 302),
            ..now
        };
        assert_eq!(outside_cpus(before, build, 0.05, 100.0), 0.0);
        // A nice-0 hog beside the niced build: 4 ticks user, 4 nice, 2 system outside: half
        // the outside user time is not niced, so half of the 10 outside ticks count.
        let both = CpuTicks {
            system: split(1009, 2004, 302),
            ..now
        };
        let used = outside_cpus(before, both, 0.05, 100.0);
        assert!((used - 1.0).abs() < 1e-9, "{used}");
    }

    #[test]
    fn a_niced_managed_program_is_neither_outside_use_nor_a_hole() {
        // The program runs at nice 10: its 10 user ticks are in the nice column, and in its
        // own known nice column.
        let before = CpuTicks {
            system: split(1000, 2000, 300),
            known: split(0, 500, 10),
            known_set: 0,
        };
        let alone = CpuTicks {
            system: split(1000, 2010, 300),
            known: split(0, 510, 10),
            ..before
        };
        assert_eq!(outside_cpus(before, alone, 0.05, 100.0), 0.0);
        // A nice-0 hog beside it takes half of the ticks: 5 user ticks of outside use, 1 CPU.
        let hog = CpuTicks {
            system: split(1005, 2005, 300),
            known: split(0, 505, 10),
            ..before
        };
        assert!((outside_cpus(before, hog, 0.05, 100.0) - 1.0).abs() < 1e-9);
        // Reniced between samples: its user time moved columns; not compared.
        let reniced = CpuTicks {
            known: split(505, 0, 10),
            ..hog
        };
        assert!(!comparable(before, reniced));
    }

    #[test]
    fn the_count_is_capped_at_what_outside_threads_use() {
        let settled = |x: f64| (0..40).fold(OutsideUse::default(), |u, _| u.update(x, ALPHA));
        // One nice-0 hog using a CPU beside a runnable niced thread that gets nothing: 1.
        assert_eq!(gate(2, settled(1.0)), 1);
        assert_eq!(gate(2, settled(1.08)), 1);
        // Two nice-0 hogs, one on the free CPU and one sharing an application's: 2.
        assert_eq!(gate(2, settled(1.5)), 2);
        // A hog that just started: the average is low, but the gate is open on its own use,
        // and it counts as 1.
        assert_eq!(gate(1, OutsideUse::default().update(0.67, ALPHA)), 1);
        // Never above the runnable count.
        assert_eq!(gate(1, settled(3.0)), 1);
    }

    fn pr(pid: i32, ppid: i32, foreground: u32) -> ProcRunnable {
        ProcRunnable {
            pid,
            ppid,
            foreground,
        }
    }

    #[test]
    fn a_registration_counts_foreground_threads_outside_the_known_processes() {
        // init 1; a shell 10 with a busy child 11 and grandchild 12; an application 20 with
        // two runnable workers; the manager 30; a tracked tree 40 -> 41.
        let procs = [
            pr(1, 0, 0),
            pr(10, 1, 0),
            pr(11, 10, 1),
            pr(12, 11, 2),
            pr(20, 1, 2),
            pr(30, 1, 1),
            pr(40, 1, 0),
            pr(41, 40, 1),
        ];
        let known = [(20, false), (30, false), (40, true)];
        assert_eq!(foreground_outside(&procs, &known), 3);
        // The application's own tree (a jobserver build) takes in what it started.
        assert_eq!(
            foreground_outside(&procs, &[(10, true), (20, false), (30, false)]),
            1
        );
        // A loop that has exited is not in the walk: nothing counts.
        let gone = [pr(1, 0, 0), pr(20, 1, 2), pr(30, 1, 1)];
        assert_eq!(foreground_outside(&gone, &known), 0);
    }

    proptest! {
        /// Never more than the walk's foreground threads, and all of them when nothing is
        /// known.
        #[test]
        fn the_outside_count_is_bounded(fg in prop::collection::vec(0u32..4, 1..40),
                                        known in prop::collection::vec((0usize..40, any::<bool>()), 0..6)) {
            let procs: Vec<ProcRunnable> = fg
                .iter()
                .enumerate()
                .map(|(i, &f)| pr(i as i32 + 2, if i == 0 { 1 } else { i as i32 + 1 - (i as i32 % 3).min(1) }, f))
                .collect();
            let all: u32 = fg.iter().sum();
            prop_assert_eq!(foreground_outside(&procs, &[]), all);
            let k: Vec<(i32, bool)> = known.iter().map(|&(i, t)| (i as i32 + 2, t)).collect();
            prop_assert!(foreground_outside(&procs, &k) <= all);
        }

        /// Never negative, never more than the busy time allows, 0 for a bad interval,
        /// whatever the columns.
        #[test]
        fn outside_use_is_bounded(s0 in (0u64..1_000_000, 0u64..1_000_000, 0u64..1_000_000),
                                  ds in (0u64..1000, 0u64..1000, 0u64..1000),
                                  k0 in (0u64..1_000_000, 0u64..1_000_000, 0u64..1_000_000),
                                  dk in (0u64..2000, 0u64..2000, 0u64..2000),
                                  secs in 0.0f64..2.0) {
            let before = CpuTicks {
                system: split(s0.0, s0.1, s0.2),
                known: split(k0.0, k0.1, k0.2),
                known_set: 0,
            };
            let now = CpuTicks {
                system: split(s0.0 + ds.0, s0.1 + ds.1, s0.2 + ds.2),
                known: split(k0.0 + dk.0, k0.1 + dk.1, k0.2 + dk.2),
                known_set: 0,
            };
            let used = outside_cpus(before, now, secs, 100.0);
            let db = ds.0 + ds.1 + ds.2;
            prop_assert!(used >= 0.0);
            if secs > 0.0 {
                prop_assert!(used <= db as f64 / 100.0 / secs + 1e-9);
            } else {
                prop_assert_eq!(used, 0.0);
            }
            // Counters that went backwards (a process gone) are not outside use.
            prop_assert_eq!(outside_cpus(now, before, 1.0, 100.0), 0.0);
        }

        /// The gate only ever lowers the count, to 0 when the use is not real and to at
        /// least 1 when it is; the average stays between the smallest and largest use
        /// folded in.
        #[test]
        fn gate_lowers_or_zeroes(n in 0u32..64, uses in prop::collection::vec(0.0f64..4.0, 1..20)) {
            let u = uses.iter().fold(OutsideUse::default(), |u, &x| u.update(x, ALPHA));
            let g = gate(n, u);
            prop_assert!(g <= n);
            prop_assert_eq!(g == 0, n == 0 || !u.real());
            let hi = uses.iter().cloned().fold(0.0, f64::max);
            prop_assert!(u.avg >= 0.0 && u.avg <= hi + 1e-9);
        }
    }
}
