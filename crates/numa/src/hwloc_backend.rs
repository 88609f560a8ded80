//! The `hwloc` topology backend: the same [`Topology`] built through hwloc (libhwloc 2.x).
//!
//! hwloc has no portable way (in the `hwloc2` crate) to read the SLIT matrix, so distances
//! come from sysfs, where hwloc itself reads them on Linux. hwloc's default filter drops
//! instruction caches, so CPUs list data and unified caches only.

use crate::error::{NumaError, Result};
use crate::topology::{Cache, CacheKind, Cpu, Node, Topology};
use hwloc2::{ObjectType, TopologyObject};
use std::os::raw::{c_int, c_uint, c_void};

const CALL: &str = "hwloc topology";
/// hwloc 2's virtual depth of the NUMA-node level (`HWLOC_TYPE_DEPTH_NUMANODE`).
const DEPTH_NUMANODE: c_int = -3;

// The `hwloc2` crate (written for hwloc 1's depth numbering) cannot reach hwloc 2's NUMA
// level: its depth is virtual (negative) and the crate's accessors take and check `u32`
// depths. These four entry points of the same libhwloc (linked by `hwloc2`) reach it; the
// objects are read through `hwloc2::TopologyObject`, whose layout is hwloc 2's `hwloc_obj`.
unsafe extern "C" {
    fn hwloc_topology_init(topology: *mut *mut c_void) -> c_int;
    fn hwloc_topology_load(topology: *mut c_void) -> c_int;
    fn hwloc_topology_destroy(topology: *mut c_void);
    fn hwloc_get_nbobjs_by_depth(topology: *mut c_void, depth: c_int) -> c_uint;
    fn hwloc_get_obj_by_depth(
        topology: *mut c_void,
        depth: c_int,
        idx: c_uint,
    ) -> *mut TopologyObject;
}

/// An hwloc topology handle used only to list NUMA nodes; destroyed on drop.
struct RawTopology(*mut c_void);

impl RawTopology {
    fn load() -> Result<RawTopology> {
        let mut t: *mut c_void = std::ptr::null_mut();
        // SAFETY: init writes a fresh handle into `t`; load fills it; on failure we destroy
        // what init created.
        unsafe {
            if hwloc_topology_init(&mut t) != 0 || t.is_null() {
                return Err(err("hwloc_topology_init failed"));
            }
            if hwloc_topology_load(t) != 0 {
                hwloc_topology_destroy(t);
                return Err(err("hwloc_topology_load failed"));
            }
        }
        Ok(RawTopology(t))
    }

    /// `(os_index, cpus, memory)` of every NUMA node.
    fn numa_nodes(&self) -> Vec<(u32, Vec<u32>, u64)> {
        // SAFETY: the handle is loaded; indices are below the level's object count, and the
        // returned objects live as long as the handle (we copy what we need before drop).
        unsafe {
            let n = hwloc_get_nbobjs_by_depth(self.0, DEPTH_NUMANODE);
            (0..n)
                .filter_map(|i| hwloc_get_obj_by_depth(self.0, DEPTH_NUMANODE, i).as_ref())
                .map(|o| {
                    let cpus = o
                        .cpuset()
                        .map(|s| s.into_iter().collect())
                        .unwrap_or_default();
                    (o.os_index(), cpus, o.total_memory())
                })
                .collect()
        }
    }
}

impl Drop for RawTopology {
    fn drop(&mut self) {
        // SAFETY: destroying the handle this value created, once.
        unsafe { hwloc_topology_destroy(self.0) }
    }
}

fn err(detail: impl Into<String>) -> NumaError {
    NumaError::Topology {
        call: CALL,
        detail: detail.into(),
    }
}

fn cache_level(t: &ObjectType) -> Option<(u32, bool)> {
    Some(match t {
        ObjectType::L1Cache => (1, false),
        ObjectType::L2Cache => (2, false),
        ObjectType::L3Cache => (3, false),
        ObjectType::L4Cache => (4, false),
        ObjectType::L5Cache => (5, false),
        ObjectType::L1iCache => (1, true),
        ObjectType::L2iCache => (2, true),
        ObjectType::L3iCache => (3, true),
        _ => return None,
    })
}

fn ancestors(obj: &TopologyObject) -> impl Iterator<Item = &TopologyObject> {
    std::iter::successors(obj.parent(), |o| o.parent())
}

impl Topology {
    /// The running machine's topology, read through hwloc (feature `hwloc`).
    ///
    /// ```
    /// let a = partita_numa::Topology::from_hwloc().unwrap();
    /// let b = partita_numa::Topology::current().unwrap();
    /// assert_eq!(a.nodes().len(), b.nodes().len());
    /// ```
    pub fn from_hwloc() -> Result<Topology> {
        let topo = hwloc2::Topology::new().ok_or_else(|| err("hwloc_topology_load failed"))?;
        let sysfs = Topology::current().ok();
        let mut nodes = Vec::new();
        for (id, cpus, memory_bytes) in RawTopology::load()?.numa_nodes() {
            nodes.push(Node {
                id,
                cpus,
                memory_bytes,
                distances: Vec::new(),
            });
        }
        if nodes.is_empty() {
            return Err(err("hwloc reports no NUMA node"));
        }
        nodes.sort_by_key(|n| n.id);
        let count = nodes.len();
        for n in &mut nodes {
            n.distances = sysfs
                .as_ref()
                .and_then(|t| t.node(n.id))
                .map(|sn| sn.distances.clone())
                .filter(|d| d.len() == count)
                .unwrap_or_else(|| vec![10; count]);
        }
        let pus = topo
            .objects_with_type(&ObjectType::PU)
            .map_err(|e| err(format!("no PU level: {e:?}")))?;
        let mut cpus = Vec::new();
        for pu in pus {
            let id = pu.os_index();
            let node = nodes
                .iter()
                .find(|n| n.cpus.contains(&id))
                .map(|n| n.id)
                .unwrap_or(nodes[0].id);
            let package = ancestors(pu)
                .find(|o| o.object_type() == ObjectType::Package)
                .map(|o| o.os_index())
                .unwrap_or(0);
            let mut caches = Vec::new();
            for o in ancestors(pu) {
                let Some((level, instr)) = cache_level(&o.object_type()) else {
                    continue;
                };
                let attrs = o.cache_attributes();
                // hwloc_obj_cache_type_e: 0 unified, 1 data, 2 instruction.
                let raw_type = attrs.map(|a| {
                    // SAFETY: `_type` is a fieldless #[repr(C)] enum (a C `int`) that the
                    // `hwloc2` crate does not export; reading it as i32 reads the same bits.
                    unsafe { *(&a._type as *const _ as *const i32) }
                });
                let kind = match raw_type {
                    _ if instr => CacheKind::Instruction,
                    Some(1) => CacheKind::Data,
                    Some(2) => CacheKind::Instruction,
                    _ => CacheKind::Unified,
                };
                let shared_with: Vec<u32> = o
                    .cpuset()
                    .map(|s| s.into_iter().collect())
                    .unwrap_or_default();
                caches.push(Cache {
                    level,
                    kind,
                    size_bytes: attrs.map(|a| a.size()).unwrap_or(0),
                    shared_with,
                });
            }
            caches.sort_by_key(|c| (c.level, c.kind));
            cpus.push(Cpu {
                id,
                node,
                package,
                caches,
            });
        }
        Topology::from_parts(nodes, cpus)
    }
}
