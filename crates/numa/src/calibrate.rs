//! Measures this machine's page-move cost and remote-miss penalty, from which the policy's
//! trigger follows (`trigger ≈ move cost / remote-miss penalty`, numa.md; the thesis' 128
//! comes from ~200 µs / ~1.2 µs).
//!
//! Both need two nodes; on a one-node machine they return `Ok(None)`.

use crate::error::Result;
use crate::pages::{MoveScope, move_pages_to};
use crate::placement::{NodeVec, Placement, first_touch_on};
use crate::range::{online_nodes, page_size};
use std::time::Instant;

fn two_nodes() -> Option<(u32, u32)> {
    let online = online_nodes();
    let mut it = online.iter();
    Some((it.next()?, it.next()?))
}

/// Mean nanoseconds per page to move `pages` pages between the first two nodes, `batch` pages
/// per `move_pages` call (one move each way). `Ok(None)` with fewer than two nodes.
///
/// ```
/// let cost = partita_numa::calibrate::move_cost_ns(64, 64).unwrap();
/// if partita_numa::online_nodes().len() < 2 {
///     assert!(cost.is_none());
/// }
/// ```
pub fn move_cost_ns(pages: usize, batch: usize) -> Result<Option<f64>> {
    let Some((a, b)) = two_nodes() else {
        return Ok(None);
    };
    let pages = pages.max(1);
    let v = NodeVec::from_fn(pages * page_size(), Placement::Node(a), |i| i as u8)?;
    let Some(range) = v.pages() else {
        return Ok(None);
    };
    let addrs: Vec<usize> = range.page_addresses().collect();
    let t = Instant::now();
    move_pages_to(&addrs, b, batch, MoveScope::Exclusive)?;
    move_pages_to(&addrs, a, batch, MoveScope::Exclusive)?;
    Ok(Some(
        t.elapsed().as_nanos() as f64 / (2 * addrs.len()) as f64,
    ))
}

/// Dependent-load latency (pointer chase over a random cycle of cache lines in `bytes` of
/// memory on `memory_node`), measured by a thread pinned to `cpu_node`'s CPUs.
///
/// ```
/// let n = partita_numa::online_nodes().iter().next().unwrap();
/// let ns = partita_numa::calibrate::load_latency_ns(n, n, 1 << 20).unwrap();
/// assert!(ns > 0.0);
/// ```
pub fn load_latency_ns(memory_node: u32, cpu_node: u32, bytes: usize) -> Result<f64> {
    const LINE: usize = 64 / std::mem::size_of::<usize>();
    let lines = (bytes / 64).max(2);
    // A random cyclic permutation of the lines (Sattolo's algorithm, fixed seed).
    let mut order: Vec<usize> = (0..lines).collect();
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    for i in (1..lines).rev() {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let j = (seed % i as u64) as usize;
        order.swap(i, j);
    }
    let mut next = vec![0usize; lines];
    for w in 0..lines {
        next[order[w]] = order[(w + 1) % lines];
    }
    let chain = NodeVec::from_fn(lines * LINE, Placement::Node(memory_node), |i| {
        if i % LINE == 0 {
            next[i / LINE] * LINE
        } else {
            0
        }
    })?;
    let steps = lines * 4;
    first_touch_on(cpu_node, || {
        let mut at = 0usize;
        for _ in 0..lines {
            at = chain[at]; // warm the TLB and caches that fit
        }
        let t = Instant::now();
        for _ in 0..steps {
            at = chain[at];
        }
        std::hint::black_box(at);
        t.elapsed().as_nanos() as f64 / steps as f64
    })
}

/// Remote minus local load latency between the first two nodes (ns; may be ≤ 0 on an emulated
/// machine). `Ok(None)` with fewer than two nodes.
///
/// ```
/// let p = partita_numa::calibrate::remote_penalty_ns(1 << 20).unwrap();
/// if partita_numa::online_nodes().len() < 2 {
///     assert!(p.is_none());
/// }
/// ```
pub fn remote_penalty_ns(bytes: usize) -> Result<Option<f64>> {
    let Some((a, b)) = two_nodes() else {
        return Ok(None);
    };
    let local = load_latency_ns(a, a, bytes)?;
    let remote = load_latency_ns(b, a, bytes)?;
    Ok(Some(remote - local))
}
