//! The bandwidth policy end to end: `partita serve` with a bandwidth partition, two probe
//! applications whose gangs cannot run together, time-sliced quantum by quantum; a parked
//! application resumes on its own when the manager stops updating it (quantum_end).

mod support;

use std::time::Duration;
use support::*;

const CONFIG: &str = "uncontrolled = \"tracked\"\nhello_timeout_ms = 500\n\
[bandwidth]\ncapacity_gbps = 1.0\nsources = [\"self-report\"]\nquantum_ms = 100\n\
[[partition]]\nname = \"default\"\npolicy = \"bandwidth\"\n";

fn target_line(v: u64) -> impl Fn(&str) -> bool {
    move |l: &str| l.starts_with("active=") && field(l, "target") == Some(v)
}

#[test]
fn gangs_alternate_and_a_parked_app_outlives_a_stopped_manager() {
    let _g = serial();
    let dir = TempDir::new("bw");
    let (mut manager, socket) = serve(&dir, CONFIG);
    let cpus = partita_manager::query_status(&socket).unwrap().cpus_managed as u32;
    // Each wants every CPU: only one gang fits at a time.
    let a = probe(&socket, "bw-a", cpus, cpus);
    let b = probe(&socket, "bw-b", cpus, cpus);
    let both = wait_until(Duration::from_secs(10), || {
        partita_manager::query_status(&socket)
            .unwrap()
            .applications
            .len()
            == 2
    });
    assert!(both, "both registered");
    let s = partita_manager::query_status(&socket).unwrap();
    let p = s.partition("default").unwrap();
    assert_eq!(p.counter_source, "self-report");
    assert!(
        p.bandwidth.contains("capacity 1.00 GB/s"),
        "{}",
        p.bandwidth
    );
    assert!(s.to_table().contains("counters: self-report"));
    // Each is parked (target 0) and later runs with its whole gang, in turn.
    for app in [&a, &b] {
        let (i, _) = app
            .wait_line(0, Duration::from_secs(10), target_line(0))
            .expect("parked at some quantum");
        app.wait_line(i, Duration::from_secs(10), target_line(cpus as u64))
            .expect("runs again after its zero quantum");
    }
    // Stop the manager (it can update nobody): whoever is parked resumes on its own after
    // its quantum_end.
    let pid = manager.pid();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGSTOP,
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let (na, nb) = (a.line_count(), b.line_count());
    let resumed = wait_until(Duration::from_secs(5), || {
        let last = |p: &Proc| {
            p.lines
                .lock()
                .unwrap()
                .iter()
                .rev()
                .find(|(_, l)| l.starts_with("active="))
                .and_then(|(_, l)| field(l, "target"))
        };
        last(&a) == Some(cpus as u64) && last(&b) == Some(cpus as u64)
    });
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGCONT,
    )
    .unwrap();
    assert!(
        resumed,
        "both run with the manager stopped (lines since stop: {} {})",
        a.line_count() - na,
        b.line_count() - nb
    );
    manager.kill();
}
