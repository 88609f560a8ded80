//! # partita-runtime
//!
//! A work-stealing task pool with rayon-core 1.13's public API, plus *process control*: the
//! pool follows a target number of active workers (set by hand or by a co-located manager),
//! suspending workers only at safe points between tasks. Design: `shared/spec/runtime.md`.

mod client;
