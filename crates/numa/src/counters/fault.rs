//! Page-fault sampling: `mprotect(PROT_NONE)` a sample of pages; the first access to each
//! faults, a `SIGSEGV` handler counts it for the node of the faulting CPU and restores access.
//! The user-space analogue of Linux's NUMA hinting faults.
//!
//! All `unsafe` of the sampler is in this module: the signal handler and the region table it
//! reads. The handler only uses async-signal-safe operations (atomics, `getcpu`, `mprotect`,
//! `sigaction`).

use crate::error::{NumaError, Result};
use crate::placement::NodeVec;
use crate::range::{PageRange, page_size};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

const SLOTS: usize = 16;

struct Slot {
    base: AtomicUsize,
    len: AtomicUsize,
    nodes: AtomicUsize,
    counts: AtomicPtr<AtomicU32>,
}

#[allow(clippy::declare_interior_mutable_const)] // used only to initialise the static array
const EMPTY: Slot = Slot {
    base: AtomicUsize::new(0),
    len: AtomicUsize::new(0),
    nodes: AtomicUsize::new(0),
    counts: AtomicPtr::new(std::ptr::null_mut()),
};
static SLOTS_TABLE: [Slot; SLOTS] = [EMPTY; SLOTS];
/// Handlers currently running (unregistering waits for zero before freeing counts).
static IN_HANDLER: AtomicUsize = AtomicUsize::new(0);
/// Faults handled since start (all samplers).
static HANDLED: AtomicU64 = AtomicU64::new(0);
static REGISTER: Mutex<()> = Mutex::new(());
static PREVIOUS: OnceLock<libc::sigaction> = OnceLock::new();

extern "C" fn on_segv(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    IN_HANDLER.fetch_add(1, Ordering::SeqCst);
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers.
    let addr = unsafe { (*info).si_addr() } as usize;
    let ps = crate::sys::page_size();
    let mut handled = false;
    for slot in &SLOTS_TABLE {
        let base = slot.base.load(Ordering::SeqCst);
        let len = slot.len.load(Ordering::SeqCst);
        if base != 0 && addr >= base && addr < base + len {
            let page = (addr - base) / ps;
            let nodes = slot.nodes.load(Ordering::SeqCst);
            let node = crate::sys::current_cpu_and_node()
                .map(|(_, n)| n as usize)
                .unwrap_or(0);
            let counts = slot.counts.load(Ordering::SeqCst);
            if !counts.is_null() && node < nodes {
                // SAFETY: `counts` holds `pages * nodes` counters and stays allocated while
                // IN_HANDLER > 0 (see `Drop for FaultSampler`); the index is in bounds.
                unsafe { (*counts.add(page * nodes + node)).fetch_add(1, Ordering::Relaxed) };
            }
            // SAFETY: restoring read-write access to one page of a registered region, which the
            // sampler's owner guarantees is its own read-write anonymous memory.
            unsafe {
                libc::mprotect(
                    (base + page * ps) as *mut libc::c_void,
                    ps,
                    libc::PROT_READ | libc::PROT_WRITE,
                )
            };
            HANDLED.fetch_add(1, Ordering::Relaxed);
            handled = true;
            break;
        }
    }
    IN_HANDLER.fetch_sub(1, Ordering::SeqCst);
    if handled {
        return;
    }
    // Not ours: hand over to the previous handler (e.g. Rust's stack-overflow handler), or
    // reinstall the default so the faulting instruction crashes the process as it would have.
    if let Some(prev) = PREVIOUS.get() {
        let h = prev.sa_sigaction;
        if h == libc::SIG_DFL || h == libc::SIG_IGN {
            // SAFETY: reinstalling the saved disposition; returning re-executes the faulting
            // access, which then takes the default action.
            unsafe { libc::sigaction(sig, prev, std::ptr::null_mut()) };
        } else if prev.sa_flags & libc::SA_SIGINFO != 0 {
            // SAFETY: the saved handler was installed with SA_SIGINFO, so it has this signature.
            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                unsafe { std::mem::transmute(h) };
            f(sig, info, ctx);
        } else {
            // SAFETY: a handler installed without SA_SIGINFO takes only the signal number.
            let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(h) };
            f(sig);
        }
    }
}

fn install() -> Result<()> {
    if PREVIOUS.get().is_some() {
        return Ok(());
    }
    // SAFETY: building a sigaction from zeroed memory is valid (all fields are plain data);
    // installing our handler for SIGSEGV and keeping the old one for chaining.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_segv as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_NODEFER | libc::SA_ONSTACK;
        libc::sigemptyset(&mut sa.sa_mask);
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGSEGV, &sa, &mut old) != 0 {
            return Err(NumaError::last_os("sigaction"));
        }
        let _ = PREVIOUS.set(old);
    }
    Ok(())
}

/// Counts of a [`FaultSampler`] and the faults it handled.
///
/// ```
/// let s = partita_numa::counters::FaultStats { per_node: vec![vec![1, 0]], faults: 1 };
/// assert_eq!(s.per_node[0][0], 1);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FaultStats {
    /// `per_node[page][node]`: sampled faults.
    pub per_node: Vec<Vec<u32>>,
    /// Sum over pages and nodes.
    pub faults: u64,
}

/// Samples accesses to the pages of one [`NodeVec`] by protecting them and counting the
/// faults per node.
///
/// The region's pages are made inaccessible by [`FaultSampler::arm_all`] (or
/// [`FaultSampler::arm_sample`]); each one's first load or store then traps, is counted for
/// the node the thread runs on, and the page is opened again.
/// Accesses made by the kernel on the program's behalf (e.g. `read(2)` into the buffer) do not
/// trap but fail with `EFAULT` while a page is armed, so arm only memory that is accessed from
/// user space. Dropping the sampler opens every page again.
///
/// ```
/// use partita_numa::{NodeVec, Placement};
/// use partita_numa::counters::FaultSampler;
/// use std::sync::atomic::{AtomicU64, Ordering};
/// let v = NodeVec::from_fn(4096, Placement::FirstTouch, |_| AtomicU64::new(0)).unwrap();
/// let s = FaultSampler::new(&v, 1).unwrap();
/// s.arm_all().unwrap();
/// v[0].fetch_add(1, Ordering::Relaxed);  // faults once, counted
/// v[1].fetch_add(1, Ordering::Relaxed);  // same page, already open: not counted
/// let stats = s.stats();
/// assert_eq!(stats.faults, 1);
/// ```
pub struct FaultSampler<'a> {
    slot: usize,
    range: PageRange,
    nodes: usize,
    counts: Box<[AtomicU32]>,
    _borrow: PhantomData<&'a ()>,
}

impl<'a> FaultSampler<'a> {
    /// Registers the pages of `v` on a machine with `nodes` nodes. At most 16 samplers exist at
    /// a time.
    ///
    /// ```
    /// use partita_numa::{NodeVec, Placement};
    /// let v = NodeVec::from_fn(1, Placement::FirstTouch, |_| 0u8).unwrap();
    /// assert!(partita_numa::counters::FaultSampler::new(&v, 0).is_err());
    /// ```
    pub fn new<T: Sync>(v: &'a NodeVec<T>, nodes: usize) -> Result<Self> {
        let range = v.pages().ok_or(NumaError::EmptyRange {
            call: "fault sampler",
        })?;
        // SAFETY: `range` is exactly `v`'s own private read-write anonymous mapping, which the
        // borrow `'a` keeps mapped for as long as the sampler lives.
        unsafe { Self::for_range(range, nodes) }
    }

    /// Registers the pages of `range` (like [`FaultSampler::new`], for owners that cannot lend
    /// a [`NodeVec`] borrow, such as a pool's registered regions).
    ///
    /// ```
    /// use partita_numa::{NodeVec, Placement};
    /// use std::sync::atomic::{AtomicU64, Ordering};
    /// let v = NodeVec::from_fn(1024, Placement::FirstTouch, |_| AtomicU64::new(0)).unwrap();
    /// // SAFETY: `v`'s own mapping, which outlives the sampler (dropped first, below).
    /// let s = unsafe { partita_numa::counters::FaultSampler::for_range(v.pages().unwrap(), 1) }
    ///     .unwrap();
    /// s.arm_all().unwrap();
    /// v[3].fetch_add(1, Ordering::Relaxed);
    /// assert_eq!(s.stats().faults, 1);
    /// drop(s);
    /// ```
    ///
    /// # Safety
    ///
    /// `range` must be private read-write anonymous memory of this process, accessed only from
    /// user space while armed, and must stay mapped until the sampler is dropped (dropping it
    /// re-opens the pages with `mprotect`).
    pub unsafe fn for_range(range: PageRange, nodes: usize) -> Result<Self> {
        const CALL: &str = "fault sampler";
        if nodes == 0 {
            return Err(NumaError::InvalidArgument {
                call: CALL,
                what: "zero nodes".into(),
            });
        }
        install()?;
        let counts: Box<[AtomicU32]> = (0..range.pages() * nodes)
            .map(|_| AtomicU32::new(0))
            .collect();
        let _g = REGISTER.lock().unwrap_or_else(|p| p.into_inner());
        let slot = SLOTS_TABLE
            .iter()
            .position(|s| s.base.load(Ordering::SeqCst) == 0)
            .ok_or_else(|| NumaError::InvalidArgument {
                call: CALL,
                what: format!("at most {SLOTS} samplers at a time"),
            })?;
        let s = &SLOTS_TABLE[slot];
        s.len.store(range.len(), Ordering::SeqCst);
        s.nodes.store(nodes, Ordering::SeqCst);
        s.counts
            .store(counts.as_ptr() as *mut AtomicU32, Ordering::SeqCst);
        s.base.store(range.start(), Ordering::SeqCst);
        Ok(FaultSampler {
            slot,
            range,
            nodes,
            counts,
            _borrow: PhantomData,
        })
    }

    fn protect(&self, start: usize, len: usize, prot: libc::c_int) -> Result<()> {
        // SAFETY: `[start, start+len)` lies inside the NodeVec mapping this sampler borrows;
        // PROT_NONE pages are reopened by the handler on access or by `Drop`.
        if unsafe { libc::mprotect(start as *mut libc::c_void, len, prot) } != 0 {
            return Err(NumaError::last_os("mprotect"));
        }
        Ok(())
    }

    /// Arms every page: the next access to each is counted.
    ///
    /// ```
    /// use partita_numa::{NodeVec, Placement};
    /// let v = NodeVec::from_fn(10, Placement::FirstTouch, |_| 0u8).unwrap();
    /// let s = partita_numa::counters::FaultSampler::new(&v, 1).unwrap();
    /// s.arm_all().unwrap();
    /// ```
    pub fn arm_all(&self) -> Result<()> {
        self.protect(self.range.start(), self.range.len(), libc::PROT_NONE)
    }

    /// Arms every `every`-th page starting at page `offset` (a rotating sample keeps the
    /// overhead bounded). Returns the pages armed.
    ///
    /// ```
    /// use partita_numa::{NodeVec, Placement};
    /// let v = NodeVec::from_fn(4 * partita_numa::page_size(), Placement::FirstTouch, |_| 0u8).unwrap();
    /// let s = partita_numa::counters::FaultSampler::new(&v, 1).unwrap();
    /// assert_eq!(s.arm_sample(2, 1).unwrap(), 2);
    /// ```
    pub fn arm_sample(&self, every: usize, offset: usize) -> Result<usize> {
        let ps = page_size();
        let mut armed = 0;
        for page in (offset..self.range.pages()).step_by(every.max(1)) {
            self.protect(self.range.start() + page * ps, ps, libc::PROT_NONE)?;
            armed += 1;
        }
        Ok(armed)
    }

    /// The counts so far.
    ///
    /// ```
    /// use partita_numa::{NodeVec, Placement};
    /// let v = NodeVec::from_fn(10, Placement::FirstTouch, |_| 0u8).unwrap();
    /// let s = partita_numa::counters::FaultSampler::new(&v, 2).unwrap();
    /// assert_eq!(s.stats().per_node, vec![vec![0, 0]]);
    /// ```
    pub fn stats(&self) -> FaultStats {
        let per_node: Vec<Vec<u32>> = self
            .counts
            .chunks(self.nodes)
            .map(|c| c.iter().map(|x| x.load(Ordering::Relaxed)).collect())
            .collect();
        let faults = per_node.iter().flatten().map(|x| u64::from(*x)).sum();
        FaultStats { per_node, faults }
    }
}

impl Drop for FaultSampler<'_> {
    fn drop(&mut self) {
        // Reopen first, so no access can trap once the slot is gone.
        let _ = self.protect(
            self.range.start(),
            self.range.len(),
            libc::PROT_READ | libc::PROT_WRITE,
        );
        let _g = REGISTER.lock().unwrap_or_else(|p| p.into_inner());
        let s = &SLOTS_TABLE[self.slot];
        s.base.store(0, Ordering::SeqCst);
        s.counts.store(std::ptr::null_mut(), Ordering::SeqCst);
        while IN_HANDLER.load(Ordering::SeqCst) != 0 {
            std::hint::spin_loop();
        }
    }
}
