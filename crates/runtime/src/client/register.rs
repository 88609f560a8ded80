//! Registration: connect, hello, welcome with the control page's fd.

use partita_protocol::page::PageMap;
use partita_protocol::sys::recv_with_fd;
use partita_protocol::wire::{frame_len, ClientMessage, Hello, ManagerMessage, MAX_MANAGER_FRAME};
use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Duration;

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

/// Why registration failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RegisterError {
    #[error("{call}: {source}")]
    Io {
        call: &'static str,
        source: std::io::Error,
    },
    #[error("manager refused: {code:?}: {message}")]
    Refused {
        code: partita_protocol::wire::ErrorCode,
        message: String,
    },
    #[error("bad reply from the manager: {0}")]
    Protocol(String),
    #[error("control page: {0}")]
    Page(#[from] partita_protocol::page::PageError),
}

fn io(call: &'static str) -> impl FnOnce(std::io::Error) -> RegisterError {
    move |source| RegisterError::Io { call, source }
}

/// Connect to `socket` and register; blocks at most a few seconds (on the client thread).
pub(crate) fn register(p: &Params, socket: &Path) -> Result<Connection, RegisterError> {
    let mut stream = UnixStream::connect(socket).map_err(io("connect"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(3)))
        .map_err(io("setsockopt"))?;
    stream
        .set_write_timeout(Some(Duration::from_secs(3)))
        .map_err(io("setsockopt"))?;
    let mut hello = Hello::new(p.pool_size, &p.name);
    hello.partition_hint = p.hint.clone();
    stream
        .write_all(&ClientMessage::Hello(hello).encode())
        .map_err(io("send hello"))?;

    // Read one whole frame; the fd arrives with its first byte.
    let mut buf: Vec<u8> = Vec::with_capacity(256);
    let mut fd: Option<OwnedFd> = None;
    let mut chunk = [0u8; 256];
    let len = loop {
        if buf.len() >= 4 {
            let len = frame_len(buf[..4].try_into().unwrap_or([0; 4]), MAX_MANAGER_FRAME)
                .map_err(|e| RegisterError::Protocol(e.to_string()))?;
            if buf.len() >= 4 + len {
                break len;
            }
        }
        let (n, got) = recv_with_fd(stream.as_fd(), &mut chunk).map_err(io("recvmsg"))?;
        if n == 0 {
            return Err(RegisterError::Protocol(
                "connection closed before the welcome".into(),
            ));
        }
        if fd.is_none() {
            fd = got;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let msg = ManagerMessage::decode(&buf[4..4 + len])
        .map_err(|e| RegisterError::Protocol(e.to_string()))?;
    let app_id = match msg {
        ManagerMessage::Welcome { app_id, .. } => app_id,
        ManagerMessage::Error { code, message } => {
            return Err(RegisterError::Refused { code, message })
        }
        other => {
            return Err(RegisterError::Protocol(format!(
                "unexpected reply {other:?}"
            )))
        }
    };
    let fd = fd.ok_or_else(|| RegisterError::Protocol("welcome without a control page".into()))?;
    let page = PageMap::open(fd)?;
    if page.header.app_id.load(Ordering::Acquire) != app_id {
        return Err(RegisterError::Protocol(
            "control page belongs to another application".into(),
        ));
    }
    stream
        .set_nonblocking(true)
        .map_err(io("set_nonblocking"))?;
    Ok(Connection { stream, page })
}
