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
    check_listener(&stream)?;
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
    check_seals(&fd)?;
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

/// Only a manager run by root or by this process's own user may control it (a listener of
/// another user on a shared socket path is not trusted).
fn check_listener(stream: &UnixStream) -> Result<(), RegisterError> {
    let cred = partita_protocol::sys::peer_cred(stream.as_fd()).map_err(io("SO_PEERCRED"))?;
    // SAFETY: geteuid has no failure mode and no preconditions.
    let me = unsafe { libc::geteuid() };
    if cred.uid != 0 && cred.uid != me {
        return Err(RegisterError::Protocol(format!(
            "the listener runs as uid {}, neither root nor this user ({me})",
            cred.uid
        )));
    }
    Ok(())
}

/// The page must be sealed against shrinking and growing before it is mapped: an unsealed
/// page could be truncated by the sender under our mapping (SIGBUS in the application).
fn check_seals(fd: &OwnedFd) -> Result<(), RegisterError> {
    let need = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW;
    let seals = partita_protocol::sys::file_seals(fd.as_fd()).map_err(io("fcntl(F_GET_SEALS)"))?;
    if seals & need != need {
        return Err(RegisterError::Protocol(format!(
            "control page is not sealed against resizing (seals {seals:#x})"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use partita_protocol::wire::{ManagerMessage, PROTOCOL_VERSION};
    use std::io::Read;
    use std::os::fd::FromRawFd;

    /// A rogue listener that welcomes with an unsealed (truncatable) page is refused.
    #[test]
    fn an_unsealed_page_is_refused() {
        let dir = std::env::temp_dir().join(format!("partita-rogue-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let sock = dir.join("rogue.sock");
        let _ = std::fs::remove_file(&sock);
        let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut buf = [0u8; 256];
            let _ = s.read(&mut buf);
            // SAFETY: valid NUL-terminated name; the fd is owned below.
            let raw = unsafe { libc::memfd_create(c"rogue".as_ptr(), libc::MFD_CLOEXEC) };
            assert!(raw >= 0);
            // SAFETY: memfd_create returned a fresh fd.
            let f = unsafe { std::fs::File::from_raw_fd(raw) };
            f.set_len(4096).unwrap();
            let mut header = vec![0u8; 4096];
            header[..8].copy_from_slice(&partita_protocol::page::PAGE_MAGIC.to_le_bytes());
            header[8..12].copy_from_slice(&partita_protocol::page::LAYOUT_VERSION.to_le_bytes());
            header[12..16].copy_from_slice(&7u32.to_le_bytes());
            std::os::unix::fs::FileExt::write_all_at(&f, &header, 0).unwrap();
            let frame = ManagerMessage::Welcome {
                version: PROTOCOL_VERSION,
                app_id: 7,
                partition: "default".into(),
            }
            .encode();
            partita_protocol::sys::send_with_fd(s.as_fd(), &frame, f.as_fd()).unwrap();
            std::thread::sleep(Duration::from_millis(200));
        });
        let params = Params {
            sockets: vec![sock.clone()],
            name: "victim".into(),
            hint: String::new(),
            pool_size: 2,
        };
        let err = register(&params, &sock)
            .err()
            .expect("an unsealed page must be refused");
        assert!(err.to_string().contains("sealed"), "{err}");
        server.join().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
