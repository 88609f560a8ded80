//! `partita run`: start an uncontrolled program confined to a partition.

use super::{socket_or_default, CliResult};
use std::path::PathBuf;

/// Options of `partita run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
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

/// Join the partition, then exec the command (it returns only on failure).
pub fn run(args: &RunArgs) -> CliResult {
    use std::os::unix::process::CommandExt;
    let socket = socket_or_default(args.socket.as_deref());
    let (partition, cpus) = partita_manager::confine_self(&socket, &args.partition)?;
    eprintln!("partita: running in partition {partition} on CPUs {cpus}");
    // exec keeps the pid (which the manager tracks), the cgroup and the affinity.
    let err = std::process::Command::new(&args.command[0])
        .args(&args.command[1..])
        .exec();
    Err(format!("cannot execute {}: {err}", args.command[0]).into())
}
