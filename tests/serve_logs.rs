//! `partita serve --log-format json|text`: JSON gives one parseable object per line with the
//! level, target and fields; text (the default) stays human-readable; a bad format is refused
//! by name.

mod support;

use std::process::{Command, Stdio};
use std::time::Duration;
use support::{bin, wait_until, TempDir};

/// Run `serve` with `extra` arguments until it listens, stop it with SIGTERM, return stderr.
fn serve_log(dir: &TempDir, extra: &[&str]) -> String {
    let socket = dir.path("m.sock");
    let child = Command::new(bin())
        .arg("serve")
        .arg("--socket")
        .arg(&socket)
        .args(extra)
        .env("RUST_LOG", "info")
        .env("PARTITA_SOCKET", &socket)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(wait_until(Duration::from_secs(10), || {
        partita_manager::query_status(&socket).is_ok()
    }));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stderr).unwrap()
}

#[test]
fn json_logs_are_one_object_per_line() {
    let dir = TempDir::new("log-json");
    let log = serve_log(&dir, &["--log-format", "json"]);
    let lines: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(lines.len() >= 2, "{log}");
    for l in &lines {
        assert!(l["timestamp"].is_string() && l["level"].is_string(), "{l}");
        assert!(l["target"].as_str().unwrap().starts_with("partita"), "{l}");
    }
    let listening = lines
        .iter()
        .find(|l| {
            l["fields"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("listening"))
        })
        .unwrap_or_else(|| panic!("no listening line in {log}"));
    assert_eq!(listening["level"], "INFO");
    assert!(listening["fields"]["socket"]
        .as_str()
        .unwrap()
        .ends_with("m.sock"));
}

#[test]
fn text_is_the_default_and_bad_formats_are_refused() {
    let dir = TempDir::new("log-text");
    let log = serve_log(&dir, &[]);
    assert!(log.contains("listening") && log.contains("INFO"), "{log}");
    assert!(log
        .lines()
        .all(|l| serde_json::from_str::<serde_json::Value>(l).is_err()));

    let bad = Command::new(bin())
        .args(["serve", "--log-format", "xml", "--socket"])
        .arg(dir.path("x.sock"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        !bad.status.success() && err.contains("xml") && err.contains("json"),
        "{err}"
    );
}
