//! # partita-runtime
//!
//! A work-stealing task pool with rayon-core 1.13's public API, plus *process control*: the
//! pool follows a target number of active workers (set by hand or by a co-located manager),
//! suspending workers only at safe points between tasks. Design: `docs/design/runtime.md`.
//!
//! Code written against rayon-core ports by changing the crate name:
//!
//! ```
//! use partita_runtime as rayon_core;
//!
//! fn quick_sort<T: PartialOrd + Send>(v: &mut [T]) {
//!     if v.len() <= 1 { return; }
//!     let mid = partition(v);
//!     let (lo, hi) = v.split_at_mut(mid);
//!     rayon_core::join(|| quick_sort(lo), || quick_sort(&mut hi[1..]));
//! }
//! fn partition<T: PartialOrd>(v: &mut [T]) -> usize {
//!     let pivot = v.len() - 1;
//!     let mut i = 0;
//!     for j in 0..pivot { if v[j] <= v[pivot] { v.swap(i, j); i += 1; } }
//!     v.swap(i, pivot);
//!     i
//! }
//! let mut v: Vec<u32> = (0..1000).rev().collect();
//! quick_sort(&mut v);
//! assert!(v.windows(2).all(|w| w[0] <= w[1]));
//! ```
//!
//! ## Process control
//!
//! ```
//! use partita_runtime::{ProcessControl, ThreadPoolBuilder};
//! let pool = ThreadPoolBuilder::new().num_threads(2)
//!     .process_control(ProcessControl::Manual).build().unwrap();
//! pool.set_target_workers(1);          // worker 1 suspends at its next safe point
//! while pool.active_workers() > 1 { std::thread::yield_now(); }
//! let s: u64 = pool.install(|| (0..100u64).sum());  // still runs, on worker 0
//! assert_eq!(s, 4950);
//! pool.set_target_workers(2);          // worker 1 is unparked at once
//! ```
//!
//! Lowering the target suspends the highest indices at their next safe point (between two
//! tasks of a worker's main loop) or, if a job on their stack waits (`join`, `scope`), at
//! that wait, from which they come back only to finish the job once what it waits for is
//! done; a worker asleep is suspended where it sleeps, without waking. A suspending worker
//! first hands its deque to the ready queues, and the queues of suspended workers are
//! assigned to active ones, so no task waits on a suspended worker.
//! Raising the target unparks the lowest suspended indices at once. `broadcast` still reaches
//! every worker: suspended ones run their copy and suspend again.
//!
//! ## Environment
//!
//! - `RAYON_NUM_THREADS`: default pool size when `num_threads` is 0 (as in rayon-core).
//! - `PARTITA=off`: never contact a manager (pools in `ProcessControl::Manager` mode then
//!   behave like `Manual` ones).
//! - `PARTITA_SOCKET`: the manager's socket (default `$XDG_RUNTIME_DIR/partita.sock`, then
//!   `/run/partita/partita.sock`). A pool in `Manager` mode registers in the background: it
//!   runs at full size until the manager answers, and a pool built before the manager starts
//!   registers when it appears (it looks again with backoff up to once a second).
//! - `PARTITA_STATS=<file>`: at process exit every pool the process built appends one line of
//!   its counters (`pid=… name=… threads=… target_changes=… parks=… unparks=…`, key=value
//!   pairs) to `<file>`, for programs that cannot call [`stats`] themselves.
//!
//! ## Design and verification
//!
//! Module map (the data flow, top to bottom):
//! - `thread_pool` / `builder` / `join` / `scope` / `spawn` / `broadcast`: the rayon-core API;
//! - `registry`: one pool's shared state, the global pool, starting workers, injection;
//! - `worker`: a worker thread's main loop, stealing and idling;
//! - `deque`: each worker's Chase–Lev deque, in pages of its own that follow the worker's node
//!   (**its protocol and loom models are in `src/deque/README.md`**);
//! - `control`: process control, one owner of the target, the choice of who parks, the
//!   manager's page and the report — the pure policies (`control/mod.rs`), the target and
//!   suspension at safe points (`target.rs`), places (`slots.rs`), the live session's page
//!   (`manager_page.rs`) and how workers apply it (`page.rs`), demand (`report.rs`,
//!   `demand.rs`); the module table is in `docs/design/runtime.md`;
//! - `sleep`: idle workers and suspended ones; **the sleep and suspension protocol, its
//!   correctness argument and its loom models are in `src/sleep/README.md`**;
//! - `ready` (the partita-queues ready-queue set), `job` / `latch` (units of work and their
//!   completion signals), `client` (the socket to a manager: register, back off, ring, notice
//!   it leaving; `client_off.rs` where there is none), `affinity` (re-pinning syscall).
//! - `numa` (pool memory that follows the pool's CPUs), `traffic` (self-reported memory
//!   traffic), `stats` (`ThreadPool::stats`), `deprecated_config` (rayon-core's deprecated
//!   `Configuration`), `sync` (std or loom primitives).
//!
//! The sleep protocol and the deque are model-checked with loom (`sleep::tests::loom_*`,
//! `deque::tests::loom_deque_*`:
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p partita-runtime --lib
//! --release -- loom_`, run by `scripts/test.d/30-runtime.sh`). The whole pool is checked by
//! behaviour tests (`tests/`), a churn stress in which every task must run exactly once while
//! the target changes every few microseconds (10^4 tasks by default; 10^6 with
//! `cargo test -p partita-runtime --release --test process_control -- --ignored`), and a
//! proptest that after quiescence `active == clamp(target, 1, size)`.

#![warn(missing_docs)]
// Under loom only the sleep protocol and the deque are exercised; the rest is compiled but unused.
#![cfg_attr(loom, allow(dead_code))]
// In the portable build (`not(partita_linux)`) the manager-facing half of process control
// (the page watch, the ring, demand sampling, CPU sets, the deque's page lists) is
// compiled, since the Linux build shares those modules, but nothing calls it: no client.
#![cfg_attr(not(partita_linux), allow(dead_code))]

// The Linux-only half (`cfg(partita_linux)`, set by build.rs on Linux unless
// `--cfg partita_portable` forces the portable path): the manager client, re-pinning, NUMA
// placement and perf-event counters. The portable files beside these modules keep the few
// crate-internal items the pool needs and nothing else.
#[cfg_attr(not(partita_linux), path = "affinity_portable.rs")]
mod affinity;
mod broadcast;
mod build_error;
mod builder;
#[cfg(all(not(loom), partita_linux))]
mod client;
/// No manager client: loom builds (`--cfg loom`) model the sleep protocol only, and the
/// portable build (not Linux, or `--cfg partita_portable`) has no manager to follow.
#[cfg(any(loom, not(partita_linux)))]
#[path = "client_off.rs"]
mod client;
mod control;
mod deprecated_config;
mod deque;
// Not under loom: its registry list is a process-wide std mutex, and loom models no exit.
#[cfg(not(loom))]
mod exit_stats;
mod job;
mod join;
mod latch;
#[cfg_attr(not(partita_linux), path = "numa_portable.rs")]
mod numa;
mod page_aligned;
mod ready;
mod registry;
mod scope;
mod sleep;
mod spawn;
mod stats;
mod sync;
mod thread_builder;
mod thread_pool;
mod traffic;
mod unwind;
mod worker;

#[cfg(all(test, not(loom)))]
mod test;

pub use broadcast::{broadcast, spawn_broadcast, BroadcastContext};
pub use builder::{ThreadPoolBuildError, ThreadPoolBuilder};
pub use control::{Need, ProcessControl};
#[allow(deprecated)]
pub use deprecated_config::{initialize, Configuration};
pub use join::{join, join_context, FnContext};
#[cfg(partita_linux)]
pub use numa::{
    FollowOutcome, HomePart, NumaReport, PoolMemError, PoolVec, SamplerParams, SamplerReport,
    SamplerSource, WorkerHome,
};
pub use partita_queues::{DequeuePolicy, EnqueuePolicy};
pub use scope::{in_place_scope, in_place_scope_fifo, scope, scope_fifo, Scope, ScopeFifo};
pub use spawn::{spawn, spawn_fifo};
pub use stats::PoolStats;
pub use thread_builder::ThreadBuilder;
pub use thread_pool::{
    active_workers, current_thread_has_pending_tasks, current_thread_index, set_demand,
    set_target_workers, stats, target_workers, yield_local, yield_now, ThreadPool, Yield,
};
#[cfg(partita_linux)]
pub use traffic::{
    measure_traffic_with, measured_bytes, measured_traffic, measured_traffic_status,
    MeasuredTraffic, TrafficEvent,
};
pub use traffic::{published_bytes, report_bytes, reported_bytes, TrafficStatus};

/// The largest pool size this crate supports (pools asking for more are capped).
///
/// ```
/// assert!(partita_runtime::max_num_threads() >= 256);
/// ```
pub fn max_num_threads() -> usize {
    sleep::THREADS_MAX
}

/// The number of workers of the current pool (the global one from outside any pool). This is
/// the pool size: it does not change when process control suspends workers.
///
/// ```
/// let pool = partita_runtime::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
/// assert_eq!(pool.install(partita_runtime::current_num_threads), 3);
/// ```
pub fn current_num_threads() -> usize {
    registry::Registry::current_num_threads()
}
