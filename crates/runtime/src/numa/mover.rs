//! The plumbing of "memory follows CPUs": the follower thread and the paced mover. The rules
//! it applies are the pure functions of `follow.rs`.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use partita_numa::{locate, mbind, move_pages_to, MbindFlags, MemPolicy, MoveScope, NumaError};

use super::follow::{self, FollowParams};
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

/// Measures the move cost and remote penalty once (Verghese's rule needs both). On an
/// emulated machine the measured penalty may be ≤ 0; the SLIT distance ratio then stands in
/// (remote ≈ local × distance / 10), so the rule still sees the topology's intent.
fn measure_trigger() -> Option<u32> {
    let mv = partita_numa::calibrate::move_cost_ns(64, 64)
        .ok()
        .flatten()?;
    let mut pen = partita_numa::calibrate::remote_penalty_ns(1 << 20)
        .ok()
        .flatten();
    if pen.is_none_or(|p| p <= 0.0) {
        let t = partita_numa::Topology::current().ok()?;
        let (a, b) = (t.nodes().first()?.id, t.nodes().get(1)?.id);
        let local = partita_numa::calibrate::load_latency_ns(a, a, 1 << 20).ok()?;
        let d = f64::from(t.distance(a, b)?);
        pen = Some(local * (d / 10.0 - 1.0));
    }
    if !follow::worth_moving(Some(mv), pen) {
        return None;
    }
    Some(partita_numa::policy::Params::derived_trigger(
        mv as u64,
        pen.unwrap_or(1.0) as u64,
    ))
}

/// The follower thread: waits for a new CPU set to settle, then moves the registered
/// memory to its node. Exits when the pool (or its NUMA state) is gone.
fn follower(numa: std::sync::Weak<PoolNuma>, pool: PoolRef, params: FollowParams) {
    // Measuring takes a while (pointer chases on both nodes): on its own thread, so the
    // follower watches the CPU set from the start.
    let for_trigger = numa.clone();
    let _ = std::thread::Builder::new()
        .name("partita-numa-calibrate".into())
        .spawn(move || {
            if let (Some(t), Some(n)) = (measure_trigger(), for_trigger.upgrade()) {
                n.lock_report().trigger = Some(t);
            }
        });
    let mut seen = u64::MAX;
    let mut pending: Option<(Instant, Option<Vec<usize>>)> = None;
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
            pending = Some((Instant::now(), cpus));
            continue;
        }
        drop(reg);
        let Some((since, cpus)) = pending.take_if(|(t, _)| t.elapsed() >= params.settle) else {
            continue;
        };
        let Some((main, allowed)) = cpus.and_then(|c| follow::follow_target(&n.nodes_of(&c)))
        else {
            continue; // unconfined or no CPUs: nothing to follow
        };
        let regions = n.lock_regions().clone();
        let epoch_now = || {
            pool.upgrade()
                .map(|r| r.control.cpus_epoch.load(Ordering::Acquire))
        };
        let stale = || epoch_now() != Some(seen);
        match move_paced(&n, &regions, main, &allowed, since, &params, &stale) {
            Ok(out) if out.moved > 0 || out.failed > 0 => {
                tracing::info!("{out}");
                let mut r = n.lock_report();
                r.follows += 1;
                r.pages_moved += out.moved as u64;
                r.pages_failed += out.failed as u64;
                r.last_follow = Some(out);
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "numa: follow failed"),
        }
    }
}

fn move_paced(
    numa: &PoolNuma,
    regions: &[Region],
    main: u32,
    allowed: &[u32],
    since: Instant,
    params: &FollowParams,
    stale: &dyn Fn() -> bool,
) -> Result<FollowOutcome, NumaError> {
    move_regions_with(numa, regions, main, allowed, Some((params, stale)), since)
}

/// Moves every page of `regions` to `node` now, unpaced (an explicit call).
pub(super) fn move_regions(
    numa: &PoolNuma,
    regions: &[Region],
    node: u32,
) -> Result<FollowOutcome, NumaError> {
    move_regions_with(numa, regions, node, &[node], None, Instant::now())
}

/// Moves the stray pages of `regions` (those on nodes outside `allowed`) to `main`, points
/// their policy at `main`, and counts where the pages are afterwards. `pacing`: chunk size,
/// duty cycle and a "CPU set changed" probe (the follower); `None`: all at once.
fn move_regions_with(
    numa: &PoolNuma,
    regions: &[Region],
    main: u32,
    allowed: &[u32],
    pacing: Option<(&FollowParams, &dyn Fn() -> bool)>,
    since: Instant,
) -> Result<FollowOutcome, NumaError> {
    let mut out = FollowOutcome {
        node: main,
        ..Default::default()
    };
    let chunk = pacing.map_or(partita_numa::DEFAULT_BATCH, |p| p.0.chunk.max(1));
    'regions: for region in regions {
        let addrs: Vec<usize> = region.range.page_addresses().collect();
        let strays = follow::stray_pages(&locate(region.range)?, allowed);
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
    for region in regions.iter().filter(|r| regs.iter().any(|g| g.id == r.id)) {
        let st = locate(region.range)?;
        out.present += st.iter().filter(|s| s.node().is_some()).count();
        out.on_node += st.iter().filter(|s| s.node() == Some(main)).count();
    }
    out.elapsed = since.elapsed().max(Duration::from_nanos(1));
    Ok(out)
}
