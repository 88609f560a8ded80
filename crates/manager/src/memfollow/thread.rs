//! The mover's own thread: rounds every [`POLL`] (sooner when an application is due), views
//! taken from the registry only when it changed. A thread of its own because `move_pages`
//! and the `numa_maps` reads block for as long as the kernel takes: neither the reallocator
//! nor the daemon's tasks ever wait for them.

use super::mover::{Mover, View};
use super::pages::Linux;
use super::{MigrationConfig, Stats};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// The longest pause between two rounds (how soon a new placement is seen).
pub const POLL: Duration = Duration::from_millis(20);

/// The running mover thread; [`MoverThread::stop`] ends it.
#[derive(Debug)]
pub struct MoverThread {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: std::thread::JoinHandle<()>,
}

impl MoverThread {
    /// Starts the mover over the views that `views(seen)` returns when the registry changed
    /// since `seen` (its generation). Not started (`Ok(None)`) when migration is disabled or
    /// the machine has fewer than two nodes: nothing would ever move there.
    pub fn start(
        config: &MigrationConfig,
        online_nodes: usize,
        stats: Arc<Stats>,
        mut views: impl FnMut(u64) -> Option<(u64, Vec<View>)> + Send + 'static,
    ) -> std::io::Result<Option<MoverThread>> {
        if !config.enabled || online_nodes < 2 {
            return Ok(None);
        }
        let mut mover = Mover::new(
            Linux,
            config.params(),
            online_nodes,
            config.exclude.clone(),
            stats,
        );
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let s = stop.clone();
        let thread = std::thread::Builder::new()
            .name("partita-numa-migrate".into())
            .spawn(move || {
                if let Err(e) = super::cpu::raise_priority() {
                    tracing::debug!(error = %e, "numa-migrate: the mover keeps the default priority");
                }
                let mut seen = u64::MAX;
                loop {
                    let fresh = views(seen);
                    if let Some((g, _)) = &fresh {
                        seen = *g;
                    }
                    let now = partita_protocol::page::monotonic_ns();
                    let next = mover.round(fresh.as_ref().map(|(_, v)| v.as_slice()), now);
                    let pause = Duration::from_nanos(next.saturating_sub(now)).min(POLL);
                    let stopped = crate::sync::lock(&s.0);
                    let (stopped, _) =
                        s.1.wait_timeout_while(stopped, pause, |stop| !*stop)
                            .unwrap_or_else(|p| p.into_inner());
                    if *stopped {
                        break;
                    }
                }
            })?;
        Ok(Some(MoverThread { stop, thread }))
    }

    /// Ends the thread after its current slice (at most one budget burst of moves).
    pub fn stop(self) {
        *crate::sync::lock(&self.stop.0) = true;
        self.stop.1.notify_all();
        let _ = self.thread.join();
    }
}
