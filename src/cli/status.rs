//! `partita status`: what a running manager shows, as tables or JSON.

use super::{print_out, socket_or_default, CliResult};
use std::path::{Path, PathBuf};

/// Options of `partita status`.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// Print JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// Socket path (default: where applications look: PARTITA_SOCKET, else
    /// $XDG_RUNTIME_DIR/partita.sock if it exists, else /run/partita/partita.sock).
    #[arg(long)]
    socket: Option<PathBuf>,
}

/// Ask the manager for its status and print it.
pub fn status(args: &StatusArgs) -> CliResult {
    let socket = socket_or_default(args.socket.as_deref());
    let s = partita_manager::query_status(&socket).map_err(|e| explain(e, &socket))?;
    if args.json {
        print_out(&(serde_json::to_string_pretty(&s)? + "\n"))
    } else {
        print_out(&s.to_table())
    }
}

/// A socket this user may not open: say in one line which socket, which group may, and what
/// that means for this user's programs.
fn explain(e: partita_manager::Error, socket: &Path) -> Box<dyn std::error::Error> {
    use std::os::unix::fs::MetadataExt;
    let denied = matches!(&e, partita_manager::Error::Io { source, .. }
        if source.kind() == std::io::ErrorKind::PermissionDenied);
    if !denied {
        return e.into();
    }
    let gid = std::fs::metadata(socket).map_or(0, |m| m.gid());
    let group = nix::unistd::Group::from_gid(gid.into())
        .ok()
        .flatten()
        .map_or_else(|| gid.to_string(), |g| g.name);
    let who = if gid == 0 {
        "only root may use it (the manager found no group partita to give it to)".to_string()
    } else {
        format!("only group {group} may register (an administrator adds you: usermod -aG {group} $USER, then log in again)")
    };
    format!(
        "no permission to use the manager's socket {}: {who}; your programs run standalone",
        socket.display()
    )
    .into()
}
