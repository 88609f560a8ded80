//! Sources of the per-page, per-node access counts the policy needs, in order of preference
//! (numa.md §Counter sources), and which one is in use.
//!
//! - [`CounterSource::PerfSampling`]: hardware data-address sampling (PEBS / IBS memory-load
//!   events through `perf_event_open`). Only detected here: virtual machines (including this
//!   project's development and CI machines) expose no such events.
//! - [`CounterSource::AccessHints`]: the runtime's tasks declare the ranges they touch
//!   ([`AccessHints`]); cheap and exact for array-parallel code.
//! - [`CounterSource::FaultSampling`]: `mprotect` a sample of pages and count the faults per
//!   node ([`crate::counters::FaultSampler`]); the user-space analogue of Linux's NUMA hinting
//!   faults.
//! - [`CounterSource::None`].
//!
//! Linux's own automatic NUMA balancing (`kernel.numa_balancing`) also moves pages; when it is
//! on, it competes with this crate's policy. [`numa_balancing`] reports it so callers can warn
//! or turn one of them off.
//!
//! ```
//! use partita_numa::counters::{numa_balancing, probe};
//! let source = probe().best(false);
//! println!("counter source in use: {source}; kernel NUMA balancing: {:?}", numa_balancing());
//! ```

use crate::policy::{CounterTable, NodeId};
use crate::range::page_size;
use std::path::Path;

mod fault;
pub use fault::{FaultSampler, FaultStats};

/// Where access counts come from.
///
/// ```
/// use partita_numa::counters::CounterSource;
/// assert_eq!(CounterSource::AccessHints.to_string(), "access hints");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CounterSource {
    /// Hardware sampling of data addresses (PEBS/IBS).
    PerfSampling,
    /// Ranges declared by the application's tasks.
    AccessHints,
    /// Sampled page faults on `mprotect`ed pages.
    FaultSampling,
    /// No counts.
    None,
}

impl std::fmt::Display for CounterSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CounterSource::PerfSampling => "perf data-address sampling",
            CounterSource::AccessHints => "access hints",
            CounterSource::FaultSampling => "page-fault sampling",
            CounterSource::None => "none",
        })
    }
}

/// What the machine offers, as found by [`probe`].
///
/// ```
/// let p = partita_numa::counters::probe();
/// println!("counter source: {} ({})", p.best(true), p.why_not_perf);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Probe {
    /// Whether a memory-sampling PMU event exists and `perf_event_open` accepts it.
    pub perf_sampling: bool,
    /// Why perf sampling is unavailable (empty if available).
    pub why_not_perf: String,
    /// Whether `mprotect`-based fault sampling can be installed (always on Linux).
    pub fault_sampling: bool,
}

impl Probe {
    /// The preferred available source; `hints` says whether the application declares ranges.
    ///
    /// ```
    /// use partita_numa::counters::{CounterSource, Probe};
    /// let p = Probe { perf_sampling: false, why_not_perf: "no PMU".into(), fault_sampling: true };
    /// assert_eq!(p.best(true), CounterSource::AccessHints);
    /// assert_eq!(p.best(false), CounterSource::FaultSampling);
    /// ```
    pub fn best(&self, hints: bool) -> CounterSource {
        if self.perf_sampling {
            CounterSource::PerfSampling
        } else if hints {
            CounterSource::AccessHints
        } else if self.fault_sampling {
            CounterSource::FaultSampling
        } else {
            CounterSource::None
        }
    }
}

/// Looks for a memory-sampling PMU event (`cpu/events/mem-loads` on Intel, the `ibs_op` PMU on
/// AMD) and checks that `perf_event_open` would be allowed.
///
/// ```
/// let p = partita_numa::counters::probe();
/// assert!(p.perf_sampling || !p.why_not_perf.is_empty());
/// ```
pub fn probe() -> Probe {
    probe_at(
        Path::new("/sys/bus/event_source/devices"),
        Path::new("/proc/sys/kernel/perf_event_paranoid"),
    )
}

fn probe_at(pmus: &Path, paranoid: &Path) -> Probe {
    let intel = pmus.join("cpu/events/mem-loads").exists();
    let amd = pmus.join("ibs_op").exists();
    let paranoid: Option<i32> = std::fs::read_to_string(paranoid)
        .ok()
        .and_then(|s| s.trim().parse().ok());
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let why_not_perf = if !intel && !amd {
        "no memory-sampling PMU event (mem-loads / ibs_op) on this machine".to_string()
    } else if paranoid.is_none() {
        "perf_event_open not supported by this kernel".to_string()
    } else if !root && paranoid.unwrap_or(3) > 1 {
        format!(
            "kernel.perf_event_paranoid = {} forbids CPU-wide sampling",
            paranoid.unwrap_or(3)
        )
    } else {
        String::new()
    };
    Probe {
        perf_sampling: why_not_perf.is_empty(),
        why_not_perf,
        fault_sampling: true,
    }
}

/// `kernel.numa_balancing`: `Some(true)` when Linux's automatic NUMA balancing is on (it
/// migrates pages on its own, competing with this crate's policy), `None` if the kernel has
/// no such setting (no NUMA balancing support).
///
/// ```
/// println!("{:?}", partita_numa::counters::numa_balancing());
/// ```
pub fn numa_balancing() -> Option<bool> {
    let s = std::fs::read_to_string("/proc/sys/kernel/numa_balancing").ok()?;
    Some(s.trim() != "0")
}

/// Access hints: the application's tasks declare the address ranges they touch and from which
/// node; counts go into a per-page, per-node [`CounterTable`] over one registered region.
///
/// `sample_every` keeps one count in N (deterministically), so sampled counts never exceed the
/// true counts.
///
/// ```
/// use partita_numa::counters::AccessHints;
/// let ps = partita_numa::page_size();
/// let mut h = AccessHints::new(0x10_0000, 4 * ps, 2, 1, 0);
/// h.touch(0x10_0000, 2 * ps, 1, false, 0); // one touch on each of pages 0 and 1 from node 1
/// assert_eq!(h.table().counters(1, 1).misses, vec![0, 1]);
/// ```
#[derive(Clone, Debug)]
pub struct AccessHints {
    base: usize,
    pages: usize,
    table: CounterTable,
    sample_every: u32,
    seen: u64,
    true_counts: Vec<u64>,
    nodes: usize,
}

impl AccessHints {
    /// Counters for `[base, base + len)` on a `nodes`-node machine, reset every
    /// `reset_interval_ns`, keeping one count in `sample_every` (≥ 1).
    ///
    /// ```
    /// let h = partita_numa::counters::AccessHints::new(0, 4096, 1, 1, 0);
    /// assert_eq!(h.table().pages(), 4096usize.div_ceil(partita_numa::page_size()));
    /// ```
    pub fn new(
        base: usize,
        len: usize,
        nodes: usize,
        sample_every: u32,
        reset_interval_ns: u64,
    ) -> Self {
        let ps = page_size();
        let base_aligned = base - base % ps;
        let pages = (base + len).div_ceil(ps) - base_aligned / ps;
        AccessHints {
            base: base_aligned,
            pages,
            table: CounterTable::new(pages, nodes, reset_interval_ns),
            sample_every: sample_every.max(1),
            seen: 0,
            true_counts: vec![0; pages * nodes],
            nodes,
        }
    }

    /// Records that a task on `node` touched `[addr, addr + len)` at `now_ns` (one count per
    /// page; the part outside the region is ignored). Returns the pages counted.
    ///
    /// ```
    /// let mut h = partita_numa::counters::AccessHints::new(0, 8192, 1, 1, 0);
    /// assert_eq!(h.touch(100_000, 10, 0, false, 0), 0); // outside
    /// ```
    pub fn touch(
        &mut self,
        addr: usize,
        len: usize,
        node: NodeId,
        write: bool,
        now_ns: u64,
    ) -> usize {
        if len == 0 || node >= self.nodes {
            return 0;
        }
        let ps = page_size();
        let lo = addr.max(self.base);
        let hi = addr.saturating_add(len).min(self.base + self.pages * ps);
        if lo >= hi {
            return 0;
        }
        let mut counted = 0;
        for page in (lo - self.base) / ps..=(hi - 1 - self.base) / ps {
            self.true_counts[page * self.nodes + node] += 1;
            self.seen += 1;
            if self.seen % u64::from(self.sample_every) == 0 {
                self.table.record(page, node, write, now_ns);
                counted += 1;
            }
        }
        counted
    }

    /// The (sampled) counters.
    ///
    /// ```
    /// let h = partita_numa::counters::AccessHints::new(0, 4096, 1, 1, 0);
    /// assert_eq!(h.table().counters(0, 0).misses, vec![0]);
    /// ```
    pub fn table(&self) -> &CounterTable {
        &self.table
    }

    /// The unsampled number of touches of `page` by `node` since creation.
    ///
    /// ```
    /// let mut h = partita_numa::counters::AccessHints::new(0, 4096, 1, 3, 0);
    /// h.touch(0, 1, 0, false, 0);
    /// assert_eq!(h.true_count(0, 0), 1);
    /// ```
    pub fn true_count(&self, page: usize, node: NodeId) -> u64 {
        self.true_counts[page * self.nodes + node]
    }

    /// Mutable access to the counters (to clear a page after acting on it).
    ///
    /// ```
    /// let mut h = partita_numa::counters::AccessHints::new(0, 4096, 1, 1, 0);
    /// h.table_mut().clear_page(0);
    /// ```
    pub fn table_mut(&mut self) -> &mut CounterTable {
        &mut self.table
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_reads_fabricated_pmus() {
        let d = std::env::temp_dir().join(format!("partita-numa-pmu-{}", std::process::id()));
        std::fs::create_dir_all(d.join("cpu/events")).unwrap();
        let paranoid = d.join("paranoid");
        std::fs::write(&paranoid, "1\n").unwrap();
        assert!(!probe_at(&d, &paranoid).perf_sampling);
        std::fs::write(d.join("cpu/events/mem-loads"), "event=0xcd").unwrap();
        assert!(probe_at(&d, &paranoid).perf_sampling);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
