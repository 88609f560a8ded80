//! The NUMA nodes of a CPU set, for `partita status`.

use super::Registry;
use partita_protocol::CpuSet;

impl Registry {
    /// The NUMA nodes `cpus` lie on, ascending (for `partita status`).
    pub(super) fn nodes_of(&self, cpus: &CpuSet) -> Vec<u32> {
        let mut nodes: Vec<u32> = cpus
            .iter()
            .filter_map(|c| self.cpus.iter().position(|&x| x == c))
            .map(|i| self.nodes.get(i).copied().unwrap_or(0))
            .collect();
        nodes.sort_unstable();
        nodes.dedup();
        nodes
    }
}
