//! `ThreadPoolBuildError`: why a pool could not be built (rayon-core's messages, plus the
//! ready-queue configuration errors of partita).

use std::error::Error;
use std::fmt;
use std::io;

use partita_queues::ConfigError;

/// Why a pool could not be built.
///
/// ```
/// let _ = partita_runtime::ThreadPoolBuilder::new().build_global();
/// let err = partita_runtime::ThreadPoolBuilder::new().build_global().unwrap_err();
/// assert!(err.to_string().contains("already been initialized"));
/// ```
#[derive(Debug)]
pub struct ThreadPoolBuildError {
    kind: ErrorKind,
}

#[derive(Debug)]
pub(crate) enum ErrorKind {
    GlobalPoolAlreadyInitialized,
    CurrentThreadAlreadyInPool,
    IOError(io::Error),
    ReadyQueues(ConfigError),
    StaticNeedsStandalone,
    /// `heartbeat_interval` out of range (the message names the range).
    HeartbeatInterval(String),
}

impl ThreadPoolBuildError {
    pub(crate) fn new(kind: ErrorKind) -> Self {
        ThreadPoolBuildError { kind }
    }

    /// The platform cannot start threads at all (the global pool then falls back to the
    /// current thread alone, as rayon-core does).
    pub(crate) fn is_unsupported(&self) -> bool {
        matches!(&self.kind, ErrorKind::IOError(e) if e.kind() == io::ErrorKind::Unsupported)
    }
}

impl fmt::Display for ThreadPoolBuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ErrorKind::GlobalPoolAlreadyInitialized => {
                f.write_str("The global thread pool has already been initialized.")
            }
            ErrorKind::CurrentThreadAlreadyInPool => {
                f.write_str("The current thread is already part of another thread pool.")
            }
            ErrorKind::IOError(e) => e.fmt(f),
            ErrorKind::ReadyQueues(e) => write!(f, "ready_queues: {e}"),
            ErrorKind::StaticNeedsStandalone => f.write_str(
                "ready_queues: the Static dequeue policy needs ProcessControl::Standalone \
                 (a suspended worker's queue would have no consumer)",
            ),
            ErrorKind::HeartbeatInterval(why) => f.write_str(why),
        }
    }
}

impl Error for ThreadPoolBuildError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match &self.kind {
            ErrorKind::IOError(e) => Some(e),
            ErrorKind::ReadyQueues(e) => Some(e),
            _ => None,
        }
    }
}
