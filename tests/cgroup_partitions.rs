//! Partitions from cgroups (issue 30) with real cgroups: Slurm-, Kubernetes- and
//! systemd-like hierarchies built in a test tree of this host's cgroup v1 `cpuset` and `cpu`
//! hierarchies, real probe programs (partita-runtime pools) started inside them, a real
//! `partita serve` with the ready-made rules. Checked with `partita status --json` and the
//! programs' own thread masks. Skipped (with a line saying why) where the hierarchies are
//! not mounted writable or the machine has fewer than 2 CPUs.

mod support;

use partita_manager::Status;
use partita_protocol::CpuSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use support::{serial, serve, wait_until, Proc, TempDir};

const LONG: Duration = Duration::from_secs(20);
const RULES: &str = "uncontrolled = \"tracked\"\ncgroups = false\nrealloc_period_ms = 100\n\
    [[cgroup_rule]]\npreset = \"slurm\"\n[[cgroup_rule]]\npreset = \"kubernetes\"\n\
    [[cgroup_rule]]\npreset = \"systemd-slice\"\n";

/// A test tree under the v1 `cpuset` and `cpu` hierarchies, removed on drop (deepest first).
struct Tree {
    cpuset: PathBuf,
    cpu: PathBuf,
    /// The tree's name (a slice, so that the systemd rule can see slices below it).
    root: String,
    made: Vec<String>,
}

impl Tree {
    fn new() -> Option<Tree> {
        let (cs, cpu) = (
            PathBuf::from("/sys/fs/cgroup/cpuset"),
            PathBuf::from("/sys/fs/cgroup/cpu"),
        );
        if !cs.join("cpuset.cpus").exists() || !cpu.join("cpu.cfs_quota_us").exists() {
            eprintln!("skipped: no v1 cpuset and cpu hierarchies at /sys/fs/cgroup");
            return None;
        }
        let all: CpuSet = std::fs::read_to_string(cs.join("cpuset.effective_cpus"))
            .ok()?
            .parse()
            .ok()?;
        if all.len() < 2 {
            eprintln!("skipped: fewer than 2 CPUs");
            return None;
        }
        let mut t = Tree {
            cpuset: cs,
            cpu,
            root: format!("/partita-cgtest-{}.slice", std::process::id()),
            made: Vec::new(),
        };
        if let Err(e) = t.mkdir("", "0-1") {
            eprintln!("skipped: cannot make a test cgroup: {e}");
            return None;
        }
        Some(t)
    }

    /// Make `rel` (below the tree's root) in both hierarchies with cpuset `cpus`.
    fn mkdir(&mut self, rel: &str, cpus: &str) -> std::io::Result<()> {
        let path = format!("{}{rel}", self.root);
        for h in [&self.cpuset, &self.cpu] {
            std::fs::create_dir(h.join(&path[1..]))?;
        }
        self.made.push(path.clone());
        let d = self.cpuset.join(&path[1..]);
        std::fs::write(d.join("cpuset.cpus"), cpus)?;
        std::fs::write(d.join("cpuset.mems"), "0")?;
        Ok(())
    }

    /// Make a chain of cgroups, each with `cpus`.
    fn chain(&mut self, rel: &str, cpus: &str) {
        let mut at = String::new();
        for part in rel.split('/').filter(|p| !p.is_empty()) {
            at = format!("{at}/{part}");
            if !self.made.contains(&format!("{}{at}", self.root)) {
                self.mkdir(&at, cpus).unwrap();
            }
        }
    }

    fn set(&self, rel: &str, hierarchy: &str, file: &str, text: &str) {
        let h = if hierarchy == "cpu" {
            &self.cpu
        } else {
            &self.cpuset
        };
        let d = h.join(format!("{}{rel}", self.root).trim_start_matches('/'));
        std::fs::write(d.join(file), text).unwrap();
    }

    /// Move process `pid` into `rel` (both hierarchies).
    fn enter(&self, rel: &str, pid: i32) {
        for h in ["cpuset", "cpu"] {
            self.set(rel, h, "cgroup.procs", &pid.to_string());
        }
    }

    /// A probe (pool 2, whole pool wanted) started inside `rel`.
    fn probe(&self, socket: &Path, rel: &str, name: &str) -> Proc {
        let dirs: Vec<String> = [&self.cpuset, &self.cpu]
            .iter()
            .map(|h| {
                h.join(format!("{}{rel}", self.root).trim_start_matches('/'))
                    .join("cgroup.procs")
                    .display()
                    .to_string()
            })
            .collect();
        Proc::spawn(
            Command::new("sh")
                .arg("-c")
                .arg(r#"echo $$ > "$1" && echo $$ > "$2" && shift 2 && exec "$@""#)
                .arg("sh")
                .args(&dirs)
                .arg(support::bin())
                .args([
                    "probe", "--name", name, "--pool", "2", "--demand", "2", "--socket",
                ])
                .arg(socket)
                .env("PARTITA_SOCKET", socket),
        )
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let mut made = std::mem::take(&mut self.made);
        made.sort_by_key(|p| std::cmp::Reverse(p.len()));
        for p in made {
            for h in [&self.cpuset, &self.cpu] {
                let d = h.join(&p[1..]);
                // A killed probe is released a moment after it is reaped.
                wait_until(Duration::from_secs(5), || {
                    std::fs::remove_dir(&d).is_ok() || !d.exists()
                });
            }
        }
    }
}

fn cli_status(socket: &Path) -> Status {
    let out = Command::new(support::bin())
        .args(["status", "--json", "--socket"])
        .arg(socket)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

fn set(v: &[usize]) -> CpuSet {
    v.iter().copied().collect()
}

/// The union of the CPU masks of every thread of `pid` (empty if it is gone).
fn thread_masks(pid: i32) -> CpuSet {
    let mut all = CpuSet::new();
    let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return all;
    };
    for t in rd.flatten() {
        let Ok(text) = std::fs::read_to_string(t.path().join("status")) else {
            continue;
        };
        if let Some(l) = text
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        {
            all.union_with(&l.trim().parse().unwrap_or_default());
        }
    }
    all
}

/// Partition `name` in `s`: its programs' pids, the CPUs published to them (union), Σ of
/// the targets of those holding CPUs of their own, and the partition's cgroup cpuset.
fn partition(s: &Status, name: &str) -> Option<(Vec<i32>, CpuSet, u32, CpuSet)> {
    let p = s.partitions.iter().find(|p| p.name == name)?;
    let apps: Vec<_> = s
        .applications
        .iter()
        .filter(|a| a.partition == name)
        .collect();
    let mut cpus = CpuSet::new();
    for a in &apps {
        cpus.union_with(&a.cpus.iter().copied().collect());
    }
    Some((
        apps.iter().map(|a| a.pid).collect(),
        cpus,
        // A program left without a CPU of its own time-shares the partition's (`min_target`)
        // and holds none of them.
        apps.iter().filter(|a| !a.shared).map(|a| a.target).sum(),
        p.cgroup_cpus.iter().copied().collect(),
    ))
}

/// Wait until partition `name` holds the programs `pids`, each confined (a published
/// non-empty set), the union of their sets inside `cpus` and Σ targets ≤ `most`; then check
/// the programs' own threads.
fn settled(socket: &Path, name: &str, pids: &[i32], cpus: CpuSet, most: u32) -> Status {
    let mut last = None;
    let ok = wait_until(LONG, || {
        let s = cli_status(socket);
        let good = partition(&s, name).is_some_and(|(ps, got, sum, cg)| {
            let mut ps = ps;
            ps.sort_unstable();
            let mut want = pids.to_vec();
            want.sort_unstable();
            let confined = s
                .applications
                .iter()
                .filter(|a| a.partition == name)
                .all(|a| !a.cpus.is_empty());
            ps == want && confined && cg == cpus && got.without(&cpus).is_empty() && sum <= most
        });
        last = Some(s);
        good
    });
    let s = last.unwrap();
    assert!(
        ok,
        "{name}: want {pids:?} on {cpus}, ≤ {most}; status: {}",
        s.to_table()
    );
    for &pid in pids {
        let m = thread_masks(pid);
        assert!(
            !m.is_empty() && m.without(&cpus).is_empty(),
            "{pid}: threads on {m}, job {cpus}"
        );
    }
    s
}

/// Two Slurm jobs (one CPU each) with two programs each; a pod with a one-CPU quota and two
/// programs; a program in a slice. Each job, pod and slice is one partition with exactly its
/// cgroup's CPUs; the programs of a job split them and run nowhere else; the quota caps the
/// pod at one worker; a program that moves to another job follows it; a job's cpuset that
/// widens is taken; a partition goes with its last program.
#[test]
fn jobs_pods_and_slices_become_partitions() {
    let _g = serial();
    let Some(mut t) = Tree::new() else { return };
    let dir = TempDir::new("cgroups");
    let (_mgr, socket) = serve(&dir, RULES);

    t.chain("/slurm/uid_0", "0-1");
    t.chain("/slurm/uid_0/job_11/step_0", "0");
    t.chain("/slurm/uid_0/job_12/step_0", "1");
    let mut a = [
        t.probe(&socket, "/slurm/uid_0/job_11/step_0", "a1"),
        t.probe(&socket, "/slurm/uid_0/job_11/step_0", "a2"),
    ];
    let b = [
        t.probe(&socket, "/slurm/uid_0/job_12/step_0", "b1"),
        t.probe(&socket, "/slurm/uid_0/job_12/step_0", "b2"),
    ];
    let pa: Vec<i32> = a.iter().map(Proc::pid).collect();
    let pb: Vec<i32> = b.iter().map(Proc::pid).collect();
    settled(&socket, "slurm-job-11", &pa, set(&[0]), 1);
    let s = settled(&socket, "slurm-job-12", &pb, set(&[1]), 1);
    let job = s
        .partitions
        .iter()
        .find(|p| p.name == "slurm-job-11")
        .unwrap();
    assert_eq!(job.cgroup, format!("{}/slurm/uid_0/job_11", t.root));
    assert_eq!(job.sharing, partita_manager::config::Sharing::Never);

    // A pod in the whole node with a one-CPU quota (cgroupfs driver layout).
    let pod = "/kubepods/burstable/pod0b5e2a2c-1111-4a7e-bb0c-1234567890ab";
    t.chain(&format!("{pod}/ctr"), "0-1");
    t.set(pod, "cpu", "cpu.cfs_quota_us", "100000");
    // The jobs hold both CPUs (`never`): end job 12 first so the pod has a CPU to get.
    drop(b);
    assert!(wait_until(LONG, || partition(
        &cli_status(&socket),
        "slurm-job-12"
    )
    .is_none()));
    let k = [
        t.probe(&socket, &format!("{pod}/ctr"), "k1"),
        t.probe(&socket, &format!("{pod}/ctr"), "k2"),
    ];
    let pk: Vec<i32> = k.iter().map(Proc::pid).collect();
    let pod_name = "k8s-pod-0b5e2a2c-1111-4a7e-bb0c-1234567890ab";
    let s = settled(&socket, pod_name, &pk, set(&[0, 1]), 1);
    let p = s.partitions.iter().find(|p| p.name == pod_name).unwrap();
    assert_eq!(p.fixed_cpus, Some(1), "the quota caps the pod: {p:?}");
    // Job 11 holds CPU 0, so the pod's programs are on CPU 1 only.
    let (_, got, _, _) = partition(&s, pod_name).unwrap();
    assert_eq!(got, set(&[1]), "{}", s.to_table());
    drop(k);

    // A program that moves to another job's cgroup is re-placed there.
    t.chain("/slurm/uid_0/job_13/step_0", "1");
    t.enter("/slurm/uid_0/job_13/step_0", pa[1]);
    settled(&socket, "slurm-job-13", &pa[1..], set(&[1]), 1);
    settled(&socket, "slurm-job-11", &pa[..1], set(&[0]), 1);
    // A job's cpuset that widens is taken (job 11 ends first: `never` partitions do not
    // share CPUs).
    a[0].kill();
    assert!(wait_until(LONG, || partition(
        &cli_status(&socket),
        "slurm-job-11"
    )
    .is_none()));
    t.set("/slurm/uid_0/job_13", "cpuset", "cpuset.cpus", "0-1");
    t.set("/slurm/uid_0/job_13/step_0", "cpuset", "cpuset.cpus", "0-1");
    settled(&socket, "slurm-job-13", &pa[1..], set(&[0, 1]), 2);

    // A slice.
    t.chain("/batch.slice/run.scope", "0-1");
    a[1].kill();
    let sl = t.probe(&socket, "/batch.slice/run.scope", "s1");
    settled(&socket, "slice-batch", &[sl.pid()], set(&[0, 1]), 2);
    drop(sl);
    assert!(wait_until(LONG, || {
        let s = cli_status(&socket);
        s.partitions.len() == 1 && s.applications.is_empty()
    }));
}
