//! The `partita` command: manager daemon, status, confinement of uncontrolled programs, demo.

use clap::{Parser, Subcommand};
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
    /// Run a multiprogrammed workload with and without process control, and report.
    Demo(partita_manager::demo::DemoArgs),
    /// Run one workload application of the demo on its own (used by `demo` to start real
    /// separate processes; also useful by hand).
    #[command(hide = true)]
    Workload(partita_manager::demo::WorkloadArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Demo(args) => partita_manager::demo::run(args),
        Command::Workload(args) => partita_manager::demo::run_workload(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("partita: {e}");
            ExitCode::FAILURE
        }
    }
}
