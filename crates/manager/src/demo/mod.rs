//! `partita demo`: the multiprogrammed workload run in each mode (uncontrolled, partitioned,
//! process control, batch) with a report.

/// Options of `partita demo`.
#[derive(Debug, Clone, clap::Args)]
pub struct DemoArgs {}

/// Run the demo.
pub fn run(_args: &DemoArgs) -> Result<(), Box<dyn std::error::Error>> {
    Err("partita demo is not built yet".into())
}

/// Options of the hidden `partita workload` subcommand.
#[derive(Debug, Clone, clap::Args)]
pub struct WorkloadArgs {}

/// Run one workload application in this process.
pub fn run_workload(_args: &WorkloadArgs) -> Result<(), Box<dyn std::error::Error>> {
    Err("partita workload is not built yet".into())
}
