//! An elastic team of long-lived tasks separated by spin-then-block barriers: how an OpenMP
//! program runs, made to follow process control.
//!
//! An OpenMP parallel loop runs one long-lived thread per processor; every phase is split
//! statically among the threads, and a barrier ends the phase. The barrier spins for a while
//! (the partner is probably about to arrive), then blocks. When the program has more threads
//! than it has processors, a thread spins while the partner it waits for is descheduled: the
//! waste Tucker's thesis measures.
//!
//! A long-lived task never reaches a safe point of the pool, so the pool could never suspend
//! its worker. The team therefore adapts *at phase boundaries*: the last member to arrive at a
//! barrier (the leader) asks the pool how many workers it should run
//! ([`pool::target_workers`]) and decides the next phase's participants:
//!
//! - fewer: members whose rank is at or above the new count leave (their task returns, so their
//!   worker reaches a safe point and can be suspended);
//! - more: the leader spawns *joiner* tasks. A joiner is admitted at the first boundary after
//!   it actually starts running, never before: the barrier counts only members that are
//!   running, so a joiner that no worker picks up (the allocation fell again) delays nothing.
//!   Joiners that started but are not needed any more at a boundary are dismissed.
//! - none (the manager granted a zero quantum): every member leaves and the team pauses; one
//!   joiner stays queued in the pool, and when a worker runs it again (the quantum came), it
//!   resumes the team alone at the phase where it paused.
//!
//! Every waiter owns the cell its verdict is written into (continue with rank `r` among `n`
//! participants in phase `p`, or leave), so a slow waiter can never read a later boundary's
//! decision.

use crate::pool::{self, Scope, ThreadPool};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// One member's share of one phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PhaseCtx {
    /// Phase index, `0..phases`.
    pub phase: usize,
    /// This member's rank, `0..participants`.
    pub rank: usize,
    /// Members taking part in this phase; the phase's work is split among them.
    pub participants: usize,
}

impl PhaseCtx {
    /// The part of `0..len` this member handles (static, contiguous, balanced).
    ///
    /// ```
    /// use partita_workloads::team::PhaseCtx;
    /// let c = PhaseCtx { phase: 0, rank: 1, participants: 3 };
    /// assert_eq!(c.share(10), 3..6);
    /// ```
    pub fn share(&self, len: usize) -> std::ops::Range<usize> {
        let n = self.participants.max(1);
        (len * self.rank / n)..(len * (self.rank + 1) / n)
    }
}

/// What a team run observed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TeamStats {
    /// Boundaries at which the number of participants changed.
    pub resizes: u64,
    /// Joiner tasks spawned.
    pub joiners_spawned: u64,
    /// Barrier waits that gave up spinning and blocked.
    pub blocked_waits: u64,
    /// Sum over phases of participants (mean participants = this / phases).
    pub participant_phases: u64,
}

/// Encoded verdict of one boundary for one waiter: `0` not yet decided, [`LEAVE`], or
/// `1 + (phase << 32 | rank << 16 | participants)`.
const UNDECIDED: u64 = 0;
const LEAVE: u64 = u64::MAX;

fn encode(phase: usize, rank: usize, participants: usize) -> u64 {
    debug_assert!(rank < 1 << 16 && participants < 1 << 16 && phase < 1 << 31);
    1 + ((phase as u64) << 32 | (rank as u64) << 16 | participants as u64)
}

fn decode(v: u64) -> Option<PhaseCtx> {
    if v == LEAVE {
        return None;
    }
    let v = v - 1;
    Some(PhaseCtx {
        phase: (v >> 32) as usize,
        rank: ((v >> 16) & 0xffff) as usize,
        participants: (v & 0xffff) as usize,
    })
}

struct State {
    /// Participants of the current phase.
    members: usize,
    /// Members of the current phase waiting at its end barrier: (rank, verdict cell).
    arrived: Vec<(usize, Arc<AtomicU64>)>,
    /// Joiners that started and wait to be admitted.
    pending: Vec<Arc<AtomicU64>>,
    /// Joiners spawned that have not started yet.
    outstanding: usize,
    /// When `members` is 0 (paused), the phase the team resumes at.
    resume_phase: usize,
    /// Waiters currently blocked on the condvar.
    blocked: usize,
    done: bool,
    stats: TeamStats,
}

struct Team<'a, F> {
    target: &'a (dyn Fn() -> usize + Sync),
    body: &'a F,
    phases: usize,
    spin: Duration,
    max: usize,
    state: Mutex<State>,
    cv: Condvar,
    /// Phase currently running (only for diagnostics and the tests).
    phase: AtomicUsize,
}

/// Run `phases` phases of `body` on an elastic team in `pool`, with spin-then-block barriers
/// spinning for `spin` before blocking. `body` is called once per phase per participant.
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use std::time::Duration;
/// let pool = partita_workloads::pool::build(2, "doc").unwrap();
/// let cells: Vec<AtomicUsize> = (0..100).map(|_| AtomicUsize::new(0)).collect();
/// partita_workloads::team::run(&pool, 10, Duration::from_micros(50), |c| {
///     for i in c.share(cells.len()) {
///         cells[i].fetch_add(1, Ordering::Relaxed);
///     }
/// });
/// assert!(cells.iter().all(|c| c.load(Ordering::Relaxed) == 10));
/// ```
pub fn run<F>(pool: &ThreadPool, phases: usize, spin: Duration, body: F) -> TeamStats
where
    F: Fn(&PhaseCtx) + Sync,
{
    run_with_target(pool, &|| pool::target_workers(pool), phases, spin, body)
}

/// [`run`], with the number of participants wanted at each boundary given by `target`
/// instead of the pool's allocation (`0` pauses the team until a worker runs its queued
/// joiner). For experiments that steer participation themselves, and for tests.
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use std::time::Duration;
/// let pool = partita_workloads::pool::build(2, "doc").unwrap();
/// let count = AtomicUsize::new(0);
/// let stats = partita_workloads::team::run_with_target(&pool, &|| 1, 5, Duration::ZERO, |c| {
///     assert_eq!(c.participants, 1);
///     count.fetch_add(1, Ordering::Relaxed);
/// });
/// assert_eq!(count.load(Ordering::Relaxed), 5);
/// assert_eq!(stats.participant_phases, 5);
/// ```
pub fn run_with_target<F>(
    pool: &ThreadPool,
    target: &(dyn Fn() -> usize + Sync),
    phases: usize,
    spin: Duration,
    body: F,
) -> TeamStats
where
    F: Fn(&PhaseCtx) + Sync,
{
    if phases == 0 {
        return TeamStats::default();
    }
    let team = Team {
        target,
        body: &body,
        phases,
        spin,
        max: pool.current_num_threads().max(1),
        state: Mutex::new(State {
            members: 0,
            arrived: Vec::new(),
            pending: Vec::new(),
            outstanding: 0,
            resume_phase: 0,
            blocked: 0,
            done: false,
            stats: TeamStats::default(),
        }),
        cv: Condvar::new(),
        phase: AtomicUsize::new(0),
    };
    // The calling thread only spawns and then waits outside the pool (`in_place_scope`), so
    // no worker is ever tied up waiting for the team: every worker that is not a member is
    // between tasks, where process control can suspend it.
    pool.in_place_scope(|s| {
        // The team starts paused at phase 0: the first joiner to run resumes it alone, the
        // others are admitted at the first boundary after they start.
        let spawn = team.want().max(1);
        {
            let mut st = team.lock();
            st.outstanding += spawn;
            st.stats.joiners_spawned += spawn as u64;
        }
        for _ in 0..spawn {
            let t = &team;
            s.spawn(move |s| t.join(s));
        }
    });
    let st = team.lock();
    st.stats
}

impl<'a, F> Team<'a, F>
where
    F: Fn(&PhaseCtx) + Sync,
{
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic inside `body` propagates through the scope; the state stays consistent
        // enough for the remaining members to finish or leave, so poisoning is ignored.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Participants wanted now; 0 during a zero quantum.
    fn want(&self) -> usize {
        (self.target)().min(self.max)
    }

    /// Run phases as a member until told to leave or the run ends.
    fn member<'s>(&'s self, scope: &Scope<'s>, mut ctx: PhaseCtx) {
        loop {
            self.phase.store(ctx.phase, Ordering::Relaxed);
            (self.body)(&ctx);
            match self.arrive(scope, ctx) {
                Some(next) => ctx = next,
                None => return,
            }
        }
    }

    /// A joiner: wait to be admitted at the next boundary, then run as a member.
    fn join<'s>(&'s self, scope: &Scope<'s>) {
        let cell = Arc::new(AtomicU64::new(UNDECIDED));
        {
            let mut st = self.lock();
            st.outstanding -= 1;
            if st.done {
                return;
            }
            if st.members == 0 {
                // The team is paused: resume it alone (no barrier is waiting for anyone).
                st.members = 1;
                let ctx = PhaseCtx {
                    phase: st.resume_phase,
                    rank: 0,
                    participants: 1,
                };
                drop(st);
                self.member(scope, ctx);
                return;
            }
            st.pending.push(Arc::clone(&cell));
        }
        if let Some(ctx) = self.wait(&cell) {
            self.member(scope, ctx);
        }
    }

    /// End of phase `ctx.phase` for member `ctx.rank`: the verdict for the next phase.
    fn arrive<'s>(&'s self, scope: &Scope<'s>, ctx: PhaseCtx) -> Option<PhaseCtx> {
        let cell = Arc::new(AtomicU64::new(UNDECIDED));
        let mut st = self.lock();
        st.arrived.push((ctx.rank, Arc::clone(&cell)));
        if st.arrived.len() < st.members {
            drop(st);
            return self.wait(&cell);
        }
        // Leader: decide the next phase.
        let next = ctx.phase + 1;
        st.stats.participant_phases += st.members as u64;
        let mut spawn = 0;
        if next == self.phases {
            st.done = true;
            for (_, c) in st.arrived.drain(..) {
                c.store(LEAVE, Ordering::Release);
            }
            for c in st.pending.drain(..) {
                c.store(LEAVE, Ordering::Release);
            }
        } else {
            let want = self.want();
            let keep = st.members.min(want);
            let admit = st.pending.len().min(want - keep);
            let members = keep + admit;
            if members != st.members {
                st.stats.resizes += 1;
            }
            for (rank, c) in st.arrived.drain(..) {
                let v = if rank < keep {
                    encode(next, rank, members)
                } else {
                    LEAVE
                };
                c.store(v, Ordering::Release);
            }
            for (i, c) in st.pending.drain(..).enumerate() {
                let v = if i < admit {
                    encode(next, keep + i, members)
                } else {
                    LEAVE
                };
                c.store(v, Ordering::Release);
            }
            st.members = members;
            if members == 0 {
                st.resume_phase = next;
            }
            // While paused, one queued joiner resumes the team when a worker runs it.
            spawn = want.max(1).saturating_sub(members + st.outstanding);
            st.outstanding += spawn;
            st.stats.joiners_spawned += spawn as u64;
        }
        if st.blocked > 0 {
            self.cv.notify_all();
        }
        drop(st);
        for _ in 0..spawn {
            scope.spawn(move |s| self.join(s));
        }
        decode(cell.load(Ordering::Acquire))
    }

    /// Spin on `cell` for the spin budget, then block until it is decided.
    fn wait(&self, cell: &AtomicU64) -> Option<PhaseCtx> {
        let start = Instant::now();
        let mut spins = 0u32;
        loop {
            let v = cell.load(Ordering::Acquire);
            if v != UNDECIDED {
                return decode(v);
            }
            std::hint::spin_loop();
            spins = spins.wrapping_add(1);
            if spins % 128 == 0 && start.elapsed() >= self.spin {
                break;
            }
        }
        let mut st = self.lock();
        st.stats.blocked_waits += 1;
        loop {
            let v = cell.load(Ordering::Acquire);
            if v != UNDECIDED {
                return decode(v);
            }
            st.blocked += 1;
            st = self.cv.wait(st).unwrap_or_else(PoisonError::into_inner);
            st.blocked -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn verdict_round_trips() {
        let c = PhaseCtx {
            phase: 123_456,
            rank: 3,
            participants: 7,
        };
        assert_eq!(decode(encode(c.phase, c.rank, c.participants)), Some(c));
        assert_eq!(decode(LEAVE), None);
    }

    #[test]
    fn shares_cover_the_range_exactly_once() {
        for n in 1..6 {
            let mut seen = [0; 37];
            for rank in 0..n {
                let c = PhaseCtx {
                    phase: 0,
                    rank,
                    participants: n,
                };
                for i in c.share(37) {
                    seen[i] += 1;
                }
            }
            assert!(seen.iter().all(|&s| s == 1), "n = {n}");
        }
    }

    #[test]
    fn every_phase_covers_every_item_once_and_phases_are_ordered() {
        let pool = pool::build(3, "team-test").unwrap();
        let len = 1000;
        let phases = 200;
        let cells: Vec<AtomicUsize> = (0..len).map(|_| AtomicUsize::new(0)).collect();
        let stats = run(&pool, phases, Duration::from_micros(20), |c| {
            for i in c.share(len) {
                // Every item has been touched exactly `phase` times before this phase.
                let before = cells[i].fetch_add(1, Ordering::Relaxed);
                assert_eq!(before, c.phase);
            }
        });
        assert!(cells.iter().all(|c| c.load(Ordering::Relaxed) == phases));
        assert!(stats.participant_phases >= phases as u64);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
        /// The static split gives every item to exactly one participant, in order.
        #[test]
        fn shares_partition_any_range(len in 0usize..10_000, n in 1usize..64) {
            let mut next = 0;
            for rank in 0..n {
                let r = PhaseCtx { phase: 0, rank, participants: n }.share(len);
                proptest::prop_assert_eq!(r.start, next);
                next = r.end;
            }
            proptest::prop_assert_eq!(next, len);
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(12))]
        /// Whatever the sequence of allocations (including zero quanta), every phase touches
        /// every item exactly once and phases never overlap.
        #[test]
        fn any_allocation_sequence_keeps_phases_exact(
            targets in proptest::collection::vec(0usize..4, 1..40),
            phases in 1usize..300,
        ) {
            let pool = pool::build(3, "team-prop").unwrap();
            let len = 97;
            let cells: Vec<AtomicUsize> = (0..len).map(|_| AtomicUsize::new(0)).collect();
            let calls = AtomicUsize::new(0);
            let target = || targets[calls.fetch_add(1, Ordering::Relaxed) % targets.len()];
            run_with_target(&pool, &target, phases, Duration::from_micros(2), |c| {
                for i in c.share(len) {
                    assert_eq!(cells[i].fetch_add(1, Ordering::Relaxed), c.phase);
                }
            });
            proptest::prop_assert!(cells.iter().all(|c| c.load(Ordering::Relaxed) == phases));
        }
    }

    #[test]
    fn churning_participation_with_pauses_keeps_every_phase_exact() {
        let pool = pool::build(3, "team-churn").unwrap();
        let len = 300;
        let phases = 2000;
        let cells: Vec<AtomicUsize> = (0..len).map(|_| AtomicUsize::new(0)).collect();
        let calls = AtomicUsize::new(0);
        let target = || {
            // A deterministic churn over 0..=3 (0 = zero quantum: pause).
            let k = calls.fetch_add(1, Ordering::Relaxed);
            (crate::splitmix(k as u64) % 4) as usize
        };
        let stats = run_with_target(&pool, &target, phases, Duration::from_micros(5), |c| {
            assert!(c.participants >= 1 && c.rank < c.participants);
            for i in c.share(len) {
                let before = cells[i].fetch_add(1, Ordering::Relaxed);
                assert_eq!(before, c.phase);
            }
        });
        assert!(cells.iter().all(|c| c.load(Ordering::Relaxed) == phases));
        assert!(stats.resizes > 100, "{stats:?}");
    }
}
