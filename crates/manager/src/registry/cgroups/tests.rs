//! The registry's cgroup partitions with this test process's own cgroup (the real
//! hierarchies built for the purpose are in tests/cgroup_partitions.rs).

use super::*;
use crate::proc_ref::ProcRef;
use crate::registry::Registration;
use partita_protocol::CpuSet;

fn me(name: &str) -> Registration {
    let pid = std::process::id() as i32;
    Registration {
        pid,
        proc: ProcRef::open(pid).unwrap(),
        uid: crate::sys::euid(),
        gid: 0,
        name: name.into(),
        hint: String::new(),
        pool_size: 2,
        partition_only: false,
        jobserver: false,
    }
}

fn registry(rules: &str) -> Registry {
    let c = Config::from_toml_str(&format!("cgroups = false\n{rules}")).unwrap();
    let managed: CpuSet = crate::sys::get_affinity(0).unwrap();
    Registry::new(c, managed, "none")
}

/// Whether this process is in a cgroup hierarchy with cpuset (else the rule cannot apply).
fn have_cpuset() -> bool {
    let m = limits::mounts();
    let pc = limits::parse_proc_cgroup(&std::fs::read_to_string("/proc/self/cgroup").unwrap());
    (m.cpuset.is_some() && pc.cpuset.is_some()) || (m.v2.is_some() && pc.v2.is_some())
}

/// A rule matching this process's own cgroup makes a partition with its first program,
/// bound to the cgroup's cpuset, shown with its cgroup in the status; it goes with its last
/// program; a recheck of an unchanged cgroup changes nothing.
#[test]
fn a_partition_comes_and_goes_with_its_program() {
    if !have_cpuset() {
        eprintln!("skipped: no cgroup hierarchy with cpuset");
        return;
    }
    let mut r = registry("[[cgroup_rule]]\nmatch = '^/?'\nname = 'mine'\n");
    let id = r.register(me("p")).unwrap();
    let st = r.status(None);
    let p = st
        .partitions
        .iter()
        .find(|p| p.name == "mine")
        .expect("partition made");
    assert!(!p.cgroup_cpus.is_empty());
    assert_eq!(st.applications[0].partition, "mine");
    assert_eq!(r.cgroups.bounds().iter().flatten().count(), 1);
    assert!(!r.recheck_cgroups());
    // Once counted (the daemon recounts the outside load after the welcome), the plan
    // confines it to its cgroup's CPUs only.
    r.counted(id);
    let _ = r.plan();
    let st = r.status(None);
    let cg: CpuSet = st.partitions[1].cgroup_cpus.iter().copied().collect();
    let got: CpuSet = st.applications[0].cpus.iter().copied().collect();
    assert!(
        !got.is_empty() && got.without(&cg).is_empty(),
        "{got} ⊄ {cg}"
    );
    r.unregister(id);
    let st = r.status(None);
    assert_eq!(st.partitions.len(), 1, "{:?}", st.partitions);
    assert!(r.cgroups.slots.iter().all(Option::is_none));
}

/// No rule matches, or the rule names a configured partition: placed by the configured
/// partitions, nothing made.
#[test]
fn without_a_match_the_configured_partitions_decide() {
    let mut r = registry(
        "[[partition]]\nname = 'mine'\n[partition.members]\nnames = ['p']\n[[cgroup_rule]]\nmatch = '^/?'\nname = 'mine'\n[[cgroup_rule]]\nmatch = '^/no-such-cgroup/(x)'\n",
    );
    let id = r.register(me("p")).unwrap();
    let st = r.status(None);
    assert_eq!(st.partitions.len(), 2);
    assert_eq!(st.applications[0].partition, "mine");
    assert!(st.partitions.iter().all(|p| p.cgroup.is_empty()));
    r.unregister(id);
    let mut r = registry("[[cgroup_rule]]\nmatch = '^/no-such-cgroup/(x)'\n");
    r.register(me("p")).unwrap();
    assert_eq!(r.status(None).applications[0].partition, "default");
    assert!(!r.recheck_cgroups());
}

/// A cgroup partition is not reachable by hint or `partita run --partition`.
#[test]
fn cgroup_partitions_admit_only_their_cgroups_programs() {
    if !have_cpuset() {
        return;
    }
    let mut r = registry("[[cgroup_rule]]\nmatch = '^/?'\nname = 'mine'\n");
    let _id = r.register(me("p")).unwrap();
    let peer = crate::registry::Peer {
        proc: ProcRef::open(std::process::id() as i32).unwrap(),
        uid: 4242,
        gid: 4242,
    };
    let e = r.confine(&peer, "mine").unwrap_err();
    assert_eq!(e.0, ErrorCode::PermissionDenied, "{e:?}");
}
