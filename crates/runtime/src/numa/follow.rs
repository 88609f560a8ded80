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
//! duty cycle at or below [`FollowParams::duty`] of one CPU. Verghese's cost rule
//! (`trigger = move cost / remote-miss penalty`, from partita-numa's calibrate) is measured
//! once on a side thread and reported (`NumaReport::trigger`); the sampler uses it. The
//! follower itself moves every stray page: once all of a pool's CPUs left a node, every
//! access to a page there is remote, which is the thesis' migrate case.

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
}

impl Default for FollowParams {
    fn default() -> Self {
        FollowParams {
            // A quarter of the thesis' 100 ms freeze: the manager's own hysteresis already
            // damps flapping, and the proof asks for ≥ 95% moved within 1 s.
            settle: Duration::from_millis(25),
            chunk: 256,
            duty: 0.5,
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

/// Verghese's cost rule: moving a page pays once it would otherwise take `trigger =
/// move cost / remote-miss penalty` remote misses. A pool whose CPUs all left a node will
/// miss remotely on every access to a stray page, so following is worth it unless the
/// machine's remote penalty is not measurable (≤ 0: an emulated machine where local and
/// remote cost the same), in which case moving only costs. `None` costs (not measured) mean
/// "assume the thesis' ratio" (move).
pub(crate) fn worth_moving(move_ns: Option<f64>, penalty_ns: Option<f64>) -> bool {
    match (move_ns, penalty_ns) {
        (Some(m), Some(p)) => m.is_finite() && p.is_finite() && p > 0.0,
        _ => true,
    }
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

    #[test]
    fn cost_rule() {
        assert!(worth_moving(Some(200_000.0), Some(1_200.0)));
        assert!(!worth_moving(Some(200_000.0), Some(-3.0)));
        assert!(worth_moving(None, None));
    }

    proptest! {
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
