//! water-like: pairwise forces among 1024 molecules (72 KiB: fits in L2, reused every step),
//! integrated over time steps. Each time step is one fork-join region (a parallel loop over
//! molecules split by `join`), so synchronisation is rare: once per step.
//!
//! The force on a molecule is summed over the others in a fixed order, so the result does
//! not depend on the split.

use crate::pool::{join, ThreadPool};
use crate::{Checksum, Params};

/// Time step.
const DT: f64 = 1e-4;
/// Softening, so close pairs stay finite.
const EPS: f64 = 1e-2;
/// Molecules per leaf of the fork-join split.
const GRAIN: usize = 16;

/// Problem size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size {
    /// Molecules.
    pub molecules: usize,
    /// Time steps.
    pub steps: usize,
}

/// The size for `params`: 1024 molecules and 100 steps at scale 1.
pub fn size(params: &Params) -> Size {
    Size {
        molecules: 1024,
        steps: params.scaled(100.0, 1),
    }
}

type V3 = [f64; 3];

fn initial(n: usize) -> (Vec<V3>, Vec<V3>) {
    let pos = (0..n)
        .map(|i| std::array::from_fn(|d| crate::unit_f64((3 * i + d) as u64)))
        .collect();
    (pos, vec![[0.0; 3]; n])
}

/// Force on molecule `i` from all others (soft repulsion plus a weak pull to the centre).
fn force(pos: &[V3], i: usize) -> V3 {
    let p = pos[i];
    let mut f = [0.0; 3];
    for (j, q) in pos.iter().enumerate() {
        if j == i {
            continue;
        }
        let d = [p[0] - q[0], p[1] - q[1], p[2] - q[2]];
        let r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2] + EPS;
        let s = 1.0 / (r2 * r2);
        f[0] += d[0] * s;
        f[1] += d[1] * s;
        f[2] += d[2] * s;
    }
    for (fd, pd) in f.iter_mut().zip(p) {
        *fd -= (pd - 0.5) * pos.len() as f64;
    }
    f
}

fn integrate(pos: &mut V3, vel: &mut V3, f: V3) {
    for d in 0..3 {
        vel[d] += f[d] * DT;
        pos[d] += vel[d] * DT;
    }
}

/// Compute forces for `out` (molecules `first..first + out.len()`), split by `join`.
fn forces(pos: &[V3], first: usize, out: &mut [V3]) {
    if out.len() <= GRAIN {
        for (k, f) in out.iter_mut().enumerate() {
            *f = force(pos, first + k);
        }
    } else {
        let mid = out.len() / 2;
        let (a, b) = out.split_at_mut(mid);
        join(|| forces(pos, first, a), || forces(pos, first + mid, b));
    }
}

fn checksum(pos: &[V3], vel: &[V3]) -> u64 {
    let mut c = Checksum::new();
    for v in pos.iter().chain(vel) {
        for &x in v {
            c.f64(x);
        }
    }
    c.finish()
}

/// Run the time steps on `pool`; the checksum of the final state.
pub fn run(pool: &ThreadPool, size: Size) -> u64 {
    let (mut pos, mut vel) = initial(size.molecules);
    let mut f = vec![[0.0; 3]; size.molecules];
    for _ in 0..size.steps {
        pool.install(|| forces(&pos, 0, &mut f));
        for ((p, v), &f) in pos.iter_mut().zip(&mut vel).zip(&f) {
            integrate(p, v, f);
        }
    }
    checksum(&pos, &vel)
}

/// The checksum of a sequential run.
pub fn reference(size: Size) -> u64 {
    let (mut pos, mut vel) = initial(size.molecules);
    for _ in 0..size.steps {
        let f: Vec<V3> = (0..size.molecules).map(|i| force(&pos, i)).collect();
        for ((p, v), &f) in pos.iter_mut().zip(&mut vel).zip(&f) {
            integrate(p, v, f);
        }
    }
    checksum(&pos, &vel)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parallel_matches_sequential() {
        let size = Size {
            molecules: 200,
            steps: 5,
        };
        let want = reference(size);
        for threads in [1, 2, 3] {
            let pool = crate::pool::build(threads, "water-test").unwrap();
            assert_eq!(run(&pool, size), want, "threads = {threads}");
        }
    }

    #[test]
    fn the_state_stays_finite() {
        let size = Size {
            molecules: 64,
            steps: 200,
        };
        let (mut pos, mut vel) = initial(size.molecules);
        for _ in 0..size.steps {
            let f: Vec<V3> = (0..size.molecules).map(|i| force(&pos, i)).collect();
            for ((p, v), &f) in pos.iter_mut().zip(&mut vel).zip(&f) {
                integrate(p, v, f);
            }
        }
        assert!(pos.iter().flatten().all(|x| x.is_finite()));
    }
}
