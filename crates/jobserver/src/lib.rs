//! # partita-jobserver
//!
//! Builds under the Partita manager. `partita run --jobserver -- make -j16` serves a GNU make
//! jobserver to the command and registers the build with the manager as an application: its
//! demand is the number of jobs it could run (implicit slot + tokens out + clients blocked
//! waiting for a token), and the tokens in circulation follow its allocation — growth writes
//! new tokens at once, shrink keeps tokens as they come back. Without a reachable manager the
//! build runs like plain `make -jN`.
//!
//! **Linux only**, as the manager it registers with (crates/manager).
//!
//! - [`policy`]: the token policy, pure functions;
//! - [`fifo`]: the fifo both protocol forms share;
//! - [`procscan`]: the build's tree from `/proc` (live jobs, token waiters);
//! - [`server`]: the loop that applies the policy;
//! - [`link`]: registration with the manager;
//! - [`makeargs`]: taking `-jN` out of a make command line;
//! - [`stamps`]: jobs that stamp their start and end, and the analysis of the stamps;
//! - [`threads_env`]: `partita run --threads-env`, start-time sizing of OpenMP and friends.
//!
//! Limits (the protocol's, documented rather than hidden): a client's implicit slot cannot be
//! taken away, so a build always runs at least one job per top-level client, even with an
//! allocation of 0; shrinking waits for tokens to come back, so a long job keeps its CPU until
//! it ends; the protocol does not say who holds a token, so a token is written off as leaked
//! only when more tokens are out than the build's live clients can hold (their jobs, see
//! [`procscan`]) for [`server::LEAK_CONFIRM`] (a client killed while holding tokens), and at the latest when the
//! command exits (the fifo goes away with every token). Jobs orphaned by a killed client (a
//! sub-make killed while its jobs run) leave the tree; their tokens are reclaimed while they
//! may still run, so the build can exceed its allocation until they end. Processes that
//! leave the tree on purpose (`setsid` daemons, a compiler server) are invisible the same way.
//! The server itself must outlive the build: SIGTERM/SIGHUP are forwarded to the command and
//! SIGINT/SIGQUIT ignored (the terminal sends them to the command too).

#![warn(missing_docs)]

pub mod confine;
mod error;
pub mod fifo;
pub mod link;
pub mod makeargs;
pub mod policy;
pub mod procscan;
pub mod server;
pub mod stamps;
mod sys;
pub mod threads_env;

pub use error::Error;
pub use server::{Outcome, StatusCell, Style, TokenStatus};

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Largest pool a build may ask for.
pub const MAX_JOBS: u32 = 4096;
/// Pool size for `make -j` without a number.
pub const UNLIMITED_JOBS: u32 = 256;

/// `partita run --jobserver [OPTIONS] -- CMD ...`.
#[derive(Debug, Clone, clap::Args)]
pub struct JobserverRunArgs {
    /// Partition hint for the build.
    #[arg(long)]
    pub partition: Option<String>,
    /// Manager socket (default: `$PARTITA_SOCKET`, `$XDG_RUNTIME_DIR/partita.sock`,
    /// `/run/partita/partita.sock`). No manager there: the build runs standalone.
    #[arg(long)]
    pub socket: Option<PathBuf>,
    /// Most jobs at once (default: make's own `-jN`, else the CPUs available).
    #[arg(long, short = 'j')]
    pub jobs: Option<u32>,
    /// Fifo path (must not exist; default: a fresh one in `$XDG_RUNTIME_DIR` or /tmp).
    #[arg(long)]
    pub fifo: Option<PathBuf>,
    /// How the jobserver is announced in MAKEFLAGS / CARGO_MAKEFLAGS.
    #[arg(long, value_enum, default_value_t = Style::Auto)]
    pub jobserver_style: Style,
    /// Do not set the build's CPU affinity to the allocated CPUs.
    #[arg(long)]
    pub no_confine: bool,
    /// The command and its arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    pub command: Vec<OsString>,
}

impl JobserverRunArgs {
    /// Defaults for everything but the command (for a CLI that builds the arguments itself).
    ///
    /// ```
    /// let a = partita_jobserver::JobserverRunArgs::new(vec!["make".into(), "-j8".into()]);
    /// assert_eq!(partita_jobserver::options(&a).unwrap().0.pool, 8);
    /// ```
    pub fn new(command: Vec<OsString>) -> Self {
        JobserverRunArgs {
            partition: None,
            socket: None,
            jobs: None,
            fifo: None,
            jobserver_style: Style::Auto,
            no_confine: false,
            command,
        }
    }
}

/// `partita run --threads-env [OPTIONS] -- CMD ...`.
#[derive(Debug, Clone, clap::Args)]
pub struct ThreadsEnvArgs {
    /// Partition hint.
    #[arg(long)]
    pub partition: Option<String>,
    /// Manager socket (as for `--jobserver`).
    #[arg(long)]
    pub socket: Option<PathBuf>,
    /// The command and its arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    pub command: Vec<OsString>,
}

impl ThreadsEnvArgs {
    /// Defaults for everything but the command.
    ///
    /// ```
    /// let a = partita_jobserver::ThreadsEnvArgs::new(vec!["true".into()]);
    /// assert!(a.partition.is_none());
    /// ```
    pub fn new(command: Vec<OsString>) -> Self {
        ThreadsEnvArgs {
            partition: None,
            socket: None,
            command,
        }
    }
}

/// The manager socket to use, or `None` (standalone) when `PARTITA=off` or nothing is there.
fn manager_socket(explicit: Option<&PathBuf>) -> Option<PathBuf> {
    if std::env::var("PARTITA").is_ok_and(|v| v == "off") {
        return None;
    }
    let p = explicit
        .cloned()
        .unwrap_or_else(partita_protocol::socket_path);
    p.exists().then_some(p)
}

/// The exit code a shell would report: the command's, or 128 + signal.
///
/// ```
/// use std::os::unix::process::ExitStatusExt;
/// let s = std::process::ExitStatus::from_raw(3 << 8);
/// assert_eq!(partita_jobserver::exit_code_of(s), std::process::ExitCode::from(3));
/// ```
pub fn exit_code_of(status: std::process::ExitStatus) -> ExitCode {
    exit_code(status)
}

pub(crate) fn exit_code(status: std::process::ExitStatus) -> ExitCode {
    use std::os::unix::process::ExitStatusExt;
    let code = status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1);
    ExitCode::from(code.clamp(0, 255) as u8)
}

/// Options for the server from the command-line arguments; returns them and the command to
/// run (make's `-jN` taken out and used as the pool, see [`makeargs`]).
pub fn options(args: &JobserverRunArgs) -> Result<(server::Options, Vec<OsString>), Error> {
    let (program, rest) = args.command.split_first().ok_or(Error::NoCommand)?;
    let mut cmd = vec![program.clone()];
    let mut make_jobs = None;
    if makeargs::is_make(program) {
        let (r, j) = makeargs::adopt_jobs(rest);
        cmd.extend(r);
        make_jobs = j;
    } else {
        cmd.extend(rest.iter().cloned());
    }
    let pool = match (args.jobs, make_jobs) {
        (Some(n), _) => n,
        (None, Some(makeargs::Jobs::Count(n))) => n,
        (None, Some(makeargs::Jobs::Unlimited)) => UNLIMITED_JOBS,
        (None, None) => confine::available_cpus(),
    };
    if !(1..=MAX_JOBS).contains(&pool) {
        return Err(Error::Jobs(pool));
    }
    let name = std::path::Path::new(program)
        .file_name()
        .map_or("build".into(), |n| n.to_string_lossy().into_owned());
    let opts = server::Options {
        pool,
        name,
        partition: args.partition.clone().unwrap_or_default(),
        socket: manager_socket(args.socket.as_ref()),
        fifo: args.fifo.clone().unwrap_or_else(fifo::default_path),
        style: args.jobserver_style,
        confine: !args.no_confine,
        tick: Duration::from_millis(20),
        handle_signals: true,
    };
    Ok((opts, cmd))
}

/// `partita run --jobserver`: serve a jobserver to the command until it exits; returns its
/// exit code (128 + signal if it was killed).
pub fn run_jobserver(args: &JobserverRunArgs) -> Result<ExitCode, Error> {
    let (opts, cmd) = options(args)?;
    let outcome = server::serve(&cmd, &opts, None)?;
    if outcome.reclaimed > 0 || outcome.excess_drained > 0 {
        tracing::info!(
            reclaimed = outcome.reclaimed,
            excess = outcome.excess_drained,
            "partita: jobserver repaired its token count"
        );
    }
    Ok(exit_code(outcome.status))
}

/// `partita run --threads-env`: see [`threads_env`].
pub fn run_threads_env(args: &ThreadsEnvArgs) -> Result<ExitCode, Error> {
    threads_env::run(
        &args.command,
        manager_socket(args.socket.as_ref()),
        args.partition.as_deref().unwrap_or(""),
    )
}
