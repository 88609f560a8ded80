//! The limit readers over hierarchies laid out as plain files (the real-cgroup tests are in
//! tests/cgroup_partitions.rs).

use super::*;
use crate::cgroup::rules::{compile, CgroupRule};

fn write(root: &Path, rel: &str, file: &str, text: &str) {
    let d = root.join(rel.trim_start_matches('/'));
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join(file), text).unwrap();
}

fn rules(preset: &str) -> Vec<Compiled> {
    let r: CgroupRule = toml::from_str(&format!("preset = '{preset}'")).unwrap();
    compile(&[r]).unwrap()
}

#[test]
fn v2_pod_limits_walk_up_for_cpuset_and_take_the_smallest_quota() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    write(root, "/", "cpuset.cpus.effective", "0-7\n");
    write(root, "/kubepods", "cpu.max", "600000 100000\n");
    let pod = "/kubepods/burstable/pod1234-ab";
    write(root, pod, "cpu.max", "150000 100000\n");
    write(root, pod, "cpu.weight", "39\n");
    write(root, &format!("{pod}/ctr"), "cpu.max", "max 100000\n");
    let mounts = Mounts {
        v2: Some(root.to_path_buf()),
        ..Mounts::default()
    };
    let pc = ProcCgroup {
        v2: Some(format!("{pod}/ctr")),
        ..ProcCgroup::default()
    };
    let f = locate_in(&pc, &rules("kubernetes"), &mounts)
        .unwrap()
        .unwrap();
    assert_eq!(f.name, "k8s-pod-1234-ab");
    assert_eq!(f.prefix, pod);
    assert_eq!(f.limits.cpus, "0-7".parse().unwrap());
    assert_eq!(f.limits.quota_cpus, Some(2));
    assert_eq!(f.limits.weight, 39);
    // The pod's own cpuset, once set, is the nearest.
    write(root, pod, "cpuset.cpus.effective", "2-3\n");
    let f = locate_in(&pc, &rules("kubernetes"), &mounts)
        .unwrap()
        .unwrap();
    assert_eq!(f.limits.cpus, "2-3".parse().unwrap());
}

#[test]
fn v1_slurm_job_reads_cpuset_and_the_cpu_hierarchy() {
    let t = tempfile::tempdir().unwrap();
    let (cs, cpu) = (t.path().join("cpuset"), t.path().join("cpu"));
    let job = "/slurm/uid_0/job_5";
    write(&cs, job, "cpuset.effective_cpus", "1\n");
    write(&cs, job, "cpuset.cpus", "0-1\n");
    write(&cpu, job, "cpu.cfs_quota_us", "-1\n");
    write(&cpu, job, "cpu.cfs_period_us", "100000\n");
    write(&cpu, job, "cpu.shares", "2048\n");
    let mounts = Mounts {
        cpuset: Some(cs.clone()),
        cpu: Some(cpu.clone()),
        v2: None,
    };
    let pc = parse_proc_cgroup(&format!(
        "4:cpu,cpuacct:{job}/step_0\n3:cpuset:{job}/step_0/task_0\n0::/\n"
    ));
    let f = locate_in(&pc, &rules("slurm"), &mounts).unwrap().unwrap();
    assert_eq!((f.name.as_str(), f.prefix.as_str()), ("slurm-job-5", job));
    // effective_cpus wins over cpus.
    assert_eq!(f.limits.cpus, "1".parse().unwrap());
    assert_eq!((f.limits.quota_cpus, f.limits.weight), (None, 200));
    write(&cpu, job, "cpu.cfs_quota_us", "50000\n");
    let f = locate_in(&pc, &rules("slurm"), &mounts).unwrap().unwrap();
    assert_eq!(f.limits.quota_cpus, Some(1));
}

#[test]
fn bad_input_is_an_error_saying_why_or_no_match() {
    let t = tempfile::tempdir().unwrap();
    let cs = t.path().to_path_buf();
    let mounts = Mounts {
        cpuset: Some(cs.clone()),
        ..Mounts::default()
    };
    let job = "/slurm/job_9";
    let pc = parse_proc_cgroup(&format!("3:cpuset:{job}\n"));
    // The directory is gone (the job ended, the program moved).
    let e = locate_in(&pc, &rules("slurm"), &mounts).unwrap_err();
    assert!(e.contains("does not exist"), "{e}");
    write(&cs, job, "cpuset.cpus", "\n");
    let e = locate_in(&pc, &rules("slurm"), &mounts).unwrap_err();
    assert!(e.contains("is empty"), "{e}");
    write(&cs, job, "cpuset.cpus", "zz\n");
    let e = locate_in(&pc, &rules("slurm"), &mounts).unwrap_err();
    assert!(e.contains("cpuset of"), "{e}");
    // Another cgroup namespace's view (a manager in a container without the host's).
    let pc = parse_proc_cgroup("0::/../../kubepods/pod1/ctr\n");
    let v2 = Mounts {
        v2: Some(cs.clone()),
        ..Mounts::default()
    };
    let e = locate_in(&pc, &rules("kubernetes"), &v2).unwrap_err();
    assert!(e.contains("cgroup namespace"), "{e}");
    // No rule matches: no partition, no error.
    let pc = parse_proc_cgroup("3:cpuset:/user\n");
    assert_eq!(locate_in(&pc, &rules("slurm"), &mounts), Ok(None));
    // No hierarchy at all.
    let e = locate_in(&ProcCgroup::default(), &rules("slurm"), &Mounts::default()).unwrap_err();
    assert!(e.contains("no cgroup hierarchy"), "{e}");
    assert!(locate(-5, &rules("slurm"), &mounts)
        .unwrap_err()
        .contains("/proc/-5/cgroup"));
}

proptest::proptest! {
    /// Whatever cpu.max says: no panic, and a quota is at least 1 CPU and never below the
    /// exact ratio.
    #[test]
    fn cpu_max_never_panics(q in 0u64..10_000_000, p in 0u64..1_000_000, text in "\\PC{0,20}") {
        let _ = parse_cpu_max(&text);
        if let Some(Some((q2, p2))) = parse_cpu_max(&format!("{q} {p}")) {
            let n = quota_cpus(q2, p2) as u64;
            proptest::prop_assert!(n >= 1 && n * p2 >= q2);
        }
        let w = weight_from_shares(q);
        proptest::prop_assert!((1..=10_000).contains(&w));
    }
}
