//! The daemon: tokio plumbing around the [`Registry`]. One task accepts connections, one task
//! per connection speaks the protocol, one samples uncontrolled processes, one requests the
//! periodic reallocation round (rotation, decay, quanta); the reallocator thread ([`realloc`])
//! plans under the registry's lock and applies outside it. Tasks take the registry's lock only
//! for short bookkeeping and never wait for a reallocation (except `partita run`, which waits
//! for the one that gives its partition a CPU, on a blocking thread).

mod application;
pub mod harness;
pub(crate) mod outside;
mod sample;
use sample::sampler;

use crate::config::Config;
use crate::enforce::{Enforcer, Prepared};
use crate::limits::{AcceptBackoff, ConnLimits};
use crate::proc_ref::ProcRef;
use crate::realloc::{self, Rounds};
use crate::registry::{Peer, Registration, Registry};
use crate::service::Listening;
use crate::status::Status;
use crate::supervise::supervise;
use crate::sys::SysError;
use crate::{sys, Error};
use partita_protocol::hop;
use partita_protocol::sys::{peer_cred, peer_pidfd};
use partita_protocol::wire::{
    frame_len, ClientMessage, DecodeError, ErrorCode, ManagerMessage, FLAG_JOBSERVER,
    FLAG_PARTITION_ONLY, MAX_CLIENT_FRAME,
};
use partita_protocol::CpuSet;
use std::os::fd::AsFd;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::Notify;

/// State shared by the daemon's tasks, the reallocator thread and the in-process handle.
///
/// Lock order: the enforcer's lock, then the registry's; never the registry's while taking
/// the enforcer's. The reallocator holds the enforcer's across planning (under the
/// registry's) and applying; status snapshots take both, so they show what is in force.
#[derive(Debug)]
pub(crate) struct Shared {
    registry: Mutex<Registry>,
    /// Applies CPU sets; used by the reallocator thread, `partita run` and shutdown.
    enforcer: Mutex<Enforcer>,
    /// Asked for a round by every change that may move CPUs (see [`realloc`]).
    rounds: Arc<Rounds>,
    shutdown: Notify,
    conns: Arc<ConnLimits>,
    /// systemd's watchdog, pinged by every reallocation round ([`crate::service`]).
    watchdog: Option<crate::service::Watchdog>,
    /// What the page mover did (memory follows CPUs, [`crate::memfollow`]).
    pub(crate) memfollow: Arc<crate::memfollow::Stats>,
    /// The outside runnable threads the last sample saw, before its gate (system-wide; 0
    /// when the gate was closed): what a registration's fresh count is compared with.
    outside_seen: AtomicU32,
    /// A registration's fresh count found no outside thread: the sampler forgets the outside
    /// use it remembers at its next sample (whose interval may span a load that just exited).
    outside_gone: std::sync::atomic::AtomicBool,
    /// A registration's fresh count of outside threads, shared by those right after it.
    fresh: sample::FreshCount,
}

impl Shared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, Registry> {
        // A panic while holding the lock would be a bug in the manager itself; keep serving
        // with the state as it is rather than cascading the panic.
        crate::sync::lock(&self.registry)
    }

    fn enforcer(&self) -> MutexGuard<'_, Enforcer> {
        // As for the registry: keep going with the state as it is.
        crate::sync::lock(&self.enforcer)
    }

    /// Whether the enforcer keeps a process tree or an application inside its CPUs
    /// ([`Enforcer::reconfine`] has work); `true` when its lock is held, so a caller that may
    /// skip work never waits on it.
    fn may_have_confined(&self) -> bool {
        match self.enforcer.try_lock() {
            Ok(e) => e.has_confined(),
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner().has_confined(),
            Err(std::sync::TryLockError::WouldBlock) => true,
        }
    }

    /// Change something outside the manager unless it is shutting down. Checked under the
    /// enforcer's lock: shutdown stops the rounds before it takes that lock to restore
    /// everything, so the change happens before the restore (which undoes it) or not at all.
    /// A blocking task that outlives the aborted task awaiting it (the sampler's reconfinement
    /// under load, a `partita run` catching up) would otherwise narrow a process again after
    /// the restore, and the confinement would survive the manager.
    fn unless_stopped<R>(&self, change: impl FnOnce(&mut Enforcer) -> R) -> Option<R> {
        let mut enforcer = self.enforcer();
        (!self.rounds.is_stopped()).then(|| change(&mut enforcer))
    }

    /// [`Enforcer::confine_uncontrolled`] with the cgroup write (which may wait seconds for
    /// the kernel's RCU grace period) outside the enforcer's lock; `None` if the manager is
    /// shutting down.
    fn confine_uncontrolled(
        &self,
        partition: &str,
        proc: &ProcRef,
        cpus: &CpuSet,
    ) -> Option<Result<CpuSet, SysError>> {
        match self.unless_stopped(|e| e.prepare_uncontrolled(partition, proc, cpus))? {
            Prepared::Done(r) => Some(r),
            Prepared::Move(mv) => {
                let written = mv.write();
                self.unless_stopped(|e| e.finish_uncontrolled(mv, written))
            }
        }
    }

    /// Ask for a reallocation round (coalesced; never waits).
    pub(crate) fn request_round(&self) -> u64 {
        self.rounds.request()
    }

    /// An application's demand changed: run the reallocation on this thread at once when the
    /// rounds let it ([`Rounds::request_or_claim`]) and the enforcer is free, otherwise
    /// leave it to the reallocator thread. Never waits for a lock held by a round or a
    /// `partita run` confinement.
    pub(crate) fn demand_changed(&self) {
        let Some(claim) = self.rounds.request_or_claim() else {
            return;
        };
        match self.enforcer.try_lock() {
            Ok(enforcer) => self.round(enforcer, true),
            Err(std::sync::TryLockError::Poisoned(p)) => self.round(p.into_inner(), true),
            Err(std::sync::TryLockError::WouldBlock) => return claim.hand_over(),
        }
        drop(claim);
    }

    /// One reallocation: plan under the registry's lock, apply outside it.
    fn reallocate_once(&self) {
        self.round(self.enforcer(), false);
    }

    /// A reallocation with the enforcer's lock taken (`inline`: on the connection's thread).
    fn round(&self, mut enforcer: MutexGuard<'_, Enforcer>, inline: bool) {
        hop!("round", inline = u64::from(inline));
        // The enforcer's lock is held from before planning until the batch is applied, so a
        // status snapshot (taken under it too) never shows an allocation whose affinities
        // and cgroups are still being changed.
        let mut batch = self.lock().plan();
        hop!("planned");
        if let Some(at) = batch.recheck_at.take() {
            self.rounds.schedule(realloc::instant_at(at));
        }
        realloc::apply(batch, &mut enforcer);
        hop!("applied");
        if let Some(w) = &self.watchdog {
            w.ping();
        }
    }

    /// What `partita status` shows: the allocation in force (never one still being applied).
    pub(crate) fn status(&self) -> Status {
        let mut status = {
            let _applied = self.enforcer();
            self.lock().status(None)
        };
        self.annotate(&mut status);
        status
    }

    /// Adds the page mover's part to a status (outside the locks: it reads `numa_maps`).
    pub(crate) fn annotate(&self, status: &mut Status) {
        let nodes = self
            .memfollow
            .nodes
            .load(std::sync::atomic::Ordering::Relaxed);
        crate::memfollow::annotate(status, &self.memfollow, nodes >= 2);
    }

    pub(crate) fn request_shutdown(&self) {
        self.shutdown.notify_one();
    }
}

/// CPUs the manager may hand out: its own affinity (which reflects its cgroup cpuset),
/// intersected with the configured list.
pub(crate) fn managed_cpus(config: &Config) -> Result<CpuSet, Error> {
    let own = sys::get_affinity(0).map_err(|e| Error::Sys(e.into()))?;
    let mut set = own;
    if !config.cpus.is_empty() {
        let want: CpuSet =
            config
                .cpus
                .parse()
                .map_err(|e: partita_protocol::cpuset::CpuListError| {
                    Error::Config(crate::ConfigError::Invalid {
                        key: "cpus".into(),
                        value: format!("{:?}", config.cpus),
                        reason: if e.reason.is_empty() {
                            "invalid"
                        } else {
                            e.reason
                        },
                    })
                })?;
        set = own.iter().filter(|c| want.contains(*c)).collect();
    }
    if set.is_empty() {
        return Err(Error::Config(crate::ConfigError::Invalid {
            key: "cpus".into(),
            value: format!("{:?}", config.cpus),
            reason: "no CPU of this list is available to the manager",
        }));
    }
    Ok(set)
}

/// Bind the socket: refuse if a manager answers on it, remove a stale file, create the
/// directory, set the mode (0600, or 0660 when `group_access`).
pub(crate) fn bind(
    socket: &Path,
    group_access: bool,
) -> Result<std::os::unix::net::UnixListener, Error> {
    let io = |what: &str| {
        let what = format!("{what} {}", socket.display());
        move |source| Error::Io {
            context: what,
            source,
        }
    };
    if socket.exists() {
        if std::os::unix::net::UnixStream::connect(socket).is_ok() {
            return Err(Error::AlreadyRunning(socket.to_path_buf()));
        }
        std::fs::remove_file(socket).map_err(io("remove stale socket"))?;
        tracing::info!(socket = %socket.display(), "removed a stale socket file (no manager answered on it)");
    }
    if let Some(dir) = socket.parent() {
        if !dir.as_os_str().is_empty() && !dir.exists() {
            std::fs::create_dir_all(dir).map_err(io("create directory for"))?;
        }
    }
    // Bound and given its mode under a temporary name, then renamed into place: a client that
    // sees the path can connect (between bind and listen, or before the chmod, it would get
    // ECONNREFUSED or a socket with the wrong mode).
    let mut tmp = socket.as_os_str().to_owned();
    tmp.push(format!(".{}.tmp", std::process::id()));
    let tmp = std::path::PathBuf::from(tmp);
    let _ = std::fs::remove_file(&tmp);
    let listener = std::os::unix::net::UnixListener::bind(&tmp).map_err(io("bind"))?;
    let mode = if group_access { 0o660 } else { 0o600 };
    let published = std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode))
        .map_err(io("chmod"))
        .and_then(|()| std::fs::rename(&tmp, socket).map_err(io("rename into place")));
    if let Err(e) = published {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    listener
        .set_nonblocking(true)
        .map_err(io("set_nonblocking"))?;
    Ok(listener)
}

/// Build the shared state.
/// `state_dir` (the socket's directory) holds the journal (see [`crate::journal`]).
pub(crate) fn shared(config: Config, state_dir: Option<&Path>) -> Result<Arc<Shared>, Error> {
    config.validate().map_err(Error::Config)?;
    let managed = managed_cpus(&config)?;
    crate::config::check_fixed_cpus(&config, managed.len()).map_err(Error::Config)?;
    let want = crate::limits::fds_needed(config.max_connections, config.max_applications);
    match crate::limits::raise_nofile(want) {
        Ok(got) if got < want => tracing::warn!(
            want,
            got,
            "RLIMIT_NOFILE's hard limit is below what max_connections needs"
        ),
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "cannot raise RLIMIT_NOFILE"),
    }
    let conns = ConnLimits::new(config.max_connections, config.max_connections_per_uid);
    let enforcer = Enforcer::with_journal(config.cgroups, managed, state_dir);
    let confinement = enforcer.confinement().name();
    Ok(Arc::new(Shared {
        registry: Mutex::new(Registry::new(config, managed, confinement)),
        enforcer: Mutex::new(enforcer),
        rounds: Arc::new(Rounds::default()),
        shutdown: Notify::new(),
        conns,
        watchdog: crate::service::Watchdog::from_env(),
        memfollow: Arc::default(),
        outside_seen: AtomicU32::new(0),
        outside_gone: std::sync::atomic::AtomicBool::new(false),
        fresh: sample::FreshCount::default(),
    }))
}

/// Run until shutdown is requested; then restore affinities, remove cgroups and the socket
/// (unless systemd owns it: socket activation).
pub(crate) async fn run(shared: Arc<Shared>, listening: Listening) -> Result<(), Error> {
    let (socket, activated, notify) = (listening.path, listening.activated, listening.notify);
    // The thread that runs this loop (all tasks, on a current-thread runtime) reads
    // demand changes; worker threads of a multi-thread runtime ask for the same at their start.
    realloc::react_quickly();
    let listener = UnixListener::from_std(listening.listener).map_err(|source| Error::Io {
        context: "register listener with tokio".into(),
        source,
    })?;
    let periods = shared.lock().periods();
    let (hello_timeout, sample, tick) = (periods.hello_timeout, periods.sample, periods.tick);
    tracing::info!(socket = %socket.display(), cpus = %shared.lock().managed(), "partita manager listening");
    let reallocator = {
        let s = shared.clone();
        realloc::spawn(shared.rounds.clone(), move || s.reallocate_once()).map_err(|source| {
            Error::Io {
                context: "spawn the reallocator thread".into(),
                source,
            }
        })?
    };
    shared.request_round();
    let mover = start_mover(&shared);
    let mut tasks = tokio::task::JoinSet::new();
    let mut background = spawn_background(&shared, sample, tick);
    if notify {
        crate::service::notify(&[sd_notify::NotifyState::Ready]);
    }
    let mut backoff = AcceptBackoff::new();
    let mut failure = None;
    loop {
        // Reap finished connection tasks (their results are not needed).
        while tasks.try_join_next().is_some() {}
        tokio::select! {
            _ = shared.shutdown.notified() => break,
            Some(done) = background.join_next() => {
                let why = match done {
                    Ok(Err(why)) => why,
                    Ok(Ok(())) => "a background task stopped".into(),
                    Err(e) => format!("a background task failed: {e}"),
                };
                tracing::error!(error = %why, "the manager cannot go on; shutting down");
                failure = Some(why);
                break;
            }
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    backoff.reset();
                    let shared = shared.clone();
                    tasks.spawn(async move { connection(shared, stream, hello_timeout).await });
                }
                Err(e) => {
                    let (log, delay) = backoff.failed(std::time::Instant::now());
                    if let Some(suppressed) = log {
                        tracing::warn!(error = %e, suppressed, retry_ms = delay.as_millis() as u64, "accept failed");
                    }
                    tokio::time::sleep(delay).await;
                }
            },
        }
    }
    tracing::info!("shutting down: restoring affinities and removing cgroups");
    if notify {
        crate::service::notify(&[sd_notify::NotifyState::Stopping]);
    }
    if !activated {
        let _ = std::fs::remove_file(&socket);
    }
    background.abort_all();
    tasks.abort_all();
    while tasks.join_next().await.is_some() {}
    while background.join_next().await.is_some() {}
    shared.rounds.stop();
    let _ = tokio::task::spawn_blocking(move || reallocator.join()).await;
    let _ = tokio::task::spawn_blocking(move || mover.map(|m| m.stop())).await;
    shared.lock().shutdown();
    shared.enforcer().restore_all();
    match failure {
        Some(why) => Err(Error::Thread(why)),
        None => Ok(()),
    }
}

/// The page mover's thread (memory follows CPUs), on machines with several NUMA nodes when
/// `[numa_migration]` enables it; `None` otherwise (the reason is in the status).
fn start_mover(shared: &Arc<Shared>) -> Option<crate::memfollow::MoverThread> {
    let config = shared.lock().migration_config();
    let nodes = partita_numa::online_nodes().len();
    let stats = shared.memfollow.clone();
    stats
        .nodes
        .store(nodes, std::sync::atomic::Ordering::Relaxed);
    let s = shared.clone();
    let views = move |seen| s.lock().memory_views(seen);
    let (mover, off) = match crate::memfollow::MoverThread::start(
        &config,
        nodes,
        stats.clone(),
        views,
    ) {
        Ok(Some(m)) => (Some(m), String::new()),
        Ok(None) if !config.enabled => (None, "numa_migration.enabled = false".into()),
        Ok(None) => (None, "one NUMA node".into()),
        Err(e) => {
            tracing::warn!(error = %e, "cannot start the page mover thread; memory will not follow CPUs");
            (None, format!("the mover thread could not start: {e}"))
        }
    };
    stats
        .running
        .store(mover.is_some(), std::sync::atomic::Ordering::Relaxed);
    *crate::sync::lock(&stats.off_reason) = off;
    mover
}

/// The supervised background tasks: the sampler, the periodic tick and, when a partition uses
/// the bandwidth policy, its quantum.
fn spawn_background(
    shared: &Arc<Shared>,
    sample: Duration,
    tick: Duration,
) -> tokio::task::JoinSet<Result<(), String>> {
    let mut background = tokio::task::JoinSet::new();
    if let Some(ms) = shared.lock().bandwidth_period_ms() {
        let shared = shared.clone();
        let period = Duration::from_millis(ms);
        background.spawn(supervise("bandwidth quantum", period, move || {
            bandwidth_ticker(shared.clone(), period)
        }));
    }
    let s = shared.clone();
    background.spawn(supervise("sampler", sample, move || {
        sampler(s.clone(), sample)
    }));
    let s = shared.clone();
    background.spawn(supervise("tick", tick, move || ticker(s.clone(), tick)));
    background
}

/// The periodic reallocation (rotation, decay, quanta): a round requested per tick.
async fn ticker(shared: Arc<Shared>, tick: Duration) {
    let mut iv = tokio::time::interval(tick);
    iv.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        iv.tick().await;
        // Programs that moved to another cgroup, cpusets that changed (issue 30).
        shared.lock().recheck_cgroups();
        shared.request_round();
    }
}

/// The bandwidth policy's quantum: select, then request a round when the parked set changed.
async fn bandwidth_ticker(shared: Arc<Shared>, period: Duration) {
    let mut iv = tokio::time::interval(period);
    iv.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        iv.tick().await;
        let changed = shared.lock().bandwidth_quantum();
        if changed {
            shared.request_round();
        }
    }
}

async fn read_frame(stream: &mut UnixStream) -> Result<Option<ClientMessage>, (ErrorCode, String)> {
    let mut prefix = [0u8; 4];
    match stream.read_exact(&mut prefix).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err((ErrorCode::Malformed, format!("read: {e}"))),
    }
    let len = frame_len(prefix, MAX_CLIENT_FRAME).map_err(|e| (e.code(), e.to_string()))?;
    let mut payload = vec![0u8; len];
    stream.read_exact(&mut payload).await.map_err(|_| {
        (
            ErrorCode::Malformed,
            DecodeError::Truncated {
                field: "frame",
                need: len,
            }
            .to_string(),
        )
    })?;
    ClientMessage::decode(&payload)
        .map(Some)
        .map_err(|e| (e.code(), e.to_string()))
}

async fn send_error(stream: &mut UnixStream, code: ErrorCode, message: String) {
    let frame = ManagerMessage::Error { code, message }.encode();
    let _ = tokio::time::timeout(Duration::from_millis(200), stream.write_all(&frame)).await;
    let _ = stream.shutdown().await;
    // Read what the client already sent (bounded), so that closing with unread input does not
    // turn the error reply into ECONNRESET on the client's side.
    let mut sink = [0u8; 4096];
    for _ in 0..16 {
        match stream.try_read(&mut sink) {
            Ok(n) if n > 0 => continue,
            _ => break,
        }
    }
}

/// Refuse a peer: log it with its pid and uid, count it, send a typed error and disconnect.
async fn refuse(
    shared: &Shared,
    stream: &mut UnixStream,
    who: (i32, u32),
    code: ErrorCode,
    message: String,
) {
    tracing::warn!(pid = who.0, uid = who.1, ?code, %message, "refused a client");
    shared.lock().count_refusal(code);
    send_error(stream, code, message).await
}

/// Why a peer is refused: (its pid and uid, the code, the text).
type Refusal = ((i32, u32), ErrorCode, String);

/// Identify the peer: credentials, a connection slot, and a pidfd (never a bare pid).
fn identify(shared: &Shared, stream: &UnixStream) -> Result<(Peer, crate::limits::Slot), Refusal> {
    let cred = peer_cred(stream.as_fd()).map_err(|e| {
        (
            (0, u32::MAX),
            ErrorCode::Internal,
            format!("SO_PEERCRED: {e}"),
        )
    })?;
    let who = (cred.pid, cred.uid);
    let slot = shared
        .conns
        .acquire(cred.uid)
        .map_err(|m| (who, ErrorCode::TooManyApplications, m))?;
    if cred.pid <= 0 {
        let m = "the peer's pid is not visible from the manager's pid namespace".to_string();
        return Err((who, ErrorCode::PermissionDenied, m));
    }
    let fd = peer_pidfd(stream.as_fd(), &cred).map_err(|e| {
        let m = format!("cannot identify process {}: {e}", cred.pid);
        (who, ErrorCode::PermissionDenied, m)
    })?;
    let peer = Peer {
        proc: ProcRef::new(cred.pid, fd),
        uid: cred.uid,
        gid: cred.gid,
    };
    Ok((peer, slot))
}

async fn connection(shared: Arc<Shared>, mut stream: UnixStream, hello_timeout: Duration) {
    let (peer, _slot) = match identify(&shared, &stream) {
        Ok(p) => p,
        Err((who, code, msg)) => return refuse(&shared, &mut stream, who, code, msg).await,
    };
    let who = (peer.proc.pid(), peer.uid);
    let first = match tokio::time::timeout(hello_timeout, read_frame(&mut stream)).await {
        Err(_) => {
            let msg = format!("no message within {} ms", hello_timeout.as_millis());
            return refuse(&shared, &mut stream, who, ErrorCode::Timeout, msg).await;
        }
        Ok(Ok(Some(m))) => m,
        Ok(Ok(None)) => return,
        Ok(Err((code, msg))) => return refuse(&shared, &mut stream, who, code, msg).await,
    };
    match first {
        ClientMessage::StatusRequest { .. } => {
            let status = {
                // As `Shared::status`: wait for a reallocation being applied.
                let _applied = shared.enforcer();
                shared.lock().status(Some(peer.uid))
            };
            // The page mover's part reads numa_maps: on a blocking thread, not this task's.
            let (s, plain) = (shared.clone(), status.clone());
            let status = tokio::task::spawn_blocking(move || {
                let mut status = status;
                s.annotate(&mut status);
                status
            })
            .await
            .unwrap_or(plain);
            let json = serde_json::to_string(&status)
                .unwrap_or_else(|e| format!("{{\"error\":\"cannot serialise status: {e}\"}}"));
            let frame = ManagerMessage::StatusReply { json }.encode();
            if tokio::time::timeout(STATUS_WRITE_TIMEOUT, stream.write_all(&frame))
                .await
                .is_err()
            {
                tracing::warn!(
                    pid = who.0,
                    uid = who.1,
                    "status reply not read in time; dropped"
                );
            }
        }
        ClientMessage::Confine { partition, .. } => {
            let reply = confine(&shared, &peer, partition).await;
            match reply {
                Ok((partition, cpus)) => {
                    let m = ManagerMessage::Confined { partition, cpus };
                    let _ =
                        tokio::time::timeout(STATUS_WRITE_TIMEOUT, stream.write_all(&m.encode()))
                            .await;
                }
                Err((code, msg)) => refuse(&shared, &mut stream, who, code, msg).await,
            }
        }
        ClientMessage::Hello(hello) => {
            let req = Registration {
                pid: peer.proc.pid(),
                proc: peer.proc.clone(),
                uid: peer.uid,
                gid: peer.gid,
                name: hello.name,
                hint: hello.partition_hint,
                pool_size: hello.pool_size,
                partition_only: hello.flags & FLAG_PARTITION_ONLY != 0,
                jobserver: hello.flags & FLAG_JOBSERVER != 0,
            };
            application::serve(&shared, &mut stream, req).await
        }
        ClientMessage::DemandChanged | ClientMessage::Goodbye => {
            let msg = "the first message must be a hello, status request or confine request";
            refuse(&shared, &mut stream, who, ErrorCode::OutOfOrder, msg.into()).await
        }
    }
}

/// `partita run`: track the process (membership, uid and count checked), wait for the
/// reallocation that gives its partition a CPU, confine it there; the partition's name and
/// the CPUs. A process that cannot be confined is not tracked.
async fn confine(
    shared: &Arc<Shared>,
    peer: &Peer,
    partition: String,
) -> Result<(String, CpuSet), (ErrorCode, String)> {
    let k = shared.lock().confine(peer, &partition)?;
    let n = shared.request_round();
    let s = shared.clone();
    let proc: ProcRef = peer.proc.clone();
    tokio::task::spawn_blocking(move || {
        s.rounds.wait_served(n);
        let (name, set) = s.lock().uncontrolled_set(k);
        let applied = s.confine_uncontrolled(&name, &proc, &set);
        let Some(applied) = applied else {
            s.lock().untrack(&[proc.pid()]);
            let why = "the manager is shutting down".to_string();
            return Err((ErrorCode::Internal, why));
        };
        match applied {
            Ok(cpus) => {
                let (_, now) = s.lock().mark_confined(proc.pid(), k);
                if now != set {
                    // A reallocation ran meanwhile and left this process alone: catch up.
                    let moved = s.unless_stopped(|e| {
                        e.update_uncontrolled(&name, std::slice::from_ref(&proc), &now)
                    });
                    if let Some(Err(e)) = moved {
                        tracing::debug!(pid = proc.pid(), error = %e, "confinement not updated");
                    }
                }
                Ok((name, cpus))
            }
            Err(e) => {
                let pid = proc.pid();
                tracing::warn!(pid, partition = %name, error = %e, "could not confine process");
                s.lock().untrack(&[pid]);
                s.request_round();
                Err((
                    ErrorCode::PermissionDenied,
                    format!("cannot confine process {pid}: {e}"),
                ))
            }
        }
    })
    .await
    .map_err(|e| (ErrorCode::Internal, format!("confinement failed: {e}")))?
}

/// How long a status or confine reply may take to be read.
const STATUS_WRITE_TIMEOUT: Duration = Duration::from_secs(2);

#[cfg(test)]
mod tests;
