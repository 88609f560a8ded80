//! The portable build (any OS but Linux, or Linux with `RUSTFLAGS="--cfg partita_portable"`):
//! a pool in the default `Manager` mode pointed at a manager ignores it with one debug line,
//! opens no connection, runs at full size and still follows `set_target_workers`.
//!
//! One test per file: the debug line is said once per process.
#![cfg(not(partita_linux))] // the portable build only (crates/runtime/build.rs)

use partita_runtime::{ThreadPool, ThreadPoolBuilder};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

/// Counts the debug events whose message says the manager is ignored.
#[derive(Default)]
struct Ignored(Arc<AtomicUsize>);

struct Message(String);

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

impl Subscriber for Ignored {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut m = Message(String::new());
        event.record(&mut m);
        if *event.metadata().level() == Level::DEBUG && m.0.contains("Linux-only") {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

fn wait_for_active(pool: &ThreadPool, n: usize) {
    let start = Instant::now();
    while pool.active_workers() != n {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "active stayed {}",
            pool.active_workers()
        );
        std::thread::sleep(Duration::from_micros(100));
    }
}

#[test]
fn a_manager_is_ignored_with_one_debug_line_and_manual_control_still_works() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("partita.sock");
    // A listening socket where the manager would be (Unix only; elsewhere a path that does
    // not exist is what PARTITA_SOCKET names).
    #[cfg(unix)]
    let listener = {
        let l = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        l.set_nonblocking(true).unwrap();
        l
    };
    // SAFETY: set before any other thread of this test binary reads the environment (one
    // test in this file; the pools below are the first ones).
    unsafe { std::env::set_var("PARTITA_SOCKET", &socket) };
    unsafe { std::env::remove_var("PARTITA") };

    let said = Arc::new(AtomicUsize::new(0));
    let (p1, p2) = tracing::subscriber::with_default(Ignored(said.clone()), || {
        let build = || ThreadPoolBuilder::new().num_threads(3).build().unwrap();
        (build(), build())
    });
    assert_eq!(said.load(Ordering::SeqCst), 1, "one debug line per process");

    // Full size, work runs, and the in-process target still suspends and resumes workers.
    assert_eq!(p1.active_workers(), 3);
    assert_eq!(p1.install(|| (0..1000u64).sum::<u64>()), 499_500);
    p1.set_target_workers(1);
    wait_for_active(&p1, 1);
    let (a, b) = p1.install(|| partita_runtime::join(|| 1, || 2));
    assert_eq!(a + b, 3);
    p1.set_target_workers(3);
    wait_for_active(&p1, 3);
    assert_eq!(p2.install(partita_runtime::current_num_threads), 3);

    // Nothing ever connected to the "manager".
    #[cfg(unix)]
    assert_eq!(
        listener.accept().map(|_| ()).unwrap_err().kind(),
        std::io::ErrorKind::WouldBlock
    );
}
