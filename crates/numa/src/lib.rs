//! # partita-numa
//!
//! NUMA topology, safe memory-policy and page-migration wrappers, node-placed allocation, and
//! Verghese's migrate/replicate policy with its trace-driven simulator. Design:
//! `docs/design/numa.md`; the crate's README explains the layers.
//!
//! **Linux only** (`mbind`, `move_pages`, `get_mempolicy`, sysfs): partita-runtime depends on
//! it on Linux only, and its portable build (other platforms) has no NUMA placement.
//!
//! ```
//! use partita_numa::{Topology, NodeVec, Placement};
//! let topo = Topology::current().unwrap();
//! let node = topo.nodes()[0].id;
//! let v = NodeVec::from_fn(10_000, Placement::Node(node), |i| i as u64).unwrap();
//! assert_eq!(v[9_999], 9_999);
//! assert!(v.page_nodes().unwrap().iter().all(|s| s.node() == Some(node)));
//! ```

#![warn(missing_docs)]

mod error;
mod mempolicy;
mod nodeset;
mod pages;
mod range;
mod sys;
mod topology;

pub mod calibrate;
pub mod counters;
pub mod driver;
pub mod numa_maps;
pub mod placement;
pub mod policy;
pub mod replicated;
pub mod sim;
pub mod traffic_event;
pub mod triad;

#[cfg(feature = "hwloc")]
mod hwloc_backend;

pub use error::{NumaError, Result};
pub use mempolicy::{
    MbindFlags, MemPolicy, get_mempolicy, mbind, node_of_address, policy_at, set_mempolicy,
};
pub use nodeset::{MAX_NODES, NodeSet};
pub use pages::{
    DEFAULT_BATCH, MoveScope, PageStatus, locate, locate_pages, locate_pages_of, migrate,
    migrate_batched, migrate_pages, move_pages_of, move_pages_to,
};
pub use placement::{NodeBox, NodeVec, Placement};
pub use range::{PageRange, current_thread_stack, online_nodes, page_size};
pub use replicated::Replicated;
pub use topology::{Cache, CacheKind, Cpu, Node, Topology, parse_cpu_list};

/// The NUMA node the calling thread is running on right now (`getcpu(2)`); `None` if the
/// kernel does not say.
///
/// ```
/// if let Some(n) = partita_numa::current_node() {
///     assert!(partita_numa::online_nodes().contains(n));
/// }
/// ```
pub fn current_node() -> Option<u32> {
    sys::current_cpu_and_node().map(|(_, n)| n)
}
