//! `partita serve`: the manager daemon in the foreground.

use super::CliResult;
use std::path::{Path, PathBuf};

/// Options of `partita serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Configuration file (TOML); without one, /etc/partita/partita.toml if it exists, else
    /// the defaults.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Socket path (default: /run/partita/partita.sock as root, else
    /// $XDG_RUNTIME_DIR/partita.sock; PARTITA_SOCKET overrides).
    #[arg(long)]
    socket: Option<PathBuf>,
}

/// The configuration `serve` uses: `--config`, else /etc/partita/partita.toml if it exists,
/// else the defaults.
fn load_config(
    path: Option<&Path>,
) -> Result<partita_manager::Config, partita_manager::ConfigError> {
    let etc = Path::new("/etc/partita/partita.toml");
    match path {
        Some(p) => partita_manager::Config::from_file(p),
        None if etc.exists() => partita_manager::Config::from_file(etc),
        None => Ok(partita_manager::Config::default()),
    }
}

/// Run the manager until SIGTERM or SIGINT.
pub fn serve(args: &ServeArgs) -> CliResult {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let config = load_config(args.config.as_deref())?;
    let (default_socket, system) = partita_manager::default_serve_socket();
    let socket = args.socket.clone().unwrap_or(default_socket);
    partita_manager::serve(config, socket, system)?;
    Ok(())
}
