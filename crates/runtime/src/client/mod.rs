//! Manager client: the socket to a co-located `partita` manager. It registers the pool,
//! looks again with backoff while there is no manager, rings the manager when the pool's
//! report changes, and notices the manager leaving. The page it receives belongs to process
//! control (`control::ManagerPage`: the allocation applied, the reports written); the client
//! hands it to the pool for the session and takes it back at the end.
//!
//! Contract:
//! - The pool calls [`attach`] once, at build time, when its process-control mode is
//!   `Manager` (the default) and `PARTITA` is not `off`. It keeps the returned guard for its
//!   lifetime; dropping the guard disconnects and stops the client thread. `attach` never
//!   blocks: registration happens on the client thread, and the pool runs at full size until
//!   the manager answers.
//! - While a session is live the pool holds its `ManagerPage`
//!   (`Registry::set_manager_page`): workers apply a changed allocation from it, and the pool
//!   publishes a changed demand through it at once (`control/report.rs`), which rings.
//! - When the manager goes away the client takes the page back and reverts the pool to
//!   standalone (`Registry::revert_to_standalone`: whole pool, no CPU confinement).
//!
//! How the client works (one background thread per pool, blocking std I/O, no async runtime):
//! 1. The thread looks for the manager socket (`PARTITA_SOCKET`, else
//!    `$XDG_RUNTIME_DIR/partita.sock`, else `/run/partita/partita.sock`); when one exists it
//!    connects, sends the hello, and receives the welcome with the control page's memfd
//!    ([`register`]). No socket, or a failure: standalone, and it looks again with
//!    exponential backoff (10 ms … 1 s) — so a pool built before the manager starts registers
//!    when it appears, and an idle pool's search costs one `stat` and one timed wait per
//!    second.
//! 2. The thread then loops ([`session`]): apply the page's allocation (seqlock) to the pool,
//!    write demand, active workers, counters and the heartbeat, ring the manager when demand
//!    changed ([`ring`]), check the socket for EOF, and sleep on the page's futex word (woken
//!    by the manager at every change) for at most one tick — or only for the tick while a
//!    suspended worker waits on that word, since the worker then applies the change itself
//!    (`control/page.rs`). Between ticks the pool itself publishes and rings when it can
//!    tell at once that its demand moved (demand rings are rate-bounded).
//! 3. When the manager goes away (EOF, error, page problem; [`liveness`] notices at once) the
//!    pool reverts to its standalone size and no CPU confinement, with one warning, and the
//!    thread goes back to step 1.

mod liveness;
mod register;
mod ring;
mod session;

pub(crate) use ring::Ring;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use crate::registry::Registry;

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
pub(crate) fn attach(pool: Weak<Registry>, name: &str) -> Option<ClientGuard> {
    if std::env::var("PARTITA").is_ok_and(|v| v == "off") {
        return None;
    }
    let pool_size = pool.upgrade()?.num_threads();
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

fn client_thread(pool: Weak<Registry>, params: register::Params, stop: Arc<Stop>, tick: Duration) {
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
            p.revert_to_standalone();
            let _ = crate::affinity::pin_current_thread(None, &p.control.allowed);
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
    pool: &Weak<Registry>,
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
