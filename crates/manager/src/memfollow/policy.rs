//! When an application's memory follows its CPUs, and how much of it moves now: a pure
//! function of plain data ([`decide`]), no clock, no system call.
//!
//! **Verghese's cost rule, per process.** The thesis moves a page once its remote misses
//! reach the trigger `move cost / remote-miss penalty` (~167 with its 200 µs / 1.2 µs; it
//! uses 128), so that the misses a move saves pay for it. The manager has no per-page miss
//! counters for an unmodified program, so it stands in time for counts: a resident page of a
//! running application is taken as *hot* in the thesis' own sense — it reaches the trigger
//! within one reset interval (128 misses per 100 ms) — and so, once the application's CPUs
//! have left the node its memory is on, the page has taken `move cost / penalty` remote misses
//! after `break_even = (move cost / penalty) / (trigger / reset interval)` (130 ms with the
//! thesis' numbers). The manager moves the stray pages only once the application has stayed
//! on its new nodes that long: a placement that is over sooner never paid for a move (the
//! ski-rental argument: waiting as long as a move costs wastes at most twice the optimum).
//! An application moved back and forth faster than `break_even` is therefore never migrated;
//! its moves are counted ([`moves_within`]) and shown.
//!
//! **Pacing.** Moves draw from a per-application token bucket of `budget` bytes per second
//! holding at most `burst` worth of budget, so no application's migration takes more than its
//! share of memory bandwidth and the mover thread returns between slices.
//!
//! **Nothing** on one-node machines, for applications that opted out (`PARTITA_NUMA=off` in
//! their environment, or named in the configuration), without a confinement (no CPU set:
//! every node is its own), or when no page is stray.

use std::time::Duration;

/// The rule's parameters (the thesis' values as defaults; `[numa_migration]` in the
/// configuration).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    /// Nanoseconds to move one page (thesis: 200 µs).
    pub move_ns_per_page: f64,
    /// Extra nanoseconds of a remote over a local miss (thesis: 1.2 µs).
    pub remote_penalty_ns: f64,
    /// Misses within one reset interval that make a page hot (thesis: 128).
    pub trigger: u32,
    /// The thesis' reset interval (100 ms): counts older than this are forgotten.
    pub reset_interval: Duration,
    /// Bytes per second one application's migration may move.
    pub budget_bytes_per_s: u64,
    /// The most budget that accumulates while nothing moves (one slice at most this long).
    pub burst: Duration,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            move_ns_per_page: 200_000.0,
            remote_penalty_ns: 1_200.0,
            trigger: 128,
            reset_interval: Duration::from_millis(100),
            budget_bytes_per_s: 1 << 30,
            burst: Duration::from_millis(100),
        }
    }
}

impl Params {
    /// How long an application must stay on its new nodes before its memory is worth
    /// moving: `(move cost / penalty) / (trigger / reset interval)`; `None` when a remote
    /// miss costs nothing extra or a parameter is not a number (then moving never pays).
    ///
    /// ```
    /// use partita_manager::memfollow::policy::Params;
    /// let b = Params::default().break_even().unwrap();
    /// assert_eq!(b.as_millis(), 130); // 166.7 misses at 1280 misses/s
    /// ```
    pub fn break_even(&self) -> Option<Duration> {
        let (m, p) = (self.move_ns_per_page, self.remote_penalty_ns);
        if !(m.is_finite() && m >= 0.0 && p.is_finite() && p > 0.0) || self.trigger == 0 {
            return None;
        }
        let misses = m / p;
        let hot_rate = f64::from(self.trigger) / self.reset_interval.as_secs_f64().max(1e-9);
        Duration::try_from_secs_f64(misses / hot_rate).ok()
    }
}

/// One placement of an application: from `at_ns` (monotonic) its CPUs were on these nodes
/// (one entry per CPU, so the node with most of them is known).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// When it began (monotonic ns).
    pub at_ns: u64,
    /// The node of each of its CPUs; empty: no CPU set (not confined).
    pub cpu_nodes: Vec<u32>,
}

impl Placement {
    /// Its nodes, ascending, without repeats.
    ///
    /// ```
    /// use partita_manager::memfollow::policy::Placement;
    /// assert_eq!(Placement { at_ns: 0, cpu_nodes: vec![1, 0, 1] }.nodes(), vec![0, 1]);
    /// ```
    pub fn nodes(&self) -> Vec<u32> {
        let mut n = self.cpu_nodes.clone();
        n.sort_unstable();
        n.dedup();
        n
    }

    /// Where its memory belongs: the node holding most of its CPUs (ties: the lowest).
    ///
    /// ```
    /// use partita_manager::memfollow::policy::Placement;
    /// assert_eq!(Placement { at_ns: 0, cpu_nodes: vec![0, 1, 1] }.main_node(), Some(1));
    /// ```
    pub fn main_node(&self) -> Option<u32> {
        let nodes = self.nodes();
        let count = |n: &u32| self.cpu_nodes.iter().filter(|c| *c == n).count();
        // max_by_key keeps the last maximum: walk the nodes from the highest down.
        nodes.iter().rev().copied().max_by_key(count)
    }
}

/// The budget's token bucket: `bytes` available at `at_ns`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Bucket {
    /// Bytes that may move now.
    pub bytes: f64,
    /// When `bytes` was computed (monotonic ns).
    pub at_ns: u64,
}

/// What [`decide`] is told about one application.
#[derive(Debug, Clone, Copy)]
pub struct Facts<'a> {
    /// Online NUMA nodes of the machine.
    pub online_nodes: usize,
    /// Why it opted out (`PARTITA_NUMA=off`, the configuration), if it did.
    pub opted_out: Option<&'static str>,
    /// Its placements, oldest first; the last is the current one.
    pub history: &'a [Placement],
    /// Its resident pages (that the manager may move) on nodes outside its current ones;
    /// `None`: not counted yet.
    pub stray_pages: Option<u64>,
    /// Bytes per page.
    pub page_size: u64,
    /// Now (monotonic ns).
    pub now_ns: u64,
    /// Its budget.
    pub bucket: Bucket,
}

/// Why nothing is done for an application.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// The machine has one NUMA node.
    OneNode,
    /// The application opted out (the reason).
    OptedOut(&'static str),
    /// It has no CPU set, or its CPUs span every node: no page is stray.
    NotConfined,
    /// Its pages are all on its nodes.
    NothingStray,
    /// A remote miss costs nothing extra: moving never pays.
    NeverPays,
}

/// What to do now for one application.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Nothing, for this reason.
    Nothing(Why),
    /// The cost rule is not met yet: ask again at `until_ns` (if still placed so).
    Wait {
        /// When the placement will have lasted `break_even`.
        until_ns: u64,
    },
    /// Count the stray pages, then ask again.
    Count,
    /// Move up to `bytes` of stray pages to `node` now.
    Move {
        /// The destination.
        node: u32,
        /// How much may move in this slice.
        bytes: u64,
    },
    /// The budget is spent: ask again at `until_ns`.
    Paced {
        /// When at least one page's worth of budget is back.
        until_ns: u64,
    },
}

/// The bucket refilled up to `now_ns` (capped at `burst` worth of budget).
pub fn refill(p: &Params, b: Bucket, now_ns: u64) -> Bucket {
    let cap = p.budget_bytes_per_s as f64 * p.burst.as_secs_f64();
    let dt = now_ns.saturating_sub(b.at_ns) as f64 / 1e9;
    Bucket {
        bytes: (b.bytes + dt * p.budget_bytes_per_s as f64).min(cap),
        at_ns: now_ns.max(b.at_ns),
    }
}

/// The decision for one application now, and its bucket afterwards (a [`Decision::Move`]
/// takes its bytes from it).
///
/// ```
/// use partita_manager::memfollow::policy::*;
/// let p = Params::default();
/// let h = [Placement { at_ns: 0, cpu_nodes: vec![0] }, Placement { at_ns: 1_000_000_000, cpu_nodes: vec![1] }];
/// let facts = |now_ns, stray| Facts {
///     online_nodes: 2, opted_out: None, history: &h, stray_pages: stray, page_size: 4096,
///     now_ns, bucket: Bucket::default(),
/// };
/// // 10 ms after the move: not paid yet.
/// assert!(matches!(decide(&p, &facts(1_010_000_000, None)).0, Decision::Wait { .. }));
/// // 200 ms after: count, then move (paced by the budget: 100 ms of 1 GiB/s at most).
/// assert_eq!(decide(&p, &facts(1_200_000_000, None)).0, Decision::Count);
/// assert!(matches!(decide(&p, &facts(1_200_000_000, Some(65536))).0, Decision::Move { node: 1, .. }));
/// ```
pub fn decide(p: &Params, f: &Facts<'_>) -> (Decision, Bucket) {
    let bucket = refill(p, f.bucket, f.now_ns);
    let nothing = |why| (Decision::Nothing(why), bucket);
    if f.online_nodes < 2 {
        return nothing(Why::OneNode);
    }
    if let Some(why) = f.opted_out {
        return nothing(Why::OptedOut(why));
    }
    let Some(now) = f.history.last() else {
        return nothing(Why::NotConfined);
    };
    let Some(node) = now
        .main_node()
        .filter(|_| now.nodes().len() < f.online_nodes)
    else {
        return nothing(Why::NotConfined);
    };
    let Some(break_even) = p.break_even() else {
        return nothing(Why::NeverPays);
    };
    let until_ns = now
        .at_ns
        .saturating_add(u64::try_from(break_even.as_nanos()).unwrap_or(u64::MAX));
    if f.now_ns < until_ns {
        return (Decision::Wait { until_ns }, bucket);
    }
    let Some(stray) = f.stray_pages else {
        return (Decision::Count, bucket);
    };
    if stray == 0 {
        return nothing(Why::NothingStray);
    }
    let page = f.page_size.max(1);
    let pages = (bucket.bytes / page as f64).floor() as u64;
    let take = pages.min(stray);
    if take == 0 {
        let missing = page as f64 - bucket.bytes;
        let wait_ns = missing / p.budget_bytes_per_s.max(1) as f64 * 1e9;
        let until_ns = f
            .now_ns
            .saturating_add(wait_ns.ceil() as u64)
            .max(f.now_ns + 1);
        return (Decision::Paced { until_ns }, bucket);
    }
    let bytes = take * page;
    let left = Bucket {
        bytes: bucket.bytes - bytes as f64,
        ..bucket
    };
    (Decision::Move { node, bytes }, left)
}

/// Changes of node set in `history` that began within `window` before `now_ns` (the
/// application's moves: a flapping one has many).
///
/// ```
/// use partita_manager::memfollow::policy::{moves_within, Placement};
/// let h: Vec<Placement> = (0..5).map(|i| Placement { at_ns: i * 10, cpu_nodes: vec![(i % 2) as u32] }).collect();
/// assert_eq!(moves_within(&h, std::time::Duration::from_nanos(25), 40), 3); // at 20, 30, 40
/// ```
pub fn moves_within(history: &[Placement], window: Duration, now_ns: u64) -> usize {
    let from = now_ns.saturating_sub(u64::try_from(window.as_nanos()).unwrap_or(u64::MAX));
    history
        .windows(2)
        .filter(|w| w[1].at_ns >= from && w[0].nodes() != w[1].nodes())
        .count()
}

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;
