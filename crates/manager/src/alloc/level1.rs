//! Level 1: CPUs to partitions (Verghese's software performance units).
//!
//! 1. Entitlement: fixed-count partitions first, then the rest in proportion to shares. The
//!    integral parts are space-partitioned; the leftover CPUs (fractional remainders) go to the
//!    partitions with the largest accumulated remainder credit, which advances once per
//!    rotation period — an integer carry, so the long-run share is exact.
//! 2. Each `lend-idle` or `never` partition first gets `min(demand, entitlement)`; a `never`
//!    partition keeps the rest of its entitlement idle; an `always` partition has no reserved
//!    part and competes for everything.
//! 3. The remaining CPUs go one at a time to the partition with unmet demand whose allocation
//!    per share is lowest (weighted max-min). Since step 2 is recomputed from scratch at every
//!    reallocation, CPUs lent in step 3 are revoked the moment the owner's demand rises.

use super::{History, PartitionAlloc};
use crate::config::{PartitionConfig, Sharing};

/// Per-partition entitlement and allocation. `demands[k]` is Σ of partition k's member caps.
/// `advance` moves the rotation credits one period forward.
///
/// ```
/// use partita_manager::alloc::{level1::partition_counts, History};
/// use partita_manager::config::PartitionConfig;
/// let ps = vec![PartitionConfig::named("default"), PartitionConfig::named("b")];
/// let out = partition_counts(4, &ps, &[0, 4], &mut History::default(), false);
/// assert_eq!(out[1].entitlement, 2);
/// assert_eq!(out[1].allocation, 4); // borrows the idle default entitlement
/// assert_eq!(out[0].lent, 2);
/// ```
pub fn partition_counts(
    cpus: u32,
    specs: &[PartitionConfig],
    demands: &[u32],
    history: &mut History,
    advance: bool,
) -> Vec<PartitionAlloc> {
    let n = specs.len();
    let demands: Vec<u32> = (0..n)
        .map(|k| demands.get(k).copied().unwrap_or(0))
        .collect();
    let ent = entitlements(cpus, specs, history, advance);
    let (mut alloc, idle_never) = reserved(specs, &demands, &ent);
    let used: u32 = alloc.iter().sum::<u32>() + idle_never;
    lend(cpus.saturating_sub(used), specs, &demands, &mut alloc);
    summarize(specs, &demands, &ent, &alloc)
}

/// Step 1: entitlements. Fixed counts first, then shares; leftover CPUs rotate by credit.
fn entitlements(
    cpus: u32,
    specs: &[PartitionConfig],
    history: &mut History,
    advance: bool,
) -> Vec<u32> {
    let n = specs.len();
    let mut ent = vec![0u32; n];
    let mut remaining = cpus;
    for (k, p) in specs.iter().enumerate() {
        if let Some(f) = p.cpus {
            ent[k] = f.min(remaining);
            remaining -= ent[k];
        }
    }
    let share_parts: Vec<usize> = (0..n).filter(|&k| specs[k].cpus.is_none()).collect();
    let w: i64 = share_parts.iter().map(|&k| specs[k].share as i64).sum();
    if w == 0 {
        return ent;
    }
    if history.partition_credit_w != w {
        history.partition_credit.clear();
        history.partition_credit_w = w;
    }
    let r = remaining as i64;
    let mut rems = Vec::with_capacity(share_parts.len());
    let mut given = 0i64;
    for &k in &share_parts {
        let exact = r * specs[k].share as i64;
        ent[k] = (exact / w) as u32;
        given += exact / w;
        rems.push((k, exact % w));
    }
    let leftover = (r - given) as usize;
    let chosen = rotate_leftover(specs, &rems, leftover, history, advance);
    for &k in &chosen {
        ent[k] += 1;
    }
    if advance {
        for (k, rem) in rems {
            let c = history
                .partition_credit
                .entry(specs[k].name.clone())
                .or_insert(0);
            *c += rem;
            if chosen.contains(&k) {
                *c -= w;
            }
        }
        history.partition_extra = chosen.iter().map(|&k| specs[k].name.clone()).collect();
    }
    ent
}

/// Which partitions get the `leftover` CPUs. Advancing: the largest accumulated remainder
/// wins (and is charged by the caller). Inside a period: keep the period's choice as far as
/// it is still valid (stability).
fn rotate_leftover(
    specs: &[PartitionConfig],
    rems: &[(usize, i64)],
    leftover: usize,
    history: &History,
    advance: bool,
) -> Vec<usize> {
    // Keys computed once per partition, not in the comparator (they are string lookups).
    let mut order: Vec<(bool, i64, usize)> = rems
        .iter()
        .map(|&(k, rem)| {
            let name = &specs[k].name;
            let had = !advance && history.partition_extra.contains(name);
            let credit = history.partition_credit.get(name).copied().unwrap_or(0);
            (had, credit + rem, k)
        })
        .collect();
    // Largest (had, credit) first; ties by partition index.
    order.sort_unstable_by(|a, b| (b.0, b.1).cmp(&(a.0, a.1)).then(a.2.cmp(&b.2)));
    order.iter().take(leftover).map(|x| x.2).collect()
}

/// Step 2: the part of its entitlement each partition uses itself (`always`: none reserved),
/// and the CPUs `never` partitions keep idle.
fn reserved(specs: &[PartitionConfig], demands: &[u32], ent: &[u32]) -> (Vec<u32>, u32) {
    let mut alloc = vec![0u32; specs.len()];
    let mut idle_never = 0u32;
    for (k, p) in specs.iter().enumerate() {
        match p.sharing {
            Sharing::LendIdle => alloc[k] = demands[k].min(ent[k]),
            Sharing::Never => {
                alloc[k] = demands[k].min(ent[k]);
                idle_never += ent[k] - alloc[k];
            }
            Sharing::Always => {}
        }
    }
    (alloc, idle_never)
}

/// Step 3: the CPUs nobody reserved go one at a time to the partition with unmet demand whose
/// allocation per share is lowest (weighted max-min); `never` partitions neither lend nor
/// borrow.
fn lend(mut pool: u32, specs: &[PartitionConfig], demands: &[u32], alloc: &mut [u32]) {
    let n = specs.len();
    let weight = |k: usize| -> u64 { specs[k].cpus.unwrap_or(specs[k].share).max(1) as u64 };
    while pool > 0 {
        let mut best: Option<usize> = None;
        for k in 0..n {
            if specs[k].sharing == Sharing::Never || alloc[k] >= demands[k] {
                continue;
            }
            best = match best {
                None => Some(k),
                Some(b) => {
                    // (alloc_k + 1) / w_k < (alloc_b + 1) / w_b
                    let lk = (alloc[k] as u64 + 1) * weight(b);
                    let lb = (alloc[b] as u64 + 1) * weight(k);
                    if lk < lb {
                        Some(k)
                    } else {
                        Some(b)
                    }
                }
            };
        }
        match best {
            Some(k) => {
                alloc[k] += 1;
                pool -= 1;
            }
            None => break,
        }
    }
}

/// The report: entitlement, demand, allocation, and who lent what was borrowed.
fn summarize(
    specs: &[PartitionConfig],
    demands: &[u32],
    ent: &[u32],
    alloc: &[u32],
) -> Vec<PartitionAlloc> {
    let mut out: Vec<PartitionAlloc> = (0..specs.len())
        .map(|k| PartitionAlloc {
            entitlement: ent[k],
            demand: demands[k],
            allocation: alloc[k],
            lent: 0,
            borrowed: alloc[k].saturating_sub(ent[k]),
        })
        .collect();
    let mut to_cover: u32 = out.iter().map(|p| p.borrowed).sum();
    for (k, p) in out.iter_mut().enumerate() {
        if to_cover == 0 {
            break;
        }
        if specs[k].sharing != Sharing::Never && p.entitlement > p.allocation {
            p.lent = (p.entitlement - p.allocation).min(to_cover);
            to_cover -= p.lent;
        }
    }
    out
}
