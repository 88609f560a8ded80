//! `partita status`: what a running manager shows, as tables or JSON.

use super::{print_out, socket_or_default, CliResult};
use std::path::PathBuf;

/// Options of `partita status`.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// Print JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// Socket path (default as for `serve`).
    #[arg(long)]
    socket: Option<PathBuf>,
}

/// Ask the manager for its status and print it.
pub fn status(args: &StatusArgs) -> CliResult {
    let s = partita_manager::query_status(&socket_or_default(args.socket.as_deref()))?;
    if args.json {
        print_out(&(serde_json::to_string_pretty(&s)? + "\n"))
    } else {
        print_out(&s.to_table())
    }
}
