//! # partita-protocol
//!
//! The manager ↔ application protocol: the versioned hello exchanged over the Unix socket,
//! typed errors, and the shared control page (a memfd passed with `SCM_RIGHTS`) through which
//! the manager publishes allocations and the application reports demand. Design:
//! `docs/design/manager.md` §Protocol.
//!
//! **The protocol itself** — message sequence, frame kinds, control-page layout with offsets,
//! who writes which half, the seqlock step by step, and the failure rules — is written in this
//! crate's `README.md` (`crates/protocol/README.md`), next to the code; read it before
//! changing either side.
//!
//! - [`wire`]: the socket messages (length-prefixed frames, every field validated);
//! - [`page`]: the control page layout, its seqlock and futex;
//! - [`cpuset`]: the CPU bitset both sides exchange;
//! - [`traffic`]: the code for the runtime's own traffic measurement (page field);
//! - [`sys`]: fd passing, peer credentials, pidfd (the crate's only `unsafe`);
//! - [`hop`](mod@hop): the `partita::hop` stamps both sides write ([`hop!`]) and their clock;
//! - `seqlock`: the page's seqlock over plain atomics, model-checked with loom.
//!
//! ```
//! # #[cfg(target_os = "linux")] {
//! use partita_protocol::{page::PageMap, CpuSet};
//! // Manager side: a page for application 1 with 4 workers; give it CPUs 0 and 1.
//! let page = PageMap::create(1, 4).unwrap();
//! page.manager.publish(2, &[0, 1].into_iter().collect());
//! // Application side (normally in another process, through the fd).
//! let app = PageMap::open(page.fd().try_clone_to_owned().unwrap()).unwrap();
//! assert_eq!(app.manager.read().target, 2);
//! # }
//! ```

#![warn(missing_docs)]
#![cfg_attr(loom, allow(dead_code))] // Under loom only the seqlock model is built.

// The socket, the shared page and the syscalls exist on Linux only (the manager is
// Linux-only); elsewhere this crate is the plain data both sides share (`CpuSet`, `wire`,
// `traffic`), which partita-runtime's portable build uses.
#[cfg(all(not(loom), target_os = "linux"))]
pub mod client;
pub mod cpuset;
pub mod hop;
#[cfg(all(not(loom), target_os = "linux"))]
pub mod page;
#[cfg(any(loom, target_os = "linux"))]
mod seqlock;
#[cfg(target_os = "linux")]
pub mod sys;
pub mod traffic;
pub mod wire;

pub use cpuset::{CpuSet, MAX_CPUS};
pub use wire::PROTOCOL_VERSION;

use std::path::PathBuf;

/// Socket file name under `$XDG_RUNTIME_DIR` (user mode).
pub const SOCKET_NAME: &str = "partita.sock";
/// System-mode socket path.
pub const SYSTEM_SOCKET: &str = "/run/partita/partita.sock";

/// Where an application looks for the manager: `$PARTITA_SOCKET`, else
/// `$XDG_RUNTIME_DIR/partita.sock` if it exists, else `/run/partita/partita.sock`.
///
/// ```
/// let p = partita_protocol::socket_path();
/// assert!(p.is_absolute() || std::env::var_os("PARTITA_SOCKET").is_some());
/// ```
pub fn socket_path() -> PathBuf {
    if let Some(p) = std::env::var_os("PARTITA_SOCKET") {
        return PathBuf::from(p);
    }
    if let Some(dir) = std::env::var_os("XDG_RUNTIME_DIR") {
        let p = PathBuf::from(dir).join(SOCKET_NAME);
        if p.exists() {
            return p;
        }
    }
    PathBuf::from(SYSTEM_SOCKET)
}
