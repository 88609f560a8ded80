//! The daemon's per-connection state machine, driven in-process over a socket pair: the
//! `session` fuzz target (`fuzz/`) and tests feed it what a client would send and look at
//! what comes back, without a socket path, an accept loop or background tasks.
//!
//! A [`Harness`] holds the same shared state and reallocator thread as a running manager;
//! each [`Harness::session`] runs the daemon's real connection task on one end of a
//! `socketpair` while a client on the other end writes the given bytes, half-closes and reads
//! until the manager disconnects. The peer is this process (SO_PEERCRED of a socket pair is
//! its creator), so a hello registers this process and a confine request confines it: use a
//! configuration with `cgroups = false`, and drop the harness to restore its affinity.
//!
//! ```
//! use partita_manager::harness::Harness;
//! use partita_protocol::wire::{ClientMessage, Hello};
//! let c = partita_manager::Config::from_toml_str("uncontrolled = \"tracked\"\ncgroups = false").unwrap();
//! let h = Harness::new(c).unwrap();
//! let mut input = ClientMessage::Hello(Hello::new(2, "doc")).encode();
//! input.extend(ClientMessage::Goodbye.encode());
//! let s = h.session(&input, std::time::Duration::from_secs(10)).unwrap();
//! assert_eq!(s.frames().unwrap().len(), 1); // the welcome
//! assert!(h.status().applications.is_empty());
//! ```

use super::{connection, Shared};
use crate::status::Status;
use crate::{realloc, sys, Config, Error};
use partita_protocol::wire::{frame_len, DecodeError, ManagerMessage, MAX_MANAGER_FRAME};
use std::cell::Cell;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A manager's shared state and reallocator thread, without a listener.
#[derive(Debug)]
pub struct Harness {
    shared: Arc<Shared>,
    rt: tokio::runtime::Runtime,
    reallocator: Option<std::thread::JoinHandle<()>>,
    hello_timeout: Duration,
}

/// How the client saw the connection end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closed {
    /// End of file after the manager's last byte.
    Eof,
    /// `ECONNRESET` after the manager's last byte: the manager closed with client bytes
    /// still unread (what a real client sees too).
    Reset,
}

/// What one session produced.
#[derive(Debug, Clone)]
pub struct Session {
    /// Every byte the manager sent, in order (the welcome's page fd is not kept).
    pub reply: Vec<u8>,
    /// How the connection ended.
    pub closed: Closed,
    /// Input bytes the client could write before the manager closed.
    pub written: usize,
}

impl Session {
    /// The reply split into frames and decoded; an error if a frame is cut, oversized or
    /// does not decode.
    ///
    /// ```
    /// use partita_manager::harness::{Closed, Session};
    /// let s = Session { reply: vec![1, 0, 0, 0], closed: Closed::Eof, written: 0 };
    /// assert!(s.frames().is_err());
    /// ```
    pub fn frames(&self) -> Result<Vec<ManagerMessage>, DecodeError> {
        let mut rest = self.reply.as_slice();
        let mut out = Vec::new();
        while !rest.is_empty() {
            let prefix = rest.get(..4).ok_or_else(|| DecodeError::Truncated {
                field: "length",
                need: 4 - rest.len(),
            })?;
            // Cannot fail: `prefix` is 4 bytes long.
            let len = frame_len(prefix.try_into().unwrap(), MAX_MANAGER_FRAME)?;
            let payload = rest.get(4..4 + len).ok_or_else(|| DecodeError::Truncated {
                field: "frame",
                need: 4 + len - rest.len(),
            })?;
            out.push(ManagerMessage::decode(payload)?);
            rest = &rest[4 + len..];
        }
        Ok(out)
    }
}

impl Harness {
    /// Shared state for `config` (validated as `partita serve` does) and its reallocator
    /// thread.
    pub fn new(config: Config) -> Result<Harness, Error> {
        let shared = super::shared(config, None)?;
        let hello_timeout = shared.lock().periods().hello_timeout;
        let io = |context: &str| {
            let context = context.to_string();
            move |source| Error::Io { context, source }
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(io("build tokio runtime"))?;
        let s = shared.clone();
        let reallocator = realloc::spawn(shared.rounds.clone(), move || s.reallocate_once())
            .map_err(io("spawn the reallocator thread"))?;
        Ok(Harness {
            shared,
            rt,
            reallocator: Some(reallocator),
            hello_timeout,
        })
    }

    /// One connection: the client writes `input` (until the manager closes), half-closes,
    /// and reads until the manager disconnects. An error if that takes longer than `limit`
    /// (a hang) or a socket call fails.
    pub fn session(&self, input: &[u8], limit: Duration) -> std::io::Result<Session> {
        self.rt.block_on(async {
            let (mut client, server) = tokio::net::UnixStream::pair()?;
            let served = connection(self.shared.clone(), server, self.hello_timeout);
            let talk = async {
                let mut written = 0;
                while written < input.len() {
                    match client.write(&input[written..]).await {
                        Ok(n) if n > 0 => written += n,
                        _ => break, // the manager closed: it reads no more
                    }
                }
                let _ = client.shutdown().await;
                let mut reply = Vec::new();
                let closed = match client.read_to_end(&mut reply).await {
                    Ok(_) => Closed::Eof,
                    Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => Closed::Reset,
                    Err(e) => return Err(e),
                };
                Ok(Session {
                    reply,
                    closed,
                    written,
                })
            };
            // Which half is stuck, and whether this process ran at all meanwhile (a process
            // starved by the machine is not a manager that hangs).
            let done = (Cell::new(false), Cell::new(false));
            let both = async {
                let served = async {
                    served.await;
                    done.0.set(true)
                };
                let talk = async {
                    let r = talk.await;
                    done.1.set(true);
                    r
                };
                tokio::join!(served, talk).1
            };
            let cpu_before = cpu_ms();
            tokio::time::timeout(limit, both).await.map_err(|_| {
                let cpu = cpu_ms().saturating_sub(cpu_before);
                let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
                std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!(
                        "the connection was still open after {limit:?} (connection task \
                         finished: {}, client finished: {}; CPU time of this process \
                         meanwhile: {cpu} ms; load average {})",
                        done.0.get(),
                        done.1.get(),
                        load.trim()
                    ),
                )
            })?
        })
    }

    /// A status snapshot (everything, as the in-process handle sees it).
    pub fn status(&self) -> Status {
        self.shared.status()
    }

    /// Connections holding a slot of the connection limits now.
    pub fn open_connections(&self) -> usize {
        self.shared.conns.open()
    }
}

/// CPU time of this process so far, in milliseconds (0 if `/proc` cannot tell).
fn cpu_ms() -> u64 {
    // Clock ticks are 100 Hz on Linux (USER_HZ).
    sys::read_proc_stat(std::process::id() as i32, None).map_or(0, |s| s.cpu_ticks * 10)
}

impl Drop for Harness {
    /// As the daemon's shutdown: stop the reallocator, forget the applications, restore every
    /// affinity changed.
    fn drop(&mut self) {
        self.shared.rounds.stop();
        if let Some(t) = self.reallocator.take() {
            let _ = t.join();
        }
        self.shared.lock().shutdown();
        self.shared.enforcer().restore_all();
    }
}
