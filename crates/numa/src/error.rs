//! Typed errors for every fallible operation, each naming the system call (or operation) that
//! refused the input.

use std::io;

/// The error type of `partita-numa`: which call failed and why.
///
/// Validation errors (`EmptyRange`, `Unaligned`, `NoSuchNode`, …) are raised *before* the
/// kernel is asked, so bad input never reaches a system call. Every variant converts into an
/// [`io::Error`] whose message names the call.
///
/// ```
/// use partita_numa::{NumaError, PageRange};
/// let err = PageRange::new(1, 4096).unwrap_err();
/// assert!(matches!(err, NumaError::Unaligned { .. }));
/// assert_eq!(err.call(), "page range");
/// let io: std::io::Error = err.into();
/// assert_eq!(io.kind(), std::io::ErrorKind::InvalidInput);
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NumaError {
    /// The range has zero length.
    #[error("{call}: empty range")]
    EmptyRange {
        /// The call that rejected the input.
        call: &'static str,
    },
    /// The start or length of a range is not a multiple of the page size.
    #[error("{call}: {what} {value:#x} is not a multiple of the page size {page_size}")]
    Unaligned {
        /// The call that rejected the input.
        call: &'static str,
        /// `"address"` or `"length"`.
        what: &'static str,
        /// The offending value.
        value: usize,
        /// The page size it must be a multiple of.
        page_size: usize,
    },
    /// `start + len` does not fit in the address space.
    #[error("{call}: range {start:#x} + {len:#x} overflows the address space")]
    Overflow {
        /// The call that rejected the input.
        call: &'static str,
        /// Start of the range.
        start: usize,
        /// Length of the range.
        len: usize,
    },
    /// A node id that is not online on this machine.
    #[error("{call}: NUMA node {node} does not exist (online nodes: {online})")]
    NoSuchNode {
        /// The call that rejected the input.
        call: &'static str,
        /// The requested node.
        node: u32,
        /// The online nodes, as a sysfs-style list (`"0-1"`).
        online: String,
    },
    /// The running kernel was built without NUMA support (the syscall returned `ENOSYS`).
    #[error("{call}: the kernel has no NUMA support (ENOSYS)")]
    NoNumaSupport {
        /// The call that failed.
        call: &'static str,
    },
    /// An argument combination the call does not accept (explained in `what`).
    #[error("{call}: invalid argument: {what}")]
    InvalidArgument {
        /// The call that rejected the input.
        call: &'static str,
        /// What is wrong.
        what: String,
    },
    /// A topology backend could not read or understand the machine description.
    #[error("{call}: {detail}")]
    Topology {
        /// The backend (`"sysfs topology"` or `"hwloc topology"`).
        call: &'static str,
        /// What could not be read or parsed.
        detail: String,
    },
    /// The kernel refused the call.
    #[error("{call} failed: {source}")]
    Os {
        /// The system call.
        call: &'static str,
        /// The `errno` the kernel returned.
        #[source]
        source: io::Error,
    },
}

impl NumaError {
    /// The name of the call (system call or operation) that produced this error.
    ///
    /// ```
    /// use partita_numa::NumaError;
    /// let e = NumaError::NoNumaSupport { call: "mbind" };
    /// assert_eq!(e.call(), "mbind");
    /// ```
    pub fn call(&self) -> &'static str {
        match self {
            NumaError::EmptyRange { call }
            | NumaError::Unaligned { call, .. }
            | NumaError::Overflow { call, .. }
            | NumaError::NoSuchNode { call, .. }
            | NumaError::NoNumaSupport { call }
            | NumaError::InvalidArgument { call, .. }
            | NumaError::Topology { call, .. }
            | NumaError::Os { call, .. } => call,
        }
    }

    /// Builds the error for a failed system call from the current `errno`, mapping `ENOSYS`
    /// to [`NumaError::NoNumaSupport`].
    pub(crate) fn last_os(call: &'static str) -> NumaError {
        Self::from_os(call, io::Error::last_os_error())
    }

    pub(crate) fn from_os(call: &'static str, source: io::Error) -> NumaError {
        if source.raw_os_error() == Some(libc::ENOSYS) {
            NumaError::NoNumaSupport { call }
        } else {
            NumaError::Os { call, source }
        }
    }
}

impl From<NumaError> for io::Error {
    fn from(e: NumaError) -> io::Error {
        let kind = match &e {
            NumaError::Os { source, .. } => source.kind(),
            NumaError::NoNumaSupport { .. } => io::ErrorKind::Unsupported,
            NumaError::NoSuchNode { .. } => io::ErrorKind::NotFound,
            _ => io::ErrorKind::InvalidInput,
        };
        io::Error::new(kind, e)
    }
}

/// Result alias used throughout the crate.
///
/// ```
/// fn f() -> partita_numa::Result<u32> { Ok(1) }
/// assert_eq!(f().unwrap(), 1);
/// ```
pub type Result<T> = std::result::Result<T, NumaError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enosys_means_no_numa_support() {
        let e = NumaError::from_os("mbind", io::Error::from_raw_os_error(libc::ENOSYS));
        assert!(matches!(e, NumaError::NoNumaSupport { call: "mbind" }));
        assert_eq!(io::Error::from(e).kind(), io::ErrorKind::Unsupported);
        let e = NumaError::from_os("move_pages", io::Error::from_raw_os_error(libc::EPERM));
        assert!(matches!(
            e,
            NumaError::Os {
                call: "move_pages",
                ..
            }
        ));
        assert!(e.to_string().starts_with("move_pages failed"), "{e}");
    }
}
