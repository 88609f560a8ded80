//! `partita probe` (hidden): small programs that register with a manager, for the manager's
//! integration tests and benchmarks.
//!
//! - `--raw`: speaks the protocol directly (no pool): registers, reports a fixed demand, and
//!   prints every allocation it sees as `alloc target=N cpus=LIST` on stdout. It stands for an
//!   application that does not (or cannot) shrink.

use partita_protocol::page::{monotonic_ns, PageMap};
use partita_protocol::sys::recv_with_fd;
use partita_protocol::wire::{frame_len, ClientMessage, Hello, ManagerMessage, MAX_MANAGER_FRAME};
use std::io::Write;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Options of `partita probe`.
#[derive(Debug, Clone, clap::Args)]
pub struct ProbeArgs {
    /// Manager socket (default: what the runtime would use).
    #[arg(long)]
    pub socket: Option<PathBuf>,
    /// Application name.
    #[arg(long, default_value = "probe")]
    pub name: String,
    /// Pool size announced.
    #[arg(long, default_value_t = 2)]
    pub pool: u32,
    /// Demand reported.
    #[arg(long, default_value_t = 2)]
    pub demand: u32,
    /// Partition hint.
    #[arg(long, default_value = "")]
    pub partition: String,
    /// Exit after this many seconds (0: run until the manager goes away).
    #[arg(long, default_value_t = 0.0)]
    pub seconds: f64,
}

/// Run the probe.
///
/// ```no_run
/// let args = partita_manager::probe::ProbeArgs { socket: None, name: "p".into(), pool: 2, demand: 2, partition: String::new(), seconds: 1.0 };
/// partita_manager::probe::run(&args).unwrap();
/// ```
pub fn run(args: &ProbeArgs) -> Result<(), Box<dyn std::error::Error>> {
    let socket = args
        .socket
        .clone()
        .unwrap_or_else(partita_protocol::socket_path);
    let mut s = std::os::unix::net::UnixStream::connect(&socket)?;
    let mut hello = Hello::new(args.pool, &args.name);
    hello.partition_hint = args.partition.clone();
    s.write_all(&ClientMessage::Hello(hello).encode())?;
    // The Welcome frame is small and arrives in one piece with the fd.
    let mut buf = vec![0u8; 512];
    let (n, fd) = recv_with_fd(s.as_fd(), &mut buf)?;
    if n < 4 {
        return Err("connection closed before the welcome".into());
    }
    let len = frame_len(buf[..4].try_into()?, MAX_MANAGER_FRAME)?;
    if n < 4 + len {
        return Err("short welcome".into());
    }
    match ManagerMessage::decode(&buf[4..4 + len])? {
        ManagerMessage::Welcome { .. } => {}
        ManagerMessage::Error { code, message } => {
            return Err(format!("refused: {code:?}: {message}").into())
        }
        other => return Err(format!("unexpected {other:?}").into()),
    }
    let page = PageMap::open(fd.ok_or("welcome without a control page")?)?;
    page.app.demand.store(args.demand, Ordering::Relaxed);
    s.write_all(&ClientMessage::DemandChanged.encode())?;
    s.set_nonblocking(true)?;
    let start = std::time::Instant::now();
    let mut last = None;
    let mut out = std::io::stdout();
    loop {
        let a = page.manager.read();
        if last != Some((a.target, a.cpus)) {
            writeln!(out, "alloc target={} cpus={}", a.target, a.cpus)?;
            out.flush()?;
            last = Some((a.target, a.cpus));
        }
        page.app.active.store(a.target, Ordering::Relaxed);
        page.app.heartbeat.store(monotonic_ns(), Ordering::Relaxed);
        let seen = page.manager.wake.load(Ordering::Acquire);
        page.manager.wait_for_change(seen, Duration::from_millis(5));
        let mut b = [0u8; 64];
        match std::io::Read::read(&mut s, &mut b) {
            Ok(0) => {
                writeln!(out, "manager gone")?;
                return Ok(());
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e.into()),
        }
        if args.seconds > 0.0 && start.elapsed().as_secs_f64() > args.seconds {
            return Ok(());
        }
    }
}
