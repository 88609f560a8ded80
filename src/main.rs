//! The `partita` command: every subcommand in one binary. Each group lives in its own module
//! under `cli/`; they are thin: parse, call the crate that does the work, print.
//!
//! - `serve`, `status`, `run`: partita-manager (the daemon and its client calls);
//! - `demo` and the hidden `workload`, `probe`: partita-demo.

mod cli;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Partita: process control for parallel programs sharing one machine.
#[derive(Debug, Parser)]
#[command(name = "partita", version, about)]
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
    /// Start an uncontrolled program confined to a partition.
    Run(cli::run::RunArgs),
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
    let result = match &cli.command {
        Command::Serve(args) => cli::serve::serve(args),
        Command::Status(args) => cli::status::status(args),
        Command::Top(args) => cli::top::top(args),
        Command::Run(args) => cli::run::run(args),
        Command::Demo(args) => partita_demo::run(args),
        Command::Workload(args) => partita_demo::workload::run_workload(args),
        Command::Probe(args) => partita_demo::probe::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("partita: {e}");
            ExitCode::FAILURE
        }
    }
}
