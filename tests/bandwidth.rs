//! The bandwidth policy end to end: `partita serve` with a bandwidth partition, two probe
//! applications whose gangs cannot run together, time-sliced quantum by quantum; a parked
//! application resumes on its own when the manager stops updating it (quantum_end); a CPU
//! freed mid-quantum goes to a waiting application at once.

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

/// The quantum count in the partition's status line (`…; quanta N, top-ups M`).
fn quanta(socket: &std::path::Path) -> (u64, u64) {
    let s = partita_manager::query_status(socket).unwrap();
    let line = s.partition("default").unwrap().bandwidth.clone();
    let n = |key: &str| -> u64 {
        line.split(key)
            .nth(1)
            .and_then(|r| r.trim().split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|d| d.parse().ok())
            .unwrap_or_else(|| panic!("no {key:?} in {line:?}"))
    };
    (n("quanta "), n("top-ups "))
}

/// Work conservation, counted: one more single-worker application than CPUs, so one waits
/// with a zero quantum; when a running one exits, the waiting one is unparked by the
/// reallocation its departure triggers, within the same quantum (the quantum count has not
/// moved; the quantum is 5 s), not at the quantum's end.
#[test]
fn a_departure_hands_its_cpu_to_a_waiting_app_within_the_quantum() {
    let _g = serial();
    let dir = TempDir::new("bw-topup");
    let (mut manager, socket) = serve(
        &dir,
        &CONFIG.replace("quantum_ms = 100", "quantum_ms = 5000"),
    );
    let cpus = partita_manager::query_status(&socket).unwrap().cpus_managed as u32;
    let mut probes: Vec<(String, Proc)> = (0..=cpus)
        .map(|i| {
            let name = format!("bw-w{i}");
            let p = probe(&socket, &name, 1, 1);
            (name, p)
        })
        .collect();
    // The first quantum with everyone registered parks exactly one.
    let one_waits = wait_until(Duration::from_secs(20), || {
        let s = partita_manager::query_status(&socket).unwrap();
        s.applications.len() == cpus as usize + 1
            && s.applications.iter().filter(|a| a.parked).count() == 1
    });
    assert!(one_waits, "one application waits");
    let (q, top_ups) = quanta(&socket);
    let s = partita_manager::query_status(&socket).unwrap();
    let waiting = s
        .applications
        .iter()
        .find(|a| a.parked)
        .unwrap()
        .name
        .clone();
    let running = s
        .applications
        .iter()
        .find(|a| !a.parked)
        .unwrap()
        .name
        .clone();
    probes
        .iter_mut()
        .find(|(n, _)| *n == running)
        .unwrap()
        .1
        .kill();
    let handed = wait_until(Duration::from_secs(20), || {
        let s = partita_manager::query_status(&socket).unwrap();
        s.applications.len() == cpus as usize
            && s.applications
                .iter()
                .any(|a| a.name == waiting && !a.parked && a.target == 1)
    });
    assert!(handed, "{waiting} runs after {running} left");
    let (q2, top_ups2) = quanta(&socket);
    assert_eq!(q2, q, "unparked within the quantum in which {running} left");
    assert_eq!(top_ups2, top_ups + 1);
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
