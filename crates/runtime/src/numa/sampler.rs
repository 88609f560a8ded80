//! Verghese's policy at run time (opt-in): tasks declare what they touch
//! ([`super::PoolVec::hint`], partita-numa's `AccessHints` counter source), and a sampler
//! thread runs `decide()` over every registered region each interval and carries out the
//! migrations (`driver::Migrator`, batched `move_pages`). Replicate and rearrange decisions
//! cannot be carried out on raw Linux pages (no user-space page replication): they are
//! counted in the report, never dropped silently; values that should be replicated belong in
//! [`partita_numa::Replicated`].

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use partita_numa::counters::AccessHints;
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
}

impl Default for SamplerParams {
    fn default() -> Self {
        SamplerParams {
            interval: Duration::from_millis(100),
            trigger: None,
        }
    }
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
}

/// Per-region policy state: hints (counters) and the migrator (page homes, cool-downs).
pub(crate) struct Sampling {
    hints: AccessHints,
    migrator: Migrator,
}

impl Sampling {
    fn new(range: PageRange, nodes: usize, params: &Params) -> Result<Sampling, NumaError> {
        Ok(Sampling {
            hints: AccessHints::new(
                range.start(),
                range.len(),
                nodes,
                1,
                params.reset_interval_ns,
            ),
            migrator: Migrator::new(range, *params)?,
        })
    }

    /// Record an access to `[addr, addr + len)` by `node`.
    pub(crate) fn touch(&mut self, addr: usize, len: usize, node: usize, write: bool, now: u64) {
        self.hints.touch(addr, len, node, write, now);
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
    std::thread::Builder::new()
        .name("partita-numa-sampler".into())
        .spawn(move || run(weak, params))
        .map(drop)
        .inspect_err(|_| numa.sampler_started.store(false, Ordering::Release))
}

fn run(numa: Weak<PoolNuma>, sp: SamplerParams) {
    loop {
        std::thread::sleep(sp.interval);
        let Some(n) = numa.upgrade() else { return };
        if n.stop.load(Ordering::Relaxed) {
            return;
        }
        let trigger = sp
            .trigger
            .or(n.lock_report().trigger)
            .unwrap_or(Params::default().trigger);
        let mut params = Params::with_trigger(trigger);
        params.reset_interval_ns = sp.interval.as_nanos() as u64;
        if let Err(e) = round(&n, &params) {
            tracing::warn!(error = %e, "numa: sampler round failed");
        }
    }
}

/// One policy round over every registered region (under the regions lock, so no region is
/// unmapped while its pages move).
fn round(numa: &PoolNuma, params: &Params) -> Result<(), NumaError> {
    let now = numa.now_ns();
    let mut total = SamplerReport {
        rounds: 1,
        ..Default::default()
    };
    let regions = numa.lock_regions();
    for region in regions.iter() {
        let mut slot = region.sampling.lock().unwrap_or_else(|p| p.into_inner());
        let s = match slot.as_mut() {
            Some(s) => s,
            None => slot.insert(Sampling::new(region.range, nodes_count(), params)?),
        };
        let plan = s.migrator.plan(s.hints.table(), now, false);
        total.left_shared_written += shared_written(s, params, now) as u64;
        let done = s.migrator.apply(&plan, s.hints.table_mut(), now)?;
        total.migrated += done.migrated as u64;
        total.failed += done.failed as u64;
        total.not_executed += done.not_executed as u64;
    }
    drop(regions);
    let mut r = numa.lock_report();
    let acc = r.sampler.get_or_insert_with(SamplerReport::default);
    acc.rounds += total.rounds;
    acc.migrated += total.migrated;
    acc.failed += total.failed;
    acc.not_executed += total.not_executed;
    acc.left_shared_written += total.left_shared_written;
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
