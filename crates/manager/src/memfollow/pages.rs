//! The effects: finding an application's stray pages and moving them with `move_pages(2)`
//! on its pid, one budget-sized slice at a time.
//!
//! **One owner per range.** Only mappings with the default memory policy are the manager's
//! to move. partita-runtime binds the memory it places and follows itself (`PoolVec` /
//! `NodeVec` regions: `mbind` `MPOL_PREFERRED`, so `numa_maps` shows `prefer:N`), and a
//! program that placed memory with `mbind` (or a library doing so) chose where it lives; the
//! manager leaves all of those alone, so the runtime's follower and the manager never move
//! the same page, and a region the runtime's cost rule left behind stays where it is.
//! Only anonymous memory is moved (a file's page cache is shared).
//!
//! `move_pages(2)` rather than `migrate_pages(2)`: the latter moves every page of the process
//! on the given nodes, the runtime's own regions included, in one call that cannot be paced.

use partita_numa::numa_maps::Mapping;
use partita_numa::{MoveScope, NumaError, PageStatus};

/// Pages per `move_pages` query (16 MiB of 4 KiB pages).
pub const CHUNK: usize = 4096;

/// The system calls a slice makes, so that tests can count and fail them.
pub trait Kernel {
    /// The mappings of `pid` with their pages per node (`/proc/<pid>/numa_maps`).
    fn mappings(&self, pid: u32) -> Result<Vec<Mapping>, NumaError>;
    /// Where each page is (`move_pages` query).
    fn locate(&self, pid: u32, addrs: &[usize]) -> Result<Vec<PageStatus>, NumaError>;
    /// Move the pages to `node` (`move_pages`).
    fn move_to(&self, pid: u32, addrs: &[usize], node: u32) -> Result<Vec<PageStatus>, NumaError>;
    /// Why process `pid` named `name` opted out, if it did ([`super::optout`]).
    fn opted_out(&self, pid: i32, name: &str, exclude: &[String]) -> Option<&'static str> {
        super::optout::opt_out(pid, name, exclude)
    }
}

/// The real system calls.
#[derive(Debug, Default, Clone, Copy)]
pub struct Linux;

impl Kernel for Linux {
    fn mappings(&self, pid: u32) -> Result<Vec<Mapping>, NumaError> {
        partita_numa::numa_maps::process_mappings(pid)
    }
    fn locate(&self, pid: u32, addrs: &[usize]) -> Result<Vec<PageStatus>, NumaError> {
        partita_numa::locate_pages_of(pid, addrs)
    }
    fn move_to(&self, pid: u32, addrs: &[usize], node: u32) -> Result<Vec<PageStatus>, NumaError> {
        let _there = super::cpu::OnNode::enter(node);
        partita_numa::move_pages_of(pid, addrs, node, addrs.len().max(1), MoveScope::Exclusive)
    }
}

/// The manager's part of a process's memory: anonymous, default-policy mappings.
pub fn owned(m: &Mapping) -> bool {
    m.default_policy() && m.anon > 0 && m.end > m.start
}

/// Pages of `mappings` the manager may move that are on nodes outside `nodes`.
///
/// ```
/// use partita_manager::memfollow::pages::stray_pages;
/// use partita_numa::numa_maps::Mapping;
/// let m = |policy: &str, n0| Mapping { start: 0, end: 4096 * n0 as usize, policy: policy.into(), anon: n0, nodes: [(0, n0)].into_iter().collect() };
/// assert_eq!(stray_pages(&[m("default", 10), m("prefer:0", 5)], &[1]), 10);
/// ```
pub fn stray_pages(mappings: &[Mapping], nodes: &[u32]) -> u64 {
    mappings
        .iter()
        .filter(|m| owned(m))
        .map(|m| m.pages_outside(nodes))
        .sum()
}

/// A migration in progress: the address ranges holding stray pages, and how far it got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Work {
    /// Where the pages go.
    pub node: u32,
    /// The nodes pages may stay on (the application's).
    pub allowed: Vec<u32>,
    /// `[start, end)` of each mapping with stray pages, ascending.
    pub ranges: Vec<(usize, usize)>,
    /// The next address to look at.
    pub cursor: usize,
}

impl Work {
    /// Work over the mappings with stray pages.
    pub fn new(mappings: &[Mapping], node: u32, allowed: Vec<u32>) -> Work {
        let mut ranges: Vec<(usize, usize)> = mappings
            .iter()
            .filter(|m| owned(m) && m.pages_outside(&allowed) > 0)
            .map(|m| (m.start, m.end))
            .collect();
        ranges.sort_unstable();
        let cursor = ranges.first().map_or(0, |r| r.0);
        Work {
            node,
            allowed,
            ranges,
            cursor,
        }
    }

    /// Whether every range has been walked.
    pub fn finished(&self) -> bool {
        self.ranges.last().is_none_or(|r| self.cursor >= r.1)
    }

    /// The next chunk of page addresses (at most [`CHUNK`], within one range), advancing the
    /// cursor; empty when finished.
    fn next_chunk(&mut self, page: usize) -> Vec<usize> {
        let Some(&(start, end)) = self.ranges.iter().find(|r| self.cursor < r.1) else {
            return Vec::new();
        };
        let from = self.cursor.max(start);
        let to = end.min(from.saturating_add(CHUNK * page));
        self.cursor = to;
        (from..to).step_by(page).collect()
    }
}

/// What one slice did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Slice {
    /// Stray pages found (what the budget is charged for).
    pub stray: u64,
    /// Of those, pages on the destination afterwards.
    pub moved: u64,
    /// Pages that stayed, and the kernel's reason for the first of them (`-errno`).
    pub failed: u64,
    /// The first per-page error (`errno`), if any.
    pub first_error: Option<i32>,
    /// System calls made.
    pub calls: u64,
    /// Time spent finding the stray pages, moving them, and asking where they went (µs).
    pub us: [u64; 3],
}

/// Moves stray pages of `pid` along `work`: finds them with `move_pages` queries
/// ([`CHUNK`] pages each) until `budget_pages` are found or the work is finished, moves them
/// all in one `move_pages` call, then asks where they are. One call for the whole move
/// because each moving call drains every CPU's LRU caches first (`lru_cache_disable`), which
/// waits for a kernel worker on every CPU — on CPUs busy with the applications' workers that
/// wait dominated (the two-node guest: ~200 ms per call of 512 pages, docs/bench/numa.md).
/// The last query chunk may overshoot the budget (charged after the fact). A failed call
/// ends the slice with its error (the calls made so far are in `calls`).
pub fn slice(
    k: &dyn Kernel,
    pid: u32,
    work: &mut Work,
    budget_pages: u64,
    page: usize,
    calls: &mut u64,
) -> Result<Slice, NumaError> {
    let mut out = Slice::default();
    let mut stray = Vec::new();
    let t = std::time::Instant::now();
    while (stray.len() as u64) < budget_pages {
        let addrs = work.next_chunk(page);
        if addrs.is_empty() {
            break;
        }
        *calls += 1;
        out.calls += 1;
        let st = k.locate(pid, &addrs)?;
        stray.extend(
            addrs
                .iter()
                .zip(&st)
                .filter(|(_, s)| s.node().is_some_and(|n| !work.allowed.contains(&n)))
                .map(|(a, _)| *a),
        );
    }
    if stray.is_empty() {
        return Ok(out);
    }
    out.stray = stray.len() as u64;
    out.us[0] = t.elapsed().as_micros() as u64;
    let t = std::time::Instant::now();
    *calls += 1;
    out.calls += 1;
    let tried = k.move_to(pid, &stray, work.node)?;
    out.us[1] = t.elapsed().as_micros() as u64;
    let t = std::time::Instant::now();
    // Where they are now. The move's own answer says so for most pages; the others are asked
    // (with transparent huge pages one address moves the whole huge page and the kernel
    // answers EBUSY for the next address). A batch the kernel could not finish leaves its
    // answers unwritten, and an unwritten answer reads as node 0 (the status array starts
    // zeroed): a move to node 0 asks for every page.
    let unsure: Vec<usize> = stray
        .iter()
        .zip(&tried)
        .filter(|(_, s)| work.node == 0 || s.node() != Some(work.node))
        .map(|(a, _)| *a)
        .collect();
    let mut moved = (stray.len() - unsure.len()) as u64;
    if !unsure.is_empty() {
        *calls += 1;
        out.calls += 1;
        let after = k.locate(pid, &unsure)?;
        moved += after.iter().filter(|s| s.node() == Some(work.node)).count() as u64;
    }
    out.us[2] = t.elapsed().as_micros() as u64;
    out.moved = moved;
    out.failed = out.stray - out.moved;
    if out.failed > 0 {
        // The move's own per-page status says why (`EBUSY` for the other pages of a huge
        // page that did move, `ENOMEM` when the destination is full).
        out.first_error = tried.iter().find_map(|s| match s {
            PageStatus::Error(e) if *e != libc::EBUSY => Some(*e),
            _ => None,
        });
    }
    Ok(out)
}
