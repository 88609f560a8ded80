//! Node-placed allocation: [`NodeVec<T>`] and [`NodeBox<T>`] live in their own anonymous
//! mapping whose memory policy is set *before* the first touch, so every page lands where the
//! [`Placement`] says. First-touch helpers fault pages in from a thread pinned to a node.
//!
//! The `unsafe` of this module is confined to `Mapping` (mmap/munmap) and the element
//! initialisation/drop of `NodeVec`.
//!
//! ```
//! use partita_numa::{NodeVec, Placement};
//! let both = partita_numa::online_nodes();
//! let v = NodeVec::filled(1 << 16, 0u64, Placement::Interleave(both)).unwrap();
//! let pages = v.page_nodes().unwrap();
//! assert!(pages.iter().all(|p| p.node().is_some_and(|n| both.contains(n))));
//! ```

use crate::error::{NumaError, Result};
use crate::mempolicy::{MbindFlags, MemPolicy, mbind};
use crate::nodeset::NodeSet;
use crate::pages::{DEFAULT_BATCH, MoveScope, PageStatus, locate, migrate_batched};
use crate::range::{PageRange, check_node, page_size};
use crate::topology::Topology;
use partita_protocol::sys::set_affinity;
use partita_protocol::{CpuSet, MAX_CPUS};
use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut, Range};
use std::ptr::NonNull;

/// Where the pages of a [`NodeVec`] / [`NodeBox`] go.
///
/// ```
/// use partita_numa::{NodeSet, Placement};
/// let p = Placement::Interleave(NodeSet::single(0));
/// assert_ne!(p, Placement::FirstTouch);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// No policy: each page goes to the node of the thread that touches it first (here: the
    /// constructing thread).
    FirstTouch,
    /// First touch from a thread pinned to the CPUs of this node (no memory policy is set, so
    /// the kernel may fall back to another node when this one is full).
    FirstTouchOn(u32),
    /// `MPOL_BIND` to this node: pages are allocated only there.
    Node(u32),
    /// `MPOL_PREFERRED`: this node when it has free memory, another otherwise.
    Preferred(u32),
    /// `MPOL_INTERLEAVE` over these nodes, page by page.
    Interleave(NodeSet),
}

/// An anonymous private mapping, unmapped on drop.
struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: a Mapping is plain memory owned by one value; it carries no thread affinity.
unsafe impl Send for Mapping {}
// SAFETY: shared access only hands out the address; element access is governed by NodeVec.
unsafe impl Sync for Mapping {}

impl Mapping {
    fn new(bytes: usize) -> Result<Mapping> {
        let ps = page_size();
        let len = bytes
            .checked_next_multiple_of(ps)
            .ok_or(NumaError::Overflow {
                call: "mmap",
                start: 0,
                len: bytes,
            })?;
        // SAFETY: a fresh anonymous private mapping at a kernel-chosen address; no existing
        // memory is affected.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(NumaError::last_os("mmap"));
        }
        let ptr = NonNull::new(p.cast::<u8>()).ok_or_else(|| NumaError::InvalidArgument {
            call: "mmap",
            what: "kernel returned a null mapping".into(),
        })?;
        Ok(Mapping { ptr, len })
    }

    fn range(&self) -> PageRange {
        // A mapping is page-aligned and non-empty by construction.
        PageRange::new(self.ptr.as_ptr() as usize, self.len)
            .expect("mmap returns page-aligned, non-empty mappings")
    }

    /// Writes one byte to every page so the kernel allocates it now.
    fn prefault(&self) {
        let ps = page_size();
        for off in (0..self.len).step_by(ps) {
            // SAFETY: `off < len`, inside our own read-write mapping; no Rust value lives
            // there yet (called before elements are written).
            unsafe { self.ptr.as_ptr().add(off).write_volatile(0) };
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the region this value mapped; nothing refers to it after
        // drop.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// Pins the current thread to `node`'s CPUs and runs `f` (used for first touch).
fn on_node<R: Send>(node: u32, f: impl FnOnce() -> R + Send) -> Result<R> {
    const CALL: &str = "sched_setaffinity";
    check_node(CALL, node)?;
    let topo = Topology::current()?;
    let cpus = topo.node(node).map(|n| n.cpus.clone()).unwrap_or_default();
    if cpus.is_empty() {
        return Err(NumaError::InvalidArgument {
            call: CALL,
            what: format!("node {node} has no CPUs to first-touch from"),
        });
    }
    if let Some(c) = cpus.iter().find(|&&c| c as usize >= MAX_CPUS) {
        return Err(NumaError::InvalidArgument {
            call: CALL,
            what: format!("CPU {c} of node {node} is beyond the {MAX_CPUS} a CPU set holds"),
        });
    }
    let set: CpuSet = cpus.iter().map(|&c| c as usize).collect();
    std::thread::scope(|s| {
        s.spawn(|| {
            set_affinity(0, &set).map_err(|e| NumaError::from_os(CALL, e.source))?;
            Ok(f())
        })
        .join()
        .unwrap_or_else(|p| std::panic::resume_unwind(p))
    })
}

/// Runs `f` on a thread pinned to the CPUs of `node` and returns its result: pages `f`
/// touches first are allocated on `node` (absent another memory policy).
///
/// ```
/// let v = partita_numa::placement::first_touch_on(0, || vec![1u8; 1 << 20]).unwrap();
/// assert_eq!(v.len(), 1 << 20);
/// ```
pub fn first_touch_on<R: Send>(node: u32, f: impl FnOnce() -> R + Send) -> Result<R> {
    on_node(node, f)
}

/// A fixed-length vector whose pages are placed on NUMA nodes by a [`Placement`].
///
/// The elements live in a private mapping of their own (rounded up to whole pages), so moving
/// or querying its pages never affects other data.
///
/// ```
/// use partita_numa::{NodeVec, Placement};
/// let mut v = NodeVec::from_fn(1000, Placement::Preferred(0), |i| i * 2).unwrap();
/// v[3] = 7;
/// assert_eq!(v.iter().sum::<usize>(), 999 * 1000 - 6 + 7);
/// let where_ = v.page_nodes().unwrap();
/// assert!(where_.iter().all(|s| s.node().is_some()));
/// ```
pub struct NodeVec<T> {
    map: Option<Mapping>,
    len: usize,
    _owns: PhantomData<T>,
}

// SAFETY: NodeVec owns its elements like Vec<T>.
unsafe impl<T: Send> Send for NodeVec<T> {}
// SAFETY: shared references only give &T, like Vec<T>.
unsafe impl<T: Sync> Sync for NodeVec<T> {}

impl<T> NodeVec<T> {
    /// Allocates `len` elements placed by `placement`, initialised with `f(index)` by the
    /// calling thread. (With [`Placement::FirstTouchOn`], a pinned helper thread faults the
    /// pages in first.) A node that does not exist is an error; an empty vector has no pages.
    ///
    /// ```
    /// use partita_numa::{NodeVec, Placement};
    /// let v = NodeVec::from_fn(3, Placement::FirstTouch, |i| format!("x{i}")).unwrap();
    /// assert_eq!(v[2], "x2");
    /// assert!(NodeVec::from_fn(3, Placement::Node(9999), |i| i).is_err());
    /// ```
    pub fn from_fn(
        len: usize,
        placement: Placement,
        mut f: impl FnMut(usize) -> T,
    ) -> Result<Self> {
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .ok_or(NumaError::Overflow {
                call: "NodeVec",
                start: 0,
                len,
            })?;
        if std::mem::align_of::<T>() > page_size() {
            return Err(NumaError::InvalidArgument {
                call: "NodeVec",
                what: "element alignment exceeds the page size".into(),
            });
        }
        let map = if bytes == 0 {
            None
        } else {
            let m = Mapping::new(bytes)?;
            match placement {
                Placement::FirstTouch => {}
                Placement::FirstTouchOn(node) => {
                    let m_ref = &m;
                    on_node(node, move || m_ref.prefault())?;
                }
                Placement::Node(n) => mbind(
                    m.range(),
                    MemPolicy::Bind(NodeSet::single(n)),
                    MbindFlags::NONE,
                )?,
                Placement::Preferred(n) => {
                    mbind(m.range(), MemPolicy::Preferred(n), MbindFlags::NONE)?
                }
                Placement::Interleave(s) => {
                    mbind(m.range(), MemPolicy::Interleave(s), MbindFlags::NONE)?
                }
            }
            Some(m)
        };
        let mut v: NodeVec<T> = NodeVec {
            map,
            len: 0,
            _owns: PhantomData,
        };
        let base = v.base();
        for i in 0..len {
            let x = f(i);
            // SAFETY: `i < len` elements fit in the mapping (bytes = len * size_of::<T>()),
            // the mapping is page-aligned so every element is aligned (align ≤ page size,
            // checked above), and slot `i` is uninitialised. `len` is bumped after the
            // write so a panicking `f` drops exactly the initialised prefix.
            unsafe { base.add(i).write(x) };
            v.len = i + 1;
        }
        Ok(v)
    }

    fn base(&self) -> *mut T {
        match &self.map {
            Some(m) => m.ptr.as_ptr().cast(),
            None => NonNull::dangling().as_ptr(),
        }
    }

    /// The pages holding the elements (`None` when the vector has no memory: empty or
    /// zero-sized elements).
    ///
    /// ```
    /// use partita_numa::{NodeVec, Placement};
    /// let v = NodeVec::from_fn(10, Placement::FirstTouch, |i| i).unwrap();
    /// assert_eq!(v.pages().unwrap().pages(), 1);
    /// ```
    pub fn pages(&self) -> Option<PageRange> {
        self.map.as_ref().map(Mapping::range)
    }

    fn range_or_err(&self, call: &'static str) -> Result<PageRange> {
        self.pages().ok_or(NumaError::EmptyRange { call })
    }

    /// Where each page of the vector is (`move_pages` query).
    ///
    /// ```
    /// use partita_numa::{NodeVec, Placement, PageStatus};
    /// let v = NodeVec::from_fn(10, Placement::Node(0), |i| i).unwrap();
    /// assert_eq!(v.page_nodes().unwrap(), vec![PageStatus::Node(0)]);
    /// ```
    pub fn page_nodes(&self) -> Result<Vec<PageStatus>> {
        locate(self.range_or_err("move_pages")?)
    }

    /// Moves every page to `node`; per-page result.
    ///
    /// Only the physical location changes; the elements stay where they are in the address
    /// space. The vector's memory policy is not changed (see [`crate::mbind`] for that).
    ///
    /// ```
    /// use partita_numa::{NodeVec, Placement, PageStatus};
    /// let v = NodeVec::from_fn(5000, Placement::FirstTouch, |i| i).unwrap();
    /// let st = v.migrate(0).unwrap();
    /// assert!(st.iter().all(|s| *s == PageStatus::Node(0)));
    /// ```
    pub fn migrate(&self, node: u32) -> Result<Vec<PageStatus>> {
        migrate_batched(
            self.range_or_err("move_pages")?,
            node,
            DEFAULT_BATCH,
            MoveScope::Exclusive,
        )
    }

    /// Moves the pages holding `elements` to `node`; per-page result. Pages are whole, so
    /// neighbouring elements on the same pages move too.
    ///
    /// ```
    /// use partita_numa::{NodeVec, Placement};
    /// let v = NodeVec::from_fn(10_000, Placement::FirstTouch, |i| i as u32).unwrap();
    /// let st = v.migrate_elements(0..10, 0).unwrap();
    /// assert_eq!(st.len(), 1);
    /// assert!(v.migrate_elements(5..20_000, 0).is_err());
    /// ```
    pub fn migrate_elements(&self, elements: Range<usize>, node: u32) -> Result<Vec<PageStatus>> {
        const CALL: &str = "move_pages";
        if elements.start >= elements.end || elements.end > self.len {
            return Err(NumaError::InvalidArgument {
                call: CALL,
                what: format!("element range {elements:?} not within 0..{}", self.len),
            });
        }
        let r = PageRange::covering(&self[elements])?;
        migrate_batched(r, node, DEFAULT_BATCH, MoveScope::Exclusive)
    }
}

impl<T: Clone> NodeVec<T> {
    /// `len` copies of `value`, placed by `placement`.
    ///
    /// ```
    /// use partita_numa::{NodeVec, NodeSet, Placement};
    /// let v = NodeVec::filled(4096, 1.5f64, Placement::Interleave(NodeSet::single(0))).unwrap();
    /// assert_eq!(v.len(), 4096);
    /// ```
    pub fn filled(len: usize, value: T, placement: Placement) -> Result<Self> {
        Self::from_fn(len, placement, |_| value.clone())
    }
}

impl<T> Deref for NodeVec<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: the first `len` slots are initialised, aligned and owned by self.
        unsafe { std::slice::from_raw_parts(self.base(), self.len) }
    }
}

impl<T> DerefMut for NodeVec<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`, and `&mut self` guarantees exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.base(), self.len) }
    }
}

impl<T> Drop for NodeVec<T> {
    fn drop(&mut self) {
        let slice: *mut [T] = &mut **self;
        // SAFETY: drops each initialised element exactly once; the mapping is unmapped
        // afterwards by `Mapping::drop`.
        unsafe { std::ptr::drop_in_place(slice) };
    }
}

impl<T: fmt::Debug> fmt::Debug for NodeVec<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// One value in its own node-placed pages (a [`NodeVec`] of length one).
///
/// ```
/// use partita_numa::{NodeBox, Placement};
/// let mut b = NodeBox::new([0u64; 512], Placement::Node(0)).unwrap();
/// b[1] = 5;
/// assert_eq!(b.iter().sum::<u64>(), 5);
/// assert_eq!(b.page_nodes().unwrap()[0].node(), Some(0));
/// ```
pub struct NodeBox<T> {
    inner: NodeVec<T>,
}

impl<T> NodeBox<T> {
    /// Places `value` by `placement`.
    ///
    /// ```
    /// let b = partita_numa::NodeBox::new(7u8, partita_numa::Placement::FirstTouch).unwrap();
    /// assert_eq!(*b, 7);
    /// ```
    pub fn new(value: T, placement: Placement) -> Result<Self> {
        let mut slot = Some(value);
        let inner = NodeVec::from_fn(1, placement, |_| {
            slot.take()
                .expect("from_fn calls the initialiser once for length 1")
        })?;
        Ok(NodeBox { inner })
    }

    /// Where the value's pages are (an `EmptyRange` error for a zero-sized `T`).
    ///
    /// ```
    /// let b = partita_numa::NodeBox::new(1u32, partita_numa::Placement::Preferred(0)).unwrap();
    /// assert_eq!(b.page_nodes().unwrap().len(), 1);
    /// ```
    pub fn page_nodes(&self) -> Result<Vec<PageStatus>> {
        self.inner.page_nodes()
    }

    /// Moves the value's pages to `node`; per-page result.
    ///
    /// ```
    /// let b = partita_numa::NodeBox::new(1u32, partita_numa::Placement::FirstTouch).unwrap();
    /// assert_eq!(b.migrate(0).unwrap()[0].node(), Some(0));
    /// ```
    pub fn migrate(&self, node: u32) -> Result<Vec<PageStatus>> {
        self.inner.migrate(node)
    }
}

impl<T> Deref for NodeBox<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.inner[0]
    }
}

impl<T> DerefMut for NodeBox<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.inner[0]
    }
}

impl<T: fmt::Debug> fmt::Debug for NodeBox<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("NodeBox").field(&**self).finish()
    }
}
