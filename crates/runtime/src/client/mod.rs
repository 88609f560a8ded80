//! Manager client: registers the pool with a co-located `partita` manager and makes the pool
//! follow the allocation published in the shared control page.
//!
//! The pool side and the client side meet only through [`Controlled`] and [`attach`]; the pool
//! never sees the socket or the control page, and the client never sees the pool's internals.
//!
//! Contract:
//! - The pool calls [`attach`] once, at build time, when its process-control mode is
//!   `Manager` (the default) and `PARTITA` is not `off`. It keeps the returned guard for its
//!   lifetime; dropping the guard disconnects and stops the client thread. `attach` never
//!   blocks: registration happens on the client thread, and the pool runs at full size until
//!   the manager answers.
//! - The client calls [`Controlled::set_target_workers`] when the manager's target changes
//!   (0 means a granted zero quantum), [`Controlled::set_cpus`] when the CPU set changes, and
//!   reverts to `set_target_workers(pool_size)` / `set_cpus(None)` when the manager goes away.
//! - The client reads demand and counters through the other methods to fill the
//!   application→manager half of the control page, and while a session is live it hands the
//!   pool a [`Doorbell`] through which the pool publishes a changed demand at once (see
//!   `control/report.rs`).

//!
//! How the client works (one background thread per pool, blocking std I/O, no async runtime):
//! 1. The thread looks for the manager socket (`PARTITA_SOCKET`, else
//!    `$XDG_RUNTIME_DIR/partita.sock`, else `/run/partita/partita.sock`); when one exists it
//!    connects, sends the hello, and receives the welcome with the control page's memfd
//!    ([`register`]). No socket, or a failure: standalone, and it looks again with
//!    exponential backoff (10 ms … 1 s) — so a pool built before the manager starts registers
//!    when it appears, and an idle pool's search costs one `stat` and one timed wait per
//!    second.
//! 2. The thread then loops ([`session`]): read the page's allocation (seqlock), apply a new
//!    target / CPU set to the pool, write demand, active workers, counters and the heartbeat,
//!    ring the manager's doorbell when demand changed, check the socket for EOF, and sleep on
//!    the page's futex word (woken by the manager at every change) for at most one tick —
//!    or only for the tick while a suspended worker waits on that word, since the worker
//!    then applies the change itself (`control/page.rs`).
//!    Between ticks the pool itself publishes and rings when it can tell at once that its
//!    demand moved (the doorbell is rate-bounded).
//! 3. When the manager goes away (EOF, error, page problem) the pool reverts to its standalone
//!    size and no CPU confinement, with one warning, and the thread goes back to step 1.

mod liveness;
mod register;
mod session;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use crate::control::{Doorbell, Watch};

/// What the manager client may do to a pool.
pub(crate) trait Controlled: Send + Sync + 'static {
    /// Number of worker threads (stable for the pool's lifetime).
    fn pool_size(&self) -> usize;
    /// Set the number of workers that should be active. `0` is honoured only as a granted
    /// zero quantum (bandwidth time-slicing); values above the pool size are clamped.
    fn set_target_workers(&self, n: usize);
    /// The current target.
    fn target_workers(&self) -> usize;
    /// Workers currently active (not suspended by process control).
    fn active_workers(&self) -> usize;
    /// Confine the workers to these CPUs (`None`: no confinement). Workers re-pin themselves at
    /// their next safe point.
    fn set_cpus(&self, cpus: Option<Vec<usize>>);
    /// The CPUs the pool may use at all (its starting mask): the client's own threads follow
    /// an allocation by the same rule as the workers ([`crate::affinity::worker_cpus`]).
    fn allowed_cpus(&self) -> Vec<usize>;
    /// Sample the demand now and publish it through the doorbell (if one is set), returning
    /// it. The demand is the pool's runnable average (busy workers plus queued tasks)
    /// over a short window, rounded with hysteresis, capped by the application's own
    /// `set_demand`; `0` once the pool has been idle for the window (`control/demand.rs`).
    fn demand(&self) -> u32;
    /// Tasks run since the pool started.
    fn tasks_run(&self) -> u64;
    /// Nanoseconds workers spent idle (searching or sleeping) since the pool started.
    fn idle_ns(&self) -> u64;
    /// Hand the pool the live session's doorbell (`None` when the session ends).
    fn set_doorbell(&self, bell: Option<Arc<dyn Doorbell>>);
    /// Hand the pool the live session's page watch, through which workers apply a new
    /// allocation at their safe points (`control/page.rs`; `None` when the session ends).
    fn set_watch(&self, watch: Option<Arc<dyn Watch>>);
    /// A suspended worker waits on the page's futex word right now and will apply the next
    /// change itself (`control/page.rs`): the client thread then waits for its tick only,
    /// instead of waking with that worker at every change.
    fn page_watched(&self) -> bool;
}

/// Keeps the client connected; dropping it disconnects (sends a goodbye) and stops the thread.
pub(crate) struct ClientGuard {
    stop: Arc<Stop>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// The guard's request to stop, and how to wake the client thread from the page wait a
/// session sleeps in, so that dropping a pool does not wait for the client's next tick (up
/// to 10 ms at full demand, paid by every program that drops its pool before it exits).
#[derive(Default)]
pub(crate) struct Stop {
    requested: AtomicBool,
    /// Set by a live session (the closure keeps its page mapped); `None` otherwise.
    waker: Mutex<Option<Box<dyn Fn() + Send + Sync>>>,
}

impl Stop {
    pub(crate) fn requested(&self) -> bool {
        self.requested.load(Ordering::Acquire)
    }

    /// While a session waits on its page: how to wake it (`None` once the session ends).
    pub(crate) fn set_waker(&self, waker: Option<Box<dyn Fn() + Send + Sync>>) {
        *self.waker.lock().unwrap_or_else(|p| p.into_inner()) = waker;
    }

    fn request(&self) {
        self.requested.store(true, Ordering::Release);
        self.wake();
    }

    fn wake(&self) {
        if let Some(wake) = &*self.waker.lock().unwrap_or_else(|p| p.into_inner()) {
            wake();
        }
    }
}

impl Drop for ClientGuard {
    fn drop(&mut self) {
        self.stop.request();
        if let Some(t) = self.thread.take() {
            // Never join ourselves (the pool could in principle be dropped on this thread).
            if t.thread().id() != std::thread::current().id() {
                // The waker's FUTEX_WAKE leaves the page's word as it is, so one that lands
                // between the session's last check and its wait is lost, and the session
                // would sleep out its tick (up to 100 ms): repeat it until the thread is done.
                while !t.is_finished() {
                    t.thread().unpark();
                    self.stop.wake();
                    std::thread::sleep(Duration::from_micros(100));
                }
                let _ = t.join();
            }
        }
    }
}

/// Start the client thread for `pool`: it registers with a manager when one is reachable (now
/// or later) and follows it. Returns `None` only when `PARTITA=off` or the thread cannot
/// start (one warning). Never blocks on the manager.
/// Environment: `PARTITA_SOCKET` (socket path), `PARTITA_NAME` (name shown by the manager),
/// `PARTITA_PARTITION` (partition hint), `PARTITA_CLIENT_TICK_US` (demand sampling period
/// while busy), all read here, once.
pub(crate) fn attach(pool: Weak<dyn Controlled>, name: &str) -> Option<ClientGuard> {
    if std::env::var("PARTITA").is_ok_and(|v| v == "off") {
        return None;
    }
    let pool_size = pool.upgrade()?.pool_size();
    let hint = std::env::var("PARTITA_PARTITION").unwrap_or_default();
    // `PARTITA_NAME` overrides the name the pool chose (the executable's).
    let name = std::env::var("PARTITA_NAME").unwrap_or_else(|_| name.to_string());
    let params = register::Params {
        sockets: register::candidate_sockets(),
        name,
        hint,
        pool_size: pool_size as u32,
    };
    let tick = busy_tick();
    let stop = Arc::new(Stop::default());
    let stop2 = stop.clone();
    let thread = std::thread::Builder::new()
        .name("partita-client".into())
        .spawn(move || client_thread(pool, params, stop2, tick));
    match thread {
        Ok(t) => Some(ClientGuard {
            stop,
            thread: Some(t),
        }),
        Err(e) => {
            tracing::warn!(error = %e, "partita: cannot start the manager client thread; running standalone");
            None
        }
    }
}

/// Busy tick: how often demand is sampled while the pool has work and may want more
/// (`PARTITA_CLIENT_TICK_US` overrides; default 1 ms). An idle pool samples every 10 ms, one
/// that reports its whole size as often as the manager's page says (100 ms, or 10 ms), one
/// suspended whole every 100 ms; never faster than this (`session::tick_for`).
fn busy_tick() -> Duration {
    std::env::var("PARTITA_CLIENT_TICK_US")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|&us| us > 0)
        .map_or(Duration::from_millis(1), Duration::from_micros)
}

/// First and longest wait between two looks for a manager.
const BACKOFF_MIN: Duration = Duration::from_millis(10);
const BACKOFF_MAX: Duration = Duration::from_secs(1);

fn client_thread(
    pool: Weak<dyn Controlled>,
    params: register::Params,
    stop: Arc<Stop>,
    tick: Duration,
) {
    // This thread sleeps on the page and must act at once when woken (apply a new target,
    // and so wake or park workers): let it preempt the busy workers on wake-up (a short
    // EEVDF slice; no extra CPU share). Best effort.
    if let Err(e) = partita_protocol::sys::request_short_slice(Duration::from_micros(100)) {
        tracing::debug!(error = %e, "partita: no short scheduler slice for the client thread");
    }
    let mut registered_before = false;
    loop {
        let Some(conn) = find_manager(&pool, &params, &stop) else {
            return;
        };
        if registered_before {
            tracing::info!("partita: registered with the manager again");
        }
        registered_before = true;
        let end = session::run(&pool, conn, &stop, tick);
        // Standalone again: whole pool, no confinement (this thread too: the session pinned
        // it with the workers).
        if let Some(p) = pool.upgrade() {
            p.set_target_workers(p.pool_size());
            p.set_cpus(None);
            let _ = crate::affinity::pin_current_thread(None, &p.allowed_cpus());
        }
        match end {
            session::End::Stopped | session::End::PoolGone => return,
            session::End::Lost(why) => {
                tracing::warn!(reason = %why, "partita: lost the manager; running standalone and retrying");
            }
        }
    }
}

/// Look for a manager until one registers us (`Some`), or the pool or its guard goes away.
/// Between looks the thread sleeps with exponential backoff (10 ms … 1 s), woken early only
/// by the guard's drop: an idle pool without a manager costs one `stat` per second.
fn find_manager(
    pool: &Weak<dyn Controlled>,
    params: &register::Params,
    stop: &Stop,
) -> Option<register::Connection> {
    let mut backoff = BACKOFF_MIN;
    let mut warned = false;
    loop {
        if stop.requested() || pool.strong_count() == 0 {
            return None;
        }
        if let Some(socket) = params.existing_socket() {
            match register::register(params, &socket) {
                Ok(c) => return Some(c),
                Err(e) if !warned => {
                    warned = true;
                    tracing::warn!(socket = %socket.display(), error = %e, "partita: not registered with the manager; running standalone and retrying");
                }
                Err(e) => tracing::debug!(error = %e, "partita: registration failed"),
            }
        }
        std::thread::park_timeout(backoff);
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
}
