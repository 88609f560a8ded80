//! # partita-protocol
//!
//! The manager ↔ application protocol: the versioned hello exchanged over the Unix socket,
//! typed errors, and the shared control page (a memfd passed with `SCM_RIGHTS`) through which
//! the manager publishes allocations and the application reports demand. Design:
//! `shared/spec/manager.md` §Protocol.
