//! # partita-queues
//!
//! Multi-access distributed ready queues (DiBella, Ramamritham, Chrysanthis and Raghuram,
//! COINS TR 92-57, 1992) and their enqueue and dequeue policies, plus the FIFO baselines the
//! paper compares them against. Design: `docs/design/queues.md`.
//!
//! ## The pieces
//!
//! - [`ReadyQueue`]: one queue. [`MultiAccessQueue`] (atomic bitmaps, `LockMode::Atomic`),
//!   [`PaperQueue`] (a bitmap lock plus a lock per slot, `LockMode::Paper`) and [`FifoQueue`]
//!   (the Global / Distributed FCFS baselines) implement it.
//! - [`ReadyQueues`]: a set of N queues with an [`EnqueuePolicy`] and a [`DequeuePolicy`],
//!   built from a [`Config`] that checks compatibility (Table 3, Static coverage, N = 1) and
//!   returns a [`ConfigError`] naming the rule.
//! - [`ProducerState`] / [`ConsumerState`]: each thread's private cursors, random generator,
//!   ring index and statistics, passed by `&mut`, so the set needs no per-thread storage.
//! - [`enqueue_choice`] / [`dequeue_search`]: the policy rules as pure functions, which the
//!   set calls and the tests drive deterministically.
//! - [`load_split`]: the paper's load-distribution metric.
//!
//! The crate never parks or spins: [`ReadyQueues::post`] always succeeds at once (full queues
//! spill to the next queue, then to an unbounded overflow list) and [`ReadyQueues::poll`] is one
//! dequeue decision that returns `None` when it finds nothing. Idling belongs to the caller.
//!
//! ## Use from a thread pool
//!
//! One set shared by every worker; each worker owns a producer state (for tasks it spawns)
//! and a consumer state:
//!
//! ```
//! use partita_queues::{Config, DequeuePolicy, EnqueuePolicy, LockMode, ReadyQueues};
//! use std::sync::atomic::{AtomicUsize, Ordering};
//!
//! let workers = 2;
//! let queues: ReadyQueues<usize> = Config::new(workers)
//!     .dequeue(DequeuePolicy::Sequential)
//!     .enqueue(EnqueuePolicy::PrimaryRandom)
//!     .lock_mode(LockMode::Atomic)
//!     .slots(64)
//!     .cutoff(32)
//!     .seed(1)
//!     .build()
//!     .expect("a valid pair");
//! let served = AtomicUsize::new(0);
//! std::thread::scope(|s| {
//!     for w in 0..workers {
//!         let (queues, served) = (&queues, &served);
//!         s.spawn(move || {
//!             let mut producer = queues.producer(w);
//!             let mut consumer = queues.consumer(w);
//!             for t in 0..500 { queues.post(&mut producer, t); }
//!             while served.load(Ordering::Relaxed) < 1000 {
//!                 match queues.poll(&mut consumer) {
//!                     Some(_task) => { served.fetch_add(1, Ordering::Relaxed); }
//!                     None => std::thread::yield_now(), // the caller's idle strategy
//!                 }
//!             }
//!         });
//!     }
//! });
//! assert!(queues.is_empty());
//! ```
//!
//! ## Process control
//!
//! When workers are suspended their queues may still hold tasks. [`ReadyQueues::extra_queues`]
//! gives each orphaned queue to an active consumer (and refuses the Static policy while anyone
//! is suspended); the consumer serves them through [`ConsumerState::set_extra`] (or
//! [`ReadyQueues::poll_with_extra`]):
//!
//! ```
//! use partita_queues::{Config, DequeuePolicy, EnqueuePolicy};
//! let q = Config::new(3).dequeue(DequeuePolicy::PrimaryFixed)
//!     .enqueue(EnqueuePolicy::Static).build::<u32>().unwrap();
//! q.post(&mut q.producer(2), 7);                  // lands in queue 2
//! let active = [true, true, false];                // worker 2 is suspended
//! let extras = q.extra_queues(&active).unwrap();   // queue 2 -> consumer 0
//! let mut c0 = q.consumer(0);
//! c0.set_extra(extras[0].clone());
//! assert_eq!(q.poll(&mut c0), Some(7));            // not stranded
//! ```
//!
//! ## Incompatible configurations
//!
//! ```
//! use partita_queues::{Config, ConfigError, DequeuePolicy, EnqueuePolicy};
//! let err = Config::new(4)
//!     .dequeue(DequeuePolicy::DistributedFcfs)
//!     .enqueue(EnqueuePolicy::PrimaryFixed)
//!     .build::<u8>()
//!     .unwrap_err();
//! assert!(matches!(err, ConfigError::IncompatiblePolicies { .. }));
//! println!("{err}"); // "rule Table 3 (compatibility): dequeue policy DistributedFcfs ..."
//! ```
//!
//! ## Verification
//!
//! Invariants of `queues.md` are property tests in `tests/`; the atomic queue's protocol is
//! model-checked with loom (`RUSTFLAGS="--cfg loom" cargo test -p partita-queues --test
//! loom`), see `crates/queues/README.md`.

#![warn(missing_docs)]

mod config;
mod error;
mod policy;
mod queue;
mod rng;
mod set;
mod stats;
mod sync;

pub use config::{Config, SecondaryCursor};
pub use error::{ConfigError, Full};
pub use policy::{
    dequeue_search, enqueue_choice, structure_for, DequeueCursor, DequeuePolicy, EnqueueCursor,
    EnqueuePolicy, LockMode, Role, Structure,
};
pub use queue::{
    Claim, Direction, FifoQueue, MultiAccessQueue, PaperQueue, ReadyQueue, Scan, MAX_SLOTS,
};
pub use rng::XorShift64;
pub use set::{ConsumerState, ProducerState, ReadyQueues};
pub use stats::{load_split, ConsumerStats, ProducerStats};
