//! Reallocation as plan, then apply, in rounds.
//!
//! Every change that can move CPUs (an application's demand change, a registration, a
//! departure, a runnable-count change of uncontrolled processes, the periodic tick) goes
//! through here:
//!
//! 1. The change is recorded in the registry (a page's demand is already there) and a round
//!    is requested from [`Rounds`] ([`rounds`]). A request only bumps a counter under a small
//!    mutex: no caller ever waits for a reallocation unless it asks to
//!    ([`Rounds::wait_served`]).
//! 2. The reallocator thread (one per manager, so at most one reallocation is in flight)
//!    takes the registry's lock and computes a [`Plan`](plan::Plan) with [`plan()`]
//!    ([`mod@plan`]): a pure function of plain data (the allocator's input, what each
//!    application was last sent, the CPU sets of the uncontrolled processes) that returns the
//!    allocation and the list of [`Effect`]s that would make the world match it. The registry
//!    records what the plan publishes (so the next plan is computed against it) and resolves
//!    the effects into a [`Batch`] holding what applying needs (page handles, pids, partition
//!    names).
//! 3. The lock is released, then the batch is applied ([`apply()`], [`mod@apply`]): pages
//!    published (seqlock write and futex wake; lowered targets first,
//!    [`revocations_first`](apply::revocations_first)), affinities set, cgroup CPU sets
//!    written, departed processes' affinities restored. Registrations, demand changes and
//!    status requests proceed meanwhile.
//! 4. Requests that arrived during steps 2–3 are merged: the thread runs one more round that
//!    covers all of them, however many there were.
//! 5. A CPU revoked from a controlled application is handed to its new owner only once the
//!    application has let go of it ([`handover`](plan::handover)): the plan publishes the
//!    lowered target at once but keeps the CPU in the releasing application's page and
//!    affinity and out of every other application's until its reported active workers are
//!    down to the target (its runtime sends a demand change when its worker parks) or
//!    `handover_us` has passed; the plan's [`Plan::recheck_at`](plan::Plan::recheck_at)
//!    schedules a round at that deadline ([`Rounds::schedule`]).
//!
//! Growth and revocation stay immediate: a request while no round is in flight starts one
//! at once, and a request during a round is served right after it, with the demands of that
//! moment. An application's demand change (the message its runtime's doorbell sends), when
//! rounds have been rare and short lately, runs its round on the connection's own thread
//! instead of waking the reallocator thread ([`Rounds::request_or_claim`]): on a machine
//! whose CPUs are all busy, that wake-up alone took p99 500–600 µs (`cargo run --release
//! --example reaction -- 300`, hop "reallocator starts its round", docs/bench/manager.md
//! §2). The claim keeps "one round in flight".
//!
//! Why a page has a single writer: only the round in flight publishes (on the reallocator
//! thread or a claimant's), rounds never overlap, and each applies the batch it planned, in
//! the order they ran, so a page's seqlock never sees two writers and a departed process's
//! affinity is restored after (never before) any batch that changed it. The whole picture
//! (threads, locks, lock order): `README.md` beside this file.

pub(crate) mod apply;
pub(crate) mod plan;
pub(crate) mod rounds;

pub(crate) use apply::{apply, Batch};
pub(crate) use plan::{plan, AppView, Effect, PlanInput};
pub(crate) use rounds::{instant_at, react_quickly, spawn, Rounds};
