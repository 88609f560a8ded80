//! # Partita
//!
//! A work-stealing task runtime with *process control*: several parallel programs share one
//! machine, a co-located manager decides how many CPUs each gets, and each program's runtime
//! suspends or resumes workers at safe points (between tasks) to match.
//!
//! This package holds the `partita` binary (every subcommand) and re-exports the member
//! crates:
//!
//! | module | crate | what it holds |
//! |---|---|---|
//! | [`queues`] | `partita-queues` | multi-access distributed ready queues and their policies (DiBella 1992) |
//! | [`runtime`] | `partita-runtime` | the work-stealing pool (rayon-core's API), process control, manager client |
//! | [`protocol`] | `partita-protocol` | the manager ↔ application wire protocol and shared control page |
//! | [`manager`] | `partita-manager` | the manager daemon, allocation policies, enforcement, status and client calls |
//! | [`demo`] | `partita-demo` | `partita demo`, its report and charts, the workload and probe programs |
//! | [`stats`] | `partita-stats` | median and percentiles used by every measurement |
//! | [`numa`] | `partita-numa` | topology, memory policy, page migration, the migrate/replicate policy |
//! | [`workloads`] | `partita-workloads` | the synthetic multiprogramming workloads used by `partita demo` |
//! | [`sim`] | `partita-sim` | `partita simulate`: the co-scheduling and allocation-policy models |
//! | [`jobserver`] | `partita-jobserver` | `partita run --jobserver`: a make jobserver following the manager |
//!
//! ```
//! // The facade exposes every member crate under a short name.
//! use partita::runtime as _;
//! use partita::queues as _;
//! ```

#![warn(missing_docs)]

pub use partita_demo as demo;
pub use partita_jobserver as jobserver;
pub use partita_manager as manager;
pub use partita_numa as numa;
pub use partita_protocol as protocol;
pub use partita_queues as queues;
pub use partita_runtime as runtime;
pub use partita_sim as sim;
pub use partita_stats as stats;
pub use partita_workloads as workloads;
