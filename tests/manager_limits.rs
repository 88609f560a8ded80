//! The manager's limits and configuration errors with real processes: raw protocol clients
//! (`partita probe --raw`, each its own pid) against an in-process manager, and `partita
//! serve` refusing bad configuration files. The single-process cases are partita-manager's
//! own `tests/protocol_errors.rs`.

mod support;

use partita_manager::{spawn_in_process, Config};
use std::time::Duration;
use support::{bin, wait_until, Proc, TempDir};

fn config() -> Config {
    let mut c = Config::from_toml_str(support::TRACKED).unwrap();
    c.hello_timeout_ms = 300;
    c.max_applications = 2;
    c
}

#[test]
fn the_application_limit_refuses_the_third_with_a_clear_error() {
    let dir = TempDir::new("limits");
    let h = spawn_in_process(config(), dir.path("m.sock")).unwrap();
    // max_applications = 2: a third application is refused with a clear error. Use child
    // processes (raw probes) so that each has its own pid.
    let mut probes = Vec::new();
    for i in 0..2 {
        probes.push(Proc::spawn(
            std::process::Command::new(bin())
                .args(["probe", "--raw", "--name", &format!("r{i}"), "--socket"])
                .arg(h.socket()),
        ));
    }
    assert!(wait_until(Duration::from_secs(10), || h
        .status()
        .applications
        .len()
        == 2));
    let out = std::process::Command::new(bin())
        .args(["probe", "--raw", "--name", "third", "--socket"])
        .arg(h.socket())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("TooManyApplications") && err.contains("max_applications"),
        "{err}"
    );
    drop(probes);
    h.shutdown().unwrap();
}

#[test]
fn invalid_configuration_names_the_key_and_value() {
    let dir = TempDir::new("badcfg");
    let cfg = dir.path("bad.toml");
    std::fs::write(&cfg, "[usage_decay]\nc = 7.5\n").unwrap();
    let out = std::process::Command::new(bin())
        .args(["serve", "--config"])
        .arg(&cfg)
        .arg("--socket")
        .arg(dir.path("s.sock"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("usage_decay.c") && err.contains("7.5"),
        "{err}"
    );
    std::fs::write(&cfg, "[[partition]]\nname = \"a\"\npolicy = \"lottery\"\n").unwrap();
    let out = std::process::Command::new(bin())
        .args(["serve", "--config"])
        .arg(&cfg)
        .arg("--socket")
        .arg(dir.path("s.sock"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("lottery") && err.contains("policy"),
        "{err}"
    );
}
