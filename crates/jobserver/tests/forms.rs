//! Both announcement forms with real clients, standalone (`--jobs 2`): cargo through the fifo
//! form and through the pipe form, GNU make through the pipe form (the make here is 4.3, which
//! predates the fifo form).

mod support;

use partita_jobserver::stamps;
use std::process::Command;
use support::*;

fn cargo_build(style: &str) -> Vec<(u64, u64)> {
    let dir = scratch(&format!("forms-cargo-{style}"));
    let (ws, st) = (dir.join("ws"), dir.join("stamps"));
    std::fs::create_dir_all(&ws).unwrap();
    generate_workspace(&ws, &st, 6);
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(BIN)
        .current_dir(&ws)
        .env("PARTITA", "off")
        .env_remove("MAKEFLAGS")
        .env_remove("CARGO_MAKEFLAGS")
        .env_remove("CARGO_BUILD_JOBS")
        .env("CARGO_TARGET_DIR", dir.join("target"))
        .env("RUSTC_WRAPPER", ws.join("wrap.sh"))
        .args(["run", "--jobs", "2", "--jobserver-style", style, "--"])
        .args([&cargo, "build", "-j16", "--offline", "-q"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stamps::read_intervals(&st).unwrap()
}

#[test]
fn cargo_follows_the_fifo_form() {
    let iv = cargo_build("fifo");
    assert_eq!(iv.len(), 6);
    assert!(stamps::max_concurrency(&iv) <= 2, "{iv:?}");
}

#[test]
fn cargo_follows_the_pipe_form() {
    let iv = cargo_build("pipe");
    assert_eq!(iv.len(), 6);
    assert!(stamps::max_concurrency(&iv) <= 2, "{iv:?}");
}

#[test]
fn make_follows_the_pipe_form_and_its_own_j_becomes_the_pool() {
    let dir = scratch("forms-make");
    let st = dir.join("stamps");
    std::fs::write(
        dir.join("Makefile"),
        stamps::cpu_bound_makefile(10, &st, 1_500_000),
    )
    .unwrap();
    let out = Command::new(BIN)
        .current_dir(&dir)
        .env("PARTITA", "off")
        .env_remove("MAKEFLAGS")
        .args(["run", "--jobserver-style", "pipe", "--", "make", "-j3"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    // make did not reset the jobserver ("-jN forced in submake") and ran at most 3 at once.
    assert!(!err.contains("resetting jobserver"), "{err}");
    let iv = stamps::read_intervals(&st).unwrap();
    assert_eq!(iv.len(), 10);
    assert_eq!(stamps::max_concurrency(&iv), 3);
}
