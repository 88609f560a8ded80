//! Partitions bound to a cgroup's CPUs (issue 30): a Slurm job, a Kubernetes pod or a systemd
//! slice whose programs registered. Each is allocated on its own, over the CPUs its cgroup
//! allows that no earlier bound partition holds, with at most its quota; then the other
//! partitions share what is left. So the manager never hands a bound partition's members a
//! CPU outside their cgroup, never more CPUs than the quota, and never lends a partition's
//! CPUs unless its sharing says so:
//!
//! - `never`: the cgroup's CPUs are withdrawn from everyone after it (idle or not);
//! - `lend-idle`: only the CPUs its members got are withdrawn; the idle ones go on (and come
//!   back at the next reallocation when its demand rises: bound partitions are served first);
//! - `always`: nothing is withdrawn.
//!
//! ```
//! use partita_manager::alloc::{allocate, bound::Bound, AllocInput, AppDemand, History, MemberId};
//! use partita_manager::config::PartitionConfig;
//! let mut input = AllocInput::new((0..4).collect(), vec![PartitionConfig::named("default"), PartitionConfig::named("job")]);
//! input.bounds = vec![None, Some(Bound { cpus: [2, 3].into_iter().collect(), cap: None })];
//! input.apps.push(AppDemand { id: 1, partition: 1, demand: 4, pool_size: 4 });
//! input.apps.push(AppDemand { id: 2, partition: 0, demand: 4, pool_size: 4 });
//! let out = allocate(&input, &mut History::default());
//! assert_eq!(out.cpus(MemberId::App(1)).to_vec(), vec![2, 3]);
//! assert_eq!(out.cpus(MemberId::App(2)).to_vec(), vec![0, 1]);
//! ```

use super::{allocate_flat, AllocInput, AllocOutput, AppDemand, History, MemberId, PartitionAlloc};
use crate::config::Sharing;
use partita_protocol::CpuSet;
use std::collections::{BTreeMap, BTreeSet};

/// What a partition's cgroup allows.
///
/// ```
/// let b = partita_manager::alloc::bound::Bound { cpus: [0].into_iter().collect(), cap: Some(1) };
/// assert_eq!(b.cpus.len(), 1);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bound {
    /// The cgroup's effective CPUs.
    pub cpus: CpuSet,
    /// Its quota in whole CPUs (`None`: no quota).
    pub cap: Option<u32>,
}

/// [`super::allocate`] with bound partitions: each bound one alone, in index order, then the
/// rest over the CPUs left. The `default` partition (index 0) is never bound.
pub(super) fn allocate(input: &AllocInput, history: &mut History) -> AllocOutput {
    let n = input.partitions.len();
    let bound_of = |k: usize| (k > 0).then(|| input.bounds.get(k).copied().flatten())?;
    let mut by_partition: Vec<Vec<AppDemand>> = vec![Vec::new(); n];
    for a in input.apps.iter().filter(|a| a.partition < n) {
        by_partition[a.partition].push(*a);
    }
    let mut available = vec![true; input.cpus.len()];
    let mut out = AllocOutput {
        partitions: vec![PartitionAlloc::default(); n],
        members: BTreeMap::new(),
        moves: 0,
    };
    let mut live = BTreeSet::new();
    for (k, apps) in by_partition.iter_mut().enumerate() {
        let Some(b) = bound_of(k) else { continue };
        let name = input.partitions[k].name.clone();
        let h = history.bound.entry(name.clone()).or_default();
        live.insert(name);
        let apps = std::mem::take(apps);
        serve_bound(input, k, b, apps, h, &mut available, &mut out);
    }
    history.bound.retain(|name, _| live.contains(name));
    let keep: Vec<usize> = (0..n).filter(|&k| bound_of(k).is_none()).collect();
    serve_rest(input, &keep, &by_partition, &available, history, &mut out);
    out
}

/// Bound partition `k` over the CPUs of its cgroup still available; then withdraw what its
/// sharing protects.
fn serve_bound(
    input: &AllocInput,
    k: usize,
    b: Bound,
    apps: Vec<AppDemand>,
    history: &mut History,
    available: &mut [bool],
    out: &mut AllocOutput,
) {
    let inside: Vec<usize> = (0..input.cpus.len())
        .filter(|&i| b.cpus.contains(input.cpus[i]))
        .collect();
    let free: Vec<usize> = inside.iter().copied().filter(|&i| available[i]).collect();
    let o = allocate_one(input, k, &free, b.cap, apps, history);
    let mut used = CpuSet::new();
    for (m, v) in o.members {
        used.union_with(&v.1);
        out.members.insert(m, v);
    }
    out.partitions[k] = o.partitions.into_iter().next().unwrap_or_default();
    out.moves += o.moves;
    for i in inside {
        match input.partitions[k].sharing {
            Sharing::Never => available[i] = false,
            Sharing::LendIdle if used.contains(input.cpus[i]) => available[i] = false,
            _ => {}
        }
    }
}

/// The partitions at `keep` (not bound) over the available CPUs, renumbered and back.
fn serve_rest(
    input: &AllocInput,
    keep: &[usize],
    by_partition: &[Vec<AppDemand>],
    available: &[bool],
    history: &mut History,
    out: &mut AllocOutput,
) {
    let free: Vec<usize> = (0..input.cpus.len()).filter(|&i| available[i]).collect();
    let mut g = subset(input, &free);
    g.partitions = keep.iter().map(|&k| input.partitions[k].clone()).collect();
    g.uncontrolled = keep
        .iter()
        .map(|&k| input.uncontrolled.get(k).copied().unwrap_or(0))
        .collect();
    for (j, &k) in keep.iter().enumerate() {
        g.apps.extend(
            by_partition[k]
                .iter()
                .map(|a| AppDemand { partition: j, ..*a }),
        );
    }
    g.apps.sort_unstable_by_key(|a| a.id);
    let o = allocate_flat(&g, history);
    for (j, p) in o.partitions.into_iter().enumerate() {
        out.partitions[keep[j]] = p;
    }
    for (m, v) in o.members {
        let m = match m {
            MemberId::Uncontrolled(j) => MemberId::Uncontrolled(keep[j]),
            app => app,
        };
        out.members.insert(m, v);
    }
    out.moves += o.moves;
}

/// The input restricted to the CPUs at indices `idx`, without partitions or members.
fn subset(input: &AllocInput, idx: &[usize]) -> AllocInput {
    let pick = |v: &[u32]| -> Vec<u32> {
        if v.len() == input.cpus.len() {
            idx.iter().map(|&i| v[i]).collect()
        } else {
            Vec::new()
        }
    };
    AllocInput {
        cpus: idx.iter().map(|&i| input.cpus[i]).collect(),
        domains: pick(&input.domains),
        nodes: pick(&input.nodes),
        partitions: Vec::new(),
        apps: Vec::new(),
        uncontrolled: Vec::new(),
        now_ms: input.now_ms,
        period_ms: input.period_ms,
        usage_decay: input.usage_decay.clone(),
        dss: input.dss.clone(),
        bounds: Vec::new(),
    }
}

/// Bound partition `k` alone over the CPUs at `idx`, with at most `cap` of them (its members
/// renumbered to partition 0 and back).
fn allocate_one(
    input: &AllocInput,
    k: usize,
    idx: &[usize],
    cap: Option<u32>,
    apps: Vec<AppDemand>,
    history: &mut History,
) -> AllocOutput {
    let demand = apps.iter().map(AppDemand::cap).sum();
    if idx.is_empty() {
        return AllocOutput {
            partitions: vec![PartitionAlloc {
                demand,
                ..Default::default()
            }],
            ..Default::default()
        };
    }
    let mut sub = subset(input, idx);
    let mut p = input.partitions[k].clone();
    p.cpus = cap.map(|c| c.clamp(1, idx.len() as u32));
    p.share = 1;
    // Alone in its input: `never` keeps a quota a hard cap (nothing to borrow beyond it).
    p.sharing = Sharing::Never;
    sub.partitions = vec![p];
    sub.apps = apps
        .into_iter()
        .map(|a| AppDemand { partition: 0, ..a })
        .collect();
    allocate_flat(&sub, history)
}

#[cfg(test)]
mod tests;
