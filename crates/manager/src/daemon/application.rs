//! A registered application's connection: register, welcome, count the outside load again
//! and plan its first allocation, follow its doorbell until it leaves, unregister.

use super::{read_frame, refuse, sample, Shared};
use crate::proc_ref::ProcRef;
use crate::registry::Registration;
use partita_protocol::hop;
use partita_protocol::sys::send_with_fd;
use partita_protocol::wire::{ClientMessage, ErrorCode, ManagerMessage, PROTOCOL_VERSION};
use std::os::fd::AsFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::io::{unix::AsyncFd, AsyncWriteExt, Interest};
use tokio::net::UnixStream;

/// Unregisters its application when dropped: on every way out of the connection task,
/// including a panic and the task's cancellation at shutdown.
pub(super) struct Unregister<'a> {
    pub(super) shared: &'a Shared,
    pub(super) id: u32,
}

impl Drop for Unregister<'_> {
    fn drop(&mut self) {
        self.shared.lock().unregister(self.id);
        self.shared.request_round();
    }
}

/// Register, welcome, follow until the application leaves, unregister.
///
/// The welcome goes out at once: a program whose pool is dropped waits for its client thread,
/// which waits for the welcome, so anything the manager did first was paid by every short
/// program (the recount below, three walks of `/proc` 2 ms apart, cost b3sum — 35 ms, its
/// own pool — 9 % of its life). Until the recount is done the application takes no part in
/// a round (`Registry::counted`): it runs at full size, and no round plans it against an
/// outside count that still holds its own threads or an exited process.
pub(super) async fn serve(shared: &Arc<Shared>, stream: &mut UnixStream, req: Registration) {
    let (pid, uid, name, pool) = (req.pid, req.uid, req.name.clone(), req.pool_size);
    let proc = req.proc.clone();
    let registered = shared.lock().register(req);
    let id = match registered {
        Ok(id) => id,
        Err((code, msg)) => return refuse(shared, stream, (pid, uid), code, msg).await,
    };
    let _guard = Unregister { shared, id };
    tracing::info!(id, pid, name = %name, pool, "application registered");
    let welcomed = welcome(shared, stream, id).await;
    tokio::spawn(count_then_allocate(shared.clone(), id));
    if welcomed.is_ok() {
        follow(shared, stream, &proc, uid).await;
    }
    tracing::info!(id, pid, "application gone");
}

/// The newcomer's first allocation, after counting the outside load again: its own threads
/// were outside ones until it registered, and the last sample may have seen a process that
/// has exited since. Nothing counted outside at the last sample (its gate closed:
/// `outside_seen` is 0): nothing to lower, and no recount (three walks of /proc, shared by
/// the registrations of the next 20 ms).
async fn count_then_allocate(shared: Arc<Shared>, id: u32) {
    let req = shared.lock().sample_request();
    if req.system_wide && shared.outside_seen.load(Ordering::Relaxed) > 0 {
        let cache = shared.fresh.clone();
        let count = move || cache.get(|| sample::outside_runnable_now(&req));
        if let Ok(fresh) = tokio::task::spawn_blocking(count).await {
            if fresh == 0 {
                shared.outside_gone.store(true, Ordering::Relaxed);
            }
            shared.lock().lower_outside(fresh);
        }
    }
    shared.lock().counted(id);
    // Its first allocation (it runs at full size until then): now, not at the periodic tick.
    shared.request_round();
}

async fn welcome(shared: &Shared, stream: &mut UnixStream, id: u32) -> std::io::Result<()> {
    let (partition, fd) = shared
        .lock()
        .welcome(id)
        .ok_or_else(|| std::io::Error::other("application vanished"))??;
    let frame = ManagerMessage::Welcome {
        version: PROTOCOL_VERSION,
        app_id: id,
        partition,
    }
    .encode();
    let sent = loop {
        stream.writable().await?;
        match stream.try_io(Interest::WRITABLE, || {
            send_with_fd(stream.as_fd(), &frame, fd.as_fd())
        }) {
            Ok(n) => break n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        }
    };
    stream.write_all(&frame[sent..]).await
}

/// Serve a registered application until it leaves: EOF, goodbye, pidfd readiness, or a
/// protocol error.
async fn follow(shared: &Shared, stream: &mut UnixStream, proc: &ProcRef, uid: u32) {
    let who = (proc.pid(), uid);
    let pidfd = proc.pidfd().try_clone().ok().and_then(|fd| {
        // SAFETY: the AsyncFd takes ownership of the OwnedFd, which therefore stays open and
        // refers to the same pidfd for the AsyncFd's whole lifetime; OwnedFd::as_raw_fd always
        // returns the same descriptor.
        unsafe { AsyncFd::register(fd) }.ok()
    });
    let Some(pidfd) = pidfd else {
        let msg = "cannot watch the process (pidfd)".to_string();
        return refuse(shared, stream, who, ErrorCode::Internal, msg).await;
    };
    let died = pidfd.readable();
    tokio::pin!(died);
    loop {
        tokio::select! {
            _ = &mut died => return,
            msg = read_frame(stream) => match msg {
                Ok(None) | Ok(Some(ClientMessage::Goodbye)) => return,
                Ok(Some(ClientMessage::DemandChanged)) => {
                    hop!("doorbell", pid = who.0);
                    shared.demand_changed();
                }
                Ok(Some(_)) => {
                    let msg = "unexpected message after registration".to_string();
                    return refuse(shared, stream, who, ErrorCode::OutOfOrder, msg).await
                }
                Err((code, msg)) => return refuse(shared, stream, who, code, msg).await,
            },
        }
    }
}
