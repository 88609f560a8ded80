//! `PageRange`: a validated, page-aligned, non-empty virtual address range, and the online-node
//! check every wrapper performs before calling the kernel.

use crate::error::{NumaError, Result};
use crate::nodeset::NodeSet;
use std::sync::OnceLock;

/// The system page size in bytes.
///
/// ```
/// assert!(partita_numa::page_size().is_power_of_two());
/// ```
pub fn page_size() -> usize {
    static PS: OnceLock<usize> = OnceLock::new();
    *PS.get_or_init(crate::sys::page_size)
}

/// A page-aligned, non-empty range of virtual addresses `[start, start + len)`.
///
/// Constructing one is the only validation the wrappers need: an unaligned start or length,
/// an empty range, or a range that wraps around the address space is an error here, before
/// any system call. The range does not borrow the memory: memory-policy calls never read or
/// write through it, and the kernel rejects unmapped addresses itself.
///
/// ```
/// use partita_numa::{page_size, PageRange};
/// let ps = page_size();
/// let r = PageRange::new(16 * ps, 2 * ps).unwrap();
/// assert_eq!(r.pages(), 2);
/// assert!(PageRange::new(16 * ps, 0).is_err());
/// assert!(PageRange::new(16 * ps + 1, ps).is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PageRange {
    start: usize,
    len: usize,
}

impl PageRange {
    /// Validates `[start, start + len)`: both page-aligned, non-empty, no overflow.
    ///
    /// ```
    /// let ps = partita_numa::page_size();
    /// assert!(partita_numa::PageRange::new(ps, ps).is_ok());
    /// ```
    pub fn new(start: usize, len: usize) -> Result<PageRange> {
        Self::checked("page range", start, len)
    }

    pub(crate) fn checked(call: &'static str, start: usize, len: usize) -> Result<PageRange> {
        let ps = page_size();
        if len == 0 {
            return Err(NumaError::EmptyRange { call });
        }
        for (what, value) in [("address", start), ("length", len)] {
            if value % ps != 0 {
                return Err(NumaError::Unaligned {
                    call,
                    what,
                    value,
                    page_size: ps,
                });
            }
        }
        if start.checked_add(len).is_none() {
            return Err(NumaError::Overflow { call, start, len });
        }
        Ok(PageRange { start, len })
    }

    /// The range covering every page that `slice` touches (rounded out to page boundaries).
    /// Errors only for an empty slice.
    ///
    /// ```
    /// let v = vec![0u8; 10_000];
    /// let r = partita_numa::PageRange::covering(&v).unwrap();
    /// assert!(r.len() >= 10_000 && r.start() <= v.as_ptr() as usize);
    /// ```
    pub fn covering<T>(slice: &[T]) -> Result<PageRange> {
        let bytes = std::mem::size_of_val(slice);
        if bytes == 0 {
            return Err(NumaError::EmptyRange { call: "page range" });
        }
        let ps = page_size();
        let start = slice.as_ptr() as usize;
        let lo = start - start % ps;
        let hi = (start + bytes).div_ceil(ps) * ps;
        PageRange::new(lo, hi - lo)
    }

    /// First address.
    ///
    /// ```
    /// let ps = partita_numa::page_size();
    /// assert_eq!(partita_numa::PageRange::new(ps, ps).unwrap().start(), ps);
    /// ```
    pub fn start(&self) -> usize {
        self.start
    }

    /// Length in bytes (a positive multiple of the page size).
    ///
    /// ```
    /// let ps = partita_numa::page_size();
    /// assert_eq!(partita_numa::PageRange::new(ps, 3 * ps).unwrap().len(), 3 * ps);
    /// ```
    #[allow(clippy::len_without_is_empty)] // a PageRange is never empty by construction
    pub fn len(&self) -> usize {
        self.len
    }

    /// Number of pages.
    ///
    /// ```
    /// let ps = partita_numa::page_size();
    /// assert_eq!(partita_numa::PageRange::new(ps, 3 * ps).unwrap().pages(), 3);
    /// ```
    pub fn pages(&self) -> usize {
        self.len / page_size()
    }

    /// The start address of every page in the range.
    ///
    /// ```
    /// let ps = partita_numa::page_size();
    /// let r = partita_numa::PageRange::new(ps, 2 * ps).unwrap();
    /// assert_eq!(r.page_addresses().collect::<Vec<_>>(), vec![ps, 2 * ps]);
    /// ```
    pub fn page_addresses(&self) -> impl Iterator<Item = usize> {
        let (ps, start) = (page_size(), self.start);
        (0..self.pages()).map(move |i| start + i * ps)
    }
}

/// The calling thread's stack mapping as a page range (`pthread_getattr_np(3)`): the memory
/// its frames — and, with glibc, its thread-locals at the top — live in. Querying or moving
/// these pages is how a thread's own working memory follows it to another node.
///
/// ```
/// let r = partita_numa::current_thread_stack().unwrap();
/// let local = 0u8;
/// let at = &local as *const u8 as usize;
/// assert!(at >= r.start() && at < r.start() + r.len());
/// ```
pub fn current_thread_stack() -> Result<PageRange> {
    const CALL: &str = "pthread_getattr_np";
    let (start, len) =
        crate::sys::current_thread_stack().map_err(|e| NumaError::from_os(CALL, e))?;
    // Rounded inwards to whole pages (glibc reports page-aligned bounds anyway).
    let ps = page_size();
    let lo = start.next_multiple_of(ps);
    let hi = (start + len) / ps * ps;
    PageRange::checked(CALL, lo, hi.saturating_sub(lo))
}

/// The nodes that are online, from `/sys/devices/system/node/online`; `{0}` on a kernel
/// without NUMA sysfs. Read once and cached.
///
/// ```
/// assert!(partita_numa::online_nodes().contains(0));
/// ```
pub fn online_nodes() -> NodeSet {
    static ONLINE: OnceLock<NodeSet> = OnceLock::new();
    *ONLINE.get_or_init(|| {
        std::fs::read_to_string("/sys/devices/system/node/online")
            .ok()
            .and_then(|s| NodeSet::parse_list(&s))
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| NodeSet::single(0))
    })
}

/// Errors with [`NumaError::NoSuchNode`] unless `node` is online.
pub(crate) fn check_node(call: &'static str, node: u32) -> Result<()> {
    let online = online_nodes();
    if online.contains(node) {
        Ok(())
    } else {
        Err(NumaError::NoSuchNode {
            call,
            node,
            online: online.to_string(),
        })
    }
}

/// Errors unless `set` is non-empty and every node in it is online.
pub(crate) fn check_nodes(call: &'static str, set: &NodeSet) -> Result<()> {
    if set.is_empty() {
        return Err(NumaError::InvalidArgument {
            call,
            what: "empty node set".into(),
        });
    }
    for n in set.iter() {
        check_node(call, n)?;
    }
    Ok(())
}
