//! `cargo build -j16` of a small generated workspace through the jobserver beside a
//! partita-runtime program on a manager with 2 CPUs: it completes, and the rustc processes
//! running at once (stamped by a `RUSTC_WRAPPER`) respect the same bound as make's jobs.

mod support;

use partita_jobserver::stamps;
use std::process::Command;
use support::*;

#[test]
fn cargo_build_j16_completes_and_follows_the_allocation() {
    let dir = scratch("managed-cargo");
    let st = dir.join("stamps");
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    generate_workspace(&ws, &st, 8);
    let h = manager(&dir);
    let pool = program_pool(h.socket());
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut build = Command::new(BIN)
        .current_dir(&ws)
        .env_remove("MAKEFLAGS")
        .env_remove("CARGO_MAKEFLAGS")
        .env_remove("CARGO_BUILD_JOBS")
        .env("CARGO_TARGET_DIR", dir.join("target"))
        .env("RUSTC_WRAPPER", ws.join("wrap.sh"))
        .args(["run", "--report", "report.txt", "--socket"])
        .arg(h.socket())
        .args(["--", &cargo, "build", "-j16", "--offline", "-q"])
        .spawn()
        .unwrap();
    let sampler = Sampler::start(&h, build.id() as i32);
    burn(&pool, 2000, 300_000);
    let status = build.wait().unwrap();
    let samples = sampler.finish();
    assert!(status.success());
    let report = std::fs::read_to_string(ws.join("report.txt")).unwrap();
    assert!(report.contains("registered 1"), "{report}");
    let iv = stamps::read_intervals(&st).unwrap();
    assert_eq!(iv.len(), 8, "every crate is compiled once");
    let excess = stamps::longest_excess(&iv, &samples);
    eprintln!(
        "rustc max concurrency {}, longest excess {} ms",
        stamps::max_concurrency(&iv),
        excess / 1_000_000
    );
    assert!(
        samples.iter().any(|&(_, a)| a == 1),
        "the program never shared the CPUs with the build: {samples:?}"
    );
    assert!(
        excess <= PERIOD_MS * 1_000_000,
        "rustc processes exceeded the allocation for {} ms (samples {samples:?})",
        excess / 1_000_000
    );
    drop(pool);
    h.shutdown().unwrap();
}
