//! `partita run`: start a program under the manager. Plain, it is an uncontrolled program
//! confined to a partition; with `--jobserver` a build whose jobs follow its allocation through
//! a GNU make jobserver; with `--threads-env` a program whose runtime is sized from the
//! allocation at start (partita-jobserver does both).

use super::{socket_or_default, CliResult};
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

/// Options of `partita run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Partition to run in (default: the default partition).
    #[arg(long, default_value = "")]
    partition: String,
    /// Socket path (default: where applications look: PARTITA_SOCKET, else
    /// $XDG_RUNTIME_DIR/partita.sock if it exists, else /run/partita/partita.sock).
    #[arg(long)]
    socket: Option<PathBuf>,
    /// Serve a GNU make jobserver (MAKEFLAGS / CARGO_MAKEFLAGS) whose tokens follow the
    /// build's allocation.
    #[arg(long, conflicts_with = "threads_env")]
    jobserver: bool,
    /// Set OMP_NUM_THREADS, RAYON_NUM_THREADS and similar from the allocation at start.
    #[arg(long)]
    threads_env: bool,
    /// With --jobserver: most jobs at once (default: make's own -jN, else the CPUs available).
    #[arg(long, short = 'j', requires = "jobserver")]
    jobs: Option<u32>,
    /// With --jobserver: the fifo path (must not exist; default: a fresh one).
    #[arg(long, requires = "jobserver")]
    fifo: Option<PathBuf>,
    /// With --jobserver: how the jobserver is announced to the build.
    #[arg(long, value_enum, requires = "jobserver")]
    jobserver_style: Option<partita_jobserver::Style>,
    /// With --jobserver: do not set the build's CPU affinity to the allocated CPUs.
    #[arg(long, requires = "jobserver")]
    no_confine: bool,
    /// The command and its arguments.
    #[arg(last = true, required = true)]
    command: Vec<OsString>,
}

/// Run the command in the mode the flags choose; the exit code is the command's.
pub fn run(args: &RunArgs) -> Result<ExitCode, Box<dyn std::error::Error>> {
    let partition = (!args.partition.is_empty()).then(|| args.partition.clone());
    if args.jobserver {
        let mut j = partita_jobserver::JobserverRunArgs::new(args.command.clone());
        j.partition = partition;
        j.socket = args.socket.clone();
        j.jobs = args.jobs;
        j.fifo = args.fifo.clone();
        if let Some(style) = args.jobserver_style {
            j.jobserver_style = style;
        }
        j.no_confine = args.no_confine;
        return Ok(partita_jobserver::run_jobserver(&j)?);
    }
    if args.threads_env {
        let mut t = partita_jobserver::ThreadsEnvArgs::new(args.command.clone());
        t.partition = partition;
        t.socket = args.socket.clone();
        return Ok(partita_jobserver::run_threads_env(&t)?);
    }
    confined(args).map(|()| ExitCode::FAILURE)
}

/// Join the partition, then exec the command (it returns only on failure).
fn confined(args: &RunArgs) -> CliResult {
    use std::os::unix::process::CommandExt;
    let socket = socket_or_default(args.socket.as_deref());
    let (partition, cpus) = partita_manager::confine_self(&socket, &args.partition)?;
    eprintln!("partita: running in partition {partition} on CPUs {cpus}");
    // exec keeps the pid (which the manager tracks), the cgroup and the affinity.
    let err = std::process::Command::new(&args.command[0])
        .args(&args.command[1..])
        .exec();
    Err(format!(
        "cannot execute {}: {err}",
        args.command[0].to_string_lossy()
    )
    .into())
}
