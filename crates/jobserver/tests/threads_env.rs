//! `threads-env`: a command started beside a busy partita-runtime program on a 2-CPU manager
//! gets the thread-count variables of its allocation (1), and standalone those of the CPUs
//! available.

mod support;

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::*;

const SHOW: &str = "echo $OMP_NUM_THREADS $RAYON_NUM_THREADS $OMP_WAIT_POLICY > env.txt";

#[test]
fn threads_env_sizes_the_command_to_its_allocation() {
    let dir = scratch("threads-env");
    let h = manager(&dir);
    let pool = Arc::new(program_pool(h.socket()));
    let stop = Arc::new(AtomicBool::new(false));
    let busy = {
        let (pool, stop) = (pool.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                burn(&pool, 256, 100_000);
            }
        })
    };
    // Wait until the manager sees the program wanting both CPUs.
    let me = std::process::id() as i32;
    let t = Instant::now();
    while h.status().app_by_pid(me).is_none_or(|a| a.demand < 2) {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "the program never registered"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = Command::new(BIN)
        .current_dir(&dir)
        .args(["threads-env", "--socket"])
        .arg(h.socket())
        .args(["--", "sh", "-c", SHOW])
        .output()
        .unwrap();
    stop.store(true, Ordering::Relaxed);
    busy.join().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let env = std::fs::read_to_string(dir.join("env.txt")).unwrap();
    assert_eq!(
        env.trim(),
        "1 1 passive",
        "two applications on 2 CPUs get one each"
    );

    // Standalone: every CPU this process may use.
    let out = Command::new(BIN)
        .current_dir(&dir)
        .env("PARTITA", "off")
        .args(["threads-env", "--", "sh", "-c", SHOW])
        .output()
        .unwrap();
    assert!(out.status.success());
    let cpus = std::thread::available_parallelism().unwrap().get();
    let env = std::fs::read_to_string(dir.join("env.txt")).unwrap();
    assert_eq!(env.trim(), format!("{cpus} {cpus} passive"));
    drop(pool);
    h.shutdown().unwrap();
}
