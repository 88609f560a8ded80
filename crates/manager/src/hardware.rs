//! What the manager reads about the machine's CPUs: their NUMA nodes and last-level caches
//! (sysfs, through partita-numa), for the allocator's placement ([`crate::alloc::topology`]),
//! which itself never touches the system.

use crate::alloc::topology::CpuTopology;

/// The NUMA node and last-level cache of each of `cpus`, read through partita-numa (sysfs
/// backend). A machine whose topology cannot be read is treated as one node, one LLC
/// (logged).
///
/// ```
/// let t = partita_manager::hardware::cpu_topology(&[0]);
/// assert_eq!(t.nodes.len(), 1);
/// ```
pub fn cpu_topology(cpus: &[usize]) -> CpuTopology {
    let topo = match partita_numa::Topology::current() {
        Ok(t) => t,
        Err(e) => {
            tracing::warn!(error = %e, "topology unreadable: placing as on one NUMA node");
            return CpuTopology {
                nodes: vec![0; cpus.len()],
                llcs: vec![0; cpus.len()],
            };
        }
    };
    let level = if has_level(&topo, 3) { 3 } else { 2 };
    let groups = topo.cache_domains(level);
    let llc_of = |c: u32| groups.iter().position(|g| g.contains(&c)).unwrap_or(0) as u32;
    CpuTopology {
        nodes: cpus
            .iter()
            .map(|&c| topo.node_of_cpu(c as u32).unwrap_or(0))
            .collect(),
        llcs: cpus.iter().map(|&c| llc_of(c as u32)).collect(),
    }
}

fn has_level(topo: &partita_numa::Topology, level: u32) -> bool {
    topo.cpus()
        .iter()
        .any(|c| c.caches.iter().any(|k| k.level == level))
}
