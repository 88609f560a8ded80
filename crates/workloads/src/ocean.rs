//! ocean-like: red-black successive over-relaxation on an `n × n` grid (the working set sits
//! between L2 and LLC size), one half sweep per phase, a spin-then-block barrier between
//! phases, the rows of each half sweep split statically among the participants.
//!
//! A red-black sweep updates every point of one colour from its four neighbours of the other
//! colour, so the result is the same bit for bit whatever the number of participants, and the
//! sequential [`reference()`] reproduces it exactly.

use crate::pool::ThreadPool;
use crate::team::{self, TeamStats};
use crate::{Checksum, Params};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Over-relaxation factor.
const OMEGA: f64 = 1.5;

/// Problem size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size {
    /// Grid side (points, boundary included).
    pub n: usize,
    /// Full sweeps (two phases each).
    pub sweeps: usize,
}

/// The size for `params`: a 512 × 512 grid (2 MiB) and 600 sweeps at scale 1.
///
/// ```
/// let s = partita_workloads::ocean::size(&partita_workloads::Params::default());
/// assert_eq!(s.n, 512);
/// ```
pub fn size(params: &Params) -> Size {
    Size {
        n: 512,
        sweeps: params.scaled(600.0, 1),
    }
}

/// The grid, shared by the team's members. Each point is an `f64` stored by its bits in an
/// atomic, accessed with relaxed loads and stores: members write disjoint rows within a phase
/// and the barrier orders phases.
pub struct Grid {
    size: Size,
    cells: Vec<AtomicU64>,
}

fn initial(n: usize, i: usize, j: usize) -> f64 {
    if i == 0 {
        1.0
    } else if i == n - 1 || j == 0 || j == n - 1 {
        crate::unit_f64((i * n + j) as u64) * 0.5
    } else {
        0.0
    }
}

#[inline]
fn relax(old: f64, up: f64, down: f64, left: f64, right: f64) -> f64 {
    (1.0 - OMEGA) * old + OMEGA * 0.25 * (((up + down) + left) + right)
}

impl Grid {
    /// The initial grid: a hot top edge, fixed pseudo-random other edges, zero inside.
    pub fn new(size: Size) -> Grid {
        let n = size.n;
        let cells = (0..n * n)
            .map(|k| AtomicU64::new(initial(n, k / n, k % n).to_bits()))
            .collect();
        Grid { size, cells }
    }

    #[inline]
    fn get(&self, i: usize, j: usize) -> f64 {
        f64::from_bits(self.cells[i * self.size.n + j].load(Relaxed))
    }

    /// One colour's update of rows `rows` (interior rows only).
    fn half_sweep(&self, color: usize, rows: std::ops::Range<usize>) {
        let n = self.size.n;
        for i in rows {
            let start = 1 + (i + 1 + color) % 2;
            for j in (start..n - 1).step_by(2) {
                let v = relax(
                    self.get(i, j),
                    self.get(i - 1, j),
                    self.get(i + 1, j),
                    self.get(i, j - 1),
                    self.get(i, j + 1),
                );
                self.cells[i * n + j].store(v.to_bits(), Relaxed);
            }
        }
    }

    /// Checksum of every point, row by row.
    pub fn checksum(&self) -> u64 {
        let mut c = Checksum::new();
        for cell in &self.cells {
            c.u64(cell.load(Relaxed));
        }
        c.finish()
    }
}

/// Run the sweeps on `pool` as an elastic team.
pub fn run(pool: &ThreadPool, params: &Params, grid: &mut Grid) -> TeamStats {
    let grid = &*grid;
    let interior = grid.size.n - 2;
    team::run(pool, grid.size.sweeps * 2, params.spin, |c| {
        let rows = c.share(interior);
        grid.half_sweep(c.phase % 2, rows.start + 1..rows.end + 1);
    })
}

/// The checksum of a sequential run.
pub fn reference(params: &Params) -> u64 {
    let size = size(params);
    let n = size.n;
    let mut g: Vec<f64> = (0..n * n).map(|k| initial(n, k / n, k % n)).collect();
    for phase in 0..size.sweeps * 2 {
        let color = phase % 2;
        for i in 1..n - 1 {
            let start = 1 + (i + 1 + color) % 2;
            for j in (start..n - 1).step_by(2) {
                g[i * n + j] = relax(
                    g[i * n + j],
                    g[(i - 1) * n + j],
                    g[(i + 1) * n + j],
                    g[i * n + j - 1],
                    g[i * n + j + 1],
                );
            }
        }
    }
    let mut c = Checksum::new();
    for v in g {
        c.f64(v);
    }
    c.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parallel_matches_sequential_for_any_pool_size() {
        let params = Params {
            scale: 0.01,
            ..Params::default()
        };
        let want = reference(&params);
        for threads in [1, 2, 3] {
            let pool = crate::pool::build(threads, "ocean-test").unwrap();
            let mut g = Grid::new(size(&params));
            run(&pool, &params, &mut g);
            assert_eq!(g.checksum(), want, "threads = {threads}");
        }
    }

    #[test]
    fn sweeps_change_the_grid() {
        let params = Params {
            scale: 0.001,
            ..Params::default()
        };
        let g = Grid::new(size(&params));
        assert_ne!(g.checksum(), reference(&params));
    }
}
