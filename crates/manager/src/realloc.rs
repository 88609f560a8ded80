//! Reallocation as plan, then apply.
//!
//! Every change that can move CPUs (a doorbell, a registration, a departure, a runnable-count
//! change of uncontrolled processes, the periodic tick) goes through here:
//!
//! 1. The change is recorded in the registry (a page's demand is already there) and the
//!    [`Doorbell`] is rung. Ringing only bumps a counter under a small mutex: no caller ever
//!    waits for a reallocation unless it asks to ([`Doorbell::wait_served`]).
//! 2. The reallocator thread (one per manager, so at most one reallocation is in flight)
//!    takes the registry's lock and computes a [`Plan`] with [`plan`]: a pure function of
//!    plain data (the allocator's input, what each application was last sent, the CPU sets
//!    of the uncontrolled processes) that returns the allocation and the list of
//!    [`Effect`]s that would make the world match it. The registry records what the plan
//!    publishes (so the next plan is computed against it) and resolves the effects into a
//!    [`Batch`] holding what applying needs (page handles, pids, partition names).
//! 3. The lock is released, then the batch is applied ([`apply`]): pages published (seqlock
//!    write and futex wake; lowered targets first, [`revocations_first`]), affinities set, cgroup CPU sets written, departed processes'
//!    affinities restored. Registrations, doorbells and status requests proceed meanwhile.
//! 4. Rings that arrived during steps 2–3 are merged: the thread runs one more round that
//!    covers all of them, however many there were.
//! 5. A CPU revoked from a controlled application is handed to its new owner only once the
//!    application has let go of it ([`handover`]): the plan publishes the lowered target at
//!    once but keeps the CPU in the releasing application's page and affinity and out of
//!    every other application's until its reported active workers are down to the target
//!    (its runtime rings when its worker parks) or `handover_us` has passed; the plan's
//!    [`Plan::recheck_at`] schedules a round at that deadline ([`Doorbell::schedule`]).
//!
//! Growth and revocation stay immediate: a ring while no round is in flight starts one at
//! once, and a ring during a round is served right after it, with the demands of that
//! moment. An application's doorbell, when rounds have been rare and short lately, runs its
//! round on the connection's own thread instead of waking the reallocator thread
//! ([`Doorbell::ring_or_claim`]): on a machine whose CPUs are all busy, that wake-up alone
//! took p99 500–600 µs (`cargo run --release --example reaction -- 300`, hop "reallocator
//! starts its round", docs/bench/manager.md §2). The claim keeps "one round in flight".
//!
//! Why a page has a single writer: only the round in flight publishes (on the reallocator
//! thread or a claimant's), rounds never overlap, and each applies the batch it planned, in
//! the order they ran, so a page's seqlock never sees two writers and a departed process's
//! affinity is restored after (never before) any batch that changed it.

use crate::alloc::{self, AllocInput, AllocOutput, AppId, History, MemberId};
use crate::enforce::Enforcer;
use crate::proc_ref::ProcRef;
use partita_protocol::page::PageMap;
use partita_protocol::CpuSet;
use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Stamp one hop of a reaction (see partita-runtime's `control::hop`): a `trace` event of
/// target `partita::hop` with `CLOCK_MONOTONIC` ns; free unless a subscriber enables it.
macro_rules! hop {
    ($name:literal $(, $k:ident = $v:expr)* $(,)?) => {
        tracing::trace!(
            target: "partita::hop",
            hop = $name,
            t = partita_protocol::page::monotonic_ns()
            $(, $k = $v)*
        )
    };
}
pub(crate) use hop;

/// What planning needs to know about one application (plain data).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AppView {
    /// Its id.
    pub id: AppId,
    /// Its partition's index.
    pub partition: usize,
    /// Worker threads in its pool.
    pub pool_size: u32,
    /// It follows only its CPU set, at full size.
    pub partition_only: bool,
    /// The manager may set its affinity (same user, or the manager is privileged).
    pub may_confine: bool,
    /// What its page says now: `(target, cpus)`, `None` before the first publish.
    pub published: Option<(u32, CpuSet)>,
    /// The demand its page reports (its own, before the bandwidth policy parks it).
    pub demand: u32,
    /// The active workers its page reports (`None`: cannot be read, so no hand-over).
    pub active: Option<u32>,
    /// When its pending revocation was published (monotonic ns; [`handover`]).
    pub revoked_at: Option<u64>,
}

/// The input of [`plan`].
#[derive(Debug, Clone)]
pub(crate) struct PlanInput {
    /// The allocator's input (CPUs, partitions, demands).
    pub alloc: AllocInput,
    /// Every registered application, sorted by id.
    pub apps: Vec<AppView>,
    /// Every CPU the manager hands out.
    pub managed: CpuSet,
    /// Per partition, the CPU set its uncontrolled processes are confined to now.
    pub uncontrolled_sets: Vec<CpuSet>,
    /// Now (monotonic ns).
    pub now_ns: u64,
    /// The hand-over deadline `D` (ns; 0: no hand-over, revoked CPUs move at once).
    pub handover_ns: u64,
}

/// One change to the world.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Effect {
    /// Write `(target, cpus)` into the application's page and wake its client.
    Publish {
        /// The application.
        app: AppId,
        /// Workers it should run.
        target: u32,
        /// CPUs it should run on (empty: no confinement).
        cpus: CpuSet,
    },
    /// Set the affinity of every thread of the application's process.
    Affinity {
        /// The application.
        app: AppId,
        /// The CPUs.
        cpus: CpuSet,
    },
    /// Move a partition's uncontrolled processes to this CPU set.
    Uncontrolled {
        /// The partition's index.
        partition: usize,
        /// The CPUs.
        cpus: CpuSet,
    },
}

/// A reallocation: the allocation and the effects that make the world match it.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// The allocator's output.
    pub allocation: AllocOutput,
    /// What to change, in order.
    pub effects: Vec<Effect>,
    /// The applications releasing CPUs after this plan, with when their revocation was
    /// published (the next plan's [`AppView::revoked_at`]; absent: none pending).
    pub revoked: BTreeMap<AppId, u64>,
    /// When a round must run to hand over CPUs whose deadline passes (monotonic ns).
    pub recheck_at: Option<u64>,
}

/// Compute the allocation and the effects that apply it. Pure: the only state it changes is
/// the allocator's `history`. An application whose `(target, cpus)` would not change gets
/// no effect.
pub(crate) fn plan(input: &PlanInput, history: &mut History) -> Plan {
    let allocation = alloc::allocate(&input.alloc, history);
    let mut effects = Vec::new();
    // Union of CPUs per partition (for partition-only applications given 0).
    let mut partition_sets = vec![CpuSet::new(); input.alloc.partitions.len()];
    let partition_of = |id: AppId| {
        input
            .apps
            .binary_search_by_key(&id, |a| a.id)
            .map_or(0, |i| input.apps[i].partition)
    };
    for (m, (_, set)) in &allocation.members {
        let k = match m {
            MemberId::Uncontrolled(k) => *k,
            MemberId::App(id) => partition_of(*id),
        };
        if let Some(s) = partition_sets.get_mut(k) {
            s.union_with(set);
        }
    }
    let transit = handover::transit(input, &allocation);
    for app in &input.apps {
        let (target, cpus) = desired(app, &allocation, &partition_sets, input.managed, &transit);
        if app.published == Some((target, cpus)) {
            continue;
        }
        effects.push(Effect::Publish {
            app: app.id,
            target,
            cpus,
        });
        let cpus_changed = app.published.map(|p| p.1) != Some(cpus);
        if cpus_changed && !cpus.is_empty() && app.may_confine {
            effects.push(Effect::Affinity { app: app.id, cpus });
        }
    }
    for (k, before) in input.uncontrolled_sets.iter().enumerate() {
        let set = allocation.cpus(MemberId::Uncontrolled(k));
        if set != *before && !set.is_empty() {
            effects.push(Effect::Uncontrolled {
                partition: k,
                cpus: set,
            });
        }
    }
    Plan {
        allocation,
        effects,
        recheck_at: transit.deadline(input.handover_ns),
        revoked: transit
            .releasing
            .iter()
            .map(|(&id, &(t, _))| (id, t))
            .collect(),
    }
}

/// What an application's page should say under `allocation` (a controlled one's, with the
/// hand-over: [`handover::controlled_page`]).
fn desired(
    app: &AppView,
    allocation: &AllocOutput,
    partition_sets: &[CpuSet],
    managed: CpuSet,
    transit: &handover::Transit,
) -> (u32, CpuSet) {
    if !app.partition_only {
        return handover::controlled_page(app, allocation, transit);
    }
    let set = allocation.cpus(MemberId::App(app.id));
    let union = partition_sets
        .get(app.partition)
        .copied()
        .unwrap_or_default();
    let cpus = if !set.is_empty() {
        set
    } else if !union.is_empty() {
        union
    } else {
        managed
    };
    (app.pool_size, cpus)
}

/// A plan's effects resolved to what applying them needs, built under the registry's lock.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    /// Pages to publish `(target, cpus)` to.
    pub publish: Vec<(Arc<PageMap>, u32, CpuSet)>,
    /// Processes whose threads get this affinity (pidfd-backed: never a reused pid).
    pub affinity: Vec<(ProcRef, CpuSet)>,
    /// Partitions (name, tracked processes) whose uncontrolled processes get this CPU set.
    pub uncontrolled: Vec<(String, Vec<ProcRef>, CpuSet)>,
    /// Departed applications' processes: restore their affinity if they still run.
    pub restore: Vec<ProcRef>,
    /// When the next round must run even if nothing rings: a hand-over deadline
    /// (monotonic ns).
    pub recheck_at: Option<u64>,
}

/// Apply a batch outside the registry's lock. Errors are logged: a process that exited or
/// refuses a new affinity does not stop the others.
pub(crate) fn apply(batch: Batch, enforcer: &mut Enforcer) {
    if !batch.publish.is_empty() {
        // Before the writes: a woken client may run before this thread stamps again.
        hop!("publish", pages = batch.publish.len());
    }
    // Only this thread publishes, so a page's current target is what it was last sent.
    let changes: Vec<(u32, u32)> = batch
        .publish
        .iter()
        .map(|(page, target, _)| (page.manager.read().target, *target))
        .collect();
    for i in revocations_first(&changes) {
        let (page, target, cpus) = &batch.publish[i];
        page.manager.publish(*target, cpus);
    }
    for (proc, cpus) in &batch.affinity {
        if let Err(e) = enforcer.confine_process(proc, cpus, false) {
            tracing::debug!(pid = proc.pid(), error = %e, "affinity not applied");
        }
    }
    for (name, procs, cpus) in &batch.uncontrolled {
        if let Err(e) = enforcer.update_uncontrolled(name, procs, cpus) {
            tracing::debug!(partition = %name, error = %e, "confinement not updated");
        }
    }
    for proc in batch.restore {
        if proc.alive() {
            enforcer.restore_process(&proc);
        } else {
            enforcer.forget_dead();
        }
    }
}

/// The `Instant` of a monotonic-clock time in ns (both are `CLOCK_MONOTONIC`; a past time
/// is now).
pub(crate) fn instant_at(ns: u64) -> Instant {
    let now = partita_protocol::page::monotonic_ns();
    Instant::now() + Duration::from_nanos(ns.saturating_sub(now))
}

/// The order in which to publish `(before, after)` targets: lowered targets first, then the
/// rest, each group in its given order. A client that must park workers is woken before
/// the ones that may grow: until its workers park, the CPUs it gives up are contested, and
/// each wake-up on the way (the page's futex, then the worker's safe point) may wait for a
/// CPU; the grantees' wake-ups follow a few microseconds later.
pub(crate) fn revocations_first(changes: &[(u32, u32)]) -> Vec<usize> {
    let (mut first, rest): (Vec<usize>, Vec<usize>) =
        (0..changes.len()).partition(|&i| changes[i].1 < changes[i].0);
    first.extend(rest);
    first
}

/// Coalescing doorbell: any number of rings while a round is in flight make one more round.
///
/// A round runs on the reallocator thread, or on the thread that rang when it may run it at
/// once ([`Doorbell::ring_or_claim`]); either way at most one is in flight.
#[derive(Debug, Default)]
pub(crate) struct Doorbell {
    state: Mutex<Bell>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct Bell {
    /// Rings so far (a ring's number is the round that will serve it, at the latest).
    requested: u64,
    /// The last ring number a finished round covered.
    served: u64,
    /// Rounds run.
    rounds: u64,
    stop: bool,
    /// A round is running (on the reallocator thread or on a thread that claimed it).
    in_flight: bool,
    /// When the round in flight started.
    started: Option<Instant>,
    /// When the last round finished and how long it took.
    last: Option<(Instant, Duration)>,
    /// A round must start by then even if nothing rings (a hand-over deadline); a round
    /// that starts at or after it covers it.
    timer: Option<Instant>,
}

impl Bell {
    /// A round starts now: it covers a timer that has come.
    fn start(&mut self, now: Instant) {
        self.in_flight = true;
        self.started = Some(now);
        if self.timer.is_some_and(|t| t <= now) {
            self.timer = None;
        }
    }
}

/// A caller may run a round itself only if the last one finished at least this long ago
/// (rings are rare: a storm of them is coalesced by the reallocator thread instead)…
pub(crate) const CLAIM_QUIET: Duration = Duration::from_millis(1);
/// …and took at most this long (a large registry's round stays off the caller's thread).
pub(crate) const CLAIM_MAX_ROUND: Duration = Duration::from_micros(300);

/// Whether a ringer may run the round itself at `now`, given when the last round finished
/// and how long it took (`None`: no round yet), and whether a hand-over is pending (a round
/// is scheduled at its deadline): then the ring is most likely the releasing application's
/// worker that parked, and its CPU's new owner waits for this round, so the quiet spell is
/// not required.
pub(crate) fn may_claim(last: Option<(Instant, Duration)>, now: Instant, handover: bool) -> bool {
    last.is_none_or(|(end, took)| {
        (handover || now.saturating_duration_since(end) >= CLAIM_QUIET) && took <= CLAIM_MAX_ROUND
    })
}

/// A round claimed by [`Doorbell::ring_or_claim`]'s caller: run it, then drop the claim,
/// which records the round as finished (also if the round panicked), or give it back to the
/// reallocator thread with [`Claim::hand_over`].
#[derive(Debug)]
pub(crate) struct Claim<'a> {
    bell: &'a Doorbell,
    covered: u64,
}

impl Claim<'_> {
    /// The caller cannot run the round now: the reallocator thread runs it.
    pub(crate) fn hand_over(self) {
        let mut b = self.bell.bell();
        b.in_flight = false;
        b.started = None;
        self.bell.changed.notify_all();
        drop(b);
        std::mem::forget(self);
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.bell.finished(self.covered);
    }
}

impl Doorbell {
    fn bell(&self) -> MutexGuard<'_, Bell> {
        // Nothing panics while holding this lock; if something did, the counters are still
        // consistent (each update is one statement), so keep using them.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Ask for a reallocation; returns the ring's number (for [`Doorbell::wait_served`]).
    pub(crate) fn ring(&self) -> u64 {
        let mut b = self.bell();
        b.requested += 1;
        self.changed.notify_all();
        b.requested
    }

    /// Ring; when no round is in flight and rounds have been rare and short lately
    /// ([`CLAIM_QUIET`], [`CLAIM_MAX_ROUND`]), claim the round that serves this ring instead
    /// of waking the reallocator thread: the caller runs it now. Rings that arrive meanwhile
    /// wait for it and are merged into the next round, as with the thread.
    pub(crate) fn ring_or_claim(&self) -> Option<Claim<'_>> {
        let mut b = self.bell();
        b.requested += 1;
        let now = Instant::now();
        if !b.in_flight && !b.stop && may_claim(b.last, now, b.timer.is_some()) {
            b.start(now);
            return Some(Claim {
                bell: self,
                covered: b.requested,
            });
        }
        self.changed.notify_all();
        None
    }

    /// Block until a round that started after ring `n` has finished (or the bell stopped).
    pub(crate) fn wait_served(&self, n: u64) {
        let mut b = self.bell();
        while b.served < n && !b.stop {
            b = self.changed.wait(b).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Rounds run so far.
    #[cfg(test)]
    pub(crate) fn rounds(&self) -> u64 {
        self.bell().rounds
    }

    /// Whether [`Doorbell::stop`] was called (the manager is shutting down).
    pub(crate) fn is_stopped(&self) -> bool {
        self.bell().stop
    }

    /// Stop the reallocator thread after its current round.
    pub(crate) fn stop(&self) {
        self.bell().stop = true;
        self.changed.notify_all();
    }

    /// Run a round at `at` at the latest, even if nothing rings (the earliest of the
    /// scheduled times counts).
    pub(crate) fn schedule(&self, at: Instant) {
        let mut b = self.bell();
        b.timer = Some(b.timer.map_or(at, |t| t.min(at)));
        self.changed.notify_all();
    }

    /// The reallocator's side: wait for unserved rings (or a scheduled time that has come)
    /// and no round in flight; the ring number a round started now covers, or `None` when
    /// stopped.
    fn next(&self) -> Option<u64> {
        let mut b = self.bell();
        loop {
            if b.stop {
                return None;
            }
            let now = Instant::now();
            let due = b.timer.is_some_and(|t| t <= now);
            if !b.in_flight && (b.requested != b.served || due) {
                b.start(now);
                return Some(b.requested);
            }
            b = match b.timer {
                Some(t) if !b.in_flight && t > now => {
                    let r = self.changed.wait_timeout(b, t - now);
                    r.map_or_else(|p| p.into_inner().0, |r| r.0)
                }
                _ => self.changed.wait(b).unwrap_or_else(|p| p.into_inner()),
            };
        }
    }

    fn finished(&self, covered: u64) {
        let mut b = self.bell();
        b.served = b.served.max(covered);
        b.rounds += 1;
        b.in_flight = false;
        let now = Instant::now();
        b.last = b
            .started
            .take()
            .map(|s| (now, now.saturating_duration_since(s)));
        self.changed.notify_all();
    }
}

/// The time slice the manager's reacting threads ask for (see [`react_quickly`]).
const REACT_SLICE: Duration = Duration::from_micros(100);

/// Let the calling thread preempt CPU-bound threads as soon as it is woken (a short EEVDF
/// slice; no extra CPU share): the doorbell handlers and the reallocator sleep almost always,
/// and every wake-up they wait for is on a reaction's path. On a machine whose CPUs are all
/// busy with workers, a woken thread could otherwise wait up to a full default slice
/// (milliseconds). Best effort. Measured (docs/bench/manager.md §2, 3 alternating runs each at
/// load 11-14): no change the noise let show; kept because it asks for no CPU share.
pub(crate) fn react_quickly() {
    if let Err(e) = partita_protocol::sys::request_short_slice(REACT_SLICE) {
        tracing::debug!(error = %e, "sched_setattr: no short slice for this thread");
    }
}

/// Start the reallocator thread: it runs `round` once per batch of rings until
/// [`Doorbell::stop`].
pub(crate) fn spawn(
    bell: Arc<Doorbell>,
    mut round: impl FnMut() + Send + 'static,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("partita-realloc".into())
        .spawn(move || {
            react_quickly();
            while let Some(covered) = bell.next() {
                round();
                bell.finished(covered);
            }
        })
}

pub(crate) mod handover;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_handover;
