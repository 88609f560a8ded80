//! `partita serve` as a systemd service, without systemd: the tests play systemd's part.
//! Socket activation (a listening socket inherited as fd 3 with LISTEN_FDS/LISTEN_PID: a
//! connection made before the manager starts is answered, the socket file survives the
//! manager, a second manager serves the same socket), readiness and watchdog notifications
//! on NOTIFY_SOCKET, and start-up failures with one clear line and a distinct exit status
//! (configuration error, unwritable state directory, stale socket, no ANSI colours in logs
//! that go to a file).

mod support;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixDatagram, UnixListener};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use support::{bin, wait_until, TempDir};

const CONFIG: &str = "uncontrolled = \"tracked\"\ncgroups = false\n";

/// `partita serve --config <dir>/p.toml` through `sh`, which sets LISTEN_PID to its own pid
/// before exec (as systemd does) when `listener` is given: it becomes the child's fd 3.
fn serve(dir: &TempDir, listener: Option<&UnixListener>, env: &[(&str, &str)]) -> Child {
    let cfg = dir.path("p.toml");
    std::fs::write(&cfg, CONFIG).unwrap();
    let script = match listener {
        Some(_) => "LISTEN_PID=$$ LISTEN_FDS=1 WATCHDOG_PID=$$ exec \"$0\" serve --config \"$1\" --socket \"$2\"",
        None => "exec \"$0\" serve --config \"$1\" --socket \"$2\"",
    };
    let mut cmd = Command::new("sh");
    cmd.args(["-c", script])
        .arg(bin())
        .arg(&cfg)
        .arg(dir.path("own.sock"))
        .env("RUST_LOG", "info")
        .env_remove("NOTIFY_SOCKET")
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.path("serve.log")).unwrap());
    if let Some(l) = listener {
        let fd = l.as_raw_fd();
        // SAFETY: dup2 and fcntl are async-signal-safe; between fork and exec the child only
        // puts the listening socket at fd 3 without FD_CLOEXEC, as systemd does (dup2 onto
        // itself would keep the flag, so fd 3 already being the socket clears it instead).
        unsafe {
            cmd.pre_exec(move || {
                let r = match fd {
                    3 => nix::libc::fcntl(3, nix::libc::F_SETFD, 0),
                    _ => nix::libc::dup2(fd, 3),
                };
                match r {
                    -1 => Err(std::io::Error::last_os_error()),
                    _ => Ok(()),
                }
            });
        }
    }
    cmd.spawn().unwrap()
}

fn stop(child: &mut Child) -> std::process::ExitStatus {
    kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
    child.wait().unwrap()
}

fn log(dir: &TempDir) -> String {
    std::fs::read_to_string(dir.path("serve.log")).unwrap()
}

#[test]
fn an_inherited_socket_is_served_and_outlives_the_manager() {
    let dir = TempDir::new("activation");
    let path = dir.path("activated.sock");
    let listener = UnixListener::bind(&path).unwrap();
    // A program that connects before the manager runs waits in the backlog.
    let early = {
        let path = path.clone();
        std::thread::spawn(move || partita_manager::query_status(&path))
    };
    let mut first = serve(&dir, Some(&listener), &[]);
    let status = early
        .join()
        .unwrap()
        .expect("the early connection is answered");
    assert!(status.cpus_managed >= 1);
    assert!(
        !dir.path("own.sock").exists(),
        "with a socket passed, the manager binds none of its own"
    );
    assert!(stop(&mut first).success(), "{}", log(&dir));
    let text = log(&dir);
    assert!(text.contains("socket passed by systemd"), "{text}");
    assert!(
        path.exists(),
        "the socket file is the socket unit's: a stopped manager leaves it"
    );
    // "Restart": a connection while no manager runs, then a new manager on the same socket.
    let waiting = {
        let path = path.clone();
        std::thread::spawn(move || partita_manager::query_status(&path))
    };
    let mut second = serve(&dir, Some(&listener), &[]);
    assert!(waiting.join().unwrap().is_ok(), "{}", log(&dir));
    assert!(stop(&mut second).success(), "{}", log(&dir));
}

#[test]
fn without_systemd_the_manager_binds_its_own_socket_and_removes_a_stale_one() {
    let dir = TempDir::new("own-socket");
    let own = dir.path("own.sock");
    // A socket file nobody listens on: what a killed manager leaves.
    drop(UnixListener::bind(&own).unwrap());
    assert!(own.exists());
    let mut child = serve(&dir, None, &[]);
    assert!(wait_until(Duration::from_secs(10), || {
        partita_manager::query_status(&own).is_ok()
    }));
    assert!(stop(&mut child).success());
    assert!(!own.exists(), "a manager removes the socket it bound");
    let text = log(&dir);
    assert_eq!(
        text.matches("removed a stale socket file").count(),
        1,
        "{text}"
    );
    assert!(
        !text.contains('\u{1b}'),
        "colour codes in a log file:\n{text}"
    );
}

/// The datagrams a manager sends to NOTIFY_SOCKET until it exits.
fn notifications(sock: &UnixDatagram) -> Vec<String> {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = sock.recv(&mut buf) {
        out.push(String::from_utf8_lossy(&buf[..n]).into_owned());
    }
    out
}

#[test]
fn readiness_watchdog_and_stopping_are_notified() {
    let dir = TempDir::new("notify");
    let path = dir.path("activated.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let notify_path = dir.path("notify");
    let notify = UnixDatagram::bind(&notify_path).unwrap();
    notify
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let n = notify_path.to_str().unwrap();
    // A 200 ms watchdog: pings every 100 ms or less, from the 300 ms reallocation rounds.
    let mut child = serve(
        &dir,
        Some(&listener),
        &[("NOTIFY_SOCKET", n), ("WATCHDOG_USEC", "200000")],
    );
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while seen
        .iter()
        .filter(|m: &&String| m.contains("WATCHDOG=1"))
        .count()
        < 3
    {
        let len = notify.recv(&mut buf).expect("notifications arrive");
        seen.push(String::from_utf8_lossy(&buf[..len]).into_owned());
    }
    let ready = seen.iter().position(|m| m.contains("READY=1"));
    assert!(ready.is_some(), "{seen:?}");
    // READY=1 means the socket is served.
    assert!(partita_manager::query_status(&path).is_ok());
    assert!(stop(&mut child).success(), "{}", log(&dir));
    notify
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let rest = notifications(&notify);
    assert!(rest.iter().any(|m| m.contains("STOPPING=1")), "{rest:?}");
}

#[test]
fn a_configuration_error_names_the_key_and_prevents_restarts() {
    let dir = TempDir::new("bad-config");
    let cfg = dir.path("bad.toml");
    std::fs::write(&cfg, "realloc_period_ms = 0\n").unwrap();
    let out = Command::new(bin())
        .arg("serve")
        .arg("--config")
        .arg(&cfg)
        .arg("--socket")
        .arg(dir.path("s.sock"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("realloc_period_ms"), "{err}");
}

#[test]
fn a_read_only_state_directory_is_one_line_and_no_restart() {
    let dir = TempDir::new("ro-state");
    let ro = dir.path("ro");
    std::fs::create_dir(&ro).unwrap();
    // A read-only mount in a private mount namespace (needs root, as CI runs).
    let script = "mount -t tmpfs -o ro none \"$1\" && exec \"$0\" serve --config /dev/null --socket \"$1/p.sock\"";
    let out = Command::new("unshare")
        .args(["-m", "sh", "-c", script])
        .arg(bin())
        .arg(&ro)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    if err.contains("mount:") || err.contains("unshare:") {
        eprintln!("cannot make a read-only mount here (not root?): skipped: {err}");
        return;
    }
    assert_eq!(out.status.code(), Some(73), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("not writable") && err.contains(ro.to_str().unwrap()),
        "{err}"
    );
    assert!(!Path::new(&ro).join("p.sock").exists());
}
