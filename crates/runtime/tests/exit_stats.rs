//! `PARTITA_STATS=<file>`: a process appends exactly one line of counters per pool it built
//! when it exits — the global pool, and a local pool even when the program exits from inside
//! it (as b3sum does); one that built no pool writes nothing. The process is this test binary
//! re-run on the `child` test alone (`EXIT_STATS_CHILD=pool|local|idle`).

use std::path::Path;
use std::process::Command;

/// The child's work: use the global pool, change its target twice, return (the harness then
/// exits, which runs the hook).
#[test]
fn child() {
    match std::env::var("EXIT_STATS_CHILD").as_deref() {
        Ok("pool") => {}
        Ok("local") => {
            let pool = partita_runtime::ThreadPoolBuilder::new()
                .num_threads(3)
                .build()
                .unwrap();
            pool.install(|| {
                partita_runtime::join(|| (), || ());
                std::process::exit(0)
            })
        }
        _ => return,
    }
    let (a, b) = partita_runtime::join(|| 1, || 2);
    assert_eq!(a + b, 3);
    partita_runtime::set_target_workers(1);
    partita_runtime::set_target_workers(2);
}

fn run_child(stats: &Path, what: &str) {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["--exact", "child", "--test-threads", "1"])
        .env("EXIT_STATS_CHILD", what)
        .env("PARTITA", "off")
        .env("PARTITA_NAME", "exit-stats-child")
        .env("RAYON_NUM_THREADS", "2")
        .env("PARTITA_STATS", stats);
    let out = c.output().unwrap();
    assert!(out.status.success(), "{out:?}");
}

fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v)
}

#[test]
fn each_exit_appends_one_line_of_the_global_pools_counters() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("stats");
    run_child(&file, "pool");
    run_child(&file, "pool");
    let text = std::fs::read_to_string(&file).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    for l in lines {
        assert_eq!(field(l, "name"), Some("exit-stats-child"), "{l}");
        assert_eq!(field(l, "threads"), Some("2"), "{l}");
        assert_eq!(field(l, "target_changes"), Some("2"), "{l}");
        assert_eq!(field(l, "target"), Some("2"), "{l}");
        let parks: u64 = field(l, "parks").unwrap().parse().unwrap();
        let unparks: u64 = field(l, "unparks").unwrap().parse().unwrap();
        assert!(unparks <= parks, "{l}");
        assert!(field(l, "pid").unwrap().parse::<u32>().is_ok(), "{l}");
    }
}

#[test]
fn a_local_pool_is_reported_when_the_program_exits_inside_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("stats");
    run_child(&file, "local");
    let text = std::fs::read_to_string(&file).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "{text}");
    assert_eq!(field(lines[0], "threads"), Some("3"), "{text}");
    assert_eq!(field(lines[0], "target_changes"), Some("0"), "{text}");
}

#[test]
fn a_process_without_a_pool_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("stats");
    run_child(&file, "idle");
    assert!(!file.exists());
    run_child(&file, "pool");
    assert_eq!(std::fs::read_to_string(&file).unwrap().lines().count(), 1);
}
