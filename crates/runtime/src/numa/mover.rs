//! The plumbing of "memory follows CPUs": the follower thread and the paced mover. The rules
//! it applies are the pure functions of `follow.rs` (where memory belongs, which pages stray,
//! Verghese's cost rule, pacing).

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

use partita_numa::{locate, mbind, move_pages_to, MbindFlags, MemPolicy, MoveScope, NumaError};

use super::follow::{self, Costs, FollowParams, Verdict};
use super::{FollowOutcome, PoolNuma, PoolRef, Region};

/// Starts the pool's follower thread once.
pub(super) fn ensure_follower(numa: &Arc<PoolNuma>, pool: PoolRef) {
    if numa.follower_started.swap(true, Ordering::AcqRel) {
        return;
    }
    let weak_numa = Arc::downgrade(numa);
    let spawned = std::thread::Builder::new()
        .name("partita-numa-follow".into())
        .spawn(move || follower(weak_numa, pool, FollowParams::default()));
    if let Err(e) = spawned {
        numa.follower_started.store(false, Ordering::Release);
        tracing::warn!(error = %e, "numa: cannot start the follower thread; memory will not follow CPUs");
    }
}

/// Measures the move cost and remote penalty (Verghese's rule needs both). The move cost is
/// the minimum of seven short measurements (4 pages each way, well under a scheduler time
/// slice): the calibrating thread shares the pool's CPUs, and being preempted only ever adds
/// time (longer measurements beside a busy worker read 1.7–2.2 ms per page against the
/// guest's 0.03–0.2 ms, and one deferred a hot region). The thread CPU clock would ignore
/// preemption, but under emulation it can tick in jiffies (samples read 0 ns per page). On an emulated machine the measured penalty may be ≤ 0;
/// the SLIT distance ratio then stands in (remote ≈ local × distance / 10), so the rule
/// still sees the topology's intent.
fn measure_costs() -> Option<Costs> {
    use partita_numa::calibrate;
    let min = |xs: &mut dyn Iterator<Item = Option<f64>>| -> Option<f64> {
        xs.flatten().reduce(f64::min)
    };
    let mv = min(&mut (0..7).map(|_| calibrate::move_cost_ns(4, 4).ok().flatten()))?;
    let mut pen = calibrate::remote_penalty_ns(1 << 20).ok().flatten();
    if pen.is_none_or(|p| p <= 0.0) {
        let t = partita_numa::Topology::current().ok()?;
        let (a, b) = (t.nodes().first()?.id, t.nodes().get(1)?.id);
        let local = calibrate::load_latency_ns(a, a, 1 << 20).ok()?;
        let d = f64::from(t.distance(a, b)?);
        pen = Some(local * (d / 10.0 - 1.0));
    }
    Some(Costs {
        move_ns_per_page: mv,
        remote_penalty_ns: pen?,
        measured: true,
    })
}

/// This machine's costs, measured once per process (`None` until measured, or where they
/// cannot be: one node, a refused call).
static MACHINE_COSTS: OnceLock<Option<Costs>> = OnceLock::new();

/// The measured costs, if calibration has finished.
pub(super) fn machine_costs() -> Option<Costs> {
    MACHINE_COSTS.get().copied().flatten()
}

/// Starts measuring the machine's costs, once per process, on a thread of its own: it takes
/// a while (page moves and pointer chases on both nodes), so followers watch their CPU sets
/// from the start, with the thesis' costs meanwhile. Once per process, not per pool: every
/// measurement competes with the pools' workers for their CPUs and for the address space.
fn ensure_calibration() {
    static STARTED: std::sync::Once = std::sync::Once::new();
    STARTED.call_once(|| {
        let spawned = std::thread::Builder::new()
            .name("partita-numa-calibrate".into())
            .spawn(|| {
                let _ = MACHINE_COSTS.set(measure_costs());
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "numa: cannot calibrate; the cost rule uses the thesis' costs");
        }
    });
}

/// A CPU set the follower is acting on.
struct Pending {
    /// When the follower noticed it (the outcome's elapsed time counts from here).
    since: Instant,
    cpus: Option<Vec<usize>>,
    /// When to look (settle time, then the deferral back-off).
    due: Instant,
    deferrals: u32,
    /// Start of the current observation window and each region's touch count then.
    window: Instant,
    touches: HashMap<u64, u64>,
}

impl Pending {
    fn new(cpus: Option<Vec<usize>>, numa: &PoolNuma, settle: Duration) -> Pending {
        let now = Instant::now();
        Pending {
            since: now,
            cpus,
            due: now + settle,
            deferrals: 0,
            window: now,
            touches: touch_snapshot(numa),
        }
    }
}

fn touch_snapshot(numa: &PoolNuma) -> HashMap<u64, u64> {
    numa.lock_regions()
        .iter()
        .map(|r| (r.id, r.touches.load(Ordering::Relaxed)))
        .collect()
}

/// The follower thread: waits for a new CPU set to settle, then moves the workers' homes and
/// the registered memory that the cost rule says is worth moving to the set's node. Exits
/// when the pool (or its NUMA state) is gone.
fn follower(numa: Weak<PoolNuma>, pool: PoolRef, params: FollowParams) {
    ensure_calibration();
    let mut seen = u64::MAX;
    let mut pending: Option<Pending> = None;
    loop {
        std::thread::sleep(follow::POLL);
        let (Some(n), Some(reg)) = (numa.upgrade(), pool.upgrade()) else {
            return;
        };
        if n.stop.load(Ordering::Relaxed) {
            return;
        }
        let epoch = reg.control.cpus_epoch.load(Ordering::Acquire);
        if epoch != seen {
            seen = epoch;
            let cpus = reg
                .control
                .cpus
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            pending = Some(Pending::new(cpus, &n, params.settle));
            continue;
        }
        drop(reg);
        let Some(p) = pending.as_mut().filter(|p| p.due <= Instant::now()) else {
            continue;
        };
        let Some((main, allowed)) = p
            .cpus
            .as_ref()
            .and_then(|c| follow::follow_target(&n.nodes_of(c)))
        else {
            pending = None; // unconfined or no CPUs: nothing to follow
            continue;
        };
        let stale = || {
            pool.upgrade()
                .map(|r| r.control.cpus_epoch.load(Ordering::Acquire))
                != Some(seen)
        };
        let ctx = Pass {
            numa: &n,
            main,
            allowed: &allowed,
            params: &params,
            stale: &stale,
        };
        move_homes(&ctx, p.since);
        match follow_regions(&ctx, p) {
            Ok(deferred) if deferred => {
                p.due = Instant::now() + follow::defer_delay(params.settle, p.deferrals);
                p.deferrals += 1;
                p.window = Instant::now();
                p.touches = touch_snapshot(&n);
            }
            Ok(_) => pending = None,
            Err(e) => {
                tracing::warn!(error = %e, "numa: follow failed");
                pending = None;
            }
        }
    }
}

/// One follow pass's fixed inputs.
struct Pass<'a> {
    numa: &'a PoolNuma,
    main: u32,
    allowed: &'a [u32],
    params: &'a FollowParams,
    stale: &'a dyn Fn() -> bool,
}

/// Moves the workers' own pages (stack, thread-locals, counters, deque) to the pool's node: few
/// pages, touched by every task, so first and unpaced; the cost rule with no counts (hot).
fn move_homes(ctx: &Pass<'_>, since: Instant) {
    let numa = ctx.numa;
    let mut out = FollowOutcome {
        node: ctx.main,
        ..Default::default()
    };
    let costs = numa.costs();
    let homes = numa.lock_homes();
    let parts: Vec<_> = homes.iter().flat_map(|h| h.parts()).collect();
    for (what, range) in &parts {
        let Ok(status) = locate(*range) else { continue };
        let strays = follow::stray_pages(&status, ctx.allowed);
        let d = follow::cost_rule(strays.len(), None, costs);
        if d.verdict != Verdict::MigrateNow {
            if !strays.is_empty() {
                tracing::info!("numa-home: {what}: not moved: {}", d.why);
            }
            continue;
        }
        let addrs: Vec<usize> = range.page_addresses().collect();
        let batch: Vec<usize> = strays.iter().map(|&i| addrs[i]).collect();
        match move_pages_to(&batch, ctx.main, batch.len(), MoveScope::Exclusive) {
            Ok(st) => {
                let moved = st.iter().filter(|s| s.node() == Some(ctx.main)).count();
                out.moved += moved;
                out.failed += st.len() - moved;
            }
            Err(e) => tracing::warn!(error = %e, "numa: moving a worker's {what} failed"),
        }
    }
    if out.moved == 0 && out.failed == 0 {
        return;
    }
    for (_, range) in &parts {
        if let Ok(st) = locate(*range) {
            out.present += st.iter().filter(|s| s.node().is_some()).count();
            out.on_node += st.iter().filter(|s| s.node() == Some(ctx.main)).count();
        }
    }
    drop(homes);
    out.elapsed = since.elapsed().max(Duration::from_nanos(1));
    tracing::info!("numa-home: workers' own {out}");
    let mut r = numa.lock_report();
    r.pages_moved += out.moved as u64;
    r.pages_failed += out.failed as u64;
    r.last_home_follow = Some(out);
}

/// Applies the cost rule to every registered region with stray pages and moves the ones it
/// says to (paced). Returns whether any region was deferred (look again later).
fn follow_regions(ctx: &Pass<'_>, p: &Pending) -> Result<bool, NumaError> {
    let numa = ctx.numa;
    let regions = numa.lock_regions().clone();
    let costs = numa.costs();
    let window = p.window.elapsed();
    let mut to_move: Vec<(&Region, Vec<usize>)> = Vec::new();
    let mut deferred = false;
    for region in &regions {
        let strays = follow::stray_pages(&locate(region.range)?, ctx.allowed);
        if strays.is_empty() {
            continue;
        }
        let touches = region.hinted.load(Ordering::Relaxed).then(|| {
            let before = p.touches.get(&region.id).copied().unwrap_or(0);
            region
                .touches
                .load(Ordering::Relaxed)
                .saturating_sub(before)
        });
        let expected = follow::expected_remote(
            touches,
            window,
            strays.len(),
            region.range.pages(),
            ctx.params.horizon,
        );
        let d = follow::cost_rule(strays.len(), expected, costs);
        let what = match d.verdict {
            Verdict::MigrateNow => "moving",
            Verdict::Defer => "not moved yet (deferred)",
            Verdict::Never => "not moved",
        };
        tracing::info!(
            "numa-follow: region {} ({} of {} pages off node {}): {what}: {}",
            region.id,
            strays.len(),
            region.range.pages(),
            ctx.main,
            d.why
        );
        let mut r = numa.lock_report();
        if r.recent_decisions.len() == super::NumaReport::DECISIONS_KEPT {
            r.recent_decisions.remove(0);
        }
        r.recent_decisions
            .push(format!("region {}: {what}: {}", region.id, d.why));
        match d.verdict {
            Verdict::MigrateNow => {
                r.decisions_moved += 1;
                to_move.push((region, strays));
            }
            Verdict::Defer => {
                r.decisions_deferred += 1;
                deferred = true;
            }
            Verdict::Never => r.decisions_never += 1,
        }
    }
    if to_move.is_empty() {
        return Ok(deferred);
    }
    let out = move_strays(
        numa,
        &to_move,
        ctx.main,
        Some((ctx.params, ctx.stale)),
        p.since,
    )?;
    if out.moved > 0 || out.failed > 0 {
        tracing::info!("{out}");
        let mut r = numa.lock_report();
        r.follows += 1;
        r.pages_moved += out.moved as u64;
        r.pages_failed += out.failed as u64;
        r.last_follow = Some(out);
    }
    Ok(deferred)
}

/// Moves every page of `regions` to `node` now, unpaced (an explicit call: no cost rule).
pub(super) fn move_regions(
    numa: &PoolNuma,
    regions: &[Region],
    node: u32,
) -> Result<FollowOutcome, NumaError> {
    let mut all = Vec::with_capacity(regions.len());
    for r in regions {
        all.push((r, follow::stray_pages(&locate(r.range)?, &[node])));
    }
    move_strays(numa, &all, node, None, Instant::now())
}

/// Moves the given stray pages of each region to `main`, points the regions' policy at
/// `main`, and counts where their pages are afterwards. `pacing`: chunk size, duty cycle and
/// a "CPU set changed" probe (the follower); `None`: all at once.
fn move_strays(
    numa: &PoolNuma,
    regions: &[(&Region, Vec<usize>)],
    main: u32,
    pacing: Option<(&FollowParams, &dyn Fn() -> bool)>,
    since: Instant,
) -> Result<FollowOutcome, NumaError> {
    let mut out = FollowOutcome {
        node: main,
        ..Default::default()
    };
    let chunk = pacing.map_or(partita_numa::DEFAULT_BATCH, |p| p.0.chunk.max(1));
    'regions: for (region, strays) in regions {
        let addrs: Vec<usize> = region.range.page_addresses().collect();
        for part in strays.chunks(chunk) {
            if pacing.is_some_and(|p| (p.1)()) {
                out.interrupted = true;
                break 'regions;
            }
            let t = Instant::now();
            {
                let regs = numa.lock_regions();
                if !regs.iter().any(|r| r.id == region.id) {
                    continue 'regions; // dropped meanwhile: nothing left to move
                }
                let batch: Vec<usize> = part.iter().map(|&i| addrs[i]).collect();
                let st = move_pages_to(&batch, main, chunk, MoveScope::Exclusive)?;
                let moved = st.iter().filter(|s| s.node() == Some(main)).count();
                out.moved += moved;
                out.failed += st.len() - moved;
            }
            if let Some((p, _)) = pacing {
                std::thread::sleep(follow::pause_after(t.elapsed(), p.duty));
            }
        }
        let regs = numa.lock_regions();
        if regs.iter().any(|r| r.id == region.id) {
            // Pages faulted in from now on land on the new node too.
            mbind(region.range, MemPolicy::Preferred(main), MbindFlags::NONE)?;
        }
    }
    let regs = numa.lock_regions();
    for (region, _) in regions
        .iter()
        .filter(|(r, _)| regs.iter().any(|g| g.id == r.id))
    {
        let st = locate(region.range)?;
        out.present += st.iter().filter(|s| s.node().is_some()).count();
        out.on_node += st.iter().filter(|s| s.node() == Some(main)).count();
    }
    out.elapsed = since.elapsed().max(Duration::from_nanos(1));
    Ok(out)
}
