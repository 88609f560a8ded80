//! Start-time sizing for runtimes that cannot change their thread count later (OpenMP, BLAS
//! libraries, rayon, Go, Julia, ...): `partita run --threads-env -- CMD`.
//!
//! What it does: registers the command as an application (pool = CPUs available), waits for
//! the manager's first allocation (at most [`FIRST_ALLOCATION_WAIT`]), sets the thread-count
//! variables of [`thread_env`] to that allocation and `OMP_WAIT_POLICY=passive` (idle OpenMP
//! threads sleep instead of spinning on CPUs others were given), starts the command confined to
//! the allocated CPUs, and stays registered while it runs, reporting a constant demand equal
//! to the threads it started with, so the manager keeps accounting for them.
//!
//! What it cannot do: the command reads these variables once, at start; a later change of the
//! allocation cannot change its thread count. When the allocation shrinks, its threads are
//! confined to the smaller CPU set (they time-share there rather than on others' CPUs); when
//! it grows, the command does not use the extra CPUs. Variables the user set explicitly are
//! overridden. Programs that ignore these variables (their own `-t` flag, `nproc`-based
//! sizing) are only confined, not sized.

use crate::confine;
use crate::error::Error;
use crate::link::{Link, Params};
use std::ffi::OsString;
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

/// How long to wait for the manager's first allocation before using what the page says.
pub const FIRST_ALLOCATION_WAIT: Duration = Duration::from_secs(2);

/// The variables set for a command given `threads` CPUs.
///
/// ```
/// let env = partita_jobserver::threads_env::thread_env(3);
/// assert!(env.contains(&("OMP_NUM_THREADS", "3".to_string())));
/// assert!(env.contains(&("OMP_WAIT_POLICY", "passive".to_string())));
/// ```
pub fn thread_env(threads: u32) -> Vec<(&'static str, String)> {
    let n = threads.max(1).to_string();
    let mut v: Vec<(&'static str, String)> = [
        "OMP_NUM_THREADS",
        "RAYON_NUM_THREADS",
        "MKL_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "BLIS_NUM_THREADS",
        "VECLIB_MAXIMUM_THREADS",
        "NUMEXPR_NUM_THREADS",
        "JULIA_NUM_THREADS",
        "GOMAXPROCS",
        "TF_NUM_INTRAOP_THREADS",
    ]
    .into_iter()
    .map(|k| (k, n.clone()))
    .collect();
    v.push(("OMP_WAIT_POLICY", "passive".into()));
    v
}

/// Run `cmd` sized to its allocation. `socket = None`: standalone (every CPU available).
pub fn run(
    cmd: &[OsString],
    socket: Option<std::path::PathBuf>,
    partition: &str,
) -> Result<ExitCode, Error> {
    let (program, args) = cmd.split_first().ok_or(Error::NoCommand)?;
    let pool = confine::available_cpus();
    let name = std::path::Path::new(program)
        .file_name()
        .map_or("command".into(), |n| n.to_string_lossy().into_owned());
    let mut link = Link::new(socket.map(|socket| Params {
        socket,
        name,
        partition: partition.to_string(),
        pool,
        flags: 0,
    }));
    let mut threads = pool;
    let mut cpus = partita_protocol::CpuSet::new();
    if let Some(sess) = link.session() {
        sess.report(pool, 0).ok();
        let start = Instant::now();
        while start.elapsed() < FIRST_ALLOCATION_WAIT {
            if let Some(a) = sess.allocation() {
                threads = if a.partition_only {
                    pool
                } else {
                    a.target.max(1)
                };
                cpus = a.cpus;
                break;
            }
            sess.wait(Duration::from_millis(20));
        }
    }
    let mut command = Command::new(program);
    command.args(args).envs(thread_env(threads));
    let mut child = command.spawn().map_err(|source| Error::Spawn {
        program: program.to_string_lossy().into_owned(),
        source,
    })?;
    let root = child.id() as i32;
    let mut applied = partita_protocol::CpuSet::new();
    loop {
        if let Some(status) = child.try_wait().map_err(|source| Error::Io {
            call: "waitpid",
            source,
        })? {
            link.close();
            return Ok(crate::exit_code(status));
        }
        if let Some(a) = link.session().and_then(|s| s.allocation()) {
            cpus = a.cpus;
        }
        if !cpus.is_empty() && cpus != applied {
            confine::confine_tree(root, &cpus);
            applied = cpus;
        }
        link.report(threads, threads);
        match link.session() {
            Some(s) => s.wait(Duration::from_millis(50)),
            None => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}
