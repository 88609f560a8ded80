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
    /// Start an uncontrolled program confined to a partition.
    Run(cli::run::RunArgs),
    /// Measure sustained memory bandwidth (a STREAM-like triad) and store it as the bandwidth
    /// policy's capacity.
    Calibrate(cli::calibrate::CalibrateArgs),
    /// Run the models: bandwidth-aware co-scheduling (Antonopoulos), allocation policies over
    /// time, NUMA page migration.
    Simulate(partita_sim::SimulateArgs),
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
        Command::Run(args) => cli::run::run(args),
        Command::Calibrate(args) => cli::calibrate::run(args).map_err(Into::into),
        Command::Simulate(args) => partita_sim::run(args).map(|_| ()).map_err(Into::into),
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
