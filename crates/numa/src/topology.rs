//! Machine topology: NUMA nodes (CPUs, memory, distances) and per-CPU caches.
//!
//! The default backend reads sysfs (`/sys/devices/system/node`, `/sys/devices/system/cpu`)
//! and needs no native library. With the `hwloc` feature, [`Topology::from_hwloc`] builds the
//! same description through hwloc; a test checks that both agree on the running machine.

use crate::error::{NumaError, Result};
use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// Parses a kernel CPU/node list such as `"0-3,8,10-11"` (whitespace-trimmed; empty input is
/// the empty list). `None` on malformed input.
///
/// ```
/// assert_eq!(partita_numa::parse_cpu_list("0-2,5\n"), Some(vec![0, 1, 2, 5]));
/// assert_eq!(partita_numa::parse_cpu_list(""), Some(vec![]));
/// assert_eq!(partita_numa::parse_cpu_list("3-1"), None);
/// ```
pub fn parse_cpu_list(s: &str) -> Option<Vec<u32>> {
    let s = s.trim();
    let mut out = BTreeSet::new();
    if s.is_empty() {
        return Some(vec![]);
    }
    for part in s.split(',') {
        let part = part.trim();
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.parse().ok()?, b.parse().ok()?);
                if a > b || b - a > 1 << 20 {
                    return None;
                }
                out.extend(a..=b);
            }
            None => {
                out.insert(part.parse().ok()?);
            }
        }
    }
    Some(out.into_iter().collect())
}

/// What a cache holds.
///
/// ```
/// assert_ne!(partita_numa::CacheKind::Data, partita_numa::CacheKind::Unified);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CacheKind {
    /// Data only.
    Data,
    /// Instructions only.
    Instruction,
    /// Data and instructions.
    Unified,
}

/// One cache seen from one CPU.
///
/// ```
/// use partita_numa::{Cache, CacheKind};
/// let c = Cache { level: 2, kind: CacheKind::Unified, size_bytes: 1 << 20, shared_with: vec![0, 1] };
/// assert!(c.holds_data());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cache {
    /// 1, 2, 3, …
    pub level: u32,
    /// Data, instruction or unified.
    pub kind: CacheKind,
    /// Capacity in bytes (0 if unknown).
    pub size_bytes: u64,
    /// The CPUs sharing this cache (including the owner), sorted.
    pub shared_with: Vec<u32>,
}

impl Cache {
    /// Whether the cache holds data (data or unified).
    ///
    /// ```
    /// use partita_numa::{Cache, CacheKind};
    /// let c = Cache { level: 1, kind: CacheKind::Instruction, size_bytes: 0, shared_with: vec![0] };
    /// assert!(!c.holds_data());
    /// ```
    pub fn holds_data(&self) -> bool {
        self.kind != CacheKind::Instruction
    }
}

/// One logical CPU.
///
/// ```
/// let t = partita_numa::Topology::current().unwrap();
/// let cpu = &t.cpus()[0];
/// assert!(t.node(cpu.node).is_some());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cpu {
    /// OS CPU number.
    pub id: u32,
    /// The NUMA node it belongs to.
    pub node: u32,
    /// Physical package (socket) id.
    pub package: u32,
    /// Its caches, sorted by level then kind.
    pub caches: Vec<Cache>,
}

/// One NUMA node.
///
/// ```
/// let t = partita_numa::Topology::current().unwrap();
/// let n = &t.nodes()[0];
/// assert!(!n.cpus.is_empty() || n.memory_bytes > 0);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// OS node number.
    pub id: u32,
    /// Its CPUs, sorted.
    pub cpus: Vec<u32>,
    /// Memory attached to it, in bytes.
    pub memory_bytes: u64,
    /// ACPI SLIT distance to every node, in the order of [`Topology::nodes`] (10 = local).
    pub distances: Vec<u32>,
}

/// The machine's NUMA nodes and CPUs.
///
/// This is what the manager uses for selective CPU assignment: [`Topology::current`] gives
/// nodes → CPUs, and [`Topology::cache_domains`] groups CPUs that share a cache level.
///
/// ```
/// use partita_numa::Topology;
/// let t = Topology::current().unwrap();
/// for node in t.nodes() {
///     println!("node {}: cpus {:?}, {} MiB", node.id, node.cpus, node.memory_bytes >> 20);
/// }
/// for domain in t.cache_domains(2) {
///     println!("L2 shared by {domain:?}");
/// }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    nodes: Vec<Node>,
    cpus: Vec<Cpu>,
}

const SYSFS: &str = "sysfs topology";

fn read(path: &Path) -> Result<String> {
    fs::read_to_string(path).map_err(|e| NumaError::Topology {
        call: SYSFS,
        detail: format!("cannot read {}: {e}", path.display()),
    })
}

fn read_list(path: &Path) -> Result<Vec<u32>> {
    let s = read(path)?;
    parse_cpu_list(&s).ok_or_else(|| NumaError::Topology {
        call: SYSFS,
        detail: format!("malformed list {:?} in {}", s.trim(), path.display()),
    })
}

fn read_num(path: &Path) -> Option<u64> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Parses a sysfs cache size (`"32K"`, `"16M"`, `"512"`).
fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, mult) = match s.as_bytes().last()? {
        b'K' => (&s[..s.len() - 1], 1 << 10),
        b'M' => (&s[..s.len() - 1], 1 << 20),
        b'G' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<u64>().ok().map(|n| n * mult)
}

fn meminfo_total(text: &str) -> Option<u64> {
    // "Node 0 MemTotal:  24605800 kB" or "/proc/meminfo" "MemTotal:  24605800 kB"
    let line = text.lines().find(|l| l.contains("MemTotal:"))?;
    let kb: u64 = line.split_whitespace().rev().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

impl Topology {
    /// The running machine's topology, read from sysfs (cheap enough to call at start-up;
    /// callers that need it often should keep the value).
    ///
    /// ```
    /// let t = partita_numa::Topology::current().unwrap();
    /// assert!(t.nodes().len() >= 1 && t.cpus().len() >= 1);
    /// ```
    pub fn current() -> Result<Topology> {
        Self::from_sysfs(Path::new("/sys/devices/system"))
    }

    /// Reads a topology from a sysfs tree rooted at `root` (normally `/sys/devices/system`;
    /// tests point it at a fabricated tree). A kernel without `node/` is one node holding
    /// every CPU.
    ///
    /// ```
    /// let t = partita_numa::Topology::from_sysfs("/sys/devices/system".as_ref()).unwrap();
    /// assert_eq!(t, partita_numa::Topology::current().unwrap());
    /// ```
    pub fn from_sysfs(root: &Path) -> Result<Topology> {
        let cpu_dir = root.join("cpu");
        let online_cpus = read_list(&cpu_dir.join("online"))?;
        let node_dir = root.join("node");
        let mut nodes = Vec::new();
        if node_dir.join("online").exists() {
            for id in read_list(&node_dir.join("online"))? {
                let nd = node_dir.join(format!("node{id}"));
                let cpus: Vec<u32> = read_list(&nd.join("cpulist"))?
                    .into_iter()
                    .filter(|c| online_cpus.contains(c))
                    .collect();
                let memory_bytes = fs::read_to_string(nd.join("meminfo"))
                    .ok()
                    .and_then(|s| meminfo_total(&s))
                    .unwrap_or(0);
                let dist_text = read(&nd.join("distance"))?;
                let distances = dist_text
                    .split_whitespace()
                    .map(|d| d.parse::<u32>())
                    .collect::<std::result::Result<Vec<_>, _>>()
                    .map_err(|_| NumaError::Topology {
                        call: SYSFS,
                        detail: format!("malformed distances {:?}", dist_text.trim()),
                    })?;
                nodes.push(Node {
                    id,
                    cpus,
                    memory_bytes,
                    distances,
                });
            }
        }
        if nodes.is_empty() {
            let memory_bytes = fs::read_to_string("/proc/meminfo")
                .ok()
                .and_then(|s| meminfo_total(&s))
                .unwrap_or(0);
            nodes.push(Node {
                id: 0,
                cpus: online_cpus.clone(),
                memory_bytes,
                distances: vec![10],
            });
        }
        // Distances are listed for the online nodes, in order.
        let n_nodes = nodes.len();
        for n in &mut nodes {
            if n.distances.len() != n_nodes {
                return Err(NumaError::Topology {
                    call: SYSFS,
                    detail: format!(
                        "node {} lists {} distances for {} nodes",
                        n.id,
                        n.distances.len(),
                        n_nodes
                    ),
                });
            }
        }
        let mut cpus = Vec::new();
        for id in online_cpus {
            let node = nodes
                .iter()
                .find(|n| n.cpus.contains(&id))
                .map(|n| n.id)
                .unwrap_or(nodes[0].id);
            let cd = cpu_dir.join(format!("cpu{id}"));
            let package = read_num(&cd.join("topology/physical_package_id")).unwrap_or(0) as u32;
            let caches = Self::read_caches(&cd.join("cache"))?;
            cpus.push(Cpu {
                id,
                node,
                package,
                caches,
            });
        }
        Ok(Topology { nodes, cpus })
    }

    fn read_caches(dir: &Path) -> Result<Vec<Cache>> {
        let mut caches = Vec::new();
        let Ok(entries) = fs::read_dir(dir) else {
            return Ok(caches);
        };
        let mut paths: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("index"))
            })
            .collect();
        paths.sort();
        for p in paths {
            let Some(level) = read_num(&p.join("level")) else {
                continue;
            };
            let kind = match read(&p.join("type"))?.trim() {
                "Data" => CacheKind::Data,
                "Instruction" => CacheKind::Instruction,
                _ => CacheKind::Unified,
            };
            let size_bytes = fs::read_to_string(p.join("size"))
                .ok()
                .and_then(|s| parse_size(&s))
                .unwrap_or(0);
            let shared_with = read_list(&p.join("shared_cpu_list"))?;
            caches.push(Cache {
                level: level as u32,
                kind,
                size_bytes,
                shared_with,
            });
        }
        caches.sort_by_key(|c| (c.level, c.kind));
        Ok(caches)
    }

    /// Builds a topology from parts (for tests and simulations). Nodes and CPUs are sorted by
    /// id; every node needs one distance per node.
    ///
    /// ```
    /// use partita_numa::{Node, Topology};
    /// let nodes = vec![
    ///     Node { id: 0, cpus: vec![0], memory_bytes: 1 << 30, distances: vec![10, 20] },
    ///     Node { id: 1, cpus: vec![1], memory_bytes: 1 << 30, distances: vec![20, 10] },
    /// ];
    /// let t = Topology::from_parts(nodes, vec![]).unwrap();
    /// assert_eq!(t.distance(0, 1), Some(20));
    /// ```
    pub fn from_parts(mut nodes: Vec<Node>, mut cpus: Vec<Cpu>) -> Result<Topology> {
        nodes.sort_by_key(|n| n.id);
        cpus.sort_by_key(|c| c.id);
        if nodes.is_empty() || nodes.iter().any(|n| n.distances.len() != nodes.len()) {
            return Err(NumaError::Topology {
                call: "topology",
                detail: "need at least one node and one distance per node".into(),
            });
        }
        Ok(Topology { nodes, cpus })
    }

    /// The nodes, sorted by id.
    ///
    /// ```
    /// assert!(!partita_numa::Topology::current().unwrap().nodes().is_empty());
    /// ```
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// The online CPUs, sorted by id.
    ///
    /// ```
    /// let t = partita_numa::Topology::current().unwrap();
    /// assert!(t.cpus().windows(2).all(|w| w[0].id < w[1].id));
    /// ```
    pub fn cpus(&self) -> &[Cpu] {
        &self.cpus
    }

    /// The node with this id.
    ///
    /// ```
    /// let t = partita_numa::Topology::current().unwrap();
    /// assert!(t.node(0).is_some() && t.node(100_000).is_none());
    /// ```
    pub fn node(&self, id: u32) -> Option<&Node> {
        self.nodes.iter().find(|n| n.id == id)
    }

    /// The CPU with this id.
    ///
    /// ```
    /// let t = partita_numa::Topology::current().unwrap();
    /// assert_eq!(t.cpu(t.cpus()[0].id).unwrap().id, t.cpus()[0].id);
    /// ```
    pub fn cpu(&self, id: u32) -> Option<&Cpu> {
        self.cpus.iter().find(|c| c.id == id)
    }

    /// The node a CPU belongs to.
    ///
    /// ```
    /// let t = partita_numa::Topology::current().unwrap();
    /// assert_eq!(t.node_of_cpu(t.cpus()[0].id), Some(t.cpus()[0].node));
    /// ```
    pub fn node_of_cpu(&self, cpu: u32) -> Option<u32> {
        self.cpu(cpu).map(|c| c.node)
    }

    /// SLIT distance from node `a` to node `b` (10 = local).
    ///
    /// ```
    /// let t = partita_numa::Topology::current().unwrap();
    /// assert_eq!(t.distance(0, 0), Some(10));
    /// ```
    pub fn distance(&self, a: u32, b: u32) -> Option<u32> {
        let ib = self.nodes.iter().position(|n| n.id == b)?;
        self.node(a).map(|n| n.distances[ib])
    }

    /// The CPUs sharing `cpu`'s data (or unified) cache at `level`, including `cpu` itself;
    /// `None` if the CPU or that cache level is unknown.
    ///
    /// ```
    /// let t = partita_numa::Topology::current().unwrap();
    /// if let Some(peers) = t.cpus_sharing_cache(t.cpus()[0].id, 1) {
    ///     assert!(peers.contains(&t.cpus()[0].id));
    /// }
    /// ```
    pub fn cpus_sharing_cache(&self, cpu: u32, level: u32) -> Option<&[u32]> {
        self.cpu(cpu)?
            .caches
            .iter()
            .find(|c| c.level == level && c.holds_data())
            .map(|c| c.shared_with.as_slice())
    }

    /// Groups of CPUs that share a data cache at `level` (each online CPU appears in exactly
    /// one group; a CPU without such a cache forms its own group). Sorted.
    ///
    /// ```
    /// let t = partita_numa::Topology::current().unwrap();
    /// let groups = t.cache_domains(3);
    /// assert_eq!(groups.iter().map(|g| g.len()).sum::<usize>(), t.cpus().len());
    /// ```
    pub fn cache_domains(&self, level: u32) -> Vec<Vec<u32>> {
        let mut seen = BTreeSet::new();
        let mut groups = Vec::new();
        for c in &self.cpus {
            if seen.contains(&c.id) {
                continue;
            }
            let group: Vec<u32> = match self.cpus_sharing_cache(c.id, level) {
                Some(peers) => peers
                    .iter()
                    .copied()
                    .filter(|p| self.cpu(*p).is_some() && !seen.contains(p))
                    .collect(),
                None => vec![c.id],
            };
            let group = if group.contains(&c.id) {
                group
            } else {
                vec![c.id]
            };
            seen.extend(group.iter().copied());
            groups.push(group);
        }
        groups
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("32K"), Some(32 << 10));
        assert_eq!(parse_size("16M\n"), Some(16 << 20));
        assert_eq!(parse_size("x"), None);
    }

    #[test]
    fn meminfo_parses_node_and_proc_formats() {
        assert_eq!(
            meminfo_total("Node 0 MemTotal:       24605800 kB\nNode 0 MemFree: 1 kB"),
            Some(24605800 * 1024)
        );
        assert_eq!(meminfo_total("MemTotal:  100 kB\n"), Some(100 * 1024));
    }
}
