//! What the page mover ([`crate::memfollow`]) needs from the registry: copies, taken under
//! the lock and used outside it.

use super::Registry;
use crate::memfollow::mover::View;
use crate::memfollow::MigrationConfig;

impl Registry {
    /// Every application's placement (the node of each CPU it was published), if the
    /// registry reallocated since generation `seen`; with the new generation.
    pub(crate) fn memory_views(&self, seen: u64) -> Option<(u64, Vec<View>)> {
        if self.reallocations == seen {
            return None;
        }
        let node_of = |c: usize| {
            let i = self.cpus.iter().position(|&x| x == c)?;
            Some(self.nodes.get(i).copied().unwrap_or(0))
        };
        let views = self
            .apps
            .values()
            .map(|a| View {
                id: a.id,
                proc: a.proc.clone(),
                name: a.name.clone(),
                cpu_nodes: a
                    .published
                    .map(|(_, cpus)| cpus.iter().filter_map(node_of).collect())
                    .unwrap_or_default(),
            })
            .collect();
        Some((self.reallocations, views))
    }

    /// The `[numa_migration]` configuration.
    pub(crate) fn migration_config(&self) -> MigrationConfig {
        self.config.numa_migration.clone()
    }
}
