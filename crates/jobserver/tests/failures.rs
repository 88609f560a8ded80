//! Bad input and dying clients, standalone (no manager): the real `make` through the
//! `partita-jobserver` binary.

mod support;

use partita_jobserver::stamps;
use std::path::Path;
use std::process::{Command, Output};
use support::scratch;

const BIN: &str = env!("CARGO_BIN_EXE_partita-jobserver");

/// Run the binary in `dir` with `PARTITA=off` (standalone), a fifo in `dir`, and a report.
fn serve(dir: &Path, extra: &[&str], cmd: &[&str]) -> Output {
    let mut c = Command::new(BIN);
    c.current_dir(dir)
        .env("PARTITA", "off")
        .env_remove("MAKEFLAGS")
        .args(["run", "--report", "report.txt", "--fifo"])
        .arg(dir.join("js.fifo"))
        .args(extra)
        .arg("--")
        .args(cmd);
    c.output().unwrap()
}

fn report(dir: &Path, key: &str) -> u64 {
    let text = std::fs::read_to_string(dir.join("report.txt")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {key} in {text}"))
}

#[test]
fn a_missing_command_is_a_clear_error_and_leaves_no_fifo() {
    let dir = scratch("missing");
    let out = serve(&dir, &[], &["no-such-command-xyz", "-j4"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(127), "{err}");
    assert!(
        err.contains("no-such-command-xyz") && err.contains("No such file"),
        "{err}"
    );
    assert!(!dir.join("js.fifo").exists(), "the fifo leaked");
}

#[test]
fn an_existing_fifo_path_is_refused_and_left_alone() {
    let dir = scratch("exists");
    std::fs::write(dir.join("js.fifo"), "someone else's").unwrap();
    let out = serve(&dir, &[], &["touch", "ran"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        err.contains("js.fifo") && err.contains("already exists"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("js.fifo")).unwrap(),
        "someone else's"
    );
    assert!(
        !dir.join("ran").exists(),
        "the command ran without a jobserver"
    );
}

#[test]
fn the_command_exit_code_is_passed_through() {
    let dir = scratch("exit");
    let out = serve(&dir, &[], &["sh", "-c", "exit 7"]);
    assert_eq!(out.status.code(), Some(7));
    let out = serve(&dir, &[], &["sh", "-c", "kill -9 $$"]);
    assert_eq!(out.status.code(), Some(128 + 9));
    assert!(!dir.join("js.fifo").exists());
}

/// A job that reads tokens from the jobserver and is killed before returning them; the jobs
/// after it must still run `pool` at a time (the tokens are reclaimed), the build completes.
#[test]
fn tokens_of_a_killed_client_are_reclaimed() {
    let dir = scratch("leak");
    let st = dir.join("stamps");
    // `thief` takes 3 tokens (all of them with -j4) and is killed holding them; the 12 jobs
    // after it depend on it, so they start only once it is gone.
    let mut mk = stamps::cpu_bound_makefile(12, &st, 1_500_000);
    mk = mk.replace("all: job1", "all: thief job1");
    mk.push_str(&format!(
        "thief:\n\t+@head -c 3 $$PARTITA_JOBSERVER_FIFO > {d}/stolen; kill -9 $$$$ || true\n",
        d = dir.display()
    ));
    for i in 1..=12 {
        mk.push_str(&format!("job{i}: thief\n"));
    }
    // The thief's recipe fails (killed): -k keeps going, -i ignores the failure.
    std::fs::write(dir.join("Makefile"), mk).unwrap();
    let out = serve(&dir, &[], &["make", "-j4", "-i"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read(dir.join("stolen")).unwrap().len(), 3);
    let iv = stamps::read_intervals(&st).unwrap();
    assert_eq!(iv.len(), 12, "every job completes");
    assert_eq!(
        report(&dir, "reclaimed"),
        3,
        "the three stolen tokens are reclaimed"
    );
    assert_eq!(
        stamps::max_concurrency(&iv),
        4,
        "after the reclaim the build runs -j4 again"
    );
    assert!(!dir.join("js.fifo").exists());
}

/// A client writes 40 bytes of garbage into the jobserver: they are removed, the build
/// completes, and (after they are gone) the build runs at most `pool` jobs at once.
#[test]
fn garbage_written_into_the_jobserver_is_drained() {
    let dir = scratch("garbage");
    let st = dir.join("stamps");
    let mut mk = stamps::cpu_bound_makefile(12, &st, 1_500_000);
    mk = mk.replace("all: job1", "all: vandal job1");
    mk.push_str("vandal:\n\t+@printf 'garbage-garbage-garbage-garbage-garbage!' > $$PARTITA_JOBSERVER_FIFO; sleep 0.3\n");
    for i in 1..=12 {
        mk.push_str(&format!("job{i}: vandal\n"));
    }
    std::fs::write(dir.join("Makefile"), mk).unwrap();
    let out = serve(&dir, &[], &["make", "-j3"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let iv = stamps::read_intervals(&st).unwrap();
    assert_eq!(iv.len(), 12);
    assert_eq!(report(&dir, "excess"), 40, "every garbage byte is drained");
    assert!(
        stamps::max_concurrency(&iv) <= 3,
        "garbage did not become tokens"
    );
    assert!(!dir.join("js.fifo").exists());
}

/// SIGTERM to the server reaches the command; the server outlives it and removes the fifo.
#[test]
fn sigterm_is_forwarded_and_the_fifo_removed() {
    let dir = scratch("sigterm");
    let fifo = dir.join("js.fifo");
    let mut child = Command::new(BIN)
        .current_dir(&dir)
        .env("PARTITA", "off")
        .args(["run", "--fifo"])
        .arg(&fifo)
        .args(["--", "sleep", "30"])
        .spawn()
        .unwrap();
    let t = std::time::Instant::now();
    while !fifo.exists() {
        assert!(t.elapsed().as_secs() < 20, "the fifo never appeared");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // Let the server install its handlers (right after it starts the command).
    std::thread::sleep(std::time::Duration::from_millis(200));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(128 + 15), "{status:?}");
    assert!(!fifo.exists(), "the fifo leaked");
}
