//! The `partita` command: manager daemon, status, confinement of uncontrolled programs, demo.

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// Partita: process control for parallel programs sharing one machine.
#[derive(Debug, Parser)]
#[command(name = "partita", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the manager daemon (system mode as root, else user mode).
    Serve(ServeArgs),
    /// Show the manager's CPUs, partitions and applications.
    Status(StatusArgs),
    /// Start an uncontrolled program confined to a partition.
    Run(RunArgs),
    /// Run a multiprogrammed workload with and without process control, and report.
    Demo(partita_manager::demo::DemoArgs),
    /// Run one workload application of the demo on its own (used by `demo` to start real
    /// separate processes; also useful by hand).
    #[command(hide = true)]
    Workload(partita_manager::demo::WorkloadArgs),
    /// A small program built on partita-runtime, for the manager's tests and benchmarks.
    #[command(hide = true)]
    Probe(partita_manager::probe::ProbeArgs),
}

#[derive(Debug, clap::Args)]
struct ServeArgs {
    /// Configuration file (TOML); without one, /etc/partita/partita.toml if it exists, else
    /// the defaults.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Socket path (default: /run/partita/partita.sock as root, else
    /// $XDG_RUNTIME_DIR/partita.sock; PARTITA_SOCKET overrides).
    #[arg(long)]
    socket: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
struct StatusArgs {
    /// Print JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// Socket path (default as for `serve`).
    #[arg(long)]
    socket: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
struct RunArgs {
    /// Partition to run in (default: the default partition).
    #[arg(long, default_value = "")]
    partition: String,
    /// Socket path (default as for `serve`).
    #[arg(long)]
    socket: Option<PathBuf>,
    /// The command and its arguments.
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

fn socket_or_default(s: &Option<PathBuf>) -> PathBuf {
    s.clone()
        .unwrap_or_else(|| partita_manager::default_serve_socket().0)
}

fn serve(args: &ServeArgs) -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let config = match &args.config {
        Some(p) => partita_manager::Config::from_file(p)?,
        None => {
            let etc = std::path::Path::new("/etc/partita/partita.toml");
            if etc.exists() {
                partita_manager::Config::from_file(etc)?
            } else {
                partita_manager::Config::default()
            }
        }
    };
    let (default_socket, system) = partita_manager::default_serve_socket();
    let socket = args.socket.clone().unwrap_or(default_socket);
    partita_manager::serve(config, socket, system)?;
    Ok(())
}

fn status(args: &StatusArgs) -> Result<(), Box<dyn std::error::Error>> {
    let s = partita_manager::query_status(&socket_or_default(&args.socket))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&s)?);
    } else {
        print!("{}", s.to_table());
    }
    Ok(())
}

fn run(args: &RunArgs) -> Result<(), Box<dyn std::error::Error>> {
    use std::os::unix::process::CommandExt;
    let socket = socket_or_default(&args.socket);
    let (partition, cpus) = partita_manager::confine_self(&socket, &args.partition)?;
    eprintln!("partita: running in partition {partition} on CPUs {cpus}");
    // exec keeps the pid (which the manager tracks), the cgroup and the affinity.
    let err = std::process::Command::new(&args.command[0])
        .args(&args.command[1..])
        .exec();
    Err(format!("cannot execute {}: {err}", args.command[0]).into())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Serve(args) => serve(args),
        Command::Status(args) => status(args),
        Command::Run(args) => run(args),
        Command::Demo(args) => partita_manager::demo::run(args),
        Command::Workload(args) => partita_manager::demo::run_workload(args),
        Command::Probe(args) => partita_manager::probe::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("partita: {e}");
            ExitCode::FAILURE
        }
    }
}
