//! # rayon-core, implemented by partita-runtime
//!
//! This package is named `rayon-core` and has rayon-core 1.13's public API — the same items,
//! with the same signatures and behaviour — but every item is partita-runtime's. Patching it
//! into a project moves every rayon program of the project (and every crate in its dependency
//! graph that uses rayon) onto partita's process-controlled pool, without a source change:
//!
//! ```toml
//! [patch.crates-io]
//! rayon-core = { path = "<partita checkout>/compat/rayon-core" }
//! ```
//!
//! At run time the global pool (and every pool built with `ThreadPoolBuilder`) registers with
//! a partita manager if one is running (`PARTITA_SOCKET` names its socket) and follows its
//! CPU allocation; `PARTITA=off` turns that off, and the pool then behaves like rayon-core's.
//! `RAYON_NUM_THREADS` sets the pool size as in rayon-core.
//!
//! The re-exports below are item by item, in the order of rayon-core 1.13's `lib.rs`, and
//! nothing else: partita's process-control items (targets, demand, statistics) stay in
//! `partita_runtime`. A program that wants them depends on partita-runtime directly; the two
//! crates' types are the same types.
//!
//! ```
//! let pool = rayon_core::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
//! let (a, b) = pool.join(|| 1 + 1, || 2 + 2);
//! assert_eq!((a, b), (2, 4));
//! ```
#![no_std]

pub use partita_runtime::current_thread_has_pending_tasks;
pub use partita_runtime::current_thread_index;
pub use partita_runtime::ThreadBuilder;
pub use partita_runtime::ThreadPool;
pub use partita_runtime::{broadcast, spawn_broadcast, BroadcastContext};
pub use partita_runtime::{current_num_threads, max_num_threads};
pub use partita_runtime::{in_place_scope, scope, Scope};
pub use partita_runtime::{in_place_scope_fifo, scope_fifo, ScopeFifo};
#[allow(deprecated)]
pub use partita_runtime::{initialize, Configuration};
pub use partita_runtime::{join, join_context};
pub use partita_runtime::{spawn, spawn_fifo};
pub use partita_runtime::{yield_local, yield_now, Yield};
pub use partita_runtime::{FnContext, ThreadPoolBuildError, ThreadPoolBuilder};
