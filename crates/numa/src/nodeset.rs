//! `NodeSet`: a fixed-size bitmask of NUMA node ids, laid out as the kernel's `nodemask_t`.

use std::fmt;
use std::os::raw::c_ulong;

/// The largest number of nodes a [`NodeSet`] can hold (Linux's `MAX_NUMNODES` on x86-64
/// distribution kernels is 1024).
///
/// ```
/// let mut s = partita_numa::NodeSet::new();
/// assert!(!s.insert(partita_numa::MAX_NODES as u32));
/// ```
pub const MAX_NODES: usize = 1024;
const WORD_BITS: usize = c_ulong::BITS as usize;
const WORDS: usize = MAX_NODES / WORD_BITS;

/// A set of NUMA node ids (`0..MAX_NODES`), passed to the kernel as a node mask.
///
/// ```
/// use partita_numa::NodeSet;
/// let s: NodeSet = [0, 3].into_iter().collect();
/// assert!(s.contains(3) && !s.contains(1));
/// assert_eq!(s.iter().collect::<Vec<_>>(), vec![0, 3]);
/// assert_eq!(s.to_string(), "0,3");
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct NodeSet {
    words: [c_ulong; WORDS],
}

impl Default for NodeSet {
    fn default() -> Self {
        NodeSet::new()
    }
}

impl NodeSet {
    /// The empty set.
    ///
    /// ```
    /// assert!(partita_numa::NodeSet::new().is_empty());
    /// ```
    pub const fn new() -> NodeSet {
        NodeSet { words: [0; WORDS] }
    }

    /// The set holding exactly `node`.
    ///
    /// ```
    /// assert_eq!(partita_numa::NodeSet::single(2).len(), 1);
    /// ```
    pub fn single(node: u32) -> NodeSet {
        let mut s = NodeSet::new();
        s.insert(node);
        s
    }

    /// Adds `node`; returns `false` (and does nothing) if it is `>= MAX_NODES`.
    ///
    /// ```
    /// let mut s = partita_numa::NodeSet::new();
    /// assert!(s.insert(1));
    /// assert!(!s.insert(5000));
    /// ```
    pub fn insert(&mut self, node: u32) -> bool {
        let n = node as usize;
        if n >= MAX_NODES {
            return false;
        }
        self.words[n / WORD_BITS] |= 1 << (n % WORD_BITS);
        true
    }

    /// Removes `node`.
    ///
    /// ```
    /// let mut s = partita_numa::NodeSet::single(1);
    /// s.remove(1);
    /// assert!(s.is_empty());
    /// ```
    pub fn remove(&mut self, node: u32) {
        let n = node as usize;
        if n < MAX_NODES {
            self.words[n / WORD_BITS] &= !(1 << (n % WORD_BITS));
        }
    }

    /// Whether `node` is in the set.
    ///
    /// ```
    /// assert!(partita_numa::NodeSet::single(7).contains(7));
    /// ```
    pub fn contains(&self, node: u32) -> bool {
        let n = node as usize;
        n < MAX_NODES && self.words[n / WORD_BITS] & (1 << (n % WORD_BITS)) != 0
    }

    /// Whether the set is empty.
    ///
    /// ```
    /// assert!(partita_numa::NodeSet::default().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|w| *w == 0)
    }

    /// Number of nodes in the set.
    ///
    /// ```
    /// let s: partita_numa::NodeSet = (0..4).collect();
    /// assert_eq!(s.len(), 4);
    /// ```
    pub fn len(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// The node ids in increasing order.
    ///
    /// ```
    /// let s: partita_numa::NodeSet = [5, 1].into_iter().collect();
    /// assert_eq!(s.iter().collect::<Vec<_>>(), vec![1, 5]);
    /// ```
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        (0..MAX_NODES as u32).filter(move |n| self.contains(*n))
    }

    /// The highest node id in the set.
    ///
    /// ```
    /// let s: partita_numa::NodeSet = [5, 1].into_iter().collect();
    /// assert_eq!(s.max(), Some(5));
    /// ```
    pub fn max(&self) -> Option<u32> {
        self.iter().last()
    }

    /// Parses a sysfs list such as `"0-3,8"`; `None` on malformed input or ids too large.
    ///
    /// ```
    /// let s = partita_numa::NodeSet::parse_list("0-2,5\n").unwrap();
    /// assert_eq!(s.iter().collect::<Vec<_>>(), vec![0, 1, 2, 5]);
    /// assert!(partita_numa::NodeSet::parse_list("x").is_none());
    /// ```
    pub fn parse_list(s: &str) -> Option<NodeSet> {
        let mut set = NodeSet::new();
        for id in crate::topology::parse_cpu_list(s)? {
            if !set.insert(id) {
                return None;
            }
        }
        Some(set)
    }

    pub(crate) fn as_ptr(&self) -> *const c_ulong {
        self.words.as_ptr()
    }

    pub(crate) fn as_mut_ptr(&mut self) -> *mut c_ulong {
        self.words.as_mut_ptr()
    }

    /// The `maxnode` argument the kernel expects for this mask (number of bits + 1: the
    /// kernel uses `maxnode - 1` bits).
    pub(crate) const fn maxnode() -> c_ulong {
        (MAX_NODES + 1) as c_ulong
    }
}

impl FromIterator<u32> for NodeSet {
    fn from_iter<I: IntoIterator<Item = u32>>(iter: I) -> Self {
        let mut s = NodeSet::new();
        for n in iter {
            s.insert(n);
        }
        s
    }
}

impl fmt::Display for NodeSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v: Vec<String> = self.iter().map(|n| n.to_string()).collect();
        f.write_str(&v.join(","))
    }
}

impl fmt::Debug for NodeSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NodeSet{{{self}}}")
    }
}
