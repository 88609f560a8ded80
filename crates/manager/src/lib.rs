//! # partita-manager
//!
//! The co-located core arbiter: a daemon (`partita serve`) that registers applications built on
//! partita-runtime, decides how many CPUs (and which) each gets with pure allocation policies,
//! and enforces the result; plus the client calls behind `partita status` and `partita run`
//! (the `partita` binary itself is the root package's). Design:
//! `docs/design/manager.md`.
//!
//! - [`alloc`]: the allocator, pure functions over plain data (levels 1 and 2, placement);
//!   [`hardware`]: the CPUs' NUMA nodes and caches it places by, read from sysfs;
//! - [`config`]: TOML configuration with the papers' defaults;
//! - [`counters`]: memory-traffic counter sources of the bandwidth policy (perf-event,
//!   resctrl, self-report, none), tried in order;
//! - [`enforce`]: affinity and cpuset cgroups; [`journal`]: what they changed, undone by the
//!   next manager when one dies without cleaning up;
//! - [`status`]: what `partita status` shows;
//! - [`harness`]: one connection of the daemon driven in-process (the fuzz target, tests);
//! - [`memfollow`]: memory follows CPUs (page migration of registered applications);
//! - [`metrics`], [`telemetry`]: `/metrics` for Prometheus (`serve --metrics ADDR`);
//! - [`sys`]: the system calls and `/proc` readers, typed and safe (all the crate's `unsafe`);
//! - [`spawn_in_process`] / [`serve`]: the daemon, on its own thread or in the foreground;
//! - [`query_status`] / [`confine_self`]: the request client (`request`) behind
//!   `partita status` and `partita run`.
//!
//! Inside the daemon (private): `daemon` (the tokio tasks), `registry` (the state behind the
//! lock), `realloc` (reallocation as plan, then apply, in rounds: its `README.md` tells who
//! writes a page, the rounds, the lock order and the hand-over) and `quantum` (the bandwidth
//! policy's per-quantum plumbing).
//!
//! ```no_run
//! // A manager on a private socket, inside this process.
//! let handle = partita_manager::spawn_in_process(
//!     partita_manager::Config::default(),
//!     "/tmp/partita-example.sock".into(),
//! ).unwrap();
//! println!("{}", handle.status().to_table());
//! handle.shutdown().unwrap();
//! ```

#![warn(missing_docs)]

pub mod alloc;
pub mod cgroup;
pub mod config;
pub mod counters;
mod daemon;
pub mod enforce;
pub mod hardware;
pub mod journal;
pub use daemon::harness;
mod limits;
pub mod memfollow;
pub mod metrics;
pub mod proc_ref;
mod quantum;
mod realloc;
mod registry;
mod request;
mod service;
pub mod status;
mod supervise;
mod sync;
pub mod sys;
pub mod telemetry;

pub use config::{Config, ConfigError, Control};
pub use request::{confine_self, query_status};
pub use status::Status;

use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Errors of the manager and its client commands.
///
/// ```
/// let e = partita_manager::Error::AlreadyRunning("/run/partita/partita.sock".into());
/// assert!(e.to_string().contains("already"));
/// ```
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Invalid configuration.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// An I/O operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// A system call failed.
    #[error(transparent)]
    Sys(#[from] sys::SysError),
    /// Another manager answers on the socket.
    #[error("a manager is already listening on {0}")]
    AlreadyRunning(PathBuf),
    /// The manager replied with an error.
    #[error("manager refused: {code:?}: {message}")]
    Refused {
        /// Error code.
        code: partita_protocol::wire::ErrorCode,
        /// Text.
        message: String,
    },
    /// The manager's reply could not be understood.
    #[error("bad reply from the manager: {0}")]
    Protocol(String),
    /// The daemon thread failed.
    #[error("manager thread: {0}")]
    Thread(String),
    /// The state directory (the undo journal's) exists but cannot be written.
    #[error("the state directory {} (where the undo journal lives) is not writable: {source}", dir.display())]
    StateDir {
        /// The directory.
        dir: PathBuf,
        /// Why a file could not be created in it.
        source: std::io::Error,
    },
}

impl Error {
    /// The exit status `partita serve` ends with: 78 (`EX_CONFIG`) for a configuration
    /// error, 73 (`EX_CANTCREAT`) for an unwritable state directory, both listed in the
    /// unit's `RestartPreventExitStatus=` (restarting cannot help), else 1.
    ///
    /// ```
    /// let e = partita_manager::Error::Thread("x".into());
    /// assert_eq!(e.exit_status(), 1);
    /// ```
    pub fn exit_status(&self) -> u8 {
        match self {
            Error::Config(_) => 78,
            Error::StateDir { .. } => 73,
            _ => 1,
        }
    }
}

/// A manager running on its own thread (see [`spawn_in_process`]).
///
/// ```
/// let h = partita_manager::spawn_in_process(Default::default(), std::env::temp_dir().join(format!("partita-h-{}.sock", std::process::id()))).unwrap();
/// h.shutdown().unwrap();
/// ```
#[derive(Debug)]
pub struct ManagerHandle {
    socket: PathBuf,
    shared: Arc<daemon::Shared>,
    thread: Option<std::thread::JoinHandle<Result<(), Error>>>,
}

/// Run the manager on its own thread with its own tokio runtime, listening on `socket`.
/// Returns once the socket is listening.
///
/// ```
/// let dir = std::env::temp_dir().join(format!("partita-doc-{}", std::process::id()));
/// let sock = dir.join("m.sock");
/// let mut cfg = partita_manager::Config::default();
/// cfg.uncontrolled = partita_manager::config::Uncontrolled::Tracked;
/// let h = partita_manager::spawn_in_process(cfg, sock.clone()).unwrap();
/// assert!(h.status().cpus_managed >= 1);
/// assert_eq!(h.socket(), sock.as_path());
/// h.shutdown().unwrap();
/// assert!(!sock.exists());
/// std::fs::remove_dir(&dir).unwrap(); // empty: the manager removed its socket
/// ```
pub fn spawn_in_process(config: Config, socket: PathBuf) -> Result<ManagerHandle, Error> {
    let shared = daemon::shared(config, Some(&state_dir(&socket)))?;
    let listening = service::Listening::bound(daemon::bind(&socket, false)?, socket.clone());
    let rt = build_runtime(tokio::runtime::Builder::new_current_thread())?;
    let s = shared.clone();
    let thread = std::thread::Builder::new()
        .name("partita-manager".into())
        .spawn(move || rt.block_on(daemon::run(s, listening)))
        .map_err(|source| Error::Io {
            context: "spawn manager thread".into(),
            source,
        })?;
    Ok(ManagerHandle {
        socket,
        shared,
        thread: Some(thread),
    })
}

/// The daemon's tokio runtime from `builder`, every driver enabled (the socket, timers,
/// signals), with the step named in the error.
fn build_runtime(mut builder: tokio::runtime::Builder) -> Result<tokio::runtime::Runtime, Error> {
    builder.enable_all().build().map_err(|source| Error::Io {
        context: "build tokio runtime".into(),
        source,
    })
}

impl ManagerHandle {
    /// A status snapshot (the same data `partita status --json` prints).
    ///
    /// ```no_run
    /// # let h = partita_manager::spawn_in_process(Default::default(), "/tmp/x.sock".into()).unwrap();
    /// for app in h.status().applications { println!("{} {}", app.name, app.target); }
    /// ```
    pub fn status(&self) -> Status {
        self.shared.status()
    }

    /// The socket the manager listens on.
    ///
    /// ```no_run
    /// # let h = partita_manager::spawn_in_process(Default::default(), "/tmp/x.sock".into()).unwrap();
    /// let status = partita_manager::query_status(h.socket()).unwrap();
    /// ```
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Stop the manager: applications see EOF and go standalone; affinities are restored,
    /// cgroups and the socket removed.
    ///
    /// ```no_run
    /// # let h = partita_manager::spawn_in_process(Default::default(), "/tmp/x.sock".into()).unwrap();
    /// h.shutdown().unwrap();
    /// ```
    pub fn shutdown(mut self) -> Result<(), Error> {
        self.stop()
    }

    fn stop(&mut self) -> Result<(), Error> {
        self.shared.request_shutdown();
        match self.thread.take() {
            Some(t) => t
                .join()
                .map_err(|_| Error::Thread("the manager thread panicked".into()))?,
            None => Ok(()),
        }
    }
}

impl Drop for ManagerHandle {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// Run the manager in the foreground until SIGTERM, SIGINT, SIGHUP or SIGQUIT (`partita
/// serve`); on any of them, on a fatal task failure and on a panic, it cleans up first.
/// `system` selects group-accessible socket permissions (0660) instead of 0600.
///
/// ```no_run
/// partita_manager::serve(Default::default(), "/run/partita/partita.sock".into(), true).unwrap();
/// ```
pub fn serve(config: Config, socket: PathBuf, system: bool) -> Result<(), Error> {
    serve_with_metrics(config, socket, system, None)
}

/// [`serve`], plus `/metrics` on `metrics` (a listener from [`metrics::bind`]) when given.
///
/// ```no_run
/// let l = partita_manager::metrics::bind("127.0.0.1:9464", false).unwrap();
/// partita_manager::serve_with_metrics(Default::default(), "/tmp/p.sock".into(), false, Some(l)).unwrap();
/// ```
pub fn serve_with_metrics(
    config: Config,
    socket: PathBuf,
    system: bool,
    metrics: Option<std::net::TcpListener>,
) -> Result<(), Error> {
    let passed = service::passed()?;
    let state = state_dir(&socket);
    check_state_dir(&state)?;
    let shared = daemon::shared(config, Some(&state))?;
    let listening = service::listen(&passed, &socket, system)?;
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    rt.worker_threads(2).on_thread_start(realloc::react_quickly);
    let rt = build_runtime(rt)?;
    install_panic_hook();
    let s = shared.clone();
    let served = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rt.block_on(async {
            metrics.map_or(Ok(()), |l| metrics::spawn(l, shared.clone()))?;
            let s = shared.clone();
            tokio::spawn(async move {
                use tokio::signal::unix::{signal, SignalKind};
                let kinds = [
                    (SignalKind::terminate(), "SIGTERM"),
                    (SignalKind::interrupt(), "SIGINT"),
                    (SignalKind::hangup(), "SIGHUP"),
                    (SignalKind::quit(), "SIGQUIT"),
                ];
                let mut streams = Vec::new();
                for (k, name) in kinds {
                    match signal(k) {
                        Ok(st) => streams.push((st, name)),
                        Err(e) => tracing::error!(signal = name, error = %e, "cannot install signal handler"),
                    }
                }
                let waits = streams.iter_mut().map(|(st, name)| {
                    Box::pin(async move {
                        st.recv().await;
                        *name
                    })
                });
                let name = first_of(waits).await;
                tracing::info!(signal = name, "signal received");
                s.request_shutdown();
            });
            daemon::run(shared, listening).await
        })
    }));
    match served {
        Ok(r) => r,
        Err(p) => {
            // The daemon's own thread panicked outside any task: undo what it did anyway.
            s.lock().shutdown();
            Err(Error::Thread(format!(
                "the manager panicked: {}",
                supervise::panic_text(p)
            )))
        }
    }
}

/// Wait for the first of several futures (a tiny `select_all`).
async fn first_of<F: std::future::Future<Output = &'static str> + Unpin>(
    futs: impl Iterator<Item = F>,
) -> &'static str {
    let mut futs: Vec<F> = futs.collect();
    if futs.is_empty() {
        std::future::pending::<()>().await;
    }
    std::future::poll_fn(move |cx| {
        for f in futs.iter_mut() {
            if let std::task::Poll::Ready(v) = std::pin::Pin::new(f).poll(cx) {
                return std::task::Poll::Ready(v);
            }
        }
        std::task::Poll::Pending
    })
    .await
}

/// Log every panic through tracing (with its location) before the default hook runs, so a
/// panic in any thread of the daemon is visible in the manager's log.
fn install_panic_hook() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        tracing::error!(panic = %info, "panic in the manager");
        default(info);
    }));
}

/// Give the socket to group `partita` (system mode); without that group only root can use
/// the socket, which is said once in the log.
fn chgrp_partita(socket: &Path) {
    match nix::unistd::Group::from_name("partita") {
        Ok(Some(g)) => {
            if let Err(e) = nix::unistd::chown(socket, None, Some(g.gid)) {
                tracing::warn!(socket = %socket.display(), error = %e, "cannot give the socket to group partita: only root can register");
            }
        }
        // Said loudly for the system socket only: a root manager on a private socket (as in
        // tests) is root's alone by design.
        Ok(None) if socket == Path::new(partita_protocol::SYSTEM_SOCKET) => {
            tracing::warn!(socket = %socket.display(), "group partita does not exist (groupadd --system partita): only root can register; other users' programs run standalone")
        }
        Ok(None) => {
            tracing::debug!(socket = %socket.display(), "no group partita: the socket stays root's")
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot look up group partita: only root can register")
        }
    }
}

/// Refuse to start when the state directory (where the undo journal lives) exists but is not
/// writable: a manager that cannot journal would leave its changes behind after a crash.
/// A missing directory is created later, with the socket.
fn check_state_dir(dir: &Path) -> Result<(), Error> {
    if !dir.is_dir() {
        return Ok(());
    }
    let probe = dir.join(format!(".partita-probe-{}", std::process::id()));
    match std::fs::File::create(&probe) {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(source) => Err(Error::StateDir {
            dir: dir.to_path_buf(),
            source,
        }),
    }
}

/// The manager's state directory: its socket's directory (where the journal lives).
fn state_dir(socket: &Path) -> PathBuf {
    match socket.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Undo what dead managers left (`partita serve --cleanup`): the journals in the state
/// directory of `socket` (affinities, cgroup moves, cgroups, `+cpuset`), then the cgroups
/// left under this process's own cgroup. Live managers' are left alone.
///
/// ```
/// let s = partita_manager::cleanup(std::path::Path::new("/nonexistent/p.sock"));
/// assert_eq!(s.journals, 0);
/// ```
pub fn cleanup(socket: &Path) -> journal::Swept {
    let mut swept = journal::sweep(&state_dir(socket));
    if let Some(h) = cgroup::detect() {
        swept.cgroups = cgroup::sweep(&h.own).len();
    }
    swept
}

/// The default socket for `serve`: system mode (root) `/run/partita/partita.sock`, else
/// `$XDG_RUNTIME_DIR/partita.sock`; `PARTITA_SOCKET` overrides both.
///
/// ```
/// let (path, _system) = partita_manager::default_serve_socket();
/// assert!(path.to_string_lossy().ends_with(".sock") || std::env::var_os("PARTITA_SOCKET").is_some());
/// ```
pub fn default_serve_socket() -> (PathBuf, bool) {
    if let Some(p) = std::env::var_os("PARTITA_SOCKET") {
        return (PathBuf::from(p), sys::euid() == 0);
    }
    if sys::euid() == 0 {
        return (PathBuf::from(partita_protocol::SYSTEM_SOCKET), true);
    }
    let dir = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    (dir.join(partita_protocol::SOCKET_NAME), false)
}
