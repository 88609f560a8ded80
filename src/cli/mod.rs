//! The subcommands of `partita`, one module per group.

pub mod calibrate;
pub mod run;
pub mod serve;
pub mod status;

use std::path::{Path, PathBuf};

/// The error type of every subcommand: a message for the user.
pub type CliResult = Result<(), Box<dyn std::error::Error>>;

/// The socket given with `--socket`, else the default (as for `serve`).
pub fn socket_or_default(s: Option<&Path>) -> PathBuf {
    s.map(Path::to_path_buf)
        .unwrap_or_else(|| partita_manager::default_serve_socket().0)
}
