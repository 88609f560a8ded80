//! Node-aware memory for a pool (issue 14): buffers registered with the pool ([`PoolVec`]),
//! placed on the node of the pool's CPUs, and moved after them when the manager moves the
//! pool to another node (`follow`, on a background thread). partita-numa does the system
//! calls; this module only decides *where* and keeps the books.
//!
//! On a machine (or kernel) with one NUMA node everything here is a no-op that says why:
//! [`NumaReport::inactive_reason`].

mod follow;
mod home;
mod mover;
mod sampler;

pub(crate) use home::enter as enter_worker_home;
pub use home::{HomePart, WorkerHome};
pub use sampler::{SamplerParams, SamplerReport, SamplerSource};

use std::fmt;
use std::ops::{Deref, DerefMut, Range};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use partita_numa::{NodeVec, NumaError, PageRange, PageStatus, Placement, Topology};

use crate::registry::Registry;
use crate::thread_pool::ThreadPool;

/// Errors of the pool-memory API; each names the call that refused the input.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PoolMemError {
    /// partita-numa refused (a node that does not exist, a kernel refusal, …).
    #[error(transparent)]
    Numa(#[from] NumaError),
    /// The region is not registered with this pool (it belongs to another pool).
    #[error("{call}: region {id} is not registered with this pool")]
    NotRegistered {
        /// The call.
        call: &'static str,
        /// The region's id.
        id: u64,
    },
}

/// What one follow pass (or [`ThreadPool::migrate_memory`]) achieved. Its `Display` is the
/// log line `numa-follow: N of M pages on node X after T ms`.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct FollowOutcome {
    /// The node the memory was moved to.
    pub node: u32,
    /// Registered pages on `node` afterwards.
    pub on_node: usize,
    /// Registered pages present (faulted in) afterwards.
    pub present: usize,
    /// Pages moved by this pass.
    pub moved: usize,
    /// Pages the kernel refused to move (counted, never silent).
    pub failed: usize,
    /// The CPU set changed again before the pass finished (the next pass continues).
    pub interrupted: bool,
    /// From noticing the new CPU set (or the call) to the end of the pass.
    pub elapsed: Duration,
}

impl fmt::Display for FollowOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "numa-follow: {} of {} pages on node {} after {} ms",
            self.on_node,
            self.present,
            self.node,
            self.elapsed.as_millis()
        )?;
        if self.failed > 0 || self.interrupted {
            write!(
                f,
                " ({} refused by the kernel{})",
                self.failed,
                if self.interrupted {
                    ", interrupted by a newer CPU set"
                } else {
                    ""
                }
            )?;
        }
        Ok(())
    }
}

/// The pool's NUMA memory state ([`ThreadPool::numa_report`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NumaReport {
    /// Online NUMA nodes.
    pub nodes_online: usize,
    /// Why placement and following do nothing here (`None`: they are active).
    pub inactive_reason: Option<String>,
    /// Whether memory follows the pool's CPUs (builder option `numa_follow`).
    pub follow: bool,
    /// Registered regions and their pages.
    pub regions: usize,
    /// Pages of the registered regions.
    pub pages: usize,
    /// Follow passes that moved at least one page.
    pub follows: u64,
    /// Pages moved in total, and refused by the kernel in total.
    pub pages_moved: u64,
    /// Pages the kernel refused to move, in total.
    pub pages_failed: u64,
    /// Verghese's trigger from this machine's measured costs (move cost / remote penalty),
    /// once measured (once per process, when the first follower starts).
    pub trigger: Option<u32>,
    /// The measured move cost per page (ns) and remote-miss penalty (ns) the cost rule uses,
    /// once measured (the thesis' 200 000 / 1 200 until then).
    pub measured_costs: Option<(f64, f64)>,
    /// The last pass that found pages to move.
    pub last_follow: Option<FollowOutcome>,
    /// The last pass that moved pages of the workers' own structures (their homes).
    pub last_home_follow: Option<FollowOutcome>,
    /// Region decisions of the cost rule: moved, deferred (not worth it yet), never (moving
    /// cannot pay on this machine).
    pub decisions_moved: u64,
    /// See `decisions_moved`.
    pub decisions_deferred: u64,
    /// See `decisions_moved`.
    pub decisions_never: u64,
    /// The latest cost-rule decisions and why, oldest first (at most
    /// [`NumaReport::DECISIONS_KEPT`]; the follow log lines say the same).
    pub recent_decisions: Vec<String>,
    /// What the opt-in sampler did (`None`: not started).
    pub sampler: Option<SamplerReport>,
}

impl NumaReport {
    /// How many decisions `recent_decisions` keeps.
    pub const DECISIONS_KEPT: usize = 8;
}

/// One registered region.
#[derive(Clone)]
struct Region {
    id: u64,
    range: PageRange,
    /// The sampler's counters and page homes for it (empty until the sampler starts).
    sampling: sampler::Slot,
    /// Page-touches declared by `PoolVec::hint` (all nodes), for the follower's cost rule.
    touches: Arc<AtomicU64>,
    /// Whether anything ever declared touches (else the rule has no counts to go on).
    hinted: Arc<AtomicBool>,
}

/// What a `PoolVec` shares with its listed region.
struct Handles {
    id: u64,
    sampling: sampler::Slot,
    touches: Arc<AtomicU64>,
    hinted: Arc<AtomicBool>,
}

/// Per-pool state (a field of the registry).
pub(crate) struct PoolNuma {
    follow: bool,
    regions: Mutex<Vec<Region>>,
    /// The workers' own pages (`home.rs`).
    homes: Mutex<Vec<home::Home>>,
    next_id: AtomicU64,
    follower_started: AtomicBool,
    sampler_started: AtomicBool,
    /// Bumped by `stop_numa_sampler`: a sampler thread of an older generation ends.
    sampler_gen: AtomicU64,
    stop: AtomicBool,
    clock: Instant,
    report: Mutex<NumaReport>,
    topo: OnceLock<Option<Topology>>,
}

impl PoolNuma {
    pub(crate) fn new(follow: bool) -> PoolNuma {
        PoolNuma {
            follow,
            regions: Mutex::new(Vec::new()),
            homes: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(1),
            follower_started: AtomicBool::new(false),
            sampler_started: AtomicBool::new(false),
            sampler_gen: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            clock: Instant::now(),
            report: Mutex::new(NumaReport::default()),
            topo: OnceLock::new(),
        }
    }

    fn topology(&self) -> Option<&Topology> {
        self.topo
            .get_or_init(|| match Topology::current() {
                Ok(t) => Some(t),
                Err(e) => {
                    tracing::warn!(error = %e, "numa: topology unreadable; pool memory is not placed");
                    None
                }
            })
            .as_ref()
    }

    /// Why node-aware memory does nothing here, if it does nothing.
    fn inactive_reason(&self) -> Option<String> {
        let online = partita_numa::online_nodes();
        if online.len() < 2 {
            return Some(format!(
                "one NUMA node online ({online}): placement and follow are no-ops"
            ));
        }
        if self.topology().is_none() {
            return Some("topology unreadable".into());
        }
        None
    }

    fn lock_regions(&self) -> std::sync::MutexGuard<'_, Vec<Region>> {
        self.regions.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_homes(&self) -> std::sync::MutexGuard<'_, Vec<home::Home>> {
        self.homes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The costs for the rule: measured ones once known, else the thesis'.
    fn costs(&self) -> follow::Costs {
        mover::machine_costs().unwrap_or(follow::THESIS_COSTS)
    }

    fn lock_report(&self) -> std::sync::MutexGuard<'_, NumaReport> {
        self.report.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn now_ns(&self) -> u64 {
        sampler::ns_since(self.clock)
    }

    /// Registers a region (an empty vector has none to list) and returns the handles its
    /// `PoolVec` shares with the list.
    fn register(&self, range: Option<PageRange>) -> Handles {
        let h = Handles {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            sampling: sampler::Slot::default(),
            touches: Arc::default(),
            hinted: Arc::default(),
        };
        if let Some(range) = range {
            self.lock_regions().push(Region {
                id: h.id,
                range,
                sampling: h.sampling.clone(),
                touches: h.touches.clone(),
                hinted: h.hinted.clone(),
            });
        }
        h
    }

    fn unregister(&self, id: u64) {
        self.lock_regions().retain(|r| r.id != id);
    }

    fn is_registered(&self, id: u64) -> bool {
        self.lock_regions().iter().any(|r| r.id == id)
    }

    /// The nodes of CPUs in `cpus` (unknown CPUs are skipped).
    fn nodes_of(&self, cpus: &[usize]) -> Vec<u32> {
        let Some(t) = self.topology() else {
            return Vec::new();
        };
        cpus.iter()
            .filter_map(|&c| t.node_of_cpu(c as u32))
            .collect()
    }
}

impl Drop for PoolNuma {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// A fixed-length vector registered with a pool: its pages are placed on the node of the
/// pool's CPUs and, unless the pool opted out (`ThreadPoolBuilder::numa_follow(false)`),
/// moved to the new node when the manager moves the pool's CPUs. Dereferences to `[T]`.
///
/// ```
/// let pool = partita_runtime::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
/// let mut v = pool.node_vec(10_000, |i| i as u64).unwrap();
/// v[0] = 7;
/// assert_eq!(pool.install(|| v.iter().sum::<u64>()), 7 + (1..10_000u64).sum::<u64>());
/// ```
pub struct PoolVec<T> {
    id: u64,
    numa: Arc<PoolNuma>,
    slot: sampler::Slot,
    touches: Arc<AtomicU64>,
    hinted: Arc<AtomicBool>,
    vec: NodeVec<T>,
}

impl<T> PoolVec<T> {
    /// The region's id in its pool.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Access hint for the opt-in sampler ([`ThreadPool::start_numa_sampler`]): the caller
    /// (on whatever node it runs) touched `elements`, writing if `write`. A no-op until the
    /// sampler starts; out-of-range elements are clipped.
    ///
    /// Hints also feed the follower's cost rule (the touch rate of the region decides whether
    /// moving it after the pool's CPUs pays), sampler or not.
    pub fn hint(&self, elements: Range<usize>, write: bool) {
        let end = elements.end.min(self.vec.len());
        if elements.start >= end {
            return;
        }
        let size = std::mem::size_of::<T>();
        let addr = self.vec.as_ptr() as usize + elements.start * size;
        let ps = partita_numa::page_size();
        let pages = (addr + (end - elements.start) * size).div_ceil(ps) - addr / ps;
        self.touches.fetch_add(pages as u64, Ordering::Relaxed);
        if !self.hinted.load(Ordering::Relaxed) {
            self.hinted.store(true, Ordering::Relaxed);
        }
        let mut slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        let Some(s) = slot.as_mut() else { return };
        let Some(node) = partita_numa::current_node() else {
            return;
        };
        s.touch(
            addr,
            (end - elements.start) * size,
            node as usize,
            write,
            self.numa.now_ns(),
        );
    }

    /// Where each page of the vector is (`move_pages` query; empty for an empty vector).
    pub fn page_nodes(&self) -> Result<Vec<PageStatus>, PoolMemError> {
        match self.vec.pages() {
            Some(_) => Ok(self.vec.page_nodes()?),
            None => Ok(Vec::new()),
        }
    }
}

impl<T> Drop for PoolVec<T> {
    fn drop(&mut self) {
        // Before the mapping goes (field drop, after this): the follower moves a chunk only
        // while the region is registered, under the same lock.
        self.numa.unregister(self.id);
        // A fault sampler must reopen the pages while they are still ours.
        drop(self.slot.lock().unwrap_or_else(|p| p.into_inner()).take());
    }
}

impl<T> Deref for PoolVec<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &self.vec
    }
}

impl<T> DerefMut for PoolVec<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        &mut self.vec
    }
}

impl<T: fmt::Debug> fmt::Debug for PoolVec<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PoolVec")
            .field("id", &self.id)
            .field("len", &self.vec.len())
            .finish()
    }
}

/// The CPUs the pool runs on: its allocated set, else the process affinity.
fn pool_cpus(reg: &Registry) -> Vec<usize> {
    let set = reg
        .control
        .cpus
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    set.unwrap_or_else(|| {
        partita_protocol::sys::get_affinity(0)
            .map(|s| s.to_vec())
            .unwrap_or_default()
    })
}

impl ThreadPool {
    /// Allocates a [`PoolVec`] of `len` elements (`f(i)` each, written by the calling
    /// thread), placed preferably on the node holding most of the pool's CPUs, and registers
    /// it with the pool. On a one-node machine it is plain first-touch memory
    /// ([`ThreadPool::numa_report`] says why).
    pub fn node_vec<T>(
        &self,
        len: usize,
        f: impl FnMut(usize) -> T,
    ) -> Result<PoolVec<T>, PoolMemError> {
        let numa = Arc::clone(&self.registry.numa);
        let placement = match numa.inactive_reason() {
            Some(_) => Placement::FirstTouch,
            None => {
                let nodes = numa.nodes_of(&pool_cpus(&self.registry));
                match follow::follow_target(&nodes) {
                    Some((main, _)) => Placement::Preferred(main),
                    None => Placement::FirstTouch,
                }
            }
        };
        let vec = NodeVec::from_fn(len, placement, f)?;
        let region = numa.register(vec.pages());
        if numa.follow && numa.inactive_reason().is_none() {
            mover::ensure_follower(&numa, Arc::downgrade(&self.registry));
        }
        Ok(PoolVec {
            id: region.id,
            numa,
            slot: region.sampling,
            touches: region.touches,
            hinted: region.hinted,
            vec,
        })
    }

    /// Moves the pages of `v` to `node` now, on the calling thread, and reports how many
    /// are there afterwards. `v` must belong to this pool and `node` must exist.
    pub fn migrate_memory<T>(
        &self,
        v: &PoolVec<T>,
        node: u32,
    ) -> Result<FollowOutcome, PoolMemError> {
        const CALL: &str = "migrate_memory";
        if !Arc::ptr_eq(&v.numa, &self.registry.numa) || !v.numa.is_registered(v.id) {
            return Err(PoolMemError::NotRegistered {
                call: CALL,
                id: v.id,
            });
        }
        let online = partita_numa::online_nodes();
        if !online.contains(node) {
            return Err(NumaError::NoSuchNode {
                call: CALL,
                node,
                online: online.to_string(),
            }
            .into());
        }
        let Some(range) = v.vec.pages() else {
            return Ok(FollowOutcome {
                node,
                ..Default::default()
            });
        };
        let region = Region {
            id: v.id,
            range,
            sampling: v.slot.clone(),
            touches: v.touches.clone(),
            hinted: v.hinted.clone(),
        };
        Ok(mover::move_regions(&v.numa, &[region], node)?)
    }

    /// A read-mostly value with one copy on each node of the pool's CPUs
    /// (`partita_numa::Replicated`: readers get their node's copy, `update` rewrites all).
    /// This is the replication Linux allows: the sampler cannot replicate raw pages, and counts
    /// such decisions instead ([`SamplerReport::not_executed`]). One copy on a one-node machine.
    ///
    /// ```
    /// let pool = partita_runtime::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    /// let table = pool.replicated([7u64; 512]).unwrap();
    /// assert_eq!(pool.install(|| table.get()[3]), 7);
    /// ```
    pub fn replicated<T: Clone>(
        &self,
        value: T,
    ) -> Result<partita_numa::Replicated<T>, PoolMemError> {
        let nodes = self.registry.numa.nodes_of(&pool_cpus(&self.registry));
        let Some((main, all)) = follow::follow_target(&nodes) else {
            return Ok(partita_numa::Replicated::new(value)?);
        };
        let mut r = partita_numa::Replicated::on(value, main)?;
        for n in all {
            r.replicate_on(n)?;
        }
        Ok(r)
    }

    /// Starts Verghese's policy over this pool's registered regions (opt-in): every
    /// `params.interval` a background thread runs `decide()` on the access counts that
    /// [`PoolVec::hint`] recorded and migrates pages to the node that uses them. On a
    /// one-node machine it does not start ([`NumaReport::inactive_reason`] says why).
    pub fn start_numa_sampler(&self, params: SamplerParams) -> Result<(), PoolMemError> {
        if let Some(why) = self.registry.numa.inactive_reason() {
            tracing::info!("numa sampler not started: {why}");
            return Ok(());
        }
        sampler::start(&self.registry.numa, params).map_err(|e| {
            PoolMemError::Numa(NumaError::Os {
                call: "start_numa_sampler",
                source: e,
            })
        })
    }

    /// Where the pages of each worker's own structures are (its stack with the deque handle
    /// and thread-locals, its counters slot, and its deque's shared page and rings;
    /// `move_pages` queries). Empty where homes are
    /// not tracked: one node, a pool that opted out of following, or a worker not started yet.
    pub fn worker_homes(&self) -> Result<Vec<WorkerHome>, PoolMemError> {
        let homes = self.registry.numa.lock_homes();
        let mut out = Vec::with_capacity(homes.len());
        for h in homes.iter() {
            let all = h.parts();
            let mut parts = Vec::with_capacity(all.len());
            for (what, range) in &all {
                parts.push(home::tally(what, &partita_numa::locate(*range)?));
            }
            out.push(WorkerHome {
                worker: h.worker,
                parts,
            });
        }
        out.sort_by_key(|h| h.worker);
        Ok(out)
    }

    /// Stops the sampler started by [`ThreadPool::start_numa_sampler`]: its counts and page
    /// states are dropped and, with fault sampling, every armed page is opened again (armed
    /// pages are invisible to `move_pages` queries, so [`PoolVec::page_nodes`] and the
    /// follower see them only once touched or after this). Returns whether one was running;
    /// the report keeps its totals, and the sampler can be started again.
    pub fn stop_numa_sampler(&self) -> bool {
        sampler::stop(&self.registry.numa)
    }

    /// The pool's NUMA memory state: nodes, regions, pages moved, the last follow pass.
    pub fn numa_report(&self) -> NumaReport {
        let numa = &self.registry.numa;
        let regions = numa.lock_regions();
        let mut r = numa.lock_report().clone();
        r.nodes_online = partita_numa::online_nodes().len();
        r.trigger = machine_trigger();
        r.measured_costs =
            mover::machine_costs().map(|c| (c.move_ns_per_page, c.remote_penalty_ns));
        r.inactive_reason = numa.inactive_reason();
        r.follow = numa.follow;
        r.regions = regions.len();
        r.pages = regions.iter().map(|g| g.range.pages()).sum();
        r
    }
}

/// Verghese's trigger from the measured costs (`None` before calibration, or without a
/// measurable remote penalty).
fn machine_trigger() -> Option<u32> {
    let c = mover::machine_costs()?;
    (c.remote_penalty_ns > 0.0).then(|| {
        partita_numa::policy::Params::derived_trigger(
            c.move_ns_per_page as u64,
            c.remote_penalty_ns as u64,
        )
    })
}

/// Weak handle the follower thread keeps on its pool.
pub(crate) type PoolRef = Weak<Registry>;
