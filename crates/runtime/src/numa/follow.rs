//! Memory follows CPUs: the pure rules (where a pool's memory belongs, which pages are
//! strays, how fast to move them) and the background thread that applies them when the
//! manager moves the pool's CPU set.
//!
//! The follower runs on its own thread, never on a worker: it notices a new CPU set by
//! polling the pool's `cpus_epoch` (one atomic load every [`POLL`]), waits until the set has
//! been stable for Verghese's migration cool-down (a set that flips back and forth is not
//! worth chasing), then moves the stray pages of every registered region in chunks with
//! `move_pages(2)` and points the regions' memory policy at the new node (`mbind`
//! `MPOL_PREFERRED`), so pages faulted later land there too. Pacing: the follower keeps its
//! duty cycle at or below [`FollowParams::duty`] of one CPU.
//!
//! Each region is moved only when Verghese's cost rule ([`cost_rule`]) says it pays: the
//! remote accesses it would take over [`FollowParams::horizon`] (its hinted touch rate since
//! the CPU set changed; once all of a pool's CPUs left a node every access to a stray page is
//! remote) times the remote-miss penalty must reach its stray pages times the move cost. The
//! costs are partita-numa's `calibrate` measurements (a side thread measures them once; the
//! thesis' 200 µs / 1.2 µs until then). A deferred region is looked at again with a fresh
//! window (back-off up to 1 s); a region whose move can never pay is left and said so.

use std::time::Duration;

use partita_numa::PageStatus;

/// How often the follower looks at the pool's CPU set.
pub(crate) const POLL: Duration = Duration::from_millis(5);

/// Parameters of the follower (numa.md: cool-down 100 ms; chunk = `move_pages` batch).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct FollowParams {
    /// The CPU set must be unchanged this long before memory follows it.
    pub(crate) settle: Duration,
    /// Pages per `move_pages` call.
    pub(crate) chunk: usize,
    /// Largest fraction of one CPU the follower may use while moving.
    pub(crate) duty: f64,
    /// How long a placement is expected to last: the cost rule weighs the remote accesses
    /// of this long against the cost of moving.
    pub(crate) horizon: Duration,
}

impl Default for FollowParams {
    fn default() -> Self {
        FollowParams {
            // A quarter of the thesis' 100 ms freeze: the manager's own hysteresis already
            // damps flapping, and the proof asks for ≥ 95% moved within 1 s.
            settle: Duration::from_millis(25),
            chunk: 256,
            duty: 0.5,
            // The proof's own window (memory follows within 1 s); the manager's hysteresis
            // keeps a placement at least this long under steady demand.
            horizon: Duration::from_secs(1),
        }
    }
}

/// Where a pool's memory belongs: the node holding most of its CPUs (ties: lowest id), and
/// every node of its CPUs (pages already on one of those stay). `None` without CPUs.
///
/// ```text
/// follow_target(&[1, 1, 0]) == Some((1, vec![0, 1]))
/// ```
pub(crate) fn follow_target(cpu_nodes: &[u32]) -> Option<(u32, Vec<u32>)> {
    let mut nodes: Vec<u32> = cpu_nodes.to_vec();
    nodes.sort_unstable();
    let mut best: Option<(u32, usize)> = None;
    for chunk in nodes.chunk_by(|a, b| a == b) {
        if best.is_none_or(|(_, n)| chunk.len() > n) {
            best = Some((chunk[0], chunk.len()));
        }
    }
    nodes.dedup();
    best.map(|(main, _)| (main, nodes))
}

/// Indices of the pages that are present and on a node outside `allowed`.
pub(crate) fn stray_pages(status: &[PageStatus], allowed: &[u32]) -> Vec<usize> {
    status
        .iter()
        .enumerate()
        .filter(|(_, s)| s.node().is_some_and(|n| !allowed.contains(&n)))
        .map(|(i, _)| i)
        .collect()
}

/// The pause after a chunk that took `spent`, so the follower uses at most `duty` of a CPU.
pub(crate) fn pause_after(spent: Duration, duty: f64) -> Duration {
    let duty = duty.clamp(0.01, 1.0);
    spent.mul_f64((1.0 - duty) / duty)
}

/// The thesis' costs (numa.md): ~200 µs to move a page, ~1.2 µs per remote miss; used until
/// (or where) `calibrate` has measured this machine's.
pub(crate) const THESIS_COSTS: Costs = Costs {
    move_ns_per_page: 200_000.0,
    remote_penalty_ns: 1_200.0,
    measured: false,
};

/// The two costs of Verghese's rule.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Costs {
    /// Nanoseconds to move one page (`calibrate::move_cost_ns`).
    pub(crate) move_ns_per_page: f64,
    /// Extra nanoseconds of a remote over a local miss (`calibrate::remote_penalty_ns`).
    pub(crate) remote_penalty_ns: f64,
    /// Measured on this machine (else the thesis' numbers).
    pub(crate) measured: bool,
}

/// What to do with a region's stray pages now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Moving pays for itself within the horizon: move now.
    MigrateNow,
    /// Not (yet) worth it: look again after more accesses have been observed.
    Defer,
    /// Moving can never pay on this machine (or there is nothing to move).
    Never,
}

/// A verdict and why, in words for the log line.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Decision {
    pub(crate) verdict: Verdict,
    pub(crate) why: String,
}

/// Verghese's cost rule for one region: moving `pages` stray pages costs `pages × move cost`;
/// staying costs `expected remote accesses × remote penalty`. Move now when staying costs at
/// least as much (equivalently: the accesses per page reach the trigger `move cost /
/// penalty`) and some access is expected at all; defer otherwise; never when a remote access
/// costs nothing extra (an emulated machine whose nodes are equally fast) or the costs are
/// not numbers.
/// `expected_remote = None` means no access counts exist for the region (no hints, no
/// sampler): registered memory is the pool's working set, so it is taken as hot (the thesis'
/// migrate case once every CPU of the pool left the node).
pub(crate) fn cost_rule(pages: usize, expected_remote: Option<f64>, costs: Costs) -> Decision {
    let (m, p) = (costs.move_ns_per_page, costs.remote_penalty_ns);
    let src = if costs.measured { "measured" } else { "thesis" };
    let decision = |verdict, why: String| Decision { verdict, why };
    if pages == 0 {
        return decision(Verdict::Never, "no stray pages".into());
    }
    if !(m.is_finite() && m >= 0.0) {
        return decision(Verdict::Never, format!("move cost {m} ns is not a cost"));
    }
    if !(p.is_finite() && p > 0.0) {
        return decision(
            Verdict::Never,
            format!("a remote access costs nothing extra ({src} penalty {p:.0} ns)"),
        );
    }
    let cost = pages as f64 * m;
    let Some(e) = expected_remote.filter(|e| !e.is_nan()) else {
        return decision(
            Verdict::MigrateNow,
            format!("no access counts: registered memory taken as hot ({src} costs)"),
        );
    };
    let e = e.max(0.0);
    let stay = e * p;
    // No expected access: nothing to win, even from a free move.
    let pays = stay >= cost && e > 0.0;
    let why = format!(
        "{e:.0} expected remote accesses × {p:.0} ns {} {pages} pages × {m:.0} ns ({src} costs)",
        if pays { "≥" } else { "<" }
    );
    if pays {
        decision(Verdict::MigrateNow, why)
    } else {
        decision(Verdict::Defer, why)
    }
}

/// Remote accesses expected over `horizon` if the region stays: the observed touch rate
/// (`touches` page-touches in `window`), every one of them remote for the `strays` of
/// `pages` pages once the pool's CPUs all left their node. `None` without observations.
pub(crate) fn expected_remote(
    touches: Option<u64>,
    window: Duration,
    strays: usize,
    pages: usize,
    horizon: Duration,
) -> Option<f64> {
    let touches = touches? as f64;
    if pages == 0 {
        return Some(0.0);
    }
    let rate = touches / window.as_secs_f64().max(1e-6);
    Some(rate * horizon.as_secs_f64() * strays as f64 / pages as f64)
}

/// The wait before looking again at a deferred region: doubles from `settle` up to 1 s.
pub(crate) fn defer_delay(settle: Duration, deferrals: u32) -> Duration {
    settle
        .saturating_mul(1u32 << deferrals.min(16))
        .min(Duration::from_secs(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn target_examples() {
        assert_eq!(follow_target(&[]), None);
        assert_eq!(follow_target(&[1]), Some((1, vec![1])));
        assert_eq!(follow_target(&[1, 1, 0]), Some((1, vec![0, 1])));
        assert_eq!(follow_target(&[0, 1]), Some((0, vec![0, 1])));
    }

    #[test]
    fn strays_skip_absent_and_allowed() {
        let st = [
            PageStatus::Node(0),
            PageStatus::Node(1),
            PageStatus::NotPresent,
            PageStatus::Error(14),
            PageStatus::Node(2),
        ];
        assert_eq!(stray_pages(&st, &[1]), vec![0, 4]);
        assert_eq!(stray_pages(&st, &[0, 1, 2]), Vec::<usize>::new());
    }

    fn costs(m: f64, p: f64) -> Costs {
        Costs {
            move_ns_per_page: m,
            remote_penalty_ns: p,
            measured: true,
        }
    }

    #[test]
    fn cost_rule_examples() {
        // Thesis: trigger 200 µs / 1.2 µs ≈ 167 accesses per page.
        let c = THESIS_COSTS;
        assert_eq!(cost_rule(10, Some(1_700.0), c).verdict, Verdict::MigrateNow);
        assert_eq!(cost_rule(10, Some(1_600.0), c).verdict, Verdict::Defer);
        assert_eq!(cost_rule(10, Some(0.0), c).verdict, Verdict::Defer);
        // A free move still needs an access to win.
        assert_eq!(
            cost_rule(10, Some(0.0), costs(0.0, 5.0)).verdict,
            Verdict::Defer
        );
        assert_eq!(
            cost_rule(10, Some(1.0), costs(0.0, 5.0)).verdict,
            Verdict::MigrateNow
        );
        assert_eq!(cost_rule(10, None, c).verdict, Verdict::MigrateNow);
        assert_eq!(cost_rule(0, Some(1e9), c).verdict, Verdict::Never);
        let flat = cost_rule(10, Some(1e12), costs(100_000.0, -3.0));
        assert_eq!(flat.verdict, Verdict::Never);
        assert!(flat.why.contains("nothing extra"), "{}", flat.why);
        assert_eq!(
            cost_rule(1, Some(1.0), costs(f64::NAN, 1.0)).verdict,
            Verdict::Never
        );
        let d = cost_rule(256, Some(5e7), costs(100_000.0, 20.0));
        assert_eq!(d.verdict, Verdict::MigrateNow);
        assert!(d.why.contains("≥ 256 pages"), "{}", d.why);
    }

    #[test]
    fn expected_remote_scales_rate_and_stray_share() {
        let ms = Duration::from_millis;
        assert_eq!(expected_remote(None, ms(25), 1, 1, ms(1000)), None);
        // 1000 touches in 25 ms = 40 000/s; over 1 s, half the pages stray.
        let e = expected_remote(Some(1000), ms(25), 5, 10, ms(1000)).unwrap();
        assert!((e - 20_000.0).abs() < 1e-6, "{e}");
        assert_eq!(expected_remote(Some(7), ms(0), 0, 0, ms(1)), Some(0.0));
    }

    #[test]
    fn defer_delay_backs_off_to_a_second() {
        let s = Duration::from_millis(25);
        assert_eq!(defer_delay(s, 0), s);
        assert_eq!(defer_delay(s, 2), Duration::from_millis(100));
        assert_eq!(defer_delay(s, 40), Duration::from_secs(1));
    }

    proptest! {
        #[test]
        fn cost_rule_is_verghese(
            pages in 0usize..10_000,
            e in prop::option::of(0f64..1e9),
            m in -10f64..1e6,
            p in -10f64..1e5,
            more in 0f64..1e9,
        ) {
            let c = costs(m, p);
            let d = cost_rule(pages, e, c);
            let invalid = pages == 0 || m < 0.0 || p <= 0.0;
            // Never exactly when moving cannot pay (or there is nothing to move).
            prop_assert_eq!(d.verdict == Verdict::Never, invalid);
            if let (false, Some(e)) = (invalid, e) {
                let pays = e * p >= pages as f64 * m && e > 0.0;
                prop_assert_eq!(d.verdict == Verdict::MigrateNow, pays);
                // More expected accesses never turn "move" into "wait".
                if pays {
                    prop_assert_eq!(cost_rule(pages, Some(e + more), c).verdict, Verdict::MigrateNow);
                }
                // Scale-free: twice the pages and twice the accesses decide alike.
                prop_assert_eq!(cost_rule(pages * 2, Some(e * 2.0), c).verdict, d.verdict);
            }
            if !invalid && e.is_none() {
                prop_assert_eq!(d.verdict, Verdict::MigrateNow);
            }
        }

        #[test]
        fn cheaper_moves_never_defer_more(
            pages in 1usize..1000, e in 0f64..1e7, m in 0f64..1e6, p in 0.001f64..1e4, f in 0f64..1.0,
        ) {
            let now = cost_rule(pages, Some(e), costs(m, p)).verdict == Verdict::MigrateNow;
            let cheaper = cost_rule(pages, Some(e), costs(m * f, p)).verdict == Verdict::MigrateNow;
            prop_assert!(!now || cheaper);
        }
        #[test]
        fn target_is_a_cpu_node_with_most_cpus(nodes in prop::collection::vec(0u32..4, 0..20)) {
            match follow_target(&nodes) {
                None => prop_assert!(nodes.is_empty()),
                Some((main, all)) => {
                    let count = |n: u32| nodes.iter().filter(|&&x| x == n).count();
                    prop_assert!(all.contains(&main));
                    prop_assert!(all.iter().all(|&n| count(n) <= count(main)));
                    prop_assert!(nodes.iter().all(|n| all.contains(n)));
                }
            }
        }

        #[test]
        fn pause_keeps_duty(ms in 0u64..1000, duty in 0.01f64..1.0) {
            let spent = Duration::from_millis(ms);
            let p = pause_after(spent, duty);
            let total = (spent + p).as_secs_f64();
            if total > 0.0 {
                prop_assert!(spent.as_secs_f64() / total <= duty + 1e-6);
            }
        }
    }
}
