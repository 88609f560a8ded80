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

/// `partita status` (text and JSON) shows, per application, whether its runtime measures its
/// own traffic or why not, carried by the control page (`AppSide::traffic_status`): real
/// runtime processes (`partita probe`) under a real `partita serve`. The default event's
/// outcome is whatever this machine gives the test process itself (on the project's VM:
/// `measured-skip no-pmu`); `off` and `page-faults` give the same result everywhere.
#[test]
fn status_shows_why_the_runtime_measures_no_traffic() {
    let _g = serial();
    let dir = TempDir::new("bw-traffic");
    let (mut manager, socket) = serve(&dir, CONFIG);
    let spawn = |name: &str, event: Option<&str>| {
        let mut cmd = std::process::Command::new(bin());
        cmd.args(["probe", "--name", name, "--pool", "1", "--demand", "1"])
            .arg("--socket")
            .arg(&socket)
            .env("PARTITA_SOCKET", &socket)
            .env_remove("PARTITA_TRAFFIC_EVENT");
        if let Some(e) = event {
            cmd.env("PARTITA_TRAFFIC_EVENT", e);
        }
        Proc::spawn(&mut cmd)
    };
    let here = partita_runtime::measured_traffic_status().to_string();
    let expect = [
        ("tr-default", None, here.as_str()),
        ("tr-off", Some("off"), "measured-skip off"),
        ("tr-faults", Some("page-faults"), "measured page-faults"),
        ("tr-bad", Some("cycles"), "measured-skip bad-config"),
    ];
    let _probes: Vec<Proc> = expect.iter().map(|(n, e, _)| spawn(n, *e)).collect();
    let shown = |s: &partita_manager::Status, name: &str| {
        s.applications
            .iter()
            .find(|a| a.name == name)
            .map(|a| a.runtime_traffic.clone())
    };
    // The client publishes the code with its first report after registering.
    let all = wait_until(Duration::from_secs(10), || {
        let s = partita_manager::query_status(&socket).unwrap();
        expect
            .iter()
            .all(|(n, _, want)| shown(&s, n).as_deref() == Some(*want))
    });
    let s = partita_manager::query_status(&socket).unwrap();
    let got: Vec<_> = expect.iter().map(|(n, ..)| shown(&s, n)).collect();
    assert!(all, "runtime traffic per probe: {got:?}, want {expect:?}");
    eprintln!("this machine: runtime traffic {here:?}");
    // The CLI, text and JSON.
    let run = |json: bool| {
        let mut cmd = std::process::Command::new(bin());
        cmd.arg("status").arg("--socket").arg(&socket);
        if json {
            cmd.arg("--json");
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let text = run(false);
    for (name, _, want) in &expect {
        let line = text
            .lines()
            .find(|l| l.contains(name))
            .unwrap_or_else(|| panic!("{name} in\n{text}"));
        assert!(
            line.contains(&format!("self-report (runtime: {want})")),
            "{line}"
        );
    }
    let json: serde_json::Value = serde_json::from_str(&run(true)).unwrap();
    let apps = json["applications"].as_array().unwrap();
    for (name, _, want) in &expect {
        let a = apps.iter().find(|a| a["name"] == *name).unwrap();
        assert_eq!(a["runtime_traffic"], *want, "{a}");
    }
    manager.kill();
}
