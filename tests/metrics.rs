//! `partita serve --metrics ADDR`: a real scrape over HTTP (ureq), parsed with a Prometheus
//! text parser (prometheus-parse), while two probe applications run; the values match
//! `partita status --json` taken between two identical scrapes. Bad addresses (in use, not
//! loopback without `--metrics-public`, not an address) stop `serve` with a message naming
//! the flag and a non-zero exit.

mod support;

use partita_manager::Status;
use prometheus_parse::{Scrape, Value};
use std::collections::BTreeMap;
use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::{bin, probe, serial, wait_until, TempDir, TRACKED};

const LONG: Duration = Duration::from_secs(15);

/// `partita serve --metrics 127.0.0.1:0` with its stderr collected; killed on drop.
struct Daemon {
    child: Child,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(dir: &TempDir, socket: &std::path::Path) -> Daemon {
    let cfg = dir.path("partita.toml");
    std::fs::write(&cfg, TRACKED).unwrap();
    let mut child = Command::new(bin())
        .args(["serve", "--metrics", "127.0.0.1:0", "--config"])
        .arg(&cfg)
        .arg("--socket")
        .arg(socket)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = child.stderr.take().unwrap();
    let stderr = Arc::new(Mutex::new(Vec::new()));
    let s2 = stderr.clone();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(err).lines() {
            let Ok(line) = line else { break };
            s2.lock().unwrap().push(line);
        }
    });
    Daemon { child, stderr }
}

/// The address from the `metrics listening on ADDR` line.
fn bound_addr(d: &Daemon) -> String {
    let mut addr = None;
    assert!(
        wait_until(LONG, || {
            addr = d.stderr.lock().unwrap().iter().find_map(|l| {
                let rest = l.split("metrics listening on ").nth(1)?;
                Some(rest.split_whitespace().next()?.to_string())
            });
            addr.is_some()
        }),
        "no `metrics listening on` line: {:?}",
        d.stderr.lock().unwrap()
    );
    addr.unwrap()
}

fn scrape(addr: &str) -> Scrape {
    let mut resp = ureq::get(&format!("http://{addr}/metrics"))
        .call()
        .expect("GET /metrics");
    let ctype = resp.headers()["content-type"].to_str().unwrap().to_string();
    assert!(ctype.starts_with("text/plain; version=0.0.4"), "{ctype}");
    let body = resp.body_mut().read_to_string().unwrap();
    Scrape::parse(body.lines().map(|l| Ok(l.to_string()))).expect("Prometheus text")
}

fn cli_status(socket: &std::path::Path) -> Status {
    let out = Command::new(bin())
        .args(["status", "--json", "--socket"])
        .arg(socket)
        .output()
        .unwrap();
    assert!(out.status.success());
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Scalar value of a counter, gauge or untyped sample.
fn scalar(v: &Value) -> f64 {
    match v {
        Value::Counter(x) | Value::Gauge(x) | Value::Untyped(x) => *x,
        other => panic!("not a scalar: {other:?}"),
    }
}

/// The values compared with the status: `metric{label}` → value.
fn compared(s: &Scrape) -> BTreeMap<String, f64> {
    let mut m = BTreeMap::new();
    for x in &s.samples {
        let key = match x.metric.as_str() {
            "partita_cpus_managed" | "partita_applications" => x.metric.clone(),
            "partita_app_allocated_cpus" => {
                format!("{}{{{}}}", x.metric, x.labels.get("pid").unwrap())
            }
            "partita_partition_allocated_cpus" | "partita_partition_demand_cpus" => {
                format!("{}{{{}}}", x.metric, x.labels.get("partition").unwrap())
            }
            _ => continue,
        };
        m.insert(key, scalar(&x.value));
    }
    m
}

/// What the status says for the same keys.
fn expected(s: &Status) -> BTreeMap<String, f64> {
    let mut m = BTreeMap::new();
    m.insert("partita_cpus_managed".into(), s.cpus_managed as f64);
    m.insert("partita_applications".into(), s.applications.len() as f64);
    for a in &s.applications {
        m.insert(
            format!("partita_app_allocated_cpus{{{}}}", a.pid),
            a.target as f64,
        );
    }
    for p in &s.partitions {
        m.insert(
            format!("partita_partition_allocated_cpus{{{}}}", p.name),
            p.allocation as f64,
        );
        m.insert(
            format!("partita_partition_demand_cpus{{{}}}", p.name),
            p.demand as f64,
        );
    }
    m
}

/// A scrape, a status and a scrape again until the status agrees with both scrapes.
fn agreeing_scrape(addr: &str, socket: &std::path::Path) -> (Scrape, Status) {
    // A status taken between two scrapes must agree with both. The runtime's demand can
    // change between two reads (it follows its pool's work), so a differing triple is read
    // again; a mapping error would never agree and fails after LONG.
    let t = Instant::now();
    let mut tries = 0;
    loop {
        tries += 1;
        let first = scrape(addr);
        let status = cli_status(socket);
        let second = scrape(addr);
        let (a, b, want) = (compared(&first), compared(&second), expected(&status));
        if a == b && a == want {
            println!("scrape and status agreed after {tries} tries");
            return (first, status);
        }
        assert!(
            t.elapsed() < LONG,
            "after {tries} tries, scrape {a:?}\nstatus {want:?}\nscrape {b:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The other metric families are there, with their labels, and count what happened: two
/// registrations (two reallocations), and with two CPUs or more a revocation and a move.
fn check_families(first: &Scrape, cpus: u32) {
    let names: Vec<&str> = first.samples.iter().map(|s| s.metric.as_str()).collect();
    for name in [
        "partita_reallocations_total",
        "partita_reallocation_duration_seconds",
        "partita_registration_refusals_total",
        "partita_counter_source",
        "partita_app_demand_cpus",
        "partita_app_active_workers",
        "partita_app_cpu_moves_total",
        "partita_app_revocations_total",
        "partita_partition_active_workers",
        "partita_partition_cpu_moves_total",
        "partita_partition_revocations_total",
    ] {
        assert!(names.contains(&name), "{name} missing: {names:?}");
    }
    let realloc = first
        .samples
        .iter()
        .find(|s| s.metric == "partita_reallocations_total")
        .unwrap();
    assert!(
        scalar(&realloc.value) >= 2.0,
        "two registrations reallocate"
    );
    let hist = first
        .samples
        .iter()
        .find(|s| s.metric == "partita_reallocation_duration_seconds")
        .unwrap();
    let Value::Histogram(buckets) = &hist.value else {
        panic!("not a histogram: {hist:?}")
    };
    let inf = buckets.iter().find(|b| b.less_than.is_infinite()).unwrap();
    assert!(inf.count >= 2.0, "{buckets:?}");
    for s in first
        .samples
        .iter()
        .filter(|s| s.metric == "partita_app_allocated_cpus")
    {
        let app = s.labels.get("app").unwrap();
        assert!(app == "alpha" || app == "beta", "{s:?}");
        assert_eq!(s.labels.get("partition"), Some("default"));
    }

    let value = |metric: &str, app: &str| {
        let s = first
            .samples
            .iter()
            .find(|s| s.metric == metric && s.labels.get("app") == Some(app));
        scalar(&s.unwrap_or_else(|| panic!("no {metric} for {app}")).value)
    };
    if cpus >= 2 {
        assert!(value("partita_app_revocations_total", "alpha") >= 1.0);
        assert!(value("partita_app_cpu_moves_total", "beta") >= 1.0);
    }
}

#[test]
fn scrape_matches_status_with_two_applications() {
    let _g = serial();
    let dir = TempDir::new("metrics");
    let socket = dir.path("partita.sock");
    let daemon = start(&dir, &socket);
    let addr = bound_addr(&daemon);
    assert!(
        addr.starts_with("127.0.0.1:") && !addr.ends_with(":0"),
        "{addr}"
    );
    assert!(wait_until(LONG, || partita_manager::query_status(&socket).is_ok()));

    // alpha alone first, so that beta's arrival takes a CPU alpha still wants (a revocation
    // and a move) when there are two CPUs or more.
    let alpha = probe(&socket, "alpha", 2, 2);
    let cpus = cli_status(&socket).cpus_managed as u32;
    assert!(
        wait_until(LONG, || cli_status(&socket)
            .app_by_pid(alpha.pid())
            .is_some_and(|a| a.target == cpus.min(2))),
        "alpha did not get its CPUs"
    );
    let beta = probe(&socket, "beta", 2, 2);
    assert!(
        wait_until(LONG, || {
            let s = cli_status(&socket);
            s.applications.len() == 2 && s.applications.iter().all(|a| a.target > 0)
        }),
        "both probes did not register: {:?}",
        cli_status(&socket)
    );

    let (first, status) = agreeing_scrape(&addr, &socket);
    assert_eq!(status.applications.len(), 2);
    let pids = [alpha.pid(), beta.pid()];
    for a in &status.applications {
        assert!(pids.contains(&a.pid), "{a:?}");
    }

    check_families(&first, cpus);

    // A registration refused (unknown partition) is counted by reason.
    let refusals = |s: &Scrape| {
        s.samples
            .iter()
            .find(|x| {
                x.metric == "partita_registration_refusals_total"
                    && x.labels.get("reason") == Some("unknown_partition")
            })
            .map(|x| scalar(&x.value))
    };
    assert_eq!(refusals(&first), Some(0.0));
    let _lost = support::Proc::spawn(
        Command::new(bin())
            .args(["probe", "--name", "lost", "--partition", "nope", "--socket"])
            .arg(&socket),
    );
    assert!(
        wait_until(LONG, || refusals(&scrape(&addr)).is_some_and(|n| n >= 1.0)),
        "refusal not counted"
    );

    // Anything but /metrics is a 404.
    let other = ureq::get(&format!("http://{addr}/")).call();
    assert!(
        matches!(other, Err(ureq::Error::StatusCode(404))),
        "{other:?}"
    );
}

/// Run `serve` with `args`, expecting it to fail at once; returns stderr.
fn refused(dir: &TempDir, args: &[&str]) -> String {
    let out = Command::new(bin())
        .arg("serve")
        .args(args)
        .arg("--socket")
        .arg(dir.path("refused.sock"))
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(!dir.path("refused.sock").exists(), "the socket was created");
    err
}

#[test]
fn bad_metrics_addresses_are_refused_by_name() {
    let dir = TempDir::new("metrics-bad");
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy_addr = busy.local_addr().unwrap().to_string();
    let err = refused(&dir, &["--metrics", &busy_addr]);
    assert!(
        err.contains("--metrics") && err.contains("cannot listen"),
        "{err}"
    );
    assert!(err.to_lowercase().contains("in use"), "{err}");

    let err = refused(&dir, &["--metrics", "0.0.0.0:0"]);
    assert!(
        err.contains("not a loopback address") && err.contains("--metrics-public"),
        "{err}"
    );

    let err = refused(&dir, &["--metrics", "not-an-address"]);
    assert!(err.contains("not an address"), "{err}");

    // --metrics-public without --metrics is a usage error (clap's exit code 2).
    let out = Command::new(bin())
        .args(["serve", "--metrics-public", "--socket"])
        .arg(dir.path("x.sock"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--metrics"));
}

#[test]
fn metrics_public_allows_any_address() {
    let dir = TempDir::new("metrics-public");
    let socket = dir.path("p.sock");
    let mut child = Command::new(bin())
        .args([
            "serve",
            "--metrics",
            "0.0.0.0:0",
            "--metrics-public",
            "--socket",
        ])
        .arg(&socket)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = child.stderr.take().unwrap();
    let mut lines = std::io::BufReader::new(err).lines();
    let line = lines
        .find(|l| l.as_ref().is_ok_and(|l| l.contains("metrics listening on")))
        .expect("listening line")
        .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(line.contains("metrics listening on 0.0.0.0:"), "{line}");
}
