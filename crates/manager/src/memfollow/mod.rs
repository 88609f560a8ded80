//! Memory follows CPUs for unmodified programs (issue 31): when a reallocation moves a
//! registered application's CPUs to other NUMA nodes and they stay there long enough for
//! Verghese's cost rule, the manager moves the application's resident pages after them.
//!
//! - [`policy`]: when and how much, a pure function of the application's placement history,
//!   its stray pages and its byte budget;
//! - [`pages`]: the effects (`numa_maps`, `move_pages(2)` on the application's pid), one
//!   budget-sized slice at a time, on the manager's part of the memory only;
//! - [`mover`]: the per-application state between rounds and the error handling;
//! - [`optout`]: `PARTITA_NUMA=off`; [`config`]: `[numa_migration]`;
//! - [`MoverThread`]: the mover's own thread; [`cpu`]: where and at what priority it moves;
//! - [`Stats`]: what `partita status` and `/metrics` show.
//!
//! Design: `docs/design/numa.md`, "Memory follows CPUs for unmodified programs".

pub mod config;
pub mod cpu;
pub mod mover;
pub mod optout;
pub mod pages;
pub mod policy;
mod report;
mod stats;
mod thread;

pub use config::MigrationConfig;
pub use report::annotate;
pub use stats::{AppReport, Stats, Totals};
pub use thread::{MoverThread, POLL};
