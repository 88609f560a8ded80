//! Registration: where to look for a manager, and the hello this pool sends (the exchange
//! itself is partita-protocol's `client`).

use partita_protocol::page::PageMap;
use partita_protocol::wire::Hello;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

/// What registration needs (kept for reconnecting).
#[derive(Debug, Clone)]
pub(crate) struct Params {
    /// Where a manager's socket may appear, in order of preference.
    pub sockets: Vec<PathBuf>,
    pub name: String,
    pub hint: String,
    pub pool_size: u32,
}

impl Params {
    /// The first candidate socket that exists now (one `stat` per candidate).
    pub(crate) fn existing_socket(&self) -> Option<PathBuf> {
        self.sockets.iter().find(|p| p.exists()).cloned()
    }
}

/// Where to look for a manager: `PARTITA_SOCKET` alone if set, else
/// `$XDG_RUNTIME_DIR/partita.sock` then the system socket (partita-protocol's
/// `socket_path`, kept as a list so a manager that starts later is found in either place).
pub(crate) fn candidate_sockets() -> Vec<PathBuf> {
    if let Some(p) = std::env::var_os("PARTITA_SOCKET") {
        return vec![PathBuf::from(p)];
    }
    let mut v = Vec::new();
    if let Some(dir) = std::env::var_os("XDG_RUNTIME_DIR") {
        v.push(PathBuf::from(dir).join(partita_protocol::SOCKET_NAME));
    }
    v.push(PathBuf::from(partita_protocol::SYSTEM_SOCKET));
    v
}

/// A registered connection: the socket (non-blocking from now on) and the mapped page.
pub(crate) struct Connection {
    pub stream: UnixStream,
    pub page: PageMap,
}

pub(crate) use partita_protocol::client::RegisterError;

/// Connect to `socket` and register (partita-protocol's client); blocks at most a few seconds
/// (on the client thread).
pub(crate) fn register(p: &Params, socket: &Path) -> Result<Connection, RegisterError> {
    let mut hello = Hello::new(p.pool_size, &p.name);
    hello.partition_hint = p.hint.clone();
    let (stream, page) = partita_protocol::client::register(socket, hello)?;
    Ok(Connection { stream, page })
}
