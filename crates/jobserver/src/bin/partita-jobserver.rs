//! `partita-jobserver run [OPTIONS] -- CMD` and `partita-jobserver threads-env -- CMD`: the
//! jobserver commands on their own (the `partita` CLI offers them as `partita run --jobserver`
//! and `partita run --threads-env`). `--report FILE` (run only) writes the outcome as
//! `key value` lines, for tests and benchmarks.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "partita-jobserver",
    about = "GNU make jobserver under the Partita manager"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Serve a jobserver to CMD.
    Run {
        /// Write the outcome (tokens reclaimed, bytes drained, most tokens out) to this file.
        #[arg(long)]
        report: Option<std::path::PathBuf>,
        #[command(flatten)]
        args: partita_jobserver::JobserverRunArgs,
    },
    /// Start CMD with thread-count variables sized to its allocation.
    ThreadsEnv(partita_jobserver::ThreadsEnvArgs),
}

fn main() -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let result = match Cli::parse().cmd {
        Cmd::Run { report, args } => run(&args, report.as_deref()),
        Cmd::ThreadsEnv(a) => partita_jobserver::run_threads_env(&a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("partita: {e}");
            ExitCode::from(match e {
                partita_jobserver::Error::Spawn { .. } => 127,
                _ => 1,
            })
        }
    }
}

fn run(
    args: &partita_jobserver::JobserverRunArgs,
    report: Option<&std::path::Path>,
) -> Result<ExitCode, partita_jobserver::Error> {
    let Some(path) = report else {
        return partita_jobserver::run_jobserver(args);
    };
    let (opts, cmd) = partita_jobserver::options(args)?;
    let o = partita_jobserver::server::serve(&cmd, &opts, None)?;
    let text = format!(
        "reclaimed {}\nexcess {}\nmax_out {}\nregistered {}\npool {}\n",
        o.reclaimed, o.excess_drained, o.max_out, o.registered as u8, opts.pool
    );
    std::fs::write(path, text).map_err(|source| partita_jobserver::Error::Io {
        call: "write --report file",
        source,
    })?;
    Ok(partita_jobserver::exit_code_of(o.status))
}
