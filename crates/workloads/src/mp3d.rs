//! mp3d-like: particles in a unit box, streamed through in chunks, one chunk per phase, a
//! barrier per phase. The particle array is about twice the last-level cache, so a pass never
//! finds its data in the cache (no reuse), as MP3D's particle moves did not.
//!
//! Each particle moves independently (reflecting off the walls) and wall hits are counted as
//! integers, so the result does not depend on the split.

use crate::pool::ThreadPool;
use crate::team::{self, TeamStats};
use crate::{Checksum, Params};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Time step.
const DT: f64 = 0.003;
/// Particles per phase (512 KiB of particle data).
pub const CHUNK: usize = 16 * 1024;

/// Problem size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size {
    /// Number of particles.
    pub particles: usize,
    /// Phases (chunks moved).
    pub phases: usize,
}

/// Bytes of the largest CPU cache (from sysfs), or 32 MiB when unknown.
///
/// ```
/// assert!(partita_workloads::mp3d::llc_bytes() >= 1 << 20);
/// ```
pub fn llc_bytes() -> usize {
    let mut best = 0;
    for index in 0..8 {
        let path = format!("/sys/devices/system/cpu/cpu0/cache/index{index}/size");
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
        let t = text.trim();
        let (digits, mult) = match t.as_bytes().last() {
            Some(b'K') => (&t[..t.len() - 1], 1 << 10),
            Some(b'M') => (&t[..t.len() - 1], 1 << 20),
            _ => (t, 1),
        };
        if let Ok(v) = digits.parse::<usize>() {
            best = best.max(v * mult);
        }
    }
    if best < 1 << 20 {
        32 << 20
    } else {
        best
    }
}

/// The size for `params`: particles filling twice the LLC (between 16 MiB and 256 MiB of
/// particle data, 32 bytes each), and 6000 phases at scale 1.
pub fn size(params: &Params) -> Size {
    let bytes = (2 * llc_bytes()).clamp(16 << 20, 256 << 20);
    Size {
        particles: bytes / 32,
        phases: params.scaled(6000.0, 1),
    }
}

/// The particles: `x, y, vx, vy` per particle, by their bits, in atomics accessed with
/// relaxed loads and stores (members own disjoint particles within a phase; the barrier
/// orders phases), and the wall-hit counter.
pub struct Space {
    size: Size,
    p: Vec<AtomicU64>,
    hits: AtomicU64,
}

fn initial(k: usize) -> [f64; 4] {
    let s = (k as u64) << 2;
    [
        crate::unit_f64(s),
        crate::unit_f64(s + 1),
        crate::unit_f64(s + 2) * 2.0 - 1.0,
        crate::unit_f64(s + 3) * 2.0 - 1.0,
    ]
}

/// Move one coordinate; returns the new position and velocity and whether it hit a wall.
#[inline]
fn step(x: f64, v: f64) -> (f64, f64, u64) {
    let x = x + v * DT;
    if x < 0.0 {
        (-x, -v, 1)
    } else if x > 1.0 {
        (2.0 - x, -v, 1)
    } else {
        (x, v, 0)
    }
}

#[inline]
fn move_particle(q: [f64; 4]) -> ([f64; 4], u64) {
    let (x, vx, hx) = step(q[0], q[2]);
    let (y, vy, hy) = step(q[1], q[3]);
    ([x, y, vx, vy], hx + hy)
}

/// Particles `[start, end)` moved in phase `phase`.
fn chunk(size: Size, phase: usize) -> std::ops::Range<usize> {
    let chunks = size.particles.div_ceil(CHUNK);
    let start = (phase % chunks) * CHUNK;
    start..(start + CHUNK).min(size.particles)
}

impl Space {
    /// The initial particles.
    pub fn new(size: Size) -> Space {
        let p = (0..size.particles)
            .flat_map(initial)
            .map(|v| AtomicU64::new(v.to_bits()))
            .collect();
        Space {
            size,
            p,
            hits: AtomicU64::new(0),
        }
    }

    fn advance(&self, range: std::ops::Range<usize>) {
        let mut hits = 0;
        for k in range {
            let q = std::array::from_fn(|f| f64::from_bits(self.p[4 * k + f].load(Relaxed)));
            let (q, h) = move_particle(q);
            for (f, v) in q.iter().enumerate() {
                self.p[4 * k + f].store(v.to_bits(), Relaxed);
            }
            hits += h;
        }
        self.hits.fetch_add(hits, Relaxed);
    }

    /// Checksum of every particle and the hit count.
    pub fn checksum(&self) -> u64 {
        let mut c = Checksum::new();
        for v in &self.p {
            c.u64(v.load(Relaxed));
        }
        c.u64(self.hits.load(Relaxed));
        c.finish()
    }
}

/// Run the phases on `pool` as an elastic team.
pub fn run(pool: &ThreadPool, params: &Params, space: &mut Space) -> TeamStats {
    let space = &*space;
    team::run(pool, space.size.phases, params.spin, |c| {
        let range = chunk(space.size, c.phase);
        let mine = c.share(range.len());
        space.advance(range.start + mine.start..range.start + mine.end);
    })
}

/// The checksum of a sequential run.
pub fn reference(params: &Params) -> u64 {
    let size = size(params);
    let mut p: Vec<[f64; 4]> = (0..size.particles).map(initial).collect();
    let mut hits = 0;
    for phase in 0..size.phases {
        for q in &mut p[chunk(size, phase)] {
            let (n, h) = move_particle(*q);
            *q = n;
            hits += h;
        }
    }
    let mut c = Checksum::new();
    for q in p {
        for v in q {
            c.f64(v);
        }
    }
    c.u64(hits);
    c.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parallel_matches_sequential() {
        let params = Params {
            scale: 0.02,
            ..Params::default()
        };
        let want = reference(&params);
        for threads in [1, 2] {
            let pool = crate::pool::build(threads, "mp3d-test").unwrap();
            let mut s = Space::new(size(&params));
            run(&pool, &params, &mut s);
            assert_eq!(s.checksum(), want, "threads = {threads}");
        }
    }

    #[test]
    fn particles_stay_in_the_box() {
        let mut q = [0.999, 0.001, 1.0, -1.0];
        for _ in 0..10_000 {
            q = move_particle(q).0;
            assert!(
                (0.0..=1.0).contains(&q[0]) && (0.0..=1.0).contains(&q[1]),
                "{q:?}"
            );
        }
    }

    #[test]
    fn chunks_cover_every_particle_once_per_pass() {
        let size = Size {
            particles: 3 * CHUNK + 5,
            phases: 4,
        };
        let covered: usize = (0..4).map(|p| chunk(size, p).len()).sum();
        assert_eq!(covered, size.particles);
    }
}
