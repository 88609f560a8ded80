use super::*;
use std::io::Write as _;
use std::process::{Command, Stdio};

const CHILD_ENV: &str = "PARTITA_COUNTER_TEST_CHILD";
const CHILD_THREADS: usize = 3;
const CHILD_PAGES: usize = 2000;
const CHILD_READY: &str = "partita-child-ready";

/// Not a test: the body of the child process the perf tests observe. Waits for a line on
/// stdin, then starts threads that each touch `CHILD_PAGES` fresh pages (a fixed amount of
/// work, not a time: the machine may be busy).
#[test]
#[ignore]
fn counter_test_child() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    // Tell the parent we are up (it attaches then, as the manager does after a hello).
    println!("{CHILD_READY}");
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
    let threads: Vec<_> = (0..CHILD_THREADS)
        .map(|_| {
            std::thread::spawn(|| {
                let mut v = vec![0u8; CHILD_PAGES * 4096];
                for p in 0..CHILD_PAGES {
                    v[p * 4096] = 1;
                }
                std::hint::black_box(v);
            })
        })
        .collect();
    for t in threads {
        let _ = t.join();
    }
}

fn spawn_child() -> std::process::Child {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "counters::tests::counter_test_child",
            "--ignored",
            "--nocapture",
        ])
        .env(CHILD_ENV, "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // Attach once the child runs its code, as the manager attaches after the hello.
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains(CHILD_READY) {
        line.clear();
        assert!(
            std::io::BufRead::read_line(&mut out, &mut line).unwrap() > 0,
            "child exited"
        );
    }
    // Keep draining so the child's later output does not hit a closed pipe.
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    child
}

/// Open perf-event descriptors of this process (no other test keeps one open).
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|l| l.to_string_lossy().contains("perf_event"))
        .count()
}

/// Software events exist on every kernel: the page faults of threads created after attach
/// are counted (inheritance), in bytes (a page each, as the runtime's own counters count
/// them), reads are cumulative, detach closes the descriptors.
#[test]
fn perf_counts_threads_of_a_child_by_inheritance() {
    let Ok(mut src) = PerfSource::with_event(TrafficEvent::PageFaults) else {
        eprintln!("perf_event_open not permitted here; skipping");
        return;
    };
    let fds = open_fds();
    let mut child = spawn_child();
    let app = AppRef {
        id: 7,
        pid: child.id() as i32,
        reported_bytes: 0,
    };
    src.attach(&app).unwrap();
    assert!(src.counters_of(7) >= 1);
    let before = src.read(&app).unwrap();
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert!(child.wait().unwrap().success());
    let after = src.read(&app).unwrap();
    // Every thread touched CHILD_PAGES fresh pages after attach.
    let page = TrafficEvent::PageFaults.bytes_per_event();
    let faults = (after - before) / page;
    assert!(
        faults >= (CHILD_THREADS * CHILD_PAGES) as u64,
        "{faults} page faults ({} bytes)",
        after - before
    );
    assert!(src.read(&app).unwrap() >= after, "cumulative");
    src.detach(7);
    assert_eq!(src.counters_of(7), 0);
    assert_eq!(open_fds(), fds, "descriptors closed on detach");
}

/// The hardware path either works (a PMU) or says why it was skipped.
#[test]
fn hardware_event_is_checked() {
    match PerfSource::hardware() {
        Ok(_) => {}
        Err(CounterError::Unavailable(why)) => assert!(why.contains("perf_event_open"), "{why}"),
        Err(e) => panic!("unexpected error kind: {e}"),
    }
}

#[test]
fn resctrl_unmounted_is_skipped_with_reason() {
    let dir = std::env::temp_dir().join(format!("partita-noresctrl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let e = ResctrlSource::at(&dir).unwrap_err().to_string();
    assert!(e.contains("not a mounted resctrl"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A directory laid out like a resctrl mount: a group per application, its tasks written,
/// traffic summed over the domains, the group removed on detach.
#[test]
fn resctrl_groups_on_a_fake_tree() {
    let root = std::env::temp_dir().join(format!("partita-resctrl-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join("info/L3_MON")).unwrap();
    std::fs::create_dir_all(root.join("mon_groups")).unwrap();
    std::fs::write(
        root.join("info/L3_MON/mon_features"),
        "llc_occupancy\nmbm_total_bytes\nmbm_local_bytes\n",
    )
    .unwrap();
    let mut src = ResctrlSource::at(&root).unwrap();
    let app = AppRef {
        id: 3,
        pid: std::process::id() as i32,
        reported_bytes: 0,
    };
    src.attach(&app).unwrap();
    let g = root.join("mon_groups/partita-3");
    let tasks = std::fs::read_to_string(g.join("tasks")).unwrap();
    // A plain file keeps only the last write; the real kernel file accumulates.
    assert!(!tasks.trim().is_empty());
    for (d, v) in [("mon_L3_00", "1000"), ("mon_L3_01", "24")] {
        std::fs::create_dir_all(g.join("mon_data").join(d)).unwrap();
        std::fs::write(g.join("mon_data").join(d).join("mbm_total_bytes"), v).unwrap();
    }
    assert_eq!(src.read(&app).unwrap(), 1024);
    std::fs::remove_dir_all(g.join("mon_data")).unwrap();
    std::fs::remove_file(g.join("tasks")).unwrap();
    src.detach(3);
    assert!(!g.exists());
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn detect_records_every_skipped_source() {
    let c = Chain::detect(&["resctrl".to_string(), "self-report".to_string()]);
    if std::path::Path::new("/sys/fs/resctrl/info").is_dir() {
        return; // a machine with resctrl mounted uses it
    }
    assert_eq!(c.source(), "self-report");
    assert_eq!(c.skipped().len(), 1);
    assert_eq!(c.skipped()[0].name, "resctrl");
    let none = Chain::detect(&[]);
    assert_eq!(none.source(), NONE);
}

#[test]
fn self_report_rates_are_bytes_per_second() {
    let mut c = Chain::detect(&["self-report".to_string()]);
    let mut a = AppRef {
        id: 1,
        pid: 1,
        reported_bytes: 0,
    };
    assert!(c.sample(&[a], 0).is_empty(), "no rate on the first reading");
    a.reported_bytes = 500_000_000;
    let r = c.sample(&[a], 500_000_000);
    assert_eq!(r.get(&1).copied(), Some(1e9));
}

/// A source that works for `ok_reads` reads, then fails.
#[derive(Debug)]
struct Flaky {
    ok_reads: u32,
}

impl CounterSource for Flaky {
    fn name(&self) -> &'static str {
        "perf-event"
    }
    fn attach(&mut self, _: &AppRef) -> Result<(), CounterError> {
        Ok(())
    }
    fn read(&mut self, _: &AppRef) -> Result<u64, CounterError> {
        if self.ok_reads == 0 {
            return Err(CounterError::Io {
                call: "read(perf counter)".into(),
                source: std::io::Error::from_raw_os_error(libc::EIO),
            });
        }
        self.ok_reads -= 1;
        Ok(0)
    }
    fn detach(&mut self, _: AppId) {}
}

#[test]
fn a_failing_source_falls_back_to_the_next() {
    let mut c = Chain::from_sources(
        vec![Box::new(Flaky { ok_reads: 1 }), Box::new(SelfReport)],
        vec![],
    );
    let a = AppRef {
        id: 1,
        pid: 1,
        reported_bytes: 10,
    };
    assert_eq!(c.source(), "perf-event");
    c.sample(&[a], 0);
    assert!(c.sample(&[a], 1_000_000).is_empty());
    assert_eq!(c.source(), "self-report");
    assert!(c.skipped()[0].reason.contains("failed while running"));
    c.sample(&[a], 2_000_000);
    let r = c.sample(
        &[AppRef {
            reported_bytes: 1010,
            ..a
        }],
        3_000_000,
    );
    assert_eq!(r.get(&1).copied(), Some(1e6));
}
