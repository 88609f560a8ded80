//! Helpers for the manager's integration tests: temporary directories, the `partita` binary as
//! a daemon, probe processes whose stdout is collected line by line.
#![allow(dead_code)] // Each test binary uses a different subset.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_partita"))
}

/// The process tests spin CPUs; run them one at a time so they do not disturb each other.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

pub struct TempDir(pub tempfile::TempDir);

impl TempDir {
    /// A fresh directory under the system temp dir, named after the test; removed on drop.
    pub fn new(tag: &str) -> TempDir {
        let dir = tempfile::Builder::new()
            .prefix(&format!("partita-test-{tag}-"))
            .tempdir()
            .expect("create a temp dir"); // a test cannot run without it
        TempDir(dir)
    }
    pub fn path(&self, name: &str) -> PathBuf {
        self.0.path().join(name)
    }
}

/// Poll `cond` every millisecond until it holds or `timeout` passes.
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let t = Instant::now();
    while t.elapsed() < timeout {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    cond()
}

/// A child process killed (SIGKILL) and reaped on drop.
pub struct Proc {
    pub child: Child,
    pub lines: Arc<Mutex<Vec<(Instant, String)>>>,
    stdin: Option<ChildStdin>,
}

impl Proc {
    pub fn spawn(cmd: &mut Command) -> Proc {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn");
        let stdout = child.stdout.take().expect("piped stdout");
        let stdin = child.stdin.take();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let l2 = lines.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                l2.lock().unwrap().push((Instant::now(), line));
            }
        });
        Proc {
            child,
            lines,
            stdin,
        }
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn send(&mut self, line: &str) {
        if let Some(s) = self.stdin.as_mut() {
            let _ = writeln!(s, "{line}");
            let _ = s.flush();
        }
    }

    /// The first line (from index `from`) satisfying `pred`, waiting up to `timeout`.
    pub fn wait_line(
        &self,
        from: usize,
        timeout: Duration,
        pred: impl Fn(&str) -> bool,
    ) -> Option<(usize, String)> {
        let t = Instant::now();
        loop {
            {
                let l = self.lines.lock().unwrap();
                if let Some((i, (_, s))) =
                    l.iter().enumerate().skip(from).find(|(_, (_, s))| pred(s))
                {
                    return Some((i, s.clone()));
                }
            }
            if t.elapsed() > timeout {
                return None;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    pub fn line_count(&self) -> usize {
        self.lines.lock().unwrap().len()
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A process's nice (`/proc/<pid>/stat` field 19, counted after the command name).
pub fn nice_of(pid: i32) -> Option<i64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &text[text.rfind(')')? + 1..];
    after_name.split_whitespace().nth(16)?.parse().ok()
}

/// `nice(1)` running what follows at nice `nice` whatever this test's own nice is (the
/// test command may run niced; a negative increment needs root, as CI is).
pub fn at_nice(nice: i64) -> Command {
    let own = nice_of(std::process::id() as i32).unwrap_or(0);
    let mut c = Command::new("nice");
    c.args(["-n", &(nice - own).to_string()]);
    c
}

/// Spawned, and at nice `nice` once `nice(1)` has exec'd; `None` (the test is skipped) when
/// that nice cannot be had here.
pub fn spawn_at(nice: i64, cmd: &mut Command) -> Option<Proc> {
    let p = Proc::spawn(cmd);
    let reached = wait_until(Duration::from_secs(5), || nice_of(p.pid()) == Some(nice));
    if !reached {
        eprintln!("cannot run at nice {nice} here: skipped");
    }
    reached.then_some(p)
}

/// `partita serve` on a private socket with the given configuration text.
pub fn serve(dir: &TempDir, config: &str) -> (Proc, PathBuf) {
    let socket = dir.path("partita.sock");
    let cfg = dir.path("partita.toml");
    std::fs::write(&cfg, config).unwrap();
    let p = Proc::spawn(
        Command::new(bin())
            .arg("serve")
            .arg("--config")
            .arg(&cfg)
            .arg("--socket")
            .arg(&socket)
            // PARTITA_TEST_LOG: the managers' RUST_LOG (e.g. `partita_manager=debug`) when
            // a test fails only under load and the manager's side is wanted.
            .env(
                "RUST_LOG",
                std::env::var("PARTITA_TEST_LOG").unwrap_or_else(|_| "warn".into()),
            ),
    );
    assert!(
        wait_until(Duration::from_secs(10), || partita_manager::query_status(
            &socket
        )
        .is_ok()),
        "manager did not come up"
    );
    (p, socket)
}

/// A probe application (partita-runtime pool) registered with the manager on `socket`.
pub fn probe(socket: &Path, name: &str, pool: u32, demand: u32) -> Proc {
    Proc::spawn(
        Command::new(bin())
            .args(["probe", "--name", name, "--pool"])
            .arg(pool.to_string())
            .arg("--demand")
            .arg(demand.to_string())
            .arg("--socket")
            .arg(socket)
            .env("PARTITA_SOCKET", socket),
    )
}

/// Parse `key=value` from a probe line.
pub fn field(line: &str, key: &str) -> Option<u64> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
}

pub const TRACKED: &str = "uncontrolled = \"tracked\"\nhello_timeout_ms = 500\n";

/// A python program that prints `ready`, starts a thread when a line arrives on its stdin,
/// and prints that thread's tid (`tid N`): a thread created at a moment the test chooses.
pub const THREAD_ON_DEMAND: &str = r#"
import threading, time, sys
print("ready", flush=True)
sys.stdin.readline()
def f():
    print("tid", threading.get_native_id(), flush=True)
    time.sleep(60)
threading.Thread(target=f, daemon=True).start()
time.sleep(60)
"#;

/// The status of the manager at `socket` (a test without one fails here).
pub fn status(socket: &Path) -> partita_manager::Status {
    partita_manager::query_status(socket).expect("status")
}

/// Wait up to `timeout` for `cond` on the status, looking every 20 ms: the test process is
/// outside load to the manager too (a debug build parsing a status every millisecond keeps a
/// CPU busy), and must not be the load it measures. The status that met `cond`.
pub fn wait_for_status(
    socket: &Path,
    timeout: Duration,
    mut cond: impl FnMut(&partita_manager::Status) -> bool,
) -> Option<partita_manager::Status> {
    let t = Instant::now();
    while t.elapsed() < timeout {
        let s = status(socket);
        if cond(&s) {
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}
