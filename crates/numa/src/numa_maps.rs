//! Where another process's memory is, per mapping: `/proc/<pid>/numa_maps` (pages per node
//! and the mapping's memory policy) joined with `/proc/<pid>/maps` (where each mapping ends).
//!
//! The parsers are pure functions over the files' text, so they are tested on captured
//! lines; [`process_mappings`] reads both files of a live process. Reading `numa_maps` walks
//! the process's page tables (milliseconds for a few hundred MiB): a status query or a
//! migration decision may afford it, a hot loop may not.

use std::collections::BTreeMap;

use crate::error::{NumaError, Result};

/// One mapping of a process, with where its resident pages are.
///
/// ```
/// let m = partita_numa::numa_maps::parse(
///     "7f0000000000-7f0000400000 rw-p 00000000 00:00 0\n",
///     "7f0000000000 default anon=1024 dirty=1024 N0=1000 N1=24 kernelpagesize_kB=4\n",
///     4096,
/// );
/// assert_eq!(m[0].end, 0x7f0000400000);
/// assert_eq!(m[0].pages_on(1), 24);
/// assert!(m[0].default_policy() && m[0].anon > 0);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Mapping {
    /// First address.
    pub start: usize,
    /// One past the last address (from `maps`; `start` when `maps` had no such line).
    pub end: usize,
    /// The mapping's memory policy as `numa_maps` prints it (`default`, `prefer:1`,
    /// `bind:0-1`, …): `default` means nobody chose its placement with `mbind(2)`.
    pub policy: String,
    /// Anonymous pages (in base pages).
    pub anon: u64,
    /// Resident pages per node, in base pages (huge pages counted as the base pages they
    /// hold).
    pub nodes: BTreeMap<u32, u64>,
}

impl Mapping {
    /// Resident base pages on `node`.
    pub fn pages_on(&self, node: u32) -> u64 {
        self.nodes.get(&node).copied().unwrap_or(0)
    }

    /// Resident base pages on nodes outside `nodes`.
    ///
    /// ```
    /// let m = partita_numa::numa_maps::Mapping {
    ///     nodes: [(0, 5), (1, 7)].into_iter().collect(), ..Default::default()
    /// };
    /// assert_eq!(m.pages_outside(&[1]), 5);
    /// ```
    pub fn pages_outside(&self, nodes: &[u32]) -> u64 {
        self.nodes
            .iter()
            .filter(|(n, _)| !nodes.contains(n))
            .map(|(_, p)| p)
            .sum()
    }

    /// Whether the mapping has no policy of its own (`mbind(2)`), so its placement is the
    /// kernel's default (first touch).
    pub fn default_policy(&self) -> bool {
        self.policy == "default"
    }
}

/// Joins the text of `/proc/<pid>/maps` and `/proc/<pid>/numa_maps` into mappings, in
/// `numa_maps` order. Lines that cannot be parsed are skipped (the files are the kernel's;
/// a format this parser does not know loses a mapping, never the rest). `page_size` is the
/// base page size in bytes.
pub fn parse(maps: &str, numa_maps: &str, page_size: usize) -> Vec<Mapping> {
    let ends: BTreeMap<usize, usize> = maps.lines().filter_map(parse_maps_line).collect();
    numa_maps
        .lines()
        .filter_map(|l| parse_numa_maps_line(l, page_size))
        .map(|mut m| {
            m.end = ends.get(&m.start).copied().unwrap_or(m.start);
            m
        })
        .collect()
}

/// `start-end perms …` → (start, end).
fn parse_maps_line(line: &str) -> Option<(usize, usize)> {
    let range = line.split_whitespace().next()?;
    let (a, b) = range.split_once('-')?;
    let (a, b) = (
        usize::from_str_radix(a, 16).ok()?,
        usize::from_str_radix(b, 16).ok()?,
    );
    (b >= a).then_some((a, b))
}

/// One `numa_maps` line: `start policy key=value … N<node>=<pages> … kernelpagesize_kB=K`.
fn parse_numa_maps_line(line: &str, page_size: usize) -> Option<Mapping> {
    let mut words = line.split_whitespace();
    let start = usize::from_str_radix(words.next()?, 16).ok()?;
    let policy = words.next()?.to_string();
    let mut m = Mapping {
        start,
        end: start,
        policy,
        ..Default::default()
    };
    let mut kernel_kb = 0u64;
    let mut raw_nodes = Vec::new();
    for w in words {
        let Some((k, v)) = w.split_once('=') else {
            continue;
        };
        match k {
            "anon" => m.anon = v.parse().ok()?,
            "kernelpagesize_kB" => kernel_kb = v.parse().ok()?,
            _ => {
                if let Some(n) = k.strip_prefix('N').and_then(|n| n.parse::<u32>().ok()) {
                    raw_nodes.push((n, v.parse::<u64>().ok()?));
                }
            }
        }
    }
    // Counts are in the mapping's page size (hugetlbfs: huge pages); convert to base pages.
    let base_kb = (page_size as u64 / 1024).max(1);
    let per = if kernel_kb > base_kb {
        kernel_kb / base_kb
    } else {
        1
    };
    for (n, p) in raw_nodes {
        *m.nodes.entry(n).or_default() += p.saturating_mul(per);
    }
    m.anon = m.anon.saturating_mul(per);
    Some(m)
}

/// The mappings of process `pid` with their pages per node (reads `/proc/<pid>/maps` and
/// `/proc/<pid>/numa_maps`). Errors name the file: `ENOENT`/`ESRCH` for a process that is
/// gone, `EACCES` without the right to read it (another user's, without `CAP_SYS_PTRACE`).
///
/// ```
/// let m = partita_numa::numa_maps::process_mappings(std::process::id()).unwrap();
/// assert!(m.iter().any(|m| !m.nodes.is_empty()));
/// assert!(partita_numa::numa_maps::process_mappings(u32::MAX).is_err());
/// ```
pub fn process_mappings(pid: u32) -> Result<Vec<Mapping>> {
    let read = |file: &str, call: &'static str| {
        std::fs::read_to_string(format!("/proc/{pid}/{file}"))
            .map_err(|source| NumaError::Os { call, source })
    };
    // numa_maps first: a process that exits between the two reads then fails the second.
    let numa = read("numa_maps", "read /proc/<pid>/numa_maps")?;
    let maps = read("maps", "read /proc/<pid>/maps")?;
    Ok(parse(&maps, &numa, crate::page_size()))
}

/// Resident base pages of `pid` per node, over all its mappings.
///
/// ```
/// let n = partita_numa::numa_maps::pages_per_node(std::process::id()).unwrap();
/// assert!(n.values().sum::<u64>() > 0);
/// ```
pub fn pages_per_node(pid: u32) -> Result<BTreeMap<u32, u64>> {
    let mut total = BTreeMap::new();
    for m in process_mappings(pid)? {
        for (n, p) in m.nodes {
            *total.entry(n).or_default() += p;
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &str = "\
55d0c0000000-55d0c0021000 rw-p 00000000 00:00 0                          [heap]
7f3a00000000-7f3a10000000 rw-p 00000000 00:00 0
7f3a20000000-7f3a20200000 rw-p 00000000 00:00 0
7f3a40000000-7f3a40400000 rw-p 00000000 00:0f 1234                       /dev/hugepages/x
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]
";
    const NUMA: &str = "\
55d0c0000000 default heap anon=20 dirty=20 active=0 N0=20 kernelpagesize_kB=4
7f3a00000000 default anon=65536 dirty=65536 active=0 N0=60000 N1=5536 kernelpagesize_kB=4
7f3a20000000 prefer:1 anon=512 dirty=512 N1=512 kernelpagesize_kB=4
7f3a40000000 default file=/dev/hugepages/x huge dirty=2 N0=2 kernelpagesize_kB=2048
7ffd00000000 default stack anon=3 dirty=3 N1=3 kernelpagesize_kB=4
7ffd00100000 default
garbage line
";

    #[test]
    fn joins_maps_and_numa_maps() {
        let m = parse(MAPS, NUMA, 4096);
        assert_eq!(m.len(), 6);
        assert_eq!(m[1].end - m[1].start, 0x1000_0000);
        assert_eq!((m[1].pages_on(0), m[1].pages_on(1)), (60000, 5536));
        assert_eq!(m[1].pages_outside(&[1]), 60000);
        assert!(!m[2].default_policy());
        // Huge pages count as the base pages they hold.
        assert_eq!(m[3].pages_on(0), 1024);
        assert_eq!(m[3].anon, 0);
        // A mapping with no resident pages and no maps line.
        assert!(m[5].nodes.is_empty());
        assert_eq!(m[5].end, m[5].start);
    }

    proptest::proptest! {
        /// The kernel's files are input from outside: any text parses without a panic,
        /// and every mapping comes from a line that starts with its address.
        #[test]
        fn any_text_parses(maps in "\\PC*", numa in "[0-9a-f N=a-z:_\n]*") {
            for m in parse(&maps, &numa, 4096) {
                let start = format!("{:x}", m.start);
                let from_a_line = numa.lines().any(|l| {
                    l.split_whitespace().next().is_some_and(|w| {
                        w.trim_start_matches('0') == start.trim_start_matches('0')
                    })
                });
                proptest::prop_assert!(from_a_line, "mapping at {start} from no line");
            }
        }
    }
}
