//! The server: runs the command with a jobserver in its environment and, every tick, makes the
//! tokens in circulation follow the build's allocation.
//!
//! One tick: read the allocation from the control page (standalone: the pool size), confine
//! the build's tree to a changed CPU set, count the bytes in the fifo and scan the tree
//! ([`crate::procscan`]), decide with the pure [`crate::policy::plan`], apply it, and report
//! demand (implicit slot + tokens out + waiting clients) and tokens out to the manager. Between
//! ticks the server sleeps on the page's futex (woken by a new allocation) or, while it is
//! withholding tokens, on the fifo (so a returned token is kept at once).

use crate::confine;
use crate::error::Error;
use crate::fifo::TokenPipe;
use crate::link::{Link, Params};
use crate::policy::{self, Observation};
use crate::procscan;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How the jobserver is announced to the command in `MAKEFLAGS` / `CARGO_MAKEFLAGS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Style {
    /// `fifo` when the `make` on `PATH` is GNU make ≥ 4.4 (or there is no make), else `pipe`.
    #[default]
    Auto,
    /// `--jobserver-auth=fifo:PATH` (make ≥ 4.4, cargo, rustc, ninja ≥ 1.13).
    Fifo,
    /// `--jobserver-auth=R,W` and `--jobserver-fds=R,W` with inherited descriptors (any make).
    Pipe,
}

/// Tokens out past what live clients can hold for this long are written off (a client died).
/// Longer than two scans, so a token read just before its job is forked is never taken.
pub const LEAK_CONFIRM: Duration = Duration::from_millis(150);
/// How often the build's tree is scanned; the fifo itself is checked every tick. With this
/// period and a 20 ms tick the whole server used 1.4–1.8% of one CPU serving a 24-job build,
/// against 7% with a 10 ms scan (command and runs in docs/bench/jobserver.md).
pub const SCAN_PERIOD: Duration = Duration::from_millis(50);

/// What the server needs.
#[derive(Debug, Clone)]
pub struct Options {
    /// Most jobs at once (the hello's pool size; standalone, the build runs like `make -jN`).
    pub pool: u32,
    /// Name shown by the manager.
    pub name: String,
    /// Partition hint.
    pub partition: String,
    /// Manager socket; `None` or a socket that does not answer: standalone.
    pub socket: Option<PathBuf>,
    /// Fifo path (must not exist).
    pub fifo: PathBuf,
    /// Announcement style (`Auto` is resolved when the server starts).
    pub style: Style,
    /// Set the affinity of the build's processes to the allocated CPUs.
    pub confine: bool,
    /// Period of the server's loop.
    pub tick: Duration,
    /// Ignore SIGINT/SIGQUIT and forward SIGTERM/SIGHUP to the command (a CLI process; not in
    /// a library user's process).
    pub handle_signals: bool,
}

/// Tokens of a served build at one instant (what `partita status` shows for it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TokenStatus {
    /// Tokens held by clients.
    pub out: u32,
    /// Tokens that exist (in the fifo or out).
    pub circulation: u32,
    /// CPUs allocated (standalone: the pool size).
    pub allocation: u32,
    /// Demand reported: implicit slot + tokens out + clients waiting.
    pub demand: u32,
}

impl TokenStatus {
    /// The same figures as the manager sees them in a jobserver application's control page
    /// (`active` = tokens out, `target` = allocation, `demand`), e.g. from `partita status`.
    ///
    /// ```
    /// let t = partita_jobserver::TokenStatus::from_app(3, 4, 6);
    /// assert_eq!((t.out, t.allocation, t.demand), (3, 4, 6));
    /// ```
    pub fn from_app(active: u32, target: u32, demand: u32) -> TokenStatus {
        TokenStatus {
            out: active,
            circulation: policy::tokens_allowed(target).max(active),
            allocation: target,
            demand,
        }
    }
}

/// A live view of a running server's tokens (for a caller that runs the server on a thread).
#[derive(Debug, Clone, Default)]
pub struct StatusCell(Arc<Mutex<TokenStatus>>);

impl StatusCell {
    /// The latest figures.
    pub fn get(&self) -> TokenStatus {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
    fn set(&self, s: TokenStatus) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = s;
    }
}

/// How a served build ended.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The command's exit status.
    pub status: ExitStatus,
    /// Tokens written off because no live job held them.
    pub reclaimed: u64,
    /// Bytes removed from the fifo that were not tokens.
    pub excess_drained: u64,
    /// Most tokens out at once.
    pub max_out: u32,
    /// Whether the build was registered with a manager at some point.
    pub registered: bool,
}

/// Resolve [`Style::Auto`] by asking `make --version`.
pub fn resolve_style(style: Style) -> Style {
    if style != Style::Auto {
        return style;
    }
    let out = Command::new("make").arg("--version").output();
    let Ok(out) = out else { return Style::Fifo };
    let text = String::from_utf8_lossy(&out.stdout);
    let version = text
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("GNU Make "))
        .map(|v| {
            let mut it = v.split('.').map(|p| p.trim().parse::<u32>().unwrap_or(0));
            (it.next().unwrap_or(0), it.next().unwrap_or(0))
        });
    match version {
        Some(v) if v < (4, 4) => Style::Pipe,
        _ => Style::Fifo,
    }
}

/// `MAKEFLAGS` for the command: the user's flags without `-j`/jobserver words, then ours.
///
/// ```
/// use partita_jobserver::server::{makeflags, Style};
/// let f = makeflags(Some("k -j3 --jobserver-auth=7,8"), Style::Pipe, 4, "/x".as_ref(), (5, 6));
/// assert_eq!(f, "k -j4 --jobserver-fds=5,6 --jobserver-auth=5,6");
/// let f = makeflags(None, Style::Fifo, 4, "/run/j.fifo".as_ref(), (5, 6));
/// assert_eq!(f, " -j4 --jobserver-auth=fifo:/run/j.fifo");
/// let f = makeflags(Some("k -- CC=gcc"), Style::Fifo, 2, "/j".as_ref(), (5, 6));
/// assert_eq!(f, "k -j2 --jobserver-auth=fifo:/j -- CC=gcc");
/// ```
pub fn makeflags(
    existing: Option<&str>,
    style: Style,
    pool: u32,
    fifo: &std::path::Path,
    (r, w): (i32, i32),
) -> String {
    // Words after ` -- ` are command-line variable definitions: ours go before them.
    let existing = existing.unwrap_or("");
    let (flags, vars) = match existing.find(" -- ") {
        Some(i) => (&existing[..i], &existing[i..]),
        None => (existing, ""),
    };
    let kept: Vec<&str> = flags
        .split_whitespace()
        .filter(|w| !w.starts_with("-j") && !w.starts_with("--jobserver"))
        .collect();
    let ours = match style {
        Style::Pipe => format!("-j{pool} --jobserver-fds={r},{w} --jobserver-auth={r},{w}"),
        _ => format!("-j{pool} --jobserver-auth=fifo:{}", fifo.display()),
    };
    format!("{} {ours}{vars}", kept.join(" "))
}

/// Run `cmd` (program and arguments) under a jobserver until it exits.
pub fn serve(
    cmd: &[OsString],
    opts: &Options,
    cell: Option<&StatusCell>,
) -> Result<Outcome, Error> {
    let (program, args) = cmd.split_first().ok_or(Error::NoCommand)?;
    let pipe = TokenPipe::create(&opts.fifo)?;
    let style = resolve_style(opts.style);
    let fds = pipe.client_fds();
    let flags = makeflags(
        std::env::var("MAKEFLAGS").ok().as_deref(),
        style,
        opts.pool,
        pipe.path(),
        fds,
    );
    let mut command = Command::new(program);
    command
        .args(args)
        .env("MAKEFLAGS", &flags)
        .env("CARGO_MAKEFLAGS", &flags)
        .env("PARTITA_JOBSERVER_FIFO", pipe.path())
        .env_remove("MFLAGS");
    if style == Style::Pipe {
        use std::os::unix::process::CommandExt;
        // SAFETY: the closure only calls fcntl (async-signal-safe) on two descriptors.
        unsafe { command.pre_exec(move || crate::sys::keep_across_exec(&[fds.0, fds.1])) };
    }
    let original_affinity = confine::own_affinity();
    let params = opts.socket.clone().map(|socket| Params {
        socket,
        name: opts.name.clone(),
        partition: opts.partition.clone(),
        pool: opts.pool,
        flags: partita_protocol::wire::FLAG_JOBSERVER,
    });
    // Register before the command starts: its first jobs already follow the allocation.
    let link = Link::new(params);
    let child = command.spawn().map_err(|source| Error::Spawn {
        program: program.to_string_lossy().into_owned(),
        source,
    })?;
    if opts.handle_signals {
        // Without the handlers the build still runs; only a SIGTERM to the server would leave
        // the fifo behind.
        if let Err(e) = crate::sys::catch_termination() {
            tracing::warn!(error = %e, "partita: sigaction failed; signals are not forwarded");
        }
    }
    let mut s = Server {
        opts,
        root: child.id() as i32,
        child,
        pipe,
        link,
        circulation: 0,
        leak_since: None,
        last_scan: None,
        applied_cpus: None,
        original_affinity,
        reclaimed: 0,
        excess: 0,
        max_out: 0,
        registered: false,
    };
    let status = s.run(cell)?;
    Ok(Outcome {
        status,
        reclaimed: s.reclaimed,
        excess_drained: s.excess,
        max_out: s.max_out,
        registered: s.registered,
    })
}

struct Server<'a> {
    opts: &'a Options,
    root: i32,
    child: Child,
    pipe: TokenPipe,
    link: Link,
    circulation: u32,
    leak_since: Option<Instant>,
    last_scan: Option<(Instant, procscan::TreeScan)>,
    applied_cpus: Option<partita_protocol::CpuSet>,
    original_affinity: Option<partita_protocol::CpuSet>,
    reclaimed: u64,
    excess: u64,
    max_out: u32,
    registered: bool,
}

impl Server<'_> {
    fn run(&mut self, cell: Option<&StatusCell>) -> Result<ExitStatus, Error> {
        loop {
            if let Some(sig) = crate::sys::take_pending_signal() {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(self.root),
                    nix::sys::signal::Signal::try_from(sig).ok(),
                );
            }
            match self.child.try_wait() {
                Ok(Some(status)) => {
                    self.link.close();
                    return Ok(status);
                }
                Ok(None) => {}
                Err(source) => {
                    return Err(Error::Io {
                        call: "waitpid",
                        source,
                    })
                }
            }
            let (st, shrinking) = match self.tick() {
                Ok(t) => t,
                Err(e) => {
                    // The tokens already out keep the build going; wait for it rather than
                    // orphan it.
                    tracing::warn!(error = %e, "partita: jobserver stopped managing tokens; waiting for the command");
                    self.link.close();
                    return self.child.wait().map_err(|source| Error::Io {
                        call: "waitpid",
                        source,
                    });
                }
            };
            if let Some(c) = cell {
                c.set(st);
            }
            if shrinking {
                self.pipe.wait_readable(self.opts.tick);
            } else if let Some(sess) = self.link.session() {
                sess.wait(self.opts.tick);
            } else {
                std::thread::sleep(self.opts.tick);
            }
        }
    }

    /// The allocation in CPUs and the CPU set (empty: none).
    fn allocation(&mut self) -> (u32, partita_protocol::CpuSet) {
        let pool = self.opts.pool;
        match self.link.session() {
            None => (pool, partita_protocol::CpuSet::new()),
            Some(sess) => {
                self.registered = true;
                match sess.allocation() {
                    // Not yet granted: the implicit slot only.
                    None => (1, partita_protocol::CpuSet::new()),
                    Some(a) if a.partition_only => (pool, a.cpus),
                    Some(a) => (a.target.min(pool), a.cpus),
                }
            }
        }
    }

    fn follow_cpus(&mut self, cpus: partita_protocol::CpuSet) {
        if !self.opts.confine || self.applied_cpus == Some(cpus) {
            return;
        }
        let set = if cpus.is_empty() {
            match self.original_affinity {
                Some(s) => s,
                None => return,
            }
        } else {
            cpus
        };
        confine::confine_tree(self.root, &set);
        self.applied_cpus = Some(cpus);
    }

    /// One tick; returns the status and whether tokens are being withheld.
    fn tick(&mut self) -> Result<(TokenStatus, bool), Error> {
        let (allocation, cpus) = self.allocation();
        self.follow_cpus(cpus);
        let allowed = policy::tokens_allowed(allocation);
        let in_pipe = self.pipe.available()?;
        let scan = match self.last_scan {
            Some((at, s)) if at.elapsed() < SCAN_PERIOD => s,
            _ => {
                let s = procscan::scan(self.root, self.pipe.identity());
                self.last_scan = Some((Instant::now(), s));
                s
            }
        };
        let out = policy::tokens_out(self.circulation, in_pipe);
        // A tree that could not be read (the command just exited) proves nothing.
        let live = (scan.processes > 0).then_some(scan.tokens_justified);
        if policy::leak_suspected(out, live) {
            self.leak_since.get_or_insert_with(Instant::now);
        } else {
            self.leak_since = None;
        }
        let plan = policy::plan(&Observation {
            circulation: self.circulation,
            in_pipe,
            allowed,
            live_jobs: live,
            leak_confirmed: self.leak_since.is_some_and(|t| t.elapsed() >= LEAK_CONFIRM),
        });
        let mut now_in_pipe = in_pipe;
        if plan.drain_excess > 0 {
            let got = self.pipe.take(plan.drain_excess)?.len() as u32;
            now_in_pipe = now_in_pipe.saturating_sub(got);
            self.excess += u64::from(got);
            tracing::warn!(bytes = got, "partita: removed bytes from the jobserver that were not tokens (a client wrote garbage or returned a token it never took)");
        }
        if plan.reclaim > 0 {
            self.circulation -= plan.reclaim;
            self.reclaimed += u64::from(plan.reclaim);
            self.leak_since = None;
            tracing::warn!(tokens = plan.reclaim, "partita: reclaimed jobserver tokens held by no running job (a client died holding them)");
        }
        if plan.withhold > 0 {
            let got = self.pipe.take(plan.withhold)?.len() as u32;
            self.circulation -= got;
            now_in_pipe = now_in_pipe.saturating_sub(got);
        }
        if plan.write > 0 {
            let put = self.pipe.put(plan.write)?;
            self.circulation += put;
            now_in_pipe += put;
        }
        let out = policy::tokens_out(self.circulation, now_in_pipe);
        self.max_out = self.max_out.max(out);
        let seen = (scan.waiters_visible || scan.clients == 0).then_some(scan.waiting);
        let demand = policy::demand(out, policy::waiting(seen, now_in_pipe), self.opts.pool);
        self.link.report(demand, out);
        let st = TokenStatus {
            out,
            circulation: self.circulation,
            allocation,
            demand,
        };
        Ok((st, self.circulation > allowed))
    }
}
