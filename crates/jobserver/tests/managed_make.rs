//! `make -j16` of 16 CPU-bound jobs through the jobserver beside a partita-runtime program on a
//! manager with 2 CPUs: the jobs running at once (from their own stamps) never exceed the
//! build's allocation for longer than one period, and every job completes.

mod support;

use partita_jobserver::stamps;
use std::process::Command;
use support::*;

#[test]
fn make_j16_follows_the_allocation_beside_a_runtime_program() {
    let dir = scratch("managed-make");
    let st = dir.join("stamps");
    std::fs::write(
        dir.join("Makefile"),
        stamps::cpu_bound_makefile(16, &st, 3_000_000),
    )
    .unwrap();
    let h = manager(&dir);
    let pool = program_pool(h.socket());
    let mut build = Command::new(BIN)
        .current_dir(&dir)
        .env_remove("MAKEFLAGS")
        .args(["run", "--report", "report.txt", "--socket"])
        .arg(h.socket())
        .args(["--", "make", "-j16"])
        .spawn()
        .unwrap();
    let sampler = Sampler::start(&h, build.id() as i32);
    // The program: CPU-bound rounds of tasks until a quarter of the jobs have finished (so the
    // build shares the CPUs with it first, then has them alone), whatever the machine's speed.
    let done = |st: &std::path::Path| stamps::read_intervals(st).map_or(0, |v| v.len());
    while done(&st) < 4 && build.try_wait().unwrap().is_none() {
        burn(&pool, 100, 300_000);
    }
    let status = build.wait().unwrap();
    let samples = sampler.finish();
    assert!(status.success());
    let report = std::fs::read_to_string(dir.join("report.txt")).unwrap();
    assert!(report.contains("registered 1"), "{report}");
    let iv = stamps::read_intervals(&st).unwrap();
    assert_eq!(iv.len(), 16, "every job completes");
    assert!(
        samples.iter().any(|&(_, a)| a == 1),
        "the program never shared the CPUs with the build: {samples:?}"
    );
    assert!(
        samples.iter().any(|&(_, a)| a == 2),
        "the build never grew when the program finished (are waiting clients seen?): {samples:?}"
    );
    let excess = stamps::longest_excess(&iv, &samples);
    let t0 = iv.iter().map(|i| i.0).min().unwrap_or(0);
    let changes: Vec<(u64, u32)> = samples
        .windows(2)
        .filter(|w| w[0].1 != w[1].1)
        .map(|w| (w[1].0.saturating_sub(t0) / 1_000_000, w[1].1))
        .collect();
    eprintln!(
        "max concurrency {}, longest excess {} ms, allocation changes (ms from first job, CPUs) {changes:?}",
        stamps::max_concurrency(&iv),
        excess / 1_000_000
    );
    assert!(
        excess <= PERIOD_MS * 1_000_000,
        "jobs exceeded the allocation for {} ms (max concurrency {}; samples {samples:?})",
        excess / 1_000_000,
        stamps::max_concurrency(&iv)
    );
    drop(pool);
    h.shutdown().unwrap();
}
