//! Safe wrappers over `mbind(2)`, `set_mempolicy(2)` and `get_mempolicy(2)`.

use crate::error::{NumaError, Result};
use crate::nodeset::NodeSet;
use crate::range::{PageRange, check_node, check_nodes};
use crate::sys;
use std::os::raw::{c_int, c_ulong};

const MPOL_DEFAULT: c_int = 0;
const MPOL_PREFERRED: c_int = 1;
const MPOL_BIND: c_int = 2;
const MPOL_INTERLEAVE: c_int = 3;
const MPOL_LOCAL: c_int = 4;
const MPOL_MODE_FLAGS: c_int = (1 << 15) | (1 << 14) | (1 << 13);

const MPOL_MF_STRICT: u32 = 1 << 0;
const MPOL_MF_MOVE: u32 = 1 << 1;
const MPOL_MF_MOVE_ALL: u32 = 1 << 2;

const MPOL_F_NODE: c_ulong = 1 << 0;
const MPOL_F_ADDR: c_ulong = 1 << 1;

/// A NUMA memory policy (`MPOL_*` mode plus its nodes).
///
/// ```
/// use partita_numa::{MemPolicy, NodeSet};
/// let p = MemPolicy::Interleave(NodeSet::single(0));
/// assert_ne!(p, MemPolicy::Local);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemPolicy {
    /// `MPOL_DEFAULT`: fall back to the process (or system) policy.
    Default,
    /// `MPOL_BIND`: allocate only on these nodes.
    Bind(NodeSet),
    /// `MPOL_PREFERRED`: prefer this node, fall back to others when it is full.
    Preferred(u32),
    /// `MPOL_INTERLEAVE`: spread pages round-robin over these nodes.
    Interleave(NodeSet),
    /// `MPOL_LOCAL`: allocate on the node of the CPU that touches the page first.
    Local,
}

impl MemPolicy {
    fn validate(&self, call: &'static str) -> Result<(c_int, NodeSet)> {
        Ok(match self {
            MemPolicy::Default => (MPOL_DEFAULT, NodeSet::new()),
            MemPolicy::Local => (MPOL_LOCAL, NodeSet::new()),
            MemPolicy::Preferred(n) => {
                check_node(call, *n)?;
                (MPOL_PREFERRED, NodeSet::single(*n))
            }
            MemPolicy::Bind(s) => {
                check_nodes(call, s)?;
                (MPOL_BIND, *s)
            }
            MemPolicy::Interleave(s) => {
                check_nodes(call, s)?;
                (MPOL_INTERLEAVE, *s)
            }
        })
    }

    fn from_raw(call: &'static str, mode: c_int, mask: NodeSet) -> Result<MemPolicy> {
        Ok(match mode & !MPOL_MODE_FLAGS {
            MPOL_DEFAULT => MemPolicy::Default,
            MPOL_LOCAL => MemPolicy::Local,
            MPOL_BIND => MemPolicy::Bind(mask),
            MPOL_INTERLEAVE => MemPolicy::Interleave(mask),
            // An empty preferred mask is the kernel's encoding of "local".
            MPOL_PREFERRED => match mask.iter().next() {
                Some(n) => MemPolicy::Preferred(n),
                None => MemPolicy::Local,
            },
            other => {
                return Err(NumaError::InvalidArgument {
                    call,
                    what: format!("kernel reported unknown policy mode {other}"),
                });
            }
        })
    }
}

/// Flags for [`mbind`]: what to do with pages already allocated in the range.
///
/// ```
/// use partita_numa::MbindFlags;
/// let f = MbindFlags::MOVE | MbindFlags::STRICT;
/// assert!(f.contains(MbindFlags::MOVE));
/// assert_eq!(MbindFlags::default(), MbindFlags::NONE);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct MbindFlags(u32);

/// The flag constants combine with `|`:
///
/// ```
/// use partita_numa::MbindFlags;
/// assert_eq!((MbindFlags::MOVE | MbindFlags::STRICT).bits(), 3);
/// assert_eq!(MbindFlags::NONE.bits(), 0);
/// assert_eq!(MbindFlags::MOVE_ALL.bits(), 4);
/// ```
impl MbindFlags {
    /// Only set the policy for future allocations.
    pub const NONE: MbindFlags = MbindFlags(0);
    /// `MPOL_MF_STRICT`: fail with `EIO` if existing pages do not follow the policy (and, with
    /// a move flag, could not be moved).
    pub const STRICT: MbindFlags = MbindFlags(MPOL_MF_STRICT);
    /// `MPOL_MF_MOVE`: move this process's existing pages to conform.
    pub const MOVE: MbindFlags = MbindFlags(MPOL_MF_MOVE);
    /// `MPOL_MF_MOVE_ALL`: also move pages shared with other processes (needs `CAP_SYS_NICE`).
    pub const MOVE_ALL: MbindFlags = MbindFlags(MPOL_MF_MOVE_ALL);

    /// Builds flags from raw `MPOL_MF_*` bits, rejecting unknown bits.
    ///
    /// ```
    /// assert!(partita_numa::MbindFlags::from_bits(2).is_some());
    /// assert!(partita_numa::MbindFlags::from_bits(1 << 9).is_none());
    /// ```
    pub fn from_bits(bits: u32) -> Option<MbindFlags> {
        (bits & !(MPOL_MF_STRICT | MPOL_MF_MOVE | MPOL_MF_MOVE_ALL) == 0)
            .then_some(MbindFlags(bits))
    }

    /// The raw bits.
    ///
    /// ```
    /// assert_eq!(partita_numa::MbindFlags::MOVE.bits(), 2);
    /// ```
    pub fn bits(self) -> u32 {
        self.0
    }

    /// Whether every flag of `other` is set.
    ///
    /// ```
    /// use partita_numa::MbindFlags;
    /// assert!(!MbindFlags::NONE.contains(MbindFlags::STRICT));
    /// ```
    pub fn contains(self, other: MbindFlags) -> bool {
        self.0 & other.0 == other.0
    }
}

impl std::ops::BitOr for MbindFlags {
    type Output = MbindFlags;
    fn bitor(self, rhs: MbindFlags) -> MbindFlags {
        MbindFlags(self.0 | rhs.0)
    }
}

/// Sets the memory policy of `range` (`mbind(2)`), optionally moving pages already there.
///
/// ```
/// use partita_numa::{mbind, page_size, MbindFlags, MemPolicy, NodeSet, PageRange};
/// let mut v = vec![0u8; 4 * page_size()];
/// v.fill(1);
/// let r = PageRange::covering(&v[page_size()..2 * page_size()]).unwrap();
/// mbind(r, MemPolicy::Bind(NodeSet::single(0)), MbindFlags::MOVE).unwrap();
/// // Nodes that do not exist are refused before the call.
/// let err = mbind(r, MemPolicy::Preferred(999), MbindFlags::NONE).unwrap_err();
/// assert_eq!(err.call(), "mbind");
/// ```
pub fn mbind(range: PageRange, policy: MemPolicy, flags: MbindFlags) -> Result<()> {
    const CALL: &str = "mbind";
    if MbindFlags::from_bits(flags.bits()).is_none() {
        return Err(NumaError::InvalidArgument {
            call: CALL,
            what: format!("unknown flags {:#x}", flags.bits()),
        });
    }
    let (mode, mask) = policy.validate(CALL)?;
    let (ptr, maxnode) = if mask.is_empty() {
        (std::ptr::null(), 0)
    } else {
        (mask.as_ptr(), NodeSet::maxnode())
    };
    let r = sys::mbind(range.start(), range.len(), mode, ptr, maxnode, flags.bits());
    if r == 0 {
        Ok(())
    } else {
        Err(NumaError::last_os(CALL))
    }
}

/// Sets the calling thread's default memory policy (`set_mempolicy(2)`).
///
/// ```
/// use partita_numa::{get_mempolicy, set_mempolicy, MemPolicy, NodeSet};
/// std::thread::spawn(|| {
///     set_mempolicy(MemPolicy::Bind(NodeSet::single(0))).unwrap();
///     assert_eq!(get_mempolicy().unwrap(), MemPolicy::Bind(NodeSet::single(0)));
///     set_mempolicy(MemPolicy::Default).unwrap();
/// }).join().unwrap();
/// ```
pub fn set_mempolicy(policy: MemPolicy) -> Result<()> {
    const CALL: &str = "set_mempolicy";
    let (mode, mask) = policy.validate(CALL)?;
    let (ptr, maxnode) = if mask.is_empty() {
        (std::ptr::null(), 0)
    } else {
        (mask.as_ptr(), NodeSet::maxnode())
    };
    if sys::set_mempolicy(mode, ptr, maxnode) == 0 {
        Ok(())
    } else {
        Err(NumaError::last_os(CALL))
    }
}

/// The calling thread's default memory policy (`get_mempolicy(2)` with no flags).
///
/// ```
/// let p = partita_numa::get_mempolicy().unwrap();
/// println!("{p:?}");
/// ```
pub fn get_mempolicy() -> Result<MemPolicy> {
    const CALL: &str = "get_mempolicy";
    let mut mode: c_int = 0;
    let mut mask = NodeSet::new();
    if sys::get_mempolicy(&mut mode, mask.as_mut_ptr(), NodeSet::maxnode(), 0, 0) != 0 {
        return Err(NumaError::last_os(CALL));
    }
    MemPolicy::from_raw(CALL, mode, mask)
}

/// The policy governing the page that contains `addr` (`get_mempolicy(MPOL_F_ADDR)`).
/// `addr` must be mapped in this process (else `EFAULT`).
///
/// ```
/// let x = Box::new(5u64);
/// let p = partita_numa::policy_at(&*x as *const u64 as usize).unwrap();
/// println!("{p:?}");
/// ```
pub fn policy_at(addr: usize) -> Result<MemPolicy> {
    const CALL: &str = "get_mempolicy";
    let mut mode: c_int = 0;
    let mut mask = NodeSet::new();
    if sys::get_mempolicy(
        &mut mode,
        mask.as_mut_ptr(),
        NodeSet::maxnode(),
        addr,
        MPOL_F_ADDR,
    ) != 0
    {
        return Err(NumaError::last_os(CALL));
    }
    MemPolicy::from_raw(CALL, mode, mask)
}

/// The node holding the page that contains `addr`
/// (`get_mempolicy(MPOL_F_NODE | MPOL_F_ADDR)`); the kernel faults the page in if needed.
///
/// ```
/// let x = Box::new(5u64);
/// let node = partita_numa::node_of_address(&*x as *const u64 as usize).unwrap();
/// assert!(partita_numa::online_nodes().contains(node));
/// ```
pub fn node_of_address(addr: usize) -> Result<u32> {
    const CALL: &str = "get_mempolicy";
    let mut node: c_int = 0;
    if sys::get_mempolicy(
        &mut node,
        std::ptr::null_mut(),
        0,
        addr,
        MPOL_F_NODE | MPOL_F_ADDR,
    ) != 0
    {
        return Err(NumaError::last_os(CALL));
    }
    u32::try_from(node).map_err(|_| NumaError::InvalidArgument {
        call: CALL,
        what: format!("kernel reported node {node}"),
    })
}
