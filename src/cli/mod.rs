//! The subcommands of `partita`, one module per group.

pub mod calibrate;
pub mod dist;
pub mod run;
pub mod serve;
pub mod status;
pub mod top;

use std::path::{Path, PathBuf};

/// The error type of every subcommand: a message for the user.
pub type CliResult = Result<(), Box<dyn std::error::Error>>;

/// The socket given with `--socket`, else where applications look for the manager
/// ([`partita_protocol::socket_path`]): a user's `partita status` asks the manager their
/// programs would register with (the system one, unless a user-mode manager runs).
pub fn socket_or_default(s: Option<&Path>) -> PathBuf {
    s.map(Path::to_path_buf)
        .unwrap_or_else(partita_protocol::socket_path)
}

/// Write `text` to stdout. A reader that went away (`partita status | head -1`) is not an
/// error: `print!` would panic on the broken pipe.
pub fn print_out(text: &str) -> CliResult {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => Ok(r?),
    }
}
