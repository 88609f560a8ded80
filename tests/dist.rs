//! What `dist/` ships: the example configuration is the defaults and names every key, the
//! generated completions and manual pages match the CLI definition (regenerate with
//! `scripts/gen-dist`), and the systemd unit passes `systemd-analyze verify` where systemd is
//! installed.

use partita_manager::config::PartitionConfig;
use partita_manager::Config;
use std::path::{Path, PathBuf};
use std::process::Command;

fn dist(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("dist")
        .join(name)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn partita(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_partita"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The keys of a TOML table, recursively, as dotted paths.
fn keys(v: &toml::Value, prefix: &str, out: &mut Vec<String>) {
    if let toml::Value::Table(t) = v {
        for (k, v) in t {
            let path = format!("{prefix}{k}");
            keys(v, &format!("{path}."), out);
            out.push(path);
        }
    }
}

#[test]
fn the_example_configuration_is_the_defaults_and_names_every_key() {
    let path = dist("partita.toml");
    assert_eq!(Config::from_file(&path).unwrap(), Config::default());
    let file: toml::Value = toml::from_str(&read(&path)).unwrap();
    let mut defaults = toml::Value::try_from(Config::default()).unwrap();
    // No partition besides `default` by default: the file shows them as commented examples.
    defaults.as_table_mut().unwrap().remove("partition");
    defaults.as_table_mut().unwrap().remove("cgroup_rule");
    let (mut want, mut have) = (Vec::new(), Vec::new());
    keys(&defaults, "", &mut want);
    keys(&file, "", &mut have);
    want.sort();
    have.sort();
    assert_eq!(
        have, want,
        "dist/partita.toml must list every key exactly once"
    );
}

#[test]
fn the_example_partitions_parse_and_use_every_partition_key() {
    let text = read(&dist("partita.toml"));
    let block: String = text
        .lines()
        .skip_while(|l| !l.contains("--- example partitions ---"))
        .skip(1)
        .take_while(|l| !l.contains("--- end of example partitions ---"))
        .map(|l| l.strip_prefix('#').unwrap_or(l).trim_start_matches(' '))
        .filter(|l| !l.starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n");
    let config = Config::from_toml_str(&block).unwrap_or_else(|e| panic!("{e}\n{block}"));
    assert_eq!(config.partitions.len(), 2, "{block}");
    let example: toml::Value = toml::from_str(&block).unwrap();
    let mut used = Vec::new();
    for p in example["partition"].as_array().unwrap() {
        keys(p, "", &mut used);
    }
    let mut every = Vec::new();
    let mut one = toml::Value::try_from(PartitionConfig::named("x")).unwrap();
    one.as_table_mut()
        .unwrap()
        .insert("cpus".into(), toml::Value::Integer(1));
    keys(&one, "", &mut every);
    for k in every {
        assert!(used.contains(&k), "the example partitions never set `{k}`");
    }
}

#[test]
fn completions_and_manual_pages_are_current() {
    let stale = "dist/ is stale: run scripts/gen-dist";
    for (shell, file) in [
        ("bash", "partita.bash"),
        ("zsh", "_partita"),
        ("fish", "partita.fish"),
    ] {
        let shipped = read(&dist("completions").join(file));
        assert!(
            shipped == partita(&["completions", shell]),
            "{file}: {stale}"
        );
    }
    assert!(
        read(&dist("man/partita.1")) == partita(&["man"]),
        "partita.1: {stale}"
    );
    let tmp = std::env::temp_dir().join(format!("partita-man-{}", std::process::id()));
    partita(&["man", "--dir", tmp.to_str().unwrap()]);
    let names = |dir: &Path| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    assert_eq!(names(&tmp), names(&dist("man")), "{stale}");
    for page in names(&tmp) {
        let shipped = read(&dist("man").join(&page));
        assert!(shipped == read(&tmp.join(&page)), "{page}: {stale}");
    }
    let _ = std::fs::remove_dir_all(&tmp);
    // Every subcommand a user sees has its page.
    assert!(names(&dist("man")).contains(&"partita-top.1".to_string()));
}

#[test]
fn the_service_unit_verifies_and_its_documentation_ships() {
    let unit = read(&dist("partita.service"));
    for doc in unit
        .lines()
        .filter_map(|l| l.strip_prefix("Documentation="))
        .flat_map(str::split_whitespace)
    {
        let page = doc
            .strip_prefix("man:")
            .and_then(|p| p.strip_suffix("(1)"))
            .unwrap_or_else(|| panic!("unexpected Documentation= {doc}"));
        assert!(dist("man").join(format!("{page}.1")).exists(), "{doc}");
    }
    assert!(unit.contains("ExecStart=/usr/bin/partita serve"));
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("systemd-analyze is not installed (scripts/install-deps installs it): skipped");
        return;
    }
    // verify checks that ExecStart's binary exists: point it at the one cargo built. The
    // service requires the socket unit: verify both together.
    let dir = std::env::temp_dir().join(format!("partita-unit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let copy = dir.join("partita.service");
    std::fs::write(
        &copy,
        unit.replace("/usr/bin/partita", env!("CARGO_BIN_EXE_partita")),
    )
    .unwrap();
    std::fs::copy(dist("partita.socket"), dir.join("partita.socket")).unwrap();
    // --man=no: the pages are checked above; they are not installed on this machine.
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&copy)
        .arg(dir.join("partita.socket"))
        .output()
        .unwrap();
    // The sandbox stays at "OK": exposure 3.0 or less (--threshold is in tenths).
    let security = Command::new("systemd-analyze")
        .args(["security", "--offline=true", "--threshold=30", "--no-pager"])
        .arg(&copy)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let err = String::from_utf8_lossy(&out.stderr);
    // A bad value is only a warning for systemd ("…, ignoring"): fail on any output too.
    assert!(out.status.success() && err.trim().is_empty(), "{err}");
    let report = String::from_utf8_lossy(&security.stdout);
    assert!(
        security.status.success(),
        "exposure above 3.0:\n{report}{}",
        String::from_utf8_lossy(&security.stderr)
    );
}

/// The value of `key=` in a unit file (the last assignment).
fn unit_value<'a>(unit: &'a str, key: &str) -> &'a str {
    unit.lines()
        .filter_map(|l| l.strip_prefix(key)?.strip_prefix('='))
        .next_back()
        .unwrap_or_else(|| panic!("no {key}= in the unit"))
}

#[test]
fn the_units_agree_with_the_manager() {
    let service = read(&dist("partita.service"));
    let socket = read(&dist("partita.socket"));
    assert_eq!(
        unit_value(&socket, "ListenStream"),
        partita_protocol::SYSTEM_SOCKET
    );
    assert_eq!(unit_value(&socket, "SocketGroup"), "partita");
    assert_eq!(unit_value(&socket, "SocketMode"), "0660");
    assert_eq!(unit_value(&service, "Type"), "notify");
    assert_eq!(unit_value(&service, "Delegate"), "yes");
    // The journal sits next to the socket and must outlive a stop (see the unit's comments).
    let dir = Path::new(partita_protocol::SYSTEM_SOCKET).parent().unwrap();
    assert_eq!(
        Path::new("/run").join(unit_value(&service, "RuntimeDirectory")),
        dir
    );
    assert_eq!(unit_value(&service, "RuntimeDirectoryPreserve"), "yes");
    // Failures that a restart cannot fix end the unit at once.
    let prevent: Vec<&str> = unit_value(&service, "RestartPreventExitStatus")
        .split_whitespace()
        .collect();
    let config = partita_manager::Error::Config(partita_manager::ConfigError::Invalid {
        key: "x".into(),
        value: String::new(),
        reason: "r",
    });
    let state = partita_manager::Error::StateDir {
        dir: "/run/partita".into(),
        source: std::io::ErrorKind::PermissionDenied.into(),
    };
    for e in [config, state] {
        assert!(
            prevent.contains(&e.exit_status().to_string().as_str()),
            "{e}"
        );
    }
}

/// The commented `[[cgroup_rule]]` example parses as one rule (a preset with its sharing and
/// policy).
#[test]
fn the_example_cgroup_rule_parses() {
    let text = read(&dist("partita.toml"));
    let block: String = text
        .lines()
        .skip_while(|l| *l != "# [[cgroup_rule]]")
        .map(|l| l.strip_prefix('#').unwrap_or(l).trim_start_matches(' '))
        .filter(|l| !l.starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n");
    let config = Config::from_toml_str(&block).unwrap_or_else(|e| panic!("{e}\n{block}"));
    assert_eq!(config.cgroup_rules.len(), 1, "{block}");
    assert_eq!(config.cgroup_rules[0].preset.as_deref(), Some("slurm"));
}

/// The manager's configuration inside dist/kubernetes/partita.yaml's ConfigMap is valid and
/// makes pod partitions (the manifest itself: scripts/test.d/58-kubernetes.sh).
#[test]
fn the_kubernetes_configuration_parses() {
    let text = read(&dist("kubernetes").join("partita.yaml"));
    let block: String = text
        .lines()
        .skip_while(|l| l.trim() != "partita.toml: |")
        .skip(1)
        .take_while(|l| l.starts_with("    ") || l.is_empty())
        .map(|l| l.trim_start())
        .collect::<Vec<_>>()
        .join("\n");
    let config = Config::from_toml_str(&block).unwrap_or_else(|e| panic!("{e}\n{block}"));
    assert_eq!(config.cgroup_rules.len(), 1, "{block}");
    assert_eq!(config.cgroup_rules[0].preset.as_deref(), Some("kubernetes"));
    assert!(!config.cgroups);
}
