//! Helpers for the manager's own integration tests (in-process daemon only; the tests with
//! real processes are the root package's, `tests/processes.rs`).
#![allow(dead_code)] // Each test binary uses a different subset.

use std::path::PathBuf;

pub struct TempDir(pub tempfile::TempDir);

impl TempDir {
    /// A fresh directory under the system temp dir, named after the test; removed on drop.
    pub fn new(tag: &str) -> TempDir {
        let dir = tempfile::Builder::new()
            .prefix(&format!("partita-mtest-{tag}-"))
            .tempdir()
            .expect("create a temp dir"); // a test cannot run without it
        TempDir(dir)
    }
    pub fn path(&self, name: &str) -> PathBuf {
        self.0.path().join(name)
    }
}

/// Configuration: only registered and `partita run` processes count, short hello timeout.
pub const TRACKED: &str = "uncontrolled = \"tracked\"\nhello_timeout_ms = 500\n";
