//! Verghese's policy at run time (opt-in): a sampler thread runs `decide()` over every
//! registered region each interval and carries out the migrations (`driver::Migrator`,
//! batched `move_pages`). The counts come from one of partita-numa's counter sources
//! ([`SamplerSource`]): tasks declaring what they touch ([`super::PoolVec::hint`],
//! `AccessHints`), or page-fault sampling (`counters::FaultSampler`: the region's pages are
//! protected twice per interval and the first access to each is counted for the node of the
//! faulting CPU; no application cooperation, the user-space analogue of Linux's NUMA hinting
//! faults). Replicate and rearrange decisions cannot be carried out on raw Linux pages (no
//! user-space page replication): they are counted in the report, never dropped silently;
//! values that should be replicated belong in [`partita_numa::Replicated`].

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use partita_numa::counters::{AccessHints, FaultSampler};
use partita_numa::driver::Migrator;
use partita_numa::policy::{decide, Action, CopySet, NoAction, PageState, Params};
use partita_numa::{NumaError, PageRange};

use super::PoolNuma;

/// Parameters of the sampler.
///
/// ```
/// let p = partita_runtime::SamplerParams::default();
/// assert_eq!(p.interval, std::time::Duration::from_millis(100));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SamplerParams {
    /// How often the policy runs (also the counters' reset interval, numa.md).
    pub interval: Duration,
    /// Verghese's trigger; `None`: the one derived from this machine's measured costs when
    /// the follower measured them, else the thesis' 128.
    pub trigger: Option<u32>,
    /// Where the access counts come from.
    pub source: SamplerSource,
}

impl Default for SamplerParams {
    fn default() -> Self {
        SamplerParams {
            interval: Duration::from_millis(100),
            trigger: None,
            source: SamplerSource::AccessHints,
        }
    }
}

/// The sampler's counter source (partita-numa's `counters` module has both).
///
/// ```
/// use partita_runtime::SamplerSource;
/// assert_ne!(SamplerSource::AccessHints, SamplerSource::FaultSampling);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SamplerSource {
    /// Tasks declare the elements they touch ([`super::PoolVec::hint`]); exact and cheap for
    /// array-parallel code, and the only source that knows writes.
    AccessHints,
    /// The sampler protects every page of each region twice per interval; the first access
    /// to each page faults and is counted for the faulting CPU's node (one fault stands for
    /// half a trigger of misses, so two faults from one node in an interval decide, Linux's
    /// two-fault filter). No hints needed, but writes are not seen (a written shared page is
    /// judged a replicate decision, which is counted and not carried out), the kernel's own
    /// accesses to an armed page fail with `EFAULT` (do not `read(2)` into a sampled region),
    /// and at most 16 regions per process are sampled (the others are counted as unsampled).
    FaultSampling,
}

/// What the sampler did so far (part of [`super::NumaReport`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SamplerReport {
    /// Policy rounds run.
    pub rounds: u64,
    /// Pages migrated to the node that accessed them most.
    pub migrated: u64,
    /// Migrations the kernel refused (the page stayed; counted).
    pub failed: u64,
    /// Replicate / rearrange decisions, which Linux cannot carry out on raw pages.
    pub not_executed: u64,
    /// Page decisions "shared but written: leave alone".
    pub left_shared_written: u64,
    /// Faults counted by the fault sampler (`SamplerSource::FaultSampling`).
    pub faults: u64,
    /// Region-rounds the fault sampler could not arm (process limit of 16 sampled regions,
    /// or `mprotect` refused): those regions got no counts in that round.
    pub unsampled: u64,
}

/// A region's fault sampler and the counts already turned into misses.
struct Faults {
    sampler: FaultSampler<'static>,
    seen: Vec<Vec<u32>>,
}

/// Per-region policy state: the counters, the migrator (page homes, cool-downs) and, with
/// fault sampling, the region's fault sampler.
pub(crate) struct Sampling {
    hints: AccessHints,
    migrator: Migrator,
    faults: Option<Faults>,
}

impl Sampling {
    fn new(
        range: PageRange,
        nodes: usize,
        params: &Params,
        source: SamplerSource,
    ) -> Result<Sampling, NumaError> {
        let faults = match source {
            SamplerSource::AccessHints => None,
            // SAFETY: `range` is a registered PoolVec's own NodeVec mapping (private,
            // read-write, anonymous). It stays mapped while the sampler lives: the sampler
            // lives in the region's slot, and `PoolVec::drop` unregisters the region (after
            // which no round reaches the slot) and then takes the sampling state out of the
            // slot, dropping the sampler, before the mapping is unmapped.
            SamplerSource::FaultSampling => Some(unsafe { FaultSampler::for_range(range, nodes) }?)
                .map(|sampler| Faults {
                    sampler,
                    seen: vec![vec![0; nodes]; range.pages()],
                }),
        };
        Ok(Sampling {
            // No reset on a clock: `round` zeroes the counters after deciding, so every round
            // decides on one whole interval of counts. A clock reset with the sampler's own
            // period kept a fixed phase to its rounds, and when a round fell just after the
            // reset it saw a few milliseconds of counts, round after round (the VM's
            // read-write-shared check saw no decision in 4 rounds of two writing threads).
            hints: AccessHints::new(range.start(), range.len(), nodes, 1, 0),
            migrator: Migrator::new(range, *params)?,
            faults,
        })
    }

    /// Record an access to `[addr, addr + len)` by `node` (ignored while faults are the
    /// source: the two would count the same accesses twice).
    pub(crate) fn touch(&mut self, addr: usize, len: usize, node: usize, write: bool, now: u64) {
        if self.faults.is_none() {
            self.hints.touch(addr, len, node, write, now);
        }
    }

    /// Turns the faults since the last call into misses (`weight` each); returns them.
    fn absorb_faults(&mut self, weight: u32, now: u64) -> u64 {
        let Some(f) = self.faults.as_mut() else {
            return 0;
        };
        let stats = f.sampler.stats();
        let mut total = 0u64;
        for (page, counts) in stats.per_node.iter().enumerate() {
            for (node, (&now_count, &before)) in counts.iter().zip(&f.seen[page]).enumerate() {
                let new = now_count.saturating_sub(before);
                if new > 0 {
                    let misses = new.saturating_mul(weight);
                    self.hints
                        .table_mut()
                        .record_n(page, node, false, misses, now);
                    total += u64::from(new);
                }
            }
            f.seen[page].clone_from(counts);
        }
        total
    }

    /// Protects every page again (the next access to each is counted). `false` if refused.
    fn arm(&self) -> bool {
        self.faults
            .as_ref()
            .is_none_or(|f| f.sampler.arm_all().is_ok())
    }
}

/// A region's slot: `None` until the sampler starts.
pub(crate) type Slot = Arc<Mutex<Option<Sampling>>>;

fn nodes_count() -> usize {
    partita_numa::online_nodes()
        .max()
        .map_or(1, |m| m as usize + 1)
}

/// Starts the sampler thread (once per pool).
pub(crate) fn start(numa: &Arc<PoolNuma>, params: SamplerParams) -> std::io::Result<()> {
    if numa.sampler_started.swap(true, Ordering::AcqRel) {
        return Ok(());
    }
    let weak = Arc::downgrade(numa);
    let epoch = numa.sampler_gen.load(Ordering::Acquire);
    if params.source == SamplerSource::FaultSampling {
        if let Some(mode) = partita_numa::counters::numa_balancing().filter(|on| *on) {
            tracing::warn!(
                balancing = mode,
                "numa sampler: the kernel's NUMA balancing also migrates pages"
            );
        }
    }
    std::thread::Builder::new()
        .name("partita-numa-sampler".into())
        .spawn(move || run(weak, params, epoch))
        .map(drop)
        .inspect_err(|_| numa.sampler_started.store(false, Ordering::Release))
}

/// Stops the sampler (if running): its thread exits at its next wake-up, and every region's
/// sampling state is dropped now (a fault sampler re-opens its armed pages). Returns whether
/// a sampler was running.
pub(crate) fn stop(numa: &PoolNuma) -> bool {
    if !numa.sampler_started.load(Ordering::Acquire) {
        return false;
    }
    // Under the regions lock, like every round: no round runs half before, half after.
    let regions = numa.lock_regions();
    numa.sampler_gen.fetch_add(1, Ordering::AcqRel);
    for r in regions.iter() {
        drop(r.sampling.lock().unwrap_or_else(|p| p.into_inner()).take());
    }
    numa.sampler_started.store(false, Ordering::Release);
    true
}

fn run(numa: Weak<PoolNuma>, sp: SamplerParams, epoch: u64) {
    // Gone, stopping or stopped (`stop`): the thread ends.
    let ended = |n: &PoolNuma| {
        n.stop.load(Ordering::Relaxed) || n.sampler_gen.load(Ordering::Acquire) != epoch
    };
    loop {
        if sp.source == SamplerSource::FaultSampling {
            // Re-arm at mid-interval, so a page can fault twice per interval.
            std::thread::sleep(sp.interval / 2);
            let Some(n) = numa.upgrade() else { return };
            if ended(&n) {
                return;
            }
            rearm(&n, epoch);
            drop(n);
            std::thread::sleep(sp.interval - sp.interval / 2);
        } else {
            std::thread::sleep(sp.interval);
        }
        let Some(n) = numa.upgrade() else { return };
        if ended(&n) {
            return;
        }
        let trigger = sp
            .trigger
            .or(super::machine_trigger())
            .unwrap_or(Params::default().trigger);
        let mut params = Params::with_trigger(trigger);
        params.reset_interval_ns = sp.interval.as_nanos() as u64;
        if let Err(e) = round(&n, &params, sp.source, epoch) {
            tracing::warn!(error = %e, "numa: sampler round failed");
        }
    }
}

/// Arms every fault-sampled region again (mid-interval).
fn rearm(numa: &PoolNuma, epoch: u64) {
    let regions = numa.lock_regions();
    if numa.sampler_gen.load(Ordering::Acquire) != epoch {
        return; // stopped meanwhile
    }
    let mut refused = 0;
    for region in regions.iter() {
        let slot = region.sampling.lock().unwrap_or_else(|p| p.into_inner());
        if slot.as_ref().is_some_and(|s| !s.arm()) {
            refused += 1;
        }
    }
    drop(regions);
    if refused > 0 {
        let mut r = numa.lock_report();
        r.sampler
            .get_or_insert_with(SamplerReport::default)
            .unsampled += refused;
    }
}

/// One policy round over every registered region (under the regions lock, so no region is
/// unmapped while its pages move).
fn round(
    numa: &PoolNuma,
    params: &Params,
    source: SamplerSource,
    epoch: u64,
) -> Result<(), NumaError> {
    let now = numa.now_ns();
    let mut total = SamplerReport {
        rounds: 1,
        ..Default::default()
    };
    // Two faults from one node within an interval reach the trigger.
    let weight = params.trigger.div_ceil(2).max(1);
    let regions = numa.lock_regions();
    if numa.sampler_gen.load(Ordering::Acquire) != epoch {
        return Ok(()); // stopped meanwhile: create no sampling state again
    }
    for region in regions.iter() {
        let mut slot = region.sampling.lock().unwrap_or_else(|p| p.into_inner());
        let s = match slot.as_mut() {
            Some(s) => s,
            None => match Sampling::new(region.range, nodes_count(), params, source) {
                Ok(s) => slot.insert(s),
                Err(e) if source == SamplerSource::FaultSampling => {
                    tracing::debug!(region = region.id, error = %e, "numa sampler: region not sampled");
                    total.unsampled += 1;
                    continue;
                }
                Err(e) => return Err(e),
            },
        };
        total.faults += s.absorb_faults(weight, now);
        let plan = s.migrator.plan(s.hints.table(), now, false);
        total.left_shared_written += shared_written(s, params, now) as u64;
        let done = s.migrator.apply(&plan, s.hints.table_mut(), now)?;
        total.migrated += done.migrated as u64;
        total.failed += done.failed as u64;
        total.not_executed += done.not_executed as u64;
        s.hints.table_mut().clear();
        if !s.arm() {
            total.unsampled += 1;
        }
    }
    drop(regions);
    let mut r = numa.lock_report();
    let acc = r.sampler.get_or_insert_with(SamplerReport::default);
    acc.rounds += total.rounds;
    acc.migrated += total.migrated;
    acc.failed += total.failed;
    acc.not_executed += total.not_executed;
    acc.left_shared_written += total.left_shared_written;
    acc.faults += total.faults;
    acc.unsampled += total.unsampled;
    Ok(())
}

/// Pages whose hottest node reached the trigger but which `decide()` leaves alone because
/// they are shared and written (the read-write-shared case).
fn shared_written(s: &Sampling, params: &Params, now: u64) -> usize {
    let t = s.hints.table();
    (0..t.pages())
        .filter(|&page| {
            let counts = t.counters(page, 0).misses;
            let Some((node, _)) = counts
                .iter()
                .enumerate()
                .filter(|(_, c)| **c >= params.trigger)
                .max_by_key(|(_, c)| **c)
            else {
                return false;
            };
            let state = PageState::new(CopySet::new(s.migrator.home(page).min(63)), now);
            decide(&t.counters(page, node), params, &state) == Action::None(NoAction::SharedWritten)
        })
        .count()
}

/// Nanoseconds since `since` (the sampler's clock).
pub(crate) fn ns_since(since: Instant) -> u64 {
    since.elapsed().as_nanos() as u64
}
