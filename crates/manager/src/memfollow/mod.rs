//! Memory follows CPUs for unmodified programs (issue 31): when a reallocation moves a
//! registered application's CPUs to other NUMA nodes and they stay there long enough for
//! Verghese's cost rule, the manager moves the application's resident pages after them.
//!
//! - [`policy`]: when and how much, a pure function of the application's placement history,
//!   its stray pages and its byte budget.
//!
//! Design: `docs/design/numa.md`, "Memory follows CPUs for unmodified programs".

pub mod policy;
