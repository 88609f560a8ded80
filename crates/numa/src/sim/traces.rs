//! Synthetic workloads (numa.md §Simulator).
//!
//! ```
//! let c = partita_numa::sim::TraceConfig::small();
//! for t in partita_numa::sim::traces::all(&c) {
//!     println!("{}: {} pages, {} misses", t.name, t.initial_home.len(), t.accesses.len());
//! }
//! ```

use super::{Access, Trace, TraceConfig};

/// SplitMix64: small, deterministic, good enough for traces.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// Generates one miss per node every `miss_interval_ns`, asking `pick(rng, time, node)`
/// for `(process, page, write)`.
fn generate(
    c: &TraceConfig,
    mut pick: impl FnMut(&mut Rng, u64, usize) -> (usize, usize, bool),
    salt: u64,
) -> Vec<Access> {
    let mut rng = Rng(c.seed ^ salt);
    let mut out = Vec::new();
    let step = (c.miss_interval_ns / c.nodes as u64).max(1);
    let mut t = 0;
    let mut node = 0;
    while t < c.duration_ns {
        let (process, page, write) = pick(&mut rng, t, node);
        out.push(Access {
            time_ns: t,
            process,
            node,
            page,
            write,
        });
        node = (node + 1) % c.nodes;
        t += step;
    }
    out
}

/// A sequential process per node, each with a private working set (first-touched on its
/// starting node), moved to another node every 300 ms by the scheduler; 20% of misses go
/// to read-only shared code pages on node 0.
///
/// ```
/// let t = partita_numa::sim::traces::sequential(&partita_numa::sim::TraceConfig::small());
/// assert_eq!(t.processes, 4);
/// ```
pub fn sequential(c: &TraceConfig) -> Trace {
    const PRIVATE: usize = 32;
    const CODE: usize = 16;
    const PHASE_NS: u64 = 300_000_000;
    let n = c.nodes;
    let mut initial_home = vec![0; CODE];
    for p in 0..n {
        initial_home.extend(std::iter::repeat_n(p, PRIVATE));
    }
    let accesses = generate(
        c,
        |rng, t, node| {
            // The process on `node` during phase k is the one that started on node - k.
            let phase = (t / PHASE_NS) as usize;
            let process = (node + n - phase % n) % n;
            if rng.chance(20) {
                (process, rng.below(CODE), false)
            } else {
                (
                    process,
                    CODE + process * PRIVATE + rng.below(PRIVATE),
                    rng.chance(30),
                )
            }
        },
        1,
    );
    Trace {
        name: "sequential",
        nodes: n,
        processes: n,
        initial_home,
        accesses,
    }
}

/// Raytrace: a read-only scene initialised by node 0 and read by everyone (80% of
/// misses), plus per-node image tiles that are written (first-touched on node 0 too).
///
/// ```
/// let t = partita_numa::sim::traces::raytrace(&partita_numa::sim::TraceConfig::small());
/// assert!(t.initial_home.iter().all(|h| *h == 0));
/// ```
pub fn raytrace(c: &TraceConfig) -> Trace {
    const SCENE: usize = 48;
    const TILE: usize = 8;
    let n = c.nodes;
    let accesses = generate(
        c,
        |rng, _, node| {
            if rng.chance(80) {
                (node, rng.below(SCENE), false)
            } else {
                (node, SCENE + node * TILE + rng.below(TILE), rng.chance(50))
            }
        },
        2,
    );
    Trace {
        name: "raytrace",
        nodes: n,
        processes: n,
        initial_home: vec![0; SCENE + n * TILE],
        accesses,
    }
}

/// Ocean: a grid partitioned by node (initialised by node 0); each node reads and writes
/// its own partition and, 6% of the time, the boundary page of its neighbours.
///
/// ```
/// let t = partita_numa::sim::traces::ocean(&partita_numa::sim::TraceConfig::small());
/// assert_eq!(t.initial_home.len(), 4 * 32);
/// ```
pub fn ocean(c: &TraceConfig) -> Trace {
    const PART: usize = 32;
    const BOUNDARY: usize = 1;
    let n = c.nodes;
    let accesses = generate(
        c,
        |rng, _, node| {
            let write = rng.chance(40);
            if rng.chance(6) {
                let nb = if rng.chance(50) {
                    (node + 1) % n
                } else {
                    (node + n - 1) % n
                };
                let off = if nb == (node + 1) % n {
                    rng.below(BOUNDARY)
                } else {
                    PART - 1 - rng.below(BOUNDARY)
                };
                (node, nb * PART + off, write)
            } else {
                (node, node * PART + rng.below(PART), write)
            }
        },
        3,
    );
    Trace {
        name: "ocean",
        nodes: n,
        processes: n,
        initial_home: vec![0; n * PART],
        accesses,
    }
}

/// Database: fine-grain read-write shared synchronisation pages, read and written by every
/// node (30% writes), spread round-robin over the nodes.
///
/// ```
/// let t = partita_numa::sim::traces::database(&partita_numa::sim::TraceConfig::small());
/// assert!(t.accesses.iter().any(|a| a.write));
/// ```
pub fn database(c: &TraceConfig) -> Trace {
    const SHARED: usize = 32;
    let n = c.nodes;
    let accesses = generate(
        c,
        |rng, _, node| (node, rng.below(SHARED), rng.chance(30)),
        4,
    );
    Trace {
        name: "database",
        nodes: n,
        processes: n,
        initial_home: (0..SHARED).map(|p| p % n).collect(),
        accesses,
    }
}

/// The four workloads.
///
/// ```
/// assert_eq!(partita_numa::sim::traces::all(&partita_numa::sim::TraceConfig::small()).len(), 4);
/// ```
pub fn all(c: &TraceConfig) -> Vec<Trace> {
    vec![sequential(c), raytrace(c), ocean(c), database(c)]
}
