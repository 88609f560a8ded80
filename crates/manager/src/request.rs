//! The request client behind `partita status` and `partita run`: one request, one reply, on
//! a fresh connection to the manager's socket.

use crate::{Error, Status};
use partita_protocol::client::{read_frame, FrameError};
use partita_protocol::wire::{ClientMessage, ManagerMessage, MAX_MANAGER_FRAME, PROTOCOL_VERSION};
use std::path::Path;

/// An I/O error of a request to the manager at `socket`, naming what failed.
fn io_error(what: &'static str, socket: &Path) -> impl FnOnce(std::io::Error) -> Error {
    let context = format!("{what} {}", socket.display());
    move |source| Error::Io { context, source }
}

fn request(socket: &Path, msg: &ClientMessage) -> Result<ManagerMessage, Error> {
    let io = |what| io_error(what, socket);
    let mut s = std::os::unix::net::UnixStream::connect(socket).map_err(io("connect"))?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .map_err(io("set timeout on"))?;
    exchange(&mut s, msg, socket)
}

/// Send `msg` on a connected stream and read the reply (a refusal sent before the manager
/// read the request included: `send_request`).
fn exchange(
    s: &mut std::os::unix::net::UnixStream,
    msg: &ClientMessage,
    socket: &Path,
) -> Result<ManagerMessage, Error> {
    use partita_protocol::client::{send_request, SendError};
    match send_request(s, &msg.encode()) {
        Ok(()) => read_reply(s, socket),
        Err(SendError::Refused { code, message }) => Err(Error::Refused { code, message }),
        Err(SendError::Io(e)) => Err(io_error("write to", socket)(e)),
    }
}

/// Read one manager reply; an error reply is `Error::Refused`.
fn read_reply(
    s: &mut std::os::unix::net::UnixStream,
    socket: &Path,
) -> Result<ManagerMessage, Error> {
    // EOF or reset before a whole reply: the manager went away mid-request (a shutdown,
    // typically); say so instead of the bare "failed to fill whole buffer".
    let read = |e: std::io::Error| {
        use std::io::ErrorKind::{ConnectionReset, UnexpectedEof};
        // A reset, too: a manager closing with our request unread sends RST, not FIN.
        if matches!(e.kind(), UnexpectedEof | ConnectionReset) {
            Error::Protocol(format!(
                "no reply: {} closed the connection before a whole reply (is the manager shutting down?)",
                socket.display()
            ))
        } else {
            io_error("read from", socket)(e)
        }
    };
    let payload = read_frame(s, MAX_MANAGER_FRAME).map_err(|e| match e {
        FrameError::Io(e) => read(e),
        FrameError::Length(e) => Error::Protocol(e.to_string()),
    })?;
    match ManagerMessage::decode(&payload).map_err(|e| Error::Protocol(e.to_string()))? {
        ManagerMessage::Error { code, message } => Err(Error::Refused { code, message }),
        m => Ok(m),
    }
}

/// Ask a running manager for its status (`partita status`).
///
/// ```no_run
/// let s = partita_manager::query_status(std::path::Path::new("/run/partita/partita.sock")).unwrap();
/// println!("{}", s.to_table());
/// ```
pub fn query_status(socket: &Path) -> Result<Status, Error> {
    match request(
        socket,
        &ClientMessage::StatusRequest {
            version: PROTOCOL_VERSION,
        },
    )? {
        ManagerMessage::StatusReply { json } => {
            serde_json::from_str(&json).map_err(|e| Error::Protocol(e.to_string()))
        }
        other => Err(Error::Protocol(format!("unexpected reply {other:?}"))),
    }
}

/// Confine the calling process to a partition as an uncontrolled process (`partita run`
/// calls this, then execs the command, which inherits the confinement).
///
/// ```no_run
/// let (partition, cpus) = partita_manager::confine_self(std::path::Path::new("/run/partita/partita.sock"), "batch").unwrap();
/// println!("in {partition} on {cpus}");
/// ```
pub fn confine_self(
    socket: &Path,
    partition: &str,
) -> Result<(String, partita_protocol::CpuSet), Error> {
    match request(
        socket,
        &ClientMessage::Confine {
            version: PROTOCOL_VERSION,
            partition: partition.to_string(),
        },
    )? {
        ManagerMessage::Confined { partition, cpus } => Ok((partition, cpus)),
        other => Err(Error::Protocol(format!("unexpected reply {other:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use partita_protocol::wire::ErrorCode;
    use std::io::Write;

    /// A manager that refuses a peer at once replies and closes before it reads the request:
    /// the request's write then fails, and the caller still gets the refusal, not the
    /// broken pipe (a CI run read `Io { "write to …", BrokenPipe }` here).
    #[test]
    fn a_refusal_sent_before_the_request_is_read_is_reported() {
        let (mut client, mut manager) = std::os::unix::net::UnixStream::pair().unwrap();
        let refusal = ManagerMessage::Error {
            code: ErrorCode::PermissionDenied,
            message: "not visible from the manager's pid namespace".into(),
        };
        manager.write_all(&refusal.encode()).unwrap();
        drop(manager);
        let msg = ClientMessage::StatusRequest {
            version: PROTOCOL_VERSION,
        };
        match exchange(&mut client, &msg, Path::new("m.sock")) {
            Err(Error::Refused { code, .. }) => assert_eq!(code, ErrorCode::PermissionDenied),
            other => panic!("expected the refusal, got {other:?}"),
        }
    }
}
