//! cholesky-like: tiled Cholesky factorisation of a symmetric positive definite matrix, run as
//! a DAG of tiny dependent tasks (16 × 16 tiles: a few microseconds each). A task is spawned
//! the moment its last input is ready, as in a dataflow runtime.
//!
//! Tasks, for a matrix of `t × t` tiles (lower triangle):
//! - `potrf(k)`: factor the diagonal tile `(k, k)`; needs `update(k, k, k−1)`;
//! - `trsm(i, k)`, `i > k`: `L[i][k] = A[i][k] · L[k][k]⁻ᵀ`; needs `potrf(k)` and
//!   `update(i, k, k−1)`;
//! - `update(i, j, k)`, `i ≥ j > k`: `A[i][j] −= L[i][k] · L[j][k]ᵀ`; needs `trsm(i, k)`,
//!   `trsm(j, k)` and `update(i, j, k−1)`.
//!
//! Every tile sees the same operations in the same order as in the sequential algorithm, so
//! the factor is identical bit for bit.

use crate::pool::{Scope, ThreadPool};
use crate::Checksum;
use crate::Params;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

/// Tile side.
pub const B: usize = 16;

/// Problem size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size {
    /// Tiles per side.
    pub tiles: usize,
    /// Factorisations (each one DAG).
    pub repeats: usize,
}

/// The size for `params`: 24 × 24 tiles (a 384 × 384 matrix, about 2600 tasks per
/// factorisation) and 40 factorisations at scale 1.
pub fn size(params: &Params) -> Size {
    Size {
        tiles: 24,
        repeats: params.scaled(40.0, 1),
    }
}

type Tile = Vec<f64>;

/// Element `(r, c)` of the input matrix: symmetric, diagonally dominant, so positive definite.
fn element(n: usize, r: usize, c: usize) -> f64 {
    if r == c {
        n as f64
    } else {
        let (a, b) = if r > c { (r, c) } else { (c, r) };
        crate::unit_f64((a * n + b) as u64)
    }
}

fn input_tile(t: usize, i: usize, j: usize) -> Tile {
    let n = t * B;
    let mut tile = vec![0.0; B * B];
    for r in 0..B {
        for c in 0..B {
            tile[r * B + c] = element(n, i * B + r, j * B + c);
        }
    }
    tile
}

/// In-place Cholesky of a diagonal tile (lower triangle; the upper is zeroed).
fn potrf(a: &mut [f64]) {
    for j in 0..B {
        let mut d = a[j * B + j];
        for k in 0..j {
            d -= a[j * B + k] * a[j * B + k];
        }
        let d = d.sqrt();
        a[j * B + j] = d;
        for i in j + 1..B {
            let mut s = a[i * B + j];
            for k in 0..j {
                s -= a[i * B + k] * a[j * B + k];
            }
            a[i * B + j] = s / d;
        }
        for c in j + 1..B {
            a[j * B + c] = 0.0;
        }
    }
}

/// `a = a · l⁻ᵀ` for a lower-triangular `l`.
fn trsm(l: &[f64], a: &mut [f64]) {
    for r in 0..B {
        for c in 0..B {
            let mut s = a[r * B + c];
            for k in 0..c {
                s -= a[r * B + k] * l[c * B + k];
            }
            a[r * B + c] = s / l[c * B + c];
        }
    }
}

/// `a −= x · yᵀ`.
fn update(x: &[f64], y: &[f64], a: &mut [f64]) {
    for r in 0..B {
        for c in 0..B {
            let mut s = 0.0;
            for k in 0..B {
                s += x[r * B + k] * y[c * B + k];
            }
            a[r * B + c] -= s;
        }
    }
}

/// The shared state of one factorisation.
struct Dag {
    t: usize,
    /// Tiles being updated (lower triangle), each touched by one task at a time.
    work: Vec<Mutex<Tile>>,
    /// Finished tiles of the factor.
    done: Vec<OnceLock<Tile>>,
    /// Inputs still missing per task `(i, j, k)`.
    missing: Vec<AtomicUsize>,
}

impl Dag {
    fn new(t: usize) -> Dag {
        let work = (0..t * t)
            .map(|x| {
                let (i, j) = (x / t, x % t);
                Mutex::new(if j <= i {
                    input_tile(t, i, j)
                } else {
                    Vec::new()
                })
            })
            .collect();
        let mut missing = Vec::with_capacity(t * t * t);
        for i in 0..t {
            for j in 0..t {
                for k in 0..t {
                    let prev = usize::from(k > 0);
                    let n = if k > j || j > i {
                        0
                    } else if i == j && j == k {
                        prev
                    } else if j == k || i == j {
                        // trsm(i, k) waits for potrf(k); a diagonal update for trsm(i, k).
                        1 + prev
                    } else {
                        2 + prev
                    };
                    missing.push(AtomicUsize::new(n));
                }
            }
        }
        Dag {
            t,
            work,
            done: (0..t * t).map(|_| OnceLock::new()).collect(),
            missing,
        }
    }

    fn finished(&self, i: usize, j: usize) -> &Tile {
        // The DAG runs a task only after the tasks producing its inputs finished, and those
        // set the tile before announcing completion.
        self.done[i * self.t + j]
            .get()
            .expect("DAG order: input tile finished before its consumers run")
    }

    /// Run task `(i, j, k)` and return its successors that became ready.
    fn exec(&self, i: usize, j: usize, k: usize, ready: &mut Vec<(usize, usize, usize)>) {
        let t = self.t;
        let mut work = self.work[i * t + j]
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if i == j && j == k {
            potrf(&mut work);
            let _ = self.done[k * t + k].set(std::mem::take(&mut *work));
            drop(work);
            for r in k + 1..t {
                self.satisfy(r, k, k, ready);
            }
        } else if j == k {
            trsm(self.finished(k, k), &mut work);
            let _ = self.done[i * t + k].set(std::mem::take(&mut *work));
            drop(work);
            for c in k + 1..=i {
                self.satisfy(i, c, k, ready);
            }
            for r in i + 1..t {
                self.satisfy(r, i, k, ready);
            }
        } else {
            update(self.finished(i, k), self.finished(j, k), &mut work);
            drop(work);
            self.satisfy(i, j, k + 1, ready);
        }
    }

    fn satisfy(&self, i: usize, j: usize, k: usize, ready: &mut Vec<(usize, usize, usize)>) {
        let x = (i * self.t + j) * self.t + k;
        if self.missing[x].fetch_sub(1, Ordering::AcqRel) == 1 {
            ready.push((i, j, k));
        }
    }

    fn spawn<'s>(&'s self, s: &Scope<'s>, i: usize, j: usize, k: usize) {
        s.spawn(move |s| {
            let mut ready = Vec::new();
            self.exec(i, j, k, &mut ready);
            // Run one ready successor here (depth first, like a continuation), spawn the rest.
            let mut next = ready.pop();
            while let Some((a, b, c)) = next {
                for &(x, y, z) in &ready {
                    self.spawn(s, x, y, z);
                }
                ready.clear();
                self.exec(a, b, c, &mut ready);
                next = ready.pop();
            }
        });
    }

    fn checksum(&self) -> u64 {
        let mut c = Checksum::new();
        for i in 0..self.t {
            for j in 0..=i {
                for &v in self.finished(i, j) {
                    c.f64(v);
                }
            }
        }
        c.finish()
    }
}

/// Factor the matrix `size.repeats` times on `pool`; the checksum of the factor.
pub fn run(pool: &ThreadPool, size: Size) -> u64 {
    let mut sum = 0;
    for _ in 0..size.repeats {
        let dag = Dag::new(size.tiles);
        // Wait outside the pool: no worker is tied up waiting for the DAG, so every worker is
        // between tasks often and can follow process control.
        pool.in_place_scope(|s| dag.spawn(s, 0, 0, 0));
        sum = dag.checksum();
    }
    sum
}

/// The checksum of a sequential run (the classic right-looking tile loop).
pub fn reference(size: Size) -> u64 {
    let dag = Dag::new(size.tiles);
    factor_sequentially(&dag, size.tiles);
    dag.checksum()
}

/// Every task of a `t`-tile factorisation, in the sequential order.
fn factor_sequentially(dag: &Dag, t: usize) {
    let mut ready = Vec::new();
    for k in 0..t {
        dag.exec(k, k, k, &mut ready);
        for i in k + 1..t {
            dag.exec(i, k, k, &mut ready);
        }
        for i in k + 1..t {
            for j in k + 1..=i {
                dag.exec(i, j, k, &mut ready);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn factor_times_its_transpose_is_the_input() {
        let t = 3;
        let dag = Dag::new(t);
        factor_sequentially(&dag, t);
        let n = t * B;
        let l = |r: usize, c: usize| -> f64 {
            if c > r {
                0.0
            } else {
                dag.finished(r / B, c / B)[(r % B) * B + c % B]
            }
        };
        for r in 0..n {
            for c in 0..=r {
                let v: f64 = (0..n).map(|k| l(r, k) * l(c, k)).sum();
                assert!((v - element(n, r, c)).abs() < 1e-9, "({r},{c})");
            }
        }
    }

    #[test]
    fn parallel_matches_sequential() {
        let size = Size {
            tiles: 8,
            repeats: 3,
        };
        let want = reference(size);
        for threads in [1, 2, 3] {
            let pool = crate::pool::build(threads, "chol-test").unwrap();
            assert_eq!(run(&pool, size), want, "threads = {threads}");
        }
    }
}
