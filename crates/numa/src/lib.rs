//! # partita-numa
//!
//! NUMA topology, safe memory-policy and page-migration wrappers, node-placed allocation, and
//! Verghese's migrate/replicate policy with its trace-driven simulator. Design:
//! `shared/spec/numa.md`.
