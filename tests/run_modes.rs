//! `partita run --jobserver` and `--threads-env` through the binary: the build sees a
//! jobserver in MAKEFLAGS, the exit code is the command's, and the sizing variables are set.

mod support;

use std::process::Command;
use std::time::Duration;
use support::*;

const CONFIG: &str = "uncontrolled = \"tracked\"\n";

#[test]
fn a_make_build_gets_a_jobserver_and_its_exit_code_passes_through() {
    let _g = serial();
    let dir = TempDir::new("run-jobserver");
    let (mut manager, socket) = serve(&dir, CONFIG);
    let out_file = dir.path("flags");
    std::fs::write(
        dir.path("Makefile"),
        format!(
            "all: a b\na:\n\t@echo \"$$MAKEFLAGS\" > {}\nb:\n\t@true\n",
            out_file.display()
        ),
    )
    .expect("write Makefile");
    let status = Command::new(bin())
        .args(["run", "--jobserver", "--socket"])
        .arg(&socket)
        .args(["--", "make", "-j4", "-C"])
        .arg(dir.path(""))
        .status()
        .expect("run partita run --jobserver");
    assert!(status.success(), "{status:?}");
    let flags = std::fs::read_to_string(&out_file).expect("the job wrote MAKEFLAGS");
    assert!(flags.contains("--jobserver-auth="), "MAKEFLAGS: {flags}");

    let status = Command::new(bin())
        .args(["run", "--jobserver", "--socket"])
        .arg(&socket)
        .args(["--", "sh", "-c", "exit 3"])
        .status()
        .expect("run partita run --jobserver");
    assert_eq!(status.code(), Some(3));
    manager.kill();
}

#[test]
fn threads_env_sizes_the_program_from_its_allocation() {
    let _g = serial();
    let dir = TempDir::new("run-threads-env");
    let (mut manager, socket) = serve(&dir, CONFIG);
    let out = Command::new(bin())
        .args(["run", "--threads-env", "--socket"])
        .arg(&socket)
        .args([
            "--",
            "sh",
            "-c",
            "echo $OMP_NUM_THREADS $RAYON_NUM_THREADS $OMP_WAIT_POLICY",
        ])
        .output()
        .expect("run partita run --threads-env");
    assert!(out.status.success(), "{out:?}");
    let line = String::from_utf8_lossy(&out.stdout);
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(words.len(), 3, "{line}");
    let n: usize = words[0].parse().expect("OMP_NUM_THREADS is a number");
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert!((1..=cpus).contains(&n), "{line}");
    assert_eq!(words[0], words[1]);
    assert_eq!(words[2].to_ascii_lowercase(), "passive");
    manager.kill();
}

#[test]
fn jobserver_flags_need_jobserver() {
    let out = Command::new(bin())
        .args(["run", "--fifo", "/tmp/x", "--", "true"])
        .output()
        .expect("run partita run");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--jobserver"));
}

#[test]
fn status_shows_a_jobserver_build_with_its_tokens() {
    let _g = serial();
    let dir = TempDir::new("run-jobserver-status");
    let (mut manager, socket) = serve(&dir, CONFIG);
    std::fs::write(dir.path("Makefile"), "all: a b c d\na b c d:\n\t@sleep 2\n")
        .expect("write Makefile");
    let mut build = Proc::spawn(
        Command::new(bin())
            .args(["run", "--jobserver", "--socket"])
            .arg(&socket)
            .args(["--", "make", "-j4", "-C"])
            .arg(dir.path("")),
    );
    let seen = wait_until(Duration::from_secs(10), || {
        partita_manager::query_status(&socket).is_ok_and(|s| {
            s.applications
                .iter()
                .any(|a| a.name == "make" && a.jobserver_tokens.is_some())
        })
    });
    assert!(seen, "{:#?}", partita_manager::query_status(&socket));
    let table = Command::new(bin())
        .args(["status", "--socket"])
        .arg(&socket)
        .output()
        .expect("partita status");
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(table.contains("jobserver builds"), "{table}");
    assert!(table.contains("TOKENS"), "{table}");
    build.kill();
    manager.kill();
}
