//! locus-like: route wires on a grid, one independent task per wire. A task evaluates
//! candidate two-bend routes against a (computed) terrain cost, picks the cheapest, then
//! records the route in the shared occupancy table under a lock, as LocusRoute updates its
//! shared cost array.
//!
//! The choice depends only on the wire, and table updates are additions, so the final table
//! does not depend on the order in which tasks ran.

use crate::pool::ThreadPool;
use crate::{Checksum, Params};
use std::sync::{Mutex, PoisonError};

/// Grid side.
const G: usize = 256;
/// Candidate routes per wire.
const CANDIDATES: usize = 8;

/// Problem size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size {
    /// Wires to route (tasks).
    pub wires: usize,
}

/// The size for `params`: 40 000 wires at scale 1.
pub fn size(params: &Params) -> Size {
    Size {
        wires: params.scaled(40_000.0, 1),
    }
}

/// Terrain cost of a cell (computed, to make routing CPU work).
#[inline]
fn cost(x: usize, y: usize) -> u64 {
    crate::splitmix((x * G + y) as u64) % 97 + 1
}

fn endpoints(w: usize) -> ((usize, usize), (usize, usize)) {
    let r = crate::splitmix(w as u64 ^ 0x5eed);
    let a = ((r % G as u64) as usize, ((r >> 16) % G as u64) as usize);
    let b = (
        ((r >> 32) % G as u64) as usize,
        ((r >> 48) % G as u64) as usize,
    );
    (a, b)
}

/// Cells of the route from `a` to `b` bending at column `m`: horizontal to `m`, vertical,
/// horizontal to `b`.
fn route(a: (usize, usize), b: (usize, usize), m: usize, mut visit: impl FnMut(usize, usize)) {
    let step = |from: usize, to: usize| -> Box<dyn Iterator<Item = usize>> {
        if from <= to {
            Box::new(from..=to)
        } else {
            Box::new((to..=from).rev())
        }
    };
    for x in step(a.0, m) {
        visit(x, a.1);
    }
    for y in step(a.1, b.1).skip(1) {
        visit(m, y);
    }
    for x in step(m, b.0).skip(1) {
        visit(x, b.1);
    }
}

/// The cheapest candidate route of wire `w`, as a list of cells.
fn best_route(w: usize) -> Vec<(usize, usize)> {
    let (a, b) = endpoints(w);
    let mut best = (u64::MAX, 0);
    for c in 0..CANDIDATES {
        let m = (crate::splitmix((w * CANDIDATES + c) as u64) % G as u64) as usize;
        let mut total = 0;
        route(a, b, m, |x, y| total += cost(x, y));
        if total < best.0 {
            best = (total, m);
        }
    }
    let mut cells = Vec::new();
    route(a, b, best.1, |x, y| cells.push((x, y)));
    cells
}

fn record(table: &mut [u32], cells: &[(usize, usize)]) {
    for &(x, y) in cells {
        table[x * G + y] += 1;
    }
}

fn checksum(table: &[u32]) -> u64 {
    let mut c = Checksum::new();
    for &v in table {
        c.u64(u64::from(v));
    }
    c.finish()
}

/// Route every wire on `pool`, one task each; the checksum of the occupancy table.
pub fn run(pool: &ThreadPool, size: Size) -> u64 {
    let table = Mutex::new(vec![0u32; G * G]);
    let table = &table;
    // Wait outside the pool (so no worker is tied up waiting); one task spawns the wires, so
    // they start in a worker's own deque.
    pool.in_place_scope(|s| {
        s.spawn(move |s| {
            for w in 0..size.wires {
                s.spawn(move |_| {
                    let cells = best_route(w);
                    let mut t = table.lock().unwrap_or_else(PoisonError::into_inner);
                    record(&mut t, &cells);
                });
            }
        })
    });
    let table = table.lock().unwrap_or_else(PoisonError::into_inner);
    checksum(&table)
}

/// The checksum of a sequential run.
pub fn reference(size: Size) -> u64 {
    let mut table = vec![0u32; G * G];
    for w in 0..size.wires {
        record(&mut table, &best_route(w));
    }
    checksum(&table)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_connect_their_endpoints() {
        for w in 0..200 {
            let (a, b) = endpoints(w);
            let cells = best_route(w);
            assert_eq!(cells.first(), Some(&a));
            assert_eq!(cells.last(), Some(&b));
            for pair in cells.windows(2) {
                let d = pair[0].0.abs_diff(pair[1].0) + pair[0].1.abs_diff(pair[1].1);
                assert_eq!(d, 1, "wire {w}: {pair:?}");
            }
        }
    }

    #[test]
    fn parallel_matches_sequential() {
        let size = Size { wires: 500 };
        let want = reference(size);
        for threads in [1, 2, 3] {
            let pool = crate::pool::build(threads, "locus-test").unwrap();
            assert_eq!(run(&pool, size), want, "threads = {threads}");
        }
    }
}
