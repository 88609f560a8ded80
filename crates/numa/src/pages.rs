//! Safe wrappers over `move_pages(2)` (query where pages are; move them in batches) and
//! `migrate_pages(2)`.

use crate::error::{NumaError, Result};
use crate::nodeset::NodeSet;
use crate::range::{PageRange, check_node, check_nodes, page_size};
use crate::sys;
use std::os::raw::{c_int, c_void};

const MPOL_MF_MOVE: c_int = 1 << 1;
const MPOL_MF_MOVE_ALL: c_int = 1 << 2;

/// The default number of pages per `move_pages` call.
///
/// ```
/// assert_eq!(partita_numa::DEFAULT_BATCH, 512);
/// ```
pub const DEFAULT_BATCH: usize = 512;

/// Where one page is, or why it could not be queried or moved (the `status` array of
/// `move_pages(2)`).
///
/// ```
/// use partita_numa::PageStatus;
/// assert_eq!(PageStatus::from_raw(1), PageStatus::Node(1));
/// assert_eq!(PageStatus::from_raw(-libc::ENOENT), PageStatus::NotPresent);
/// assert_eq!(PageStatus::Node(3).node(), Some(3));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PageStatus {
    /// The page is (now) on this node.
    Node(u32),
    /// The page is not present (never touched, or the shared zero page): `ENOENT`.
    NotPresent,
    /// The kernel could not query or move this page; the `errno` (`EFAULT` for an unmapped
    /// address, `EBUSY`, `EACCES`, `ENOMEM`, …).
    Error(i32),
}

impl PageStatus {
    /// Decodes one `status` entry.
    ///
    /// ```
    /// assert_eq!(partita_numa::PageStatus::from_raw(-14), partita_numa::PageStatus::Error(14));
    /// ```
    pub fn from_raw(raw: c_int) -> PageStatus {
        if raw >= 0 {
            PageStatus::Node(raw as u32)
        } else if raw == -libc::ENOENT {
            PageStatus::NotPresent
        } else {
            PageStatus::Error(-raw)
        }
    }

    /// The node, if the page is on one.
    ///
    /// ```
    /// assert_eq!(partita_numa::PageStatus::NotPresent.node(), None);
    /// ```
    pub fn node(self) -> Option<u32> {
        match self {
            PageStatus::Node(n) => Some(n),
            _ => None,
        }
    }
}

/// Which pages [`migrate_batched`] may move.
///
/// ```
/// assert_eq!(partita_numa::MoveScope::default(), partita_numa::MoveScope::Exclusive);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MoveScope {
    /// `MPOL_MF_MOVE`: only pages mapped by this process alone.
    #[default]
    Exclusive,
    /// `MPOL_MF_MOVE_ALL`: also shared pages (needs `CAP_SYS_NICE`).
    All,
}

fn to_ptrs(call: &'static str, addrs: &[usize]) -> Result<Vec<*mut c_void>> {
    if addrs.is_empty() {
        return Err(NumaError::EmptyRange { call });
    }
    let ps = page_size();
    addrs
        .iter()
        .map(|&a| {
            if a % ps != 0 {
                Err(NumaError::Unaligned {
                    call,
                    what: "address",
                    value: a,
                    page_size: ps,
                })
            } else {
                Ok(a as *mut c_void)
            }
        })
        .collect()
}

fn run(
    call: &'static str,
    pid: c_int,
    ptrs: &[*mut c_void],
    target: Option<c_int>,
    flags: c_int,
    batch: usize,
) -> Result<Vec<PageStatus>> {
    if batch == 0 {
        return Err(NumaError::InvalidArgument {
            call,
            what: "batch size 0".into(),
        });
    }
    let mut out = Vec::with_capacity(ptrs.len());
    let mut status = vec![0 as c_int; batch.min(ptrs.len())];
    let nodes = target.map(|n| vec![n; batch.min(ptrs.len())]);
    for chunk in ptrs.chunks(batch) {
        let st = &mut status[..chunk.len()];
        let nd = nodes.as_ref().map(|v| &v[..chunk.len()]).unwrap_or(&[]);
        if sys::move_pages(pid, chunk, nd, st, flags) < 0 {
            return Err(NumaError::last_os(call));
        }
        out.extend(st.iter().map(|s| PageStatus::from_raw(*s)));
    }
    Ok(out)
}

/// Where each page of `range` lives (`move_pages(2)` with no target nodes).
///
/// ```
/// use partita_numa::{locate, page_size, PageRange, PageStatus};
/// let mut v = vec![0u8; 3 * page_size()];
/// v.fill(7); // touch every page
/// let r = PageRange::new(v.as_ptr() as usize / page_size() * page_size() + page_size(), page_size()).unwrap();
/// assert!(matches!(locate(r).unwrap()[0], PageStatus::Node(_)));
/// ```
pub fn locate(range: PageRange) -> Result<Vec<PageStatus>> {
    let addrs: Vec<usize> = range.page_addresses().collect();
    locate_pages(&addrs)
}

/// Where each of the (page-aligned) addresses lives.
///
/// ```
/// let st = partita_numa::locate_pages(&[partita_numa::page_size()]).unwrap();
/// assert_eq!(st, vec![partita_numa::PageStatus::Error(libc::EFAULT)]); // unmapped
/// ```
pub fn locate_pages(addrs: &[usize]) -> Result<Vec<PageStatus>> {
    const CALL: &str = "move_pages";
    let ptrs = to_ptrs(CALL, addrs)?;
    run(CALL, 0, &ptrs, None, 0, DEFAULT_BATCH)
}

/// Moves every page of `range` to `node` in batches of [`DEFAULT_BATCH`]; returns the
/// per-page result (the node it is on afterwards, or why it could not move).
///
/// ```
/// use partita_numa::{migrate, page_size, PageRange, PageStatus};
/// let mut v = vec![1u8; 4 * page_size()];
/// v.fill(2);
/// let r = PageRange::new((v.as_ptr() as usize).div_ceil(page_size()) * page_size(), page_size()).unwrap();
/// assert_eq!(migrate(r, 0).unwrap(), vec![PageStatus::Node(0)]);
/// assert!(migrate(r, 4000).is_err()); // no such node
/// ```
pub fn migrate(range: PageRange, node: u32) -> Result<Vec<PageStatus>> {
    migrate_batched(range, node, DEFAULT_BATCH, MoveScope::Exclusive)
}

/// [`migrate`] with an explicit batch size (pages per system call) and scope.
///
/// ```
/// use partita_numa::{migrate_batched, page_size, MoveScope, PageRange};
/// let v = vec![3u8; 8 * page_size()];
/// let r = PageRange::covering(&v[page_size()..5 * page_size()]).unwrap();
/// let st = migrate_batched(r, 0, 2, MoveScope::Exclusive).unwrap();
/// assert_eq!(st.len(), r.pages());
/// ```
pub fn migrate_batched(
    range: PageRange,
    node: u32,
    batch: usize,
    scope: MoveScope,
) -> Result<Vec<PageStatus>> {
    let addrs: Vec<usize> = range.page_addresses().collect();
    move_pages_to(&addrs, node, batch, scope)
}

/// Moves the given page-aligned addresses to `node`, `batch` pages per `move_pages` call.
///
/// ```
/// let err = partita_numa::move_pages_to(&[], 0, 1, Default::default()).unwrap_err();
/// assert_eq!(err.call(), "move_pages");
/// ```
pub fn move_pages_to(
    addrs: &[usize],
    node: u32,
    batch: usize,
    scope: MoveScope,
) -> Result<Vec<PageStatus>> {
    move_pages_in(0, addrs, node, batch, scope)
}

/// `move_pages(2)` of process `pid` (0: the caller) to `node`, `batch` pages per call: what
/// [`move_pages_to`] and [`move_pages_of`] share once `pid` is checked.
fn move_pages_in(
    pid: c_int,
    addrs: &[usize],
    node: u32,
    batch: usize,
    scope: MoveScope,
) -> Result<Vec<PageStatus>> {
    const CALL: &str = "move_pages";
    let ptrs = to_ptrs(CALL, addrs)?;
    check_node(CALL, node)?;
    let flags = match scope {
        MoveScope::Exclusive => MPOL_MF_MOVE,
        MoveScope::All => MPOL_MF_MOVE_ALL,
    };
    run(CALL, pid, &ptrs, Some(node as c_int), flags, batch)
}

/// A process id as `move_pages(2)` and `migrate_pages(2)` take it (0 is the caller itself, so
/// a pid of 0 is refused here: the `_of` calls act on another process by design).
fn other_pid(call: &'static str, pid: u32) -> Result<c_int> {
    match c_int::try_from(pid) {
        Ok(p) if p > 0 => Ok(p),
        _ => Err(NumaError::InvalidArgument {
            call,
            what: format!("pid {pid} out of range"),
        }),
    }
}

/// Where each of the (page-aligned) addresses of process `pid` lives (`move_pages(2)` on
/// another process, no target nodes). Needs the right to ptrace-read the process (same user,
/// or `CAP_SYS_PTRACE`); otherwise `EPERM`; a process that is gone: `ESRCH`.
///
/// ```
/// let me = std::process::id();
/// let v = vec![5u8; 2 * partita_numa::page_size()];
/// let page = (v.as_ptr() as usize).next_multiple_of(partita_numa::page_size());
/// let st = partita_numa::locate_pages_of(me, &[page]).unwrap();
/// assert!(st[0].node().is_some());
/// assert_eq!(partita_numa::locate_pages_of(0, &[page]).unwrap_err().call(), "move_pages");
/// ```
pub fn locate_pages_of(pid: u32, addrs: &[usize]) -> Result<Vec<PageStatus>> {
    const CALL: &str = "move_pages";
    let pid = other_pid(CALL, pid)?;
    let ptrs = to_ptrs(CALL, addrs)?;
    run(CALL, pid, &ptrs, None, 0, DEFAULT_BATCH)
}

/// Moves the given page-aligned addresses of process `pid` to `node` (`move_pages(2)` on
/// another process, `batch` pages per call); the per-page result as [`move_pages_to`]'s.
/// Needs the rights of [`locate_pages_of`], and `CAP_SYS_NICE` for another user's process.
///
/// ```
/// let me = std::process::id();
/// let v = vec![5u8; 2 * partita_numa::page_size()];
/// let page = (v.as_ptr() as usize).next_multiple_of(partita_numa::page_size());
/// let st = partita_numa::move_pages_of(me, &[page], 0, 1, Default::default()).unwrap();
/// assert_eq!(st[0].node(), Some(0));
/// ```
pub fn move_pages_of(
    pid: u32,
    addrs: &[usize],
    node: u32,
    batch: usize,
    scope: MoveScope,
) -> Result<Vec<PageStatus>> {
    move_pages_in(other_pid("move_pages", pid)?, addrs, node, batch, scope)
}

/// Moves all pages of process `pid` (`None`: this process) that are on nodes `from` to nodes
/// `to` (`migrate_pages(2)`). Returns the number of pages that could not be moved.
///
/// ```
/// use partita_numa::{migrate_pages, NodeSet};
/// let left = migrate_pages(None, &NodeSet::single(0), &NodeSet::single(0)).unwrap();
/// assert_eq!(left, 0);
/// ```
pub fn migrate_pages(pid: Option<u32>, from: &NodeSet, to: &NodeSet) -> Result<usize> {
    const CALL: &str = "migrate_pages";
    check_nodes(CALL, from)?;
    check_nodes(CALL, to)?;
    let pid = match pid {
        None => 0,
        Some(p) => c_int::try_from(p).map_err(|_| NumaError::InvalidArgument {
            call: CALL,
            what: format!("pid {p} out of range"),
        })?,
    };
    let r = sys::migrate_pages(pid, NodeSet::maxnode(), from.as_ptr(), to.as_ptr());
    if r < 0 {
        Err(NumaError::last_os(CALL))
    } else {
        Ok(r as usize)
    }
}
