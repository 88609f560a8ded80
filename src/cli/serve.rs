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
    /// Log format on stderr: `text` for people, `json` (one object per line) for collectors.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// Serve Prometheus metrics at http://ADDR/metrics (e.g. 127.0.0.1:9464; port 0 picks a
    /// free port, logged as `metrics listening on ADDR`). Loopback addresses only, unless
    /// --metrics-public.
    #[arg(long, value_name = "ADDR")]
    metrics: Option<String>,
    /// Allow --metrics on a non-loopback address (the endpoint has no authentication).
    #[arg(long, requires = "metrics")]
    metrics_public: bool,
    /// Do not serve: undo what managers that died without cleaning up left (affinities from
    /// their journals next to the socket, cgroups, `+cpuset`), print a summary and exit. A
    /// starting manager does the same first.
    #[arg(long)]
    cleanup: bool,
}

/// How `serve` writes its log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line (timestamp, level, target, fields).
    Json,
}

/// Install the log subscriber: level from `RUST_LOG` (default `info`), on stderr; colours
/// only when stderr is a terminal (never in journald or a file).
fn init_logging(format: LogFormat) {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
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

/// The exit status for an error of `serve` (see [`partita_manager::Error::exit_status`]).
pub fn exit_status(e: &(dyn std::error::Error + 'static)) -> u8 {
    if let Some(e) = e.downcast_ref::<partita_manager::Error>() {
        e.exit_status()
    } else if e.is::<partita_manager::ConfigError>() {
        78
    } else {
        1
    }
}

/// Run the manager until SIGTERM or SIGINT.
pub fn serve(args: &ServeArgs) -> CliResult {
    init_logging(args.log_format);
    let config = load_config(args.config.as_deref())?;
    let (default_socket, system) = partita_manager::default_serve_socket();
    let socket = args.socket.clone().unwrap_or(default_socket);
    if args.cleanup {
        let s = partita_manager::cleanup(&socket);
        println!(
            "journals undone: {}, affinities restored: {}, unlisted children restored: {}, moved back: {}, discarded: {}, untrusted journals: {}, cgroups removed: {}",
            s.journals, s.restored, s.children, s.moved_back, s.discarded, s.untrusted, s.cgroups
        );
        return Ok(());
    }
    let metrics = args
        .metrics
        .as_deref()
        .map(|addr| partita_manager::metrics::bind(addr, args.metrics_public))
        .transpose()?;
    partita_manager::serve_with_metrics(config, socket, system, metrics)?;
    Ok(())
}
