//! Errors of the jobserver commands.

use std::path::PathBuf;

/// What can go wrong serving a build.
///
/// ```
/// let e = partita_jobserver::Error::FifoExists("/tmp/x.fifo".into());
/// assert!(e.to_string().contains("already exists"));
/// ```
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No command was given.
    #[error("no command given (usage: partita run --jobserver -- CMD ...)")]
    NoCommand,
    /// The command could not be started.
    #[error("cannot start {program:?}: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// The OS error (not found, not executable, ...).
        source: std::io::Error,
    },
    /// The fifo path is taken; it is left as it was.
    #[error(
        "jobserver fifo {0} already exists (another build's? remove it or pass another --fifo)"
    )]
    FifoExists(PathBuf),
    /// Creating or opening the fifo failed.
    #[error("{call} {path}: {source}")]
    Fifo {
        /// The call.
        call: &'static str,
        /// The fifo.
        path: PathBuf,
        /// The error.
        source: nix::Error,
    },
    /// A system call failed.
    #[error("{call}: {source}")]
    Sys {
        /// The call.
        call: &'static str,
        /// The error.
        source: nix::Error,
    },
    /// An I/O operation failed.
    #[error("{call}: {source}")]
    Io {
        /// The operation.
        call: &'static str,
        /// The error.
        source: std::io::Error,
    },
    /// A job count out of range.
    #[error("invalid --jobs {0}: must be between 1 and {max}", max = crate::MAX_JOBS)]
    Jobs(u32),
}
