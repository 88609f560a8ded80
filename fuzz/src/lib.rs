//! The properties the fuzz targets check, as plain functions (the targets in `fuzz_targets/`
//! are one line each), and the seed corpora (`seeds/`, written from real encoded messages).
//!
//! - [`wire`]: every decoder of `partita_protocol::wire` on arbitrary bytes;
//! - [`session`]: the manager's per-connection state machine, driven in-process through
//!   `partita_manager::harness`, against a model of the protocol;
//! - [`seeds`]: the seed inputs of both targets.

pub mod seeds;
pub mod session;
pub mod wire;
