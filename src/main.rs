//! The `partita` command: every subcommand in one binary. Each group lives in its own module
//! under `cli/`; they are thin: parse, call the crate that does the work, print.
//!
//! - `serve`, `status`, `run`: partita-manager (the daemon and its client calls);
//! - `top`: a live view of the manager's status;
//! - `completions`, `man`: generated from this definition (shipped in `dist/`);
//! - `demo` and the hidden `workload`, `probe`: partita-demo.

mod cli;

use clap::{CommandFactory, Parser, Subcommand};
use std::process::ExitCode;

/// Partita: process control for parallel programs sharing one machine.
///
/// `partita serve` runs the manager, which decides how many CPUs (and which) each registered
/// program gets; programs built on partita-runtime follow their allocation by suspending or
/// resuming workers between tasks. `status` and `top` show what it decided, `run` confines a
/// program that does not register, `demo` runs a multiprogrammed workload in every mode.
/// Applications find the manager through PARTITA_SOCKET (default: /run/partita/partita.sock
/// as root, else $XDG_RUNTIME_DIR/partita.sock).
#[derive(Debug, Parser)]
#[command(name = "partita", version)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the manager daemon (system mode as root, else user mode).
    Serve(cli::serve::ServeArgs),
    /// Show the manager's CPUs, partitions and applications.
    Status(cli::status::StatusArgs),
    /// A live view of partitions and applications (`q` quits; `--once` prints one frame).
    Top(cli::top::TopArgs),
    /// Start a program under the manager: confined to a partition, or a build whose jobs
    /// follow its allocation (--jobserver), or sized from it at start (--threads-env).
    Run(cli::run::RunArgs),
    /// Measure sustained memory bandwidth (a STREAM-like triad) and store it as the bandwidth
    /// policy's capacity.
    Calibrate(cli::calibrate::CalibrateArgs),
    /// Run the models: bandwidth-aware co-scheduling (Antonopoulos), allocation policies over
    /// time, NUMA page migration.
    Simulate(partita_sim::SimulateArgs),
    /// Print the completion script for a shell (bash, zsh, fish, elvish, powershell).
    Completions(cli::dist::CompletionsArgs),
    /// Print the manual page (or write every page with --dir).
    Man(cli::dist::ManArgs),
    /// Run a multiprogrammed workload with and without process control, and report.
    Demo(partita_demo::DemoArgs),
    /// Run one workload application of the demo on its own (used by `demo` to start real
    /// separate processes; also useful by hand).
    #[command(hide = true)]
    Workload(partita_demo::WorkloadArgs),
    /// A small program built on partita-runtime, for the manager's tests and benchmarks.
    #[command(hide = true)]
    Probe(partita_demo::probe::ProbeArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::Run(args) = &cli.command {
        // The exit code is the command's.
        return cli::run::run(args).unwrap_or_else(|e| {
            eprintln!("partita: {e}");
            ExitCode::FAILURE
        });
    }
    let result = match &cli.command {
        Command::Serve(args) => cli::serve::serve(args),
        Command::Status(args) => cli::status::status(args),
        Command::Top(args) => cli::top::top(args),
        Command::Run(_) => Ok(()), // handled above
        Command::Calibrate(args) => cli::calibrate::run(args).map_err(Into::into),
        Command::Simulate(args) => partita_sim::run(args).map(|_| ()).map_err(Into::into),
        Command::Completions(args) => cli::dist::completions(args, Cli::command()),
        Command::Man(args) => cli::dist::man(args, Cli::command()),
        Command::Demo(args) => partita_demo::run(args),
        Command::Workload(args) => partita_demo::workload::run_workload(args),
        Command::Probe(args) => partita_demo::probe::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("partita: {e}");
            match cli.command {
                // systemd's RestartPreventExitStatus= tells these apart (dist/partita.service).
                Command::Serve(_) => ExitCode::from(cli::serve::exit_status(e.as_ref())),
                _ => ExitCode::FAILURE,
            }
        }
    }
}
