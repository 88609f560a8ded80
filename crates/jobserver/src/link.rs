//! The build's registration with the manager: hello, welcome with the control page, reports,
//! and reconnection with backoff when the manager goes away (standalone meanwhile).

use partita_protocol::page::{monotonic_ns, Allocation, PageMap};
use partita_protocol::wire::{ClientMessage, Hello};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

pub use partita_protocol::client::RegisterError;

/// What registering needs (kept for reconnecting).
#[derive(Debug, Clone)]
pub struct Params {
    /// Manager socket.
    pub socket: PathBuf,
    /// Application name shown by the manager.
    pub name: String,
    /// Partition hint.
    pub partition: String,
    /// Most jobs the build may run (the hello's pool size).
    pub pool: u32,
    /// Hello flags.
    pub flags: u32,
}

/// A registered session.
#[derive(Debug)]
pub struct Session {
    stream: UnixStream,
    page: PageMap,
    last_demand: Option<u32>,
}

/// Connect and register (partita-protocol's client, with its listener and seal checks);
/// blocks at most a few seconds.
pub fn register(p: &Params) -> Result<Session, RegisterError> {
    let mut hello = Hello::new(p.pool, &p.name);
    hello.partition_hint = p.partition.clone();
    hello.flags = p.flags;
    let (stream, page) = partita_protocol::client::register(&p.socket, hello)?;
    Ok(Session {
        stream,
        page,
        last_demand: None,
    })
}

impl Session {
    /// The allocation published in the page; `None` until the manager's first publication
    /// (the page starts at the pool size, which the build must not take before it is granted).
    pub fn allocation(&self) -> Option<Allocation> {
        let a = self.page.manager.read();
        (a.epoch > 0).then_some(a)
    }

    /// Write demand, `active` (tokens out) and the heartbeat; ring the doorbell when demand
    /// changed; notice the manager's departure (`Err` with the reason).
    pub fn report(&mut self, demand: u32, active: u32) -> Result<(), String> {
        let side = &self.page.app;
        side.demand.store(demand, Ordering::Relaxed);
        side.active.store(active, Ordering::Relaxed);
        side.heartbeat.store(monotonic_ns(), Ordering::Release);
        if self.last_demand != Some(demand) {
            match self.stream.write(&ClientMessage::DemandChanged.encode()) {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(format!("send: {e}")),
            }
            self.last_demand = Some(demand);
        }
        let mut buf = [0u8; 512];
        match self.stream.read(&mut buf) {
            Ok(0) => Err("the manager closed the connection".into()),
            Ok(_) => Err("the manager sent an error".into()),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(format!("recv: {e}")),
        }
    }

    /// Sleep until the manager publishes a change or `timeout` passes.
    pub fn wait(&self, timeout: Duration) {
        let seen = self.page.manager.wake.load(Ordering::Acquire);
        self.page.manager.wait_for_change(seen, timeout);
    }

    /// Leave politely.
    pub fn goodbye(mut self) {
        let _ = self.stream.write_all(&ClientMessage::Goodbye.encode());
    }
}

/// A registration that survives the manager: standalone (no session) while it is away,
/// retried with exponential backoff (10 ms … 1 s).
#[derive(Debug)]
pub struct Link {
    params: Option<Params>,
    session: Option<Session>,
    next_try: Instant,
    backoff: Duration,
}

impl Link {
    /// Try to register once now; `params = None` means never (standalone for good).
    pub fn new(params: Option<Params>) -> Link {
        let mut l = Link {
            params,
            session: None,
            next_try: Instant::now(),
            backoff: Duration::from_millis(10),
        };
        if let Some(p) = &l.params {
            match register(p) {
                Ok(s) => l.session = Some(s),
                Err(e) => {
                    tracing::warn!(socket = %p.socket.display(), error = %e, "partita: build not registered with the manager; serving it standalone");
                    l.backoff_more();
                }
            }
        }
        l
    }

    fn backoff_more(&mut self) {
        self.next_try = Instant::now() + self.backoff;
        self.backoff = (self.backoff * 2).min(Duration::from_secs(1));
    }

    /// The current session, reconnecting first if it is time to.
    pub fn session(&mut self) -> Option<&mut Session> {
        if self.session.is_none() && Instant::now() >= self.next_try {
            if let Some(p) = &self.params {
                match p.socket.exists().then(|| register(p)) {
                    Some(Ok(s)) => {
                        tracing::info!("partita: build registered with the manager again");
                        self.session = Some(s);
                        self.backoff = Duration::from_millis(10);
                    }
                    _ => self.backoff_more(),
                }
            }
        }
        self.session.as_mut()
    }

    /// Report; on loss drop the session (standalone) and schedule a retry.
    pub fn report(&mut self, demand: u32, active: u32) {
        if let Some(s) = self.session.as_mut() {
            if let Err(why) = s.report(demand, active) {
                tracing::warn!(reason = %why, "partita: lost the manager; serving the build standalone and retrying");
                self.session = None;
                self.backoff_more();
            }
        }
    }

    /// Whether a session is open.
    pub fn registered(&self) -> bool {
        self.session.is_some()
    }

    /// Leave politely.
    pub fn close(&mut self) {
        if let Some(s) = self.session.take() {
            s.goodbye();
        }
    }
}
