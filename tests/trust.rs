//! Issue 12, "a manager you can trust on a shared machine", over real processes: identity by
//! pidfd (dead peers, invisible pid namespaces), what `partita run` may join and where its
//! program goes, cleanup after signals and of what dead managers left, affinities of threads
//! created after confinement, per-user status, connection limits and counted refusals.
//! Tests that change cgroups or other processes' affinities need root (CI runs as root) and
//! say so when skipped.

mod support;

use partita_manager::enforce::Enforcer;
use partita_manager::proc_ref::ProcRef;
use partita_manager::{spawn_in_process, sys, Config, Error};
use partita_protocol::wire::{ClientMessage, ErrorCode, Hello};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use support::{bin, serial, wait_until, Proc, TempDir};

const CPUSET: &str = "/sys/fs/cgroup/cpuset";

fn root() -> bool {
    if nix::unistd::geteuid().is_root() {
        return true;
    }
    eprintln!("skipped: needs root");
    false
}

fn tracked(extra: &str) -> Config {
    Config::from_toml_str(&format!("{}{extra}", support::TRACKED)).unwrap()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The cpuset cgroup of a process, as in /proc/PID/cgroup (`/` is the root).
fn cpuset_cgroup(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (_, ctrl, path) = (f.next()?, f.next()?, f.next()?);
            ctrl.split(',')
                .any(|c| c == "cpuset")
                .then(|| path.to_string())
        })
        .unwrap_or_default()
}

fn manager_dirs(pid: u32) -> Vec<PathBuf> {
    std::fs::read_dir(CPUSET)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with(&format!("partita-mgr-{pid}-")))
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_peer_that_connected_and_exited_never_stays_registered() {
    let dir = TempDir::new("ghost");
    let h = spawn_in_process(tracked(""), dir.path("m.sock")).unwrap();
    let hello = ClientMessage::Hello(Hello::new(2, "ghost")).encode();
    // The connecting process forks and exits at once; its child keeps the socket and sends
    // the hello once the connecting pid is dead (and may be reused).
    let script = r#"
import socket, os, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
if os.fork() != 0:
    os._exit(0)
time.sleep(0.3)
s.sendall(bytes.fromhex(sys.argv[2]))
s.settimeout(3)
d = s.recv(4096)
print("reply", d.hex(), flush=True)
time.sleep(2)
"#;
    let p = Proc::spawn(
        Command::new("python3")
            .args(["-c", script])
            .arg(h.socket())
            .arg(hex(&hello)),
    );
    let (_, line) = p
        .wait_line(0, Duration::from_secs(10), |l| l.starts_with("reply"))
        .expect("no reply");
    // Kind byte 0x82 is Error (0x81 would be a Welcome).
    assert_eq!(&line[6 + 8..6 + 10], "82", "{line}");
    assert!(h.status().applications.is_empty());
    assert_eq!(h.status().refusals.get("PermissionDenied"), Some(&1));
    h.shutdown().unwrap();
}

#[test]
fn a_peer_the_manager_cannot_see_pid_zero_is_refused() {
    if !root() {
        return;
    }
    let _s = serial();
    let dir = TempDir::new("pidns");
    let sock = dir.path("m.sock");
    let cfg = dir.path("m.toml");
    std::fs::write(&cfg, "uncontrolled = \"tracked\"\ncgroups = true\n").unwrap();
    // The manager in a child pid namespace: this process has pid 0 there.
    let _m = Proc::spawn(
        Command::new("unshare")
            .args(["--pid", "--fork", "--mount-proc", "--kill-child"])
            .arg(bin())
            .arg("serve")
            .arg("--config")
            .arg(&cfg)
            .arg("--socket")
            .arg(&sock)
            .env("RUST_LOG", "warn"),
    );
    assert!(wait_until(Duration::from_secs(10), || sock.exists()));
    let r = partita_manager::confine_self(&sock, "");
    match r {
        Err(Error::Refused { code, message }) => {
            assert_eq!(code, ErrorCode::PermissionDenied);
            assert!(message.contains("pid namespace"), "{message}");
        }
        other => panic!("a pid-0 peer must be refused, got {other:?}"),
    }
}

#[test]
fn confine_obeys_membership_and_the_tracked_limit() {
    if !root() {
        return;
    }
    let _s = serial();
    let dir = TempDir::new("confine");
    let mut c = tracked(
        "cgroups = false\nmax_applications = 1\n[[partition]]\nname = \"locked\"\nmembers = { uids = [54321], hint = false }\n",
    );
    c.max_applications = 1;
    let h = spawn_in_process(c, dir.path("m.sock")).unwrap();
    let run = |partition: &str| {
        Proc::spawn(
            Command::new(bin())
                .args(["run", "--partition", partition, "--socket"])
                .arg(h.socket())
                .args(["--", "sleep", "30"]),
        )
    };
    let mut locked = run("locked");
    let st = locked.child.wait().unwrap();
    assert!(!st.success(), "a non-member joined a closed partition");
    let first = run("");
    assert!(wait_until(Duration::from_secs(10), || h
        .status()
        .partitions[0]
        .uncontrolled_pids
        .contains(&first.pid())));
    let mut second = run("");
    assert!(
        !second.child.wait().unwrap().success(),
        "tracked is unbounded"
    );
    let s = h.status();
    assert_eq!(
        s.refusals.get("PermissionDenied"),
        Some(&1),
        "{:?}",
        s.refusals
    );
    assert_eq!(
        s.refusals.get("TooManyApplications"),
        Some(&1),
        "{:?}",
        s.refusals
    );
    drop(first);
    h.shutdown().unwrap();
}

#[test]
fn fixed_cpu_counts_beyond_the_machine_are_a_config_error() {
    let n = sys::get_affinity(0).unwrap().len();
    let dir = TempDir::new("fixed");
    let c = tracked(&format!(
        "[[partition]]\nname = \"a\"\ncpus = {n}\n[[partition]]\nname = \"b\"\ncpus = 1\n"
    ));
    let e = spawn_in_process(c, dir.path("m.sock")).unwrap_err();
    assert!(e.to_string().contains("partition[1].cpus"), "{e}");
}

#[test]
fn refusals_are_counted_and_connections_are_capped_per_uid() {
    let dir = TempDir::new("caps");
    let mut c = tracked("");
    c.max_connections_per_uid = 2;
    c.hello_timeout_ms = 5000;
    let h = spawn_in_process(c, dir.path("m.sock")).unwrap();
    let connect = || std::os::unix::net::UnixStream::connect(h.socket()).unwrap();
    let mut bad = connect();
    bad.write_all(&[3, 0, 0, 0, 0x77, 1, 2]).unwrap();
    let mut reply = Vec::new();
    let _ = bad.read_to_end(&mut reply);
    assert_eq!(reply.get(4), Some(&0x82));
    let _a = connect();
    let _b = connect();
    assert!(wait_until(Duration::from_secs(5), || {
        // Both silent connections hold their slots: a third is refused at once.
        let mut third = connect();
        let mut r = Vec::new();
        third
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        let _ = third.read_to_end(&mut r);
        String::from_utf8_lossy(&r).contains("max_connections_per_uid")
    }));
    let s = h.status();
    assert_eq!(s.refusals.get("Malformed"), Some(&1), "{:?}", s.refusals);
    assert!(s
        .refusals
        .get("TooManyApplications")
        .is_some_and(|&n| n >= 1));
    h.shutdown().unwrap();
}

#[test]
fn a_user_sees_only_their_own_applications() {
    if !root() {
        return;
    }
    let dir = TempDir::new("viewer");
    std::fs::set_permissions(&dir.0, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let h = spawn_in_process(tracked(""), dir.path("m.sock")).unwrap();
    std::fs::set_permissions(
        h.socket(),
        std::os::unix::fs::PermissionsExt::from_mode(0o666),
    )
    .unwrap();
    let _p = support::probe(h.socket(), "roots", 2, 2);
    assert!(wait_until(Duration::from_secs(10), || h
        .status()
        .applications
        .len()
        == 1));
    let as_user = |uid: &str| {
        let out = Command::new("setpriv")
            .args(["--reuid", uid, "--regid", uid, "--clear-groups"])
            .arg(bin())
            .args(["status", "--json", "--socket"])
            .arg(h.socket())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let s: partita_manager::Status = serde_json::from_slice(&out.stdout).unwrap();
        s.applications.len()
    };
    assert_eq!(
        as_user("65534"),
        0,
        "another user's applications are visible"
    );
    assert_eq!(as_user("0"), 1);
    h.shutdown().unwrap();
}

/// A v1 cpuset cgroup for a test (cpus and mems of the root).
fn test_cgroup(name: &str) -> PathBuf {
    let d = Path::new(CPUSET).join(name);
    let _ = std::fs::create_dir(&d);
    for f in ["cpuset.cpus", "cpuset.mems"] {
        let v = std::fs::read_to_string(Path::new(CPUSET).join(f)).unwrap();
        std::fs::write(d.join(f), v.trim()).unwrap();
    }
    d
}

fn cpuset_v1() -> bool {
    root() && Path::new(CPUSET).join("cgroup.procs").exists()
}

#[test]
fn partita_run_keeps_a_program_in_its_own_cgroup_and_everything_is_undone() {
    if !cpuset_v1() {
        return;
    }
    let _s = serial();
    let dir = TempDir::new("owncg");
    let own = test_cgroup(&format!("partita-test-own-{}", std::process::id()));
    let h = spawn_in_process(tracked("cgroups = true\n"), dir.path("m.sock")).unwrap();
    let all = sys::get_affinity(0).unwrap();
    // One program started from its own cgroup, one from the manager's (the root).
    let from_own = Proc::spawn(Command::new("sh").arg("-c").arg(format!(
        "echo $$ > {}/cgroup.procs && exec {} run --socket {} -- sleep 30",
        own.display(),
        bin().display(),
        h.socket().display()
    )));
    let from_root = Proc::spawn(
        Command::new(bin())
            .args(["run", "--socket"])
            .arg(h.socket())
            .args(["--", "sleep", "30"]),
    );
    let tracked_now = |p: &Proc| {
        h.status().partitions[0]
            .uncontrolled_pids
            .contains(&p.pid())
    };
    // Confined once `partita run` has its reply and has exec'd the command (tracking comes
    // first, confinement after the reallocation that gives the partition a CPU).
    let running = |p: &Proc| {
        std::fs::read_to_string(format!("/proc/{}/comm", p.pid()))
            .is_ok_and(|c| c.trim() == "sleep")
    };
    assert!(wait_until(Duration::from_secs(10), || tracked_now(
        &from_own
    ) && tracked_now(
        &from_root
    ) && running(
        &from_own
    ) && running(
        &from_root
    )));
    let own_name = format!("/{}", own.file_name().unwrap().to_string_lossy());
    assert_eq!(
        cpuset_cgroup(from_own.pid()),
        own_name,
        "left its own cgroup"
    );
    // The move into the manager's cgroup comes with the confinement, after the reallocation
    // that gives the partition a CPU: wait for it (under load it can come after `running`).
    let mgr = format!("/partita-mgr-{}-", std::process::id());
    assert!(
        wait_until(Duration::from_secs(10), || cpuset_cgroup(from_root.pid())
            .starts_with(&mgr)),
        "never moved into the manager's cgroup: {}",
        cpuset_cgroup(from_root.pid())
    );
    h.shutdown().unwrap();
    assert_eq!(cpuset_cgroup(from_own.pid()), own_name);
    assert_eq!(cpuset_cgroup(from_root.pid()), "/");
    assert_eq!(sys::get_affinity(from_own.pid()).unwrap(), all);
    assert!(
        manager_dirs(std::process::id()).is_empty(),
        "cgroups left behind"
    );
    drop(from_own);
    drop(from_root);
    let _ = std::fs::remove_dir(&own);
}

#[test]
fn a_new_manager_sweeps_what_a_dead_one_left() {
    if !cpuset_v1() {
        return;
    }
    let _s = serial();
    // What a SIGKILLed manager (pid 999999999 cannot exist) left: a cgroup with a process.
    // Any manager starting meanwhile (other tests) may sweep it first: set it up again then.
    let dead = Path::new(CPUSET).join("partita-mgr-999999999-1");
    let mut victim = Command::new("sleep").arg("30").spawn().unwrap();
    let setup = || -> std::io::Result<()> {
        let part = dead.join("default");
        let _ = std::fs::create_dir(&dead);
        let _ = std::fs::create_dir(&part);
        for d in [&dead, &part] {
            for f in ["cpuset.cpus", "cpuset.mems"] {
                let v = std::fs::read_to_string(Path::new(CPUSET).join(f))?;
                std::fs::write(d.join(f), v.trim())?;
            }
        }
        std::fs::write(part.join("cgroup.procs"), victim.id().to_string())
    };
    assert!(wait_until(Duration::from_secs(10), || setup().is_ok()));
    let dir = TempDir::new("sweep");
    let h = spawn_in_process(tracked("cgroups = true\n"), dir.path("m.sock")).unwrap();
    assert!(!dead.exists(), "the dead manager's cgroup was not swept");
    assert_eq!(cpuset_cgroup(victim.id() as i32), "/");
    h.shutdown().unwrap();
    let _ = victim.kill();
    let _ = victim.wait();
}

#[test]
fn sighup_and_sigquit_clean_up_like_sigterm() {
    if !cpuset_v1() {
        return;
    }
    let _s = serial();
    for sig in [
        nix::sys::signal::Signal::SIGHUP,
        nix::sys::signal::Signal::SIGQUIT,
    ] {
        let dir = TempDir::new("hup");
        let (mut m, sock) = support::serve(&dir, "uncontrolled = \"tracked\"\ncgroups = true\n");
        let prog = Proc::spawn(
            Command::new(bin())
                .args(["run", "--socket"])
                .arg(&sock)
                .args(["--", "sleep", "30"]),
        );
        let mpid = m.pid() as u32;
        assert!(wait_until(Duration::from_secs(10), || cpuset_cgroup(
            prog.pid()
        )
        .starts_with(&format!("/partita-mgr-{mpid}-"))));
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(m.pid()), sig).unwrap();
        let st = m.child.wait().unwrap();
        assert!(
            st.code().is_some(),
            "{sig}: killed by the signal, no cleanup: {st:?}"
        );
        assert!(manager_dirs(mpid).is_empty(), "{sig}: cgroups left behind");
        assert_eq!(cpuset_cgroup(prog.pid()), "/");
    }
}

#[test]
fn threads_created_after_confinement_get_the_process_mask_back() {
    if !root() {
        return;
    }
    let all = sys::get_affinity(0).unwrap();
    if all.len() < 2 {
        return;
    }
    let _s = serial();
    let mut p = Proc::spawn(Command::new("python3").args(["-c", support::THREAD_ON_DEMAND]));
    p.wait_line(0, Duration::from_secs(10), |l| l == "ready")
        .unwrap();
    let mut e = Enforcer::new(false, all);
    let one: partita_protocol::CpuSet = [all.to_vec()[0]].into_iter().collect();
    e.confine_process(&ProcRef::open(p.pid()).unwrap(), &one, false)
        .unwrap();
    p.send("go");
    let (_, line) = p
        .wait_line(0, Duration::from_secs(10), |l| l.starts_with("tid"))
        .unwrap();
    let tid: i32 = line[4..].trim().parse().unwrap();
    assert_eq!(
        sys::get_affinity(tid).unwrap(),
        one,
        "inherits the confined mask"
    );
    e.restore_all();
    assert_eq!(sys::get_affinity(tid).unwrap(), all);
}
