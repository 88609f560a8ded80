//! The application side of registration, shared by every client (the runtime's pool, the
//! jobserver, `partita run --threads-env`): connect, check who listens, send the hello, read
//! the welcome with the control page's fd, check the page's seals and owner, map it.
//! Steps and failure rules: README §"Message sequence" and §"Failure rules".

use crate::page::PageMap;
use crate::sys::recv_with_fd;
use crate::wire::{
    frame_len, ClientMessage, DecodeError, ErrorCode, Hello, ManagerMessage, MAX_MANAGER_FRAME,
};
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// How long registration may block on the manager.
const REGISTER_TIMEOUT: Duration = Duration::from_secs(3);

/// Why registration failed.
#[derive(Debug, thiserror::Error)]
pub enum RegisterError {
    /// A socket operation failed.
    #[error("{call}: {source}")]
    Io {
        /// The operation.
        call: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// The manager replied with an error.
    #[error("manager refused: {code:?}: {message}")]
    Refused {
        /// Error code.
        code: ErrorCode,
        /// Text.
        message: String,
    },
    /// The listener or its reply cannot be trusted or understood.
    #[error("bad reply from the manager: {0}")]
    Protocol(String),
    /// The control page was refused.
    #[error("control page: {0}")]
    Page(#[from] crate::page::PageError),
}

fn io(call: &'static str) -> impl FnOnce(std::io::Error) -> RegisterError {
    move |source| RegisterError::Io { call, source }
}

/// Why a frame could not be read ([`read_frame`]).
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The read failed; the stream ended before a whole frame: `UnexpectedEof`.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The length prefix is empty or over the limit.
    #[error("{0}")]
    Length(#[from] DecodeError),
}

/// Read one length-prefixed frame from a blocking stream: its payload, at most `max` bytes
/// (`wire::MAX_CLIENT_FRAME` or `wire::MAX_MANAGER_FRAME`), to decode with the message type's
/// `decode`. (A frame that carries an fd is read with `sys::recv_with_fd` instead, as
/// [`register`] does.)
///
/// ```
/// use partita_protocol::client::read_frame;
/// use partita_protocol::wire::{ClientMessage, MAX_CLIENT_FRAME};
/// let frame = ClientMessage::Goodbye.encode();
/// let payload = read_frame(&mut frame.as_slice(), MAX_CLIENT_FRAME).unwrap();
/// assert_eq!(ClientMessage::decode(&payload).unwrap(), ClientMessage::Goodbye);
/// assert!(read_frame(&mut &frame[..2], MAX_CLIENT_FRAME).is_err());
/// ```
pub fn read_frame(r: &mut impl Read, max: usize) -> Result<Vec<u8>, FrameError> {
    let mut prefix = [0u8; 4];
    r.read_exact(&mut prefix)?;
    let len = frame_len(prefix, max)?;
    let mut payload = vec![0u8; len];
    r.read_exact(&mut payload)?;
    Ok(payload)
}

/// Why a request could not be sent ([`send_request`]).
#[derive(Debug)]
pub enum SendError {
    /// The manager refused the peer before it read the request: its reply.
    Refused {
        /// Error code.
        code: ErrorCode,
        /// Text.
        message: String,
    },
    /// The write failed.
    Io(std::io::Error),
}

/// Write one request frame to the manager. A manager that refuses the peer itself (its
/// credentials) replies and closes at once, before it reads: the write can then fail with a
/// broken pipe or a reset while its refusal is already ours to read (the peer is gone, so the
/// read cannot wait), and that refusal is what is returned.
pub fn send_request(stream: &UnixStream, frame: &[u8]) -> Result<(), SendError> {
    use std::io::ErrorKind::{BrokenPipe, ConnectionReset};
    let Err(e) = (&*stream).write_all(frame) else {
        return Ok(());
    };
    if matches!(e.kind(), BrokenPipe | ConnectionReset) {
        if let Ok((ManagerMessage::Error { code, message }, _)) = read_reply(stream) {
            return Err(SendError::Refused { code, message });
        }
    }
    Err(SendError::Io(e))
}

/// Connect to the manager at `socket` and register with `hello`; blocks at most a few
/// seconds. Returns the socket (non-blocking from now on) and the mapped control page.
pub fn register(socket: &Path, hello: Hello) -> Result<(UnixStream, PageMap), RegisterError> {
    let stream = UnixStream::connect(socket).map_err(io("connect"))?;
    check_listener(&stream)?;
    let t = Some(REGISTER_TIMEOUT);
    stream.set_read_timeout(t).map_err(io("setsockopt"))?;
    stream.set_write_timeout(t).map_err(io("setsockopt"))?;
    match send_request(&stream, &ClientMessage::Hello(hello).encode()) {
        Ok(()) => {}
        Err(SendError::Refused { code, message }) => {
            return Err(RegisterError::Refused { code, message })
        }
        Err(SendError::Io(e)) => return Err(io("send hello")(e)),
    }
    let (reply, fd) = read_reply(&stream)?;
    let app_id = match reply {
        ManagerMessage::Welcome { app_id, .. } => app_id,
        ManagerMessage::Error { code, message } => {
            return Err(RegisterError::Refused { code, message });
        }
        other => {
            return Err(RegisterError::Protocol(format!(
                "unexpected reply {other:?}"
            )));
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
    Ok((stream, page))
}

/// Read one whole frame; the fd arrives with its first byte.
fn read_reply(stream: &UnixStream) -> Result<(ManagerMessage, Option<OwnedFd>), RegisterError> {
    let mut buf: Vec<u8> = Vec::with_capacity(256);
    let mut fd: Option<OwnedFd> = None;
    let mut chunk = [0u8; 256];
    let len = loop {
        if buf.len() >= 4 {
            let len = frame_len([buf[0], buf[1], buf[2], buf[3]], MAX_MANAGER_FRAME)
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
        fd = fd.or(got);
        buf.extend_from_slice(&chunk[..n]);
    };
    let msg = ManagerMessage::decode(&buf[4..4 + len])
        .map_err(|e| RegisterError::Protocol(e.to_string()))?;
    Ok((msg, fd))
}

/// Only a manager run by root or by this process's own user may control it (a listener of
/// another user on a shared socket path is not trusted).
fn check_listener(stream: &UnixStream) -> Result<(), RegisterError> {
    let cred = crate::sys::peer_cred(stream.as_fd()).map_err(io("SO_PEERCRED"))?;
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
    let seals = crate::sys::file_seals(fd.as_fd()).map_err(io("fcntl(F_GET_SEALS)"))?;
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
    use crate::wire::{ManagerMessage, PROTOCOL_VERSION};
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
            header[..8].copy_from_slice(&crate::page::PAGE_MAGIC.to_le_bytes());
            header[8..12].copy_from_slice(&crate::page::LAYOUT_VERSION.to_le_bytes());
            header[12..16].copy_from_slice(&7u32.to_le_bytes());
            std::os::unix::fs::FileExt::write_all_at(&f, &header, 0).unwrap();
            let frame = ManagerMessage::Welcome {
                version: PROTOCOL_VERSION,
                app_id: 7,
                partition: "default".into(),
            }
            .encode();
            crate::sys::send_with_fd(s.as_fd(), &frame, f.as_fd()).unwrap();
            std::thread::sleep(Duration::from_millis(200));
        });
        let err =
            register(&sock, Hello::new(2, "victim")).expect_err("an unsealed page must be refused");
        assert!(err.to_string().contains("sealed"), "{err}");
        server.join().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
