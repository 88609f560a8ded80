//! No manager client: the build has none (loom models, which leave the control page out; the
//! portable build, on a platform other than Linux or with `--cfg partita_portable`). A pool
//! then never contacts a manager and runs at its full size; `ProcessControl::Manual` (and
//! `set_target_workers` in the default `Manager` mode) still changes its active workers.

/// What a pool keeps while a client runs: here nothing runs.
pub(crate) struct ClientGuard;

/// A pool in `Manager` mode was built where process control by a manager is not compiled in.
/// When the environment asks for a manager anyway (`PARTITA_SOCKET` set, or a socket at one
/// of the default paths), say once per process, at debug level, that it is ignored. Only
/// reads the environment and checks whether a path exists: no socket is opened, and no
/// Linux-only call is made.
#[cfg(not(loom))]
pub(crate) fn manager_unsupported() {
    use std::sync::atomic::{AtomicBool, Ordering};
    static SAID: AtomicBool = AtomicBool::new(false);
    if std::env::var("PARTITA").is_ok_and(|v| v == "off") || SAID.load(Ordering::Relaxed) {
        return;
    }
    let Some(asked) = manager_asked_for() else {
        return;
    };
    if !SAID.swap(true, Ordering::Relaxed) {
        tracing::debug!(
            manager = %asked,
            "partita: process control by a manager is Linux-only; ignoring it (the pool runs at full size)"
        );
    }
}

/// `PARTITA_SOCKET`'s value if it is set, else a default socket path that exists.
#[cfg(not(loom))]
fn manager_asked_for() -> Option<String> {
    if let Some(p) = std::env::var_os("PARTITA_SOCKET") {
        return Some(format!("PARTITA_SOCKET={}", p.to_string_lossy()));
    }
    let xdg = std::env::var_os("XDG_RUNTIME_DIR")
        .map(|d| std::path::PathBuf::from(d).join(partita_protocol::SOCKET_NAME));
    xdg.into_iter()
        .chain([std::path::PathBuf::from(partita_protocol::SYSTEM_SOCKET)])
        .find(|p| p.exists())
        .map(|p| p.display().to_string())
}
