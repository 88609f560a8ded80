//! `partita top --once` and `partita status` against a real manager with two registered
//! applications (raw protocol probes): the frame shows both with the numbers `status --json`
//! gives; a terminal too small, a missing manager and a reader that goes away get a clear
//! message or a clean exit, never a panic. The live view is driven in tmux by
//! scripts/test.d/70-top.sh.

mod support;

use partita_manager::Status;
use std::process::{Command, Output, Stdio};
use std::time::Duration;
use support::{bin, serve, wait_until, Proc, TempDir, TRACKED};

fn raw_probe(socket: &std::path::Path, name: &str) -> Proc {
    Proc::spawn(
        Command::new(bin())
            .args([
                "probe", "--raw", "--pool", "2", "--demand", "2", "--name", name,
            ])
            .arg("--socket")
            .arg(socket),
    )
}

fn top_once(socket: &std::path::Path, cols: u16, lines: u16) -> Output {
    Command::new(bin())
        .args(["top", "--once", "--socket"])
        .arg(socket)
        .env("COLUMNS", cols.to_string())
        .env("LINES", lines.to_string())
        .output()
        .unwrap()
}

#[test]
fn one_frame_shows_both_applications_as_status_reports_them() {
    let dir = TempDir::new("top");
    let (_mgr, socket) = serve(&dir, TRACKED);
    let _a = raw_probe(&socket, "alpha");
    let _b = raw_probe(&socket, "beta");
    assert!(wait_until(Duration::from_secs(10), || {
        partita_manager::query_status(&socket).is_ok_and(|s| s.applications.len() == 2)
    }));
    let out = top_once(&socket, 120, 30);
    let frame = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{frame}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(frame.lines().count(), 30);
    assert!(frame.contains("Applications (2)"), "{frame}");

    let json = Command::new(bin())
        .args(["status", "--json", "--socket"])
        .arg(&socket)
        .output()
        .unwrap();
    let status: Status = serde_json::from_slice(&json.stdout).unwrap();
    for app in &status.applications {
        let row = frame
            .lines()
            .find(|l| l.contains(&format!(" {} ", app.name)))
            .unwrap_or_else(|| panic!("{} missing from\n{frame}", app.name));
        assert!(row.contains(&app.pid.to_string()), "{row}");
        assert!(row.contains(&app.partition), "{row}");
    }
}

#[test]
fn bad_terminals_and_missing_managers_get_a_message_not_a_panic() {
    let dir = TempDir::new("top-bad");
    let (_mgr, socket) = serve(&dir, TRACKED);
    let small = top_once(&socket, 30, 8);
    let err = String::from_utf8_lossy(&small.stderr);
    assert!(!small.status.success());
    assert!(err.contains("too small") && err.contains("30x8"), "{err}");
    assert!(!err.contains("panicked"), "{err}");

    let gone = top_once(&dir.path("nobody.sock"), 120, 30);
    let err = String::from_utf8_lossy(&gone.stderr);
    assert!(!gone.status.success());
    assert!(
        err.contains("nobody.sock") && !err.contains("panicked"),
        "{err}"
    );

    // The live view refuses to run without a terminal instead of garbling a pipe.
    let live = Command::new(bin())
        .args(["top", "--socket"])
        .arg(&socket)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!live.status.success());
    assert!(String::from_utf8_lossy(&live.stderr).contains("--once"));
}

#[test]
fn status_into_a_closed_pipe_exits_cleanly() {
    let dir = TempDir::new("status-pipe");
    let (_mgr, socket) = serve(&dir, TRACKED);
    for json in [true, false] {
        let mut cmd = Command::new(bin());
        cmd.arg("status").arg("--socket").arg(&socket);
        if json {
            cmd.arg("--json");
        }
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take()); // the reader goes away before anything is written
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && !err.contains("panicked"), "{err}");
    }
}
