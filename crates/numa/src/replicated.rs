//! `Replicated<T>`: application-level page replication (Linux has none in the kernel). A
//! read-mostly value keeps one copy per node; readers get the copy on their own node.
//!
//! ```
//! let mut table = partita_numa::Replicated::new([1u32; 256]).unwrap();
//! table.replicate_everywhere().unwrap();
//! assert_eq!(table.get()[0], 1);
//! ```

use crate::error::{NumaError, Result};
use crate::placement::{NodeBox, Placement};
use crate::policy::CopySet;
use crate::range::{check_node, online_nodes};

/// A read-mostly value with at most one copy per NUMA node.
///
/// Copy-set rules (numa.md invariant 2): there is always exactly one master; at most one copy
/// per node; writes need `&mut self`, so no copy can be written while readers hold any copy;
/// every write updates all copies, so all copies always equal the last write; reclaiming
/// never removes the last copy.
///
/// Each copy is a [`NodeBox`] on its node, so what is placed is `T` itself: use inline data
/// (arrays, plain structs). For a `T` that owns heap memory (`Vec`, `String`) only the handle
/// is replicated; the heap buffer of each clone lands wherever the cloning thread allocates.
///
/// ```
/// use partita_numa::Replicated;
/// let mut r = Replicated::new(vec![1, 2, 3]).unwrap();
/// r.replicate_everywhere().unwrap();
/// assert_eq!(r.get().len(), 3);           // the copy on this thread's node
/// r.update(|v| v.push(4));                // every copy sees the write
/// assert!(r.copy_nodes().iter().all(|n| r.get_on(*n as u32).unwrap().len() == 4));
/// ```
pub struct Replicated<T> {
    copies: Vec<Option<NodeBox<T>>>,
    set: CopySet,
}

fn node_index(call: &'static str, node: u32) -> Result<usize> {
    check_node(call, node)?;
    if node >= 64 {
        return Err(NumaError::InvalidArgument {
            call,
            what: format!("Replicated supports nodes 0..64, got {node}"),
        });
    }
    Ok(node as usize)
}

impl<T: Clone> Replicated<T> {
    /// One copy (the master), on the node the calling thread runs on.
    ///
    /// ```
    /// let r = partita_numa::Replicated::new(5u32).unwrap();
    /// assert_eq!(*r.get(), 5);
    /// ```
    pub fn new(value: T) -> Result<Self> {
        let node = crate::current_node()
            .filter(|n| online_nodes().contains(*n))
            .unwrap_or_else(|| online_nodes().iter().next().unwrap_or(0));
        Self::on(value, node)
    }

    /// One copy (the master) on `node`.
    ///
    /// ```
    /// let r = partita_numa::Replicated::on("x".to_string(), 0).unwrap();
    /// assert_eq!(r.master(), 0);
    /// ```
    pub fn on(value: T, node: u32) -> Result<Self> {
        let idx = node_index("Replicated::on", node)?;
        let mut copies: Vec<Option<NodeBox<T>>> = (0..64).map(|_| None).collect();
        copies[idx] = Some(NodeBox::new(value, Placement::Preferred(node))?);
        Ok(Replicated {
            copies,
            set: CopySet::new(idx),
        })
    }

    /// Adds a copy on `node`; `Ok(false)` if one is already there.
    ///
    /// ```
    /// let mut r = partita_numa::Replicated::on(1u8, 0).unwrap();
    /// assert!(!r.replicate_on(0).unwrap());
    /// ```
    pub fn replicate_on(&mut self, node: u32) -> Result<bool> {
        let idx = node_index("Replicated::replicate_on", node)?;
        if self.set.has_copy_on(idx) {
            return Ok(false);
        }
        let copy = NodeBox::new(self.master_ref().clone(), Placement::Preferred(node))?;
        self.copies[idx] = Some(copy);
        self.set.replicate(idx);
        Ok(true)
    }

    /// Adds a copy on every online node that has none. Returns how many were added.
    ///
    /// ```
    /// let mut r = partita_numa::Replicated::on(1u8, 0).unwrap();
    /// r.replicate_everywhere().unwrap();
    /// assert_eq!(r.copy_nodes().len(), partita_numa::online_nodes().len());
    /// ```
    pub fn replicate_everywhere(&mut self) -> Result<usize> {
        let mut added = 0;
        for n in online_nodes().iter().filter(|n| *n < 64) {
            added += usize::from(self.replicate_on(n)?);
        }
        Ok(added)
    }

    /// Applies `f` to the master and then overwrites every replica with the result (the
    /// write path). `&mut self` guarantees no reader holds any copy meanwhile.
    ///
    /// ```
    /// let mut r = partita_numa::Replicated::new(1u64).unwrap();
    /// r.update(|x| *x += 1);
    /// assert_eq!(*r.get(), 2);
    /// ```
    pub fn update(&mut self, f: impl FnOnce(&mut T)) {
        let m = self.set.master();
        let master = self.copies[m]
            .as_mut()
            .expect("the master slot always holds a copy");
        f(master);
        let value = (**master).clone();
        for n in self.set.nodes().into_iter().skip(1) {
            if let Some(c) = self.copies[n].as_mut() {
                **c = value.clone();
            }
        }
    }

    /// Moves the master to `node` (reusing a replica there). `Ok(false)` if it is there.
    ///
    /// ```
    /// let mut r = partita_numa::Replicated::on(1u8, 0).unwrap();
    /// assert!(!r.migrate_master(0).unwrap());
    /// ```
    pub fn migrate_master(&mut self, node: u32) -> Result<bool> {
        let idx = node_index("Replicated::migrate_master", node)?;
        if self.set.master() == idx {
            return Ok(false);
        }
        if !self.set.has_replica_on(idx) {
            let copy = NodeBox::new(self.master_ref().clone(), Placement::Preferred(node))?;
            self.copies[idx] = Some(copy);
        }
        let old = self.set.master();
        self.set.migrate(idx);
        self.copies[old] = None;
        Ok(true)
    }
}

impl<T> Replicated<T> {
    fn master_ref(&self) -> &T {
        self.copies[self.set.master()]
            .as_ref()
            .expect("the master slot always holds a copy")
    }

    /// The copy on the calling thread's node, or the master if that node has none.
    ///
    /// ```
    /// let r = partita_numa::Replicated::new([7u8; 4]).unwrap();
    /// assert_eq!(r.get()[0], 7);
    /// ```
    pub fn get(&self) -> &T {
        match crate::current_node() {
            Some(n) => self.get_on(n).unwrap_or_else(|| self.master_ref()),
            None => self.master_ref(),
        }
    }

    /// The copy on `node`, if there is one.
    ///
    /// ```
    /// let r = partita_numa::Replicated::on(1u8, 0).unwrap();
    /// assert_eq!(r.get_on(0), Some(&1));
    /// assert_eq!(r.get_on(5), None);
    /// ```
    pub fn get_on(&self, node: u32) -> Option<&T> {
        self.copies.get(node as usize)?.as_deref()
    }

    /// The master's node.
    ///
    /// ```
    /// assert_eq!(partita_numa::Replicated::on(1u8, 0).unwrap().master(), 0);
    /// ```
    pub fn master(&self) -> usize {
        self.set.master()
    }

    /// The nodes holding copies, master first.
    ///
    /// ```
    /// assert_eq!(partita_numa::Replicated::on(1u8, 0).unwrap().copy_nodes(), vec![0]);
    /// ```
    pub fn copy_nodes(&self) -> Vec<usize> {
        self.set.nodes()
    }

    /// The copy set.
    ///
    /// ```
    /// assert!(partita_numa::Replicated::on(1u8, 0).unwrap().copy_set().writable());
    /// ```
    pub fn copy_set(&self) -> CopySet {
        self.set
    }

    /// Drops every replica, keeping the master.
    ///
    /// ```
    /// let mut r = partita_numa::Replicated::on(1u8, 0).unwrap();
    /// r.collapse();
    /// assert_eq!(r.copy_nodes().len(), 1);
    /// ```
    pub fn collapse(&mut self) {
        for n in self.set.nodes().into_iter().skip(1) {
            self.copies[n] = None;
        }
        self.set.collapse();
    }

    /// Frees the copy on `node` (memory pressure). Never removes the last copy; returns
    /// whether a copy was removed.
    ///
    /// ```
    /// let mut r = partita_numa::Replicated::on(1u8, 0).unwrap();
    /// assert!(!r.reclaim(0));
    /// ```
    pub fn reclaim(&mut self, node: u32) -> bool {
        let idx = node as usize;
        if idx >= 64 || !self.set.has_copy_on(idx) {
            return false;
        }
        if self.set.reclaim(idx) {
            self.copies[idx] = None;
            true
        } else {
            false
        }
    }
}
