//! `spawn` / `spawn_fifo` behave as in rayon-core, including panics.

use partita_runtime::{spawn, spawn_fifo, ThreadPoolBuilder};
use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex};

#[test]
fn spawn_runs_in_global_and_pool() {
    let (tx, rx) = channel();
    spawn(move || tx.send(1).unwrap());
    assert_eq!(rx.recv().unwrap(), 1);
    let pool = ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    let (tx, rx) = channel();
    pool.spawn(move || tx.send(partita_runtime::current_thread_index()).unwrap());
    assert!(rx.recv().unwrap().unwrap() < 2);
}

#[test]
fn spawn_panic_goes_to_panic_handler() {
    let (tx, rx) = channel();
    let tx = Mutex::new(tx);
    let pool = ThreadPoolBuilder::new()
        .num_threads(2)
        .panic_handler(move |p| {
            let msg = p.downcast_ref::<&str>().copied().unwrap_or("?");
            tx.lock().unwrap().send(msg.to_owned()).unwrap();
        })
        .build()
        .unwrap();
    pool.spawn(|| panic!("boom"));
    assert_eq!(rx.recv().unwrap(), "boom");
    // The worker survived.
    assert_eq!(pool.install(|| 5), 5);
}

#[test]
fn spawn_fifo_order_from_worker() {
    let pool = ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = channel();
    {
        let order = order.clone();
        pool.spawn(move || {
            for i in 0..10 {
                let order = order.clone();
                spawn_fifo(move || order.lock().unwrap().push(i));
            }
            let tx = tx.clone();
            spawn_fifo(move || tx.send(()).unwrap());
        });
    }
    rx.recv().unwrap();
    assert_eq!(*order.lock().unwrap(), (0..10).collect::<Vec<_>>());
}

/// Child half of `spawn_panic_without_handler_aborts`: run only in a child process.
#[test]
#[ignore = "run by spawn_panic_without_handler_aborts in a child process"]
fn child_spawn_panic_aborts() {
    if std::env::var("PARTITA_ABORT_CHILD").is_err() {
        return;
    }
    let pool = ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    pool.spawn(|| panic!("unhandled"));
    std::thread::sleep(std::time::Duration::from_secs(10));
}

#[test]
fn spawn_panic_without_handler_aborts() {
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "child_spawn_panic_aborts"])
        .env("PARTITA_ABORT_CHILD", "1")
        .stderr(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc_sigabrt()), "status: {status:?}");
}

fn libc_sigabrt() -> i32 {
    6 // SIGABRT on Linux
}
