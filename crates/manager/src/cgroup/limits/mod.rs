//! What a program's cgroup allows: its path (from `/proc/<pid>/cgroup`), and the CPUs, quota
//! and weight of the partition's cgroup (issue 30). Parsers are plain functions over the
//! files' text; [`locate`] reads the files.
//!
//! - v2: `cpuset.cpus.effective` (of the cgroup, or the nearest ancestor that has it),
//!   `cpu.max` (the smallest quota on the way to the root), `cpu.weight`;
//! - v1: `cpuset.effective_cpus` (else `cpuset.cpus`) in the cpuset hierarchy,
//!   `cpu.cfs_quota_us` / `cpu.cfs_period_us` and `cpu.shares` in the cpu hierarchy.

use super::rules::{match_path, Compiled};
use partita_protocol::CpuSet;
use std::path::{Path, PathBuf};

/// Where the cgroup hierarchies are mounted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Mounts {
    /// The unified (v2) hierarchy.
    pub v2: Option<PathBuf>,
    /// The v1 hierarchy holding `cpuset`.
    pub cpuset: Option<PathBuf>,
    /// The v1 hierarchy holding `cpu`.
    pub cpu: Option<PathBuf>,
}

/// Parse `/proc/self/mounts`. A later mount of a kind wins: it is the one seen where both are
/// at one place (a container that mounts the host's `/sys/fs/cgroup` over its own, as
/// dist/kubernetes does).
///
/// ```
/// let m = partita_manager::cgroup::limits::parse_mounts(
///     "cgroup /sys/fs/cgroup/cpuset cgroup rw,cpuset 0 0\ncgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n");
/// assert_eq!(m.cpuset.unwrap().to_str(), Some("/sys/fs/cgroup/cpuset"));
/// assert!(m.cpu.is_none() && m.v2.is_some());
/// let m = partita_manager::cgroup::limits::parse_mounts(
///     "cgroup2 /sys/fs/cgroup cgroup2 ro 0 0\ncgroup2 /sys/fs/cgroup cgroup2 ro 0 0\ncgroup2 /host cgroup2 ro 0 0\n");
/// assert_eq!(m.v2.unwrap().to_str(), Some("/host"));
/// ```
pub fn parse_mounts(text: &str) -> Mounts {
    let mut m = Mounts::default();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 4 {
            continue;
        }
        let at = || Some(PathBuf::from(f[1]));
        match f[2] {
            "cgroup2" => m.v2 = at(),
            "cgroup" => {
                let has = |c: &str| f[3].split(',').any(|o| o == c);
                if has("cpuset") {
                    m.cpuset = at();
                }
                if has("cpu") {
                    m.cpu = at();
                }
            }
            _ => {}
        }
    }
    m
}

/// A process's cgroup paths (from `/proc/<pid>/cgroup`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProcCgroup {
    /// Its path in the unified hierarchy (`0::/…`).
    pub v2: Option<String>,
    /// Its path in the v1 cpuset hierarchy.
    pub cpuset: Option<String>,
    /// Its path in the v1 cpu hierarchy.
    pub cpu: Option<String>,
}

/// Parse `/proc/<pid>/cgroup`.
///
/// ```
/// let p = partita_manager::cgroup::limits::parse_proc_cgroup(
///     "5:cpu,cpuacct:/a\n3:cpuset:/a/b\n0::/c\n");
/// assert_eq!((p.cpu.as_deref(), p.cpuset.as_deref(), p.v2.as_deref()), (Some("/a"), Some("/a/b"), Some("/c")));
/// ```
pub fn parse_proc_cgroup(text: &str) -> ProcCgroup {
    let mut p = ProcCgroup::default();
    for l in text.lines() {
        let mut f = l.splitn(3, ':');
        let (Some(id), Some(ctrl), Some(path)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        // A path the kernel marks as outside the reader's namespace is no usable path.
        let path = path.trim_end_matches(" (deleted)").to_string();
        if id == "0" && ctrl.is_empty() {
            p.v2 = Some(path);
        } else {
            let has = |c: &str| ctrl.split(',').any(|x| x == c);
            if has("cpuset") {
                p.cpuset = Some(path.clone());
            }
            if has("cpu") {
                p.cpu = Some(path);
            }
        }
    }
    p
}

/// What a cgroup allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Its effective cpuset.
    pub cpus: CpuSet,
    /// Its CPU quota in whole CPUs, rounded up (`None`: no quota).
    pub quota_cpus: Option<u32>,
    /// Its weight (v2 scale, 1 to 10000, default 100; v1 shares converted).
    pub weight: u32,
}

/// Parse `cpu.max` (`max 100000` or `<quota> <period>`): `Some(None)` without a quota.
///
/// ```
/// use partita_manager::cgroup::limits::parse_cpu_max;
/// assert_eq!(parse_cpu_max("max 100000\n"), Some(None));
/// assert_eq!(parse_cpu_max("250000 100000"), Some(Some((250000, 100000))));
/// assert_eq!(parse_cpu_max("x"), None);
/// ```
pub fn parse_cpu_max(text: &str) -> Option<Option<(u64, u64)>> {
    let mut f = text.split_whitespace();
    let (q, p) = (f.next()?, f.next()?);
    let period: u64 = p.parse().ok().filter(|&p| p > 0)?;
    if q == "max" {
        return Some(None);
    }
    Some(Some((q.parse().ok()?, period)))
}

/// A quota in whole CPUs: rounded up (the kernel throttles the rest), at least 1.
///
/// ```
/// use partita_manager::cgroup::limits::quota_cpus;
/// assert_eq!((quota_cpus(150000, 100000), quota_cpus(200000, 100000), quota_cpus(1, 100000)), (2, 2, 1));
/// ```
pub fn quota_cpus(quota: u64, period: u64) -> u32 {
    let period = period.max(1);
    (quota.div_ceil(period)).clamp(1, u32::MAX as u64) as u32
}

/// v1 `cpu.shares` on the v2 weight scale (1024 ↦ 100), clamped to 1..=10000.
///
/// ```
/// use partita_manager::cgroup::limits::weight_from_shares;
/// assert_eq!((weight_from_shares(1024), weight_from_shares(2048), weight_from_shares(2)), (100, 200, 1));
/// ```
pub fn weight_from_shares(shares: u64) -> u32 {
    (shares.saturating_mul(100) / 1024).clamp(1, 10_000) as u32
}

fn read(dir: &Path, file: &str) -> Option<String> {
    std::fs::read_to_string(dir.join(file)).ok()
}

/// `dir` and its ancestors up to `root`, innermost first.
fn up_to(root: &Path, dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![dir.to_path_buf()];
    let mut cur = dir;
    while cur != root {
        match cur.parent() {
            Some(p) if p.starts_with(root) => {
                out.push(p.to_path_buf());
                cur = p;
            }
            _ => break,
        }
    }
    out
}

fn join(root: &Path, path: &str) -> PathBuf {
    root.join(path.trim_start_matches('/'))
}

/// The smallest quota on the way from `dir` to `root`, in whole CPUs.
fn min_quota(root: &Path, dir: &Path, v2: bool) -> Option<u32> {
    up_to(root, dir)
        .iter()
        .filter_map(|d| {
            let (q, p) = if v2 {
                parse_cpu_max(&read(d, "cpu.max")?)??
            } else {
                let q: i64 = read(d, "cpu.cfs_quota_us")?.trim().parse().ok()?;
                let p: u64 = read(d, "cpu.cfs_period_us")?.trim().parse().ok()?;
                (u64::try_from(q).ok()?, p)
            };
            Some(quota_cpus(q, p))
        })
        .min()
}

/// Read the limits of the partition's cgroup `prefix` (and the quota path `cpu_prefix` on
/// v1). An error says what could not be read, or that the cpuset is empty.
pub fn read_limits(
    mounts: &Mounts,
    v2: bool,
    prefix: &str,
    cpu_prefix: Option<&str>,
) -> Result<Limits, String> {
    let (root, files) = if v2 {
        (mounts.v2.as_ref(), &["cpuset.cpus.effective"][..])
    } else {
        (
            mounts.cpuset.as_ref(),
            &["cpuset.effective_cpus", "cpuset.cpus"][..],
        )
    };
    let root = root.ok_or("no cgroup hierarchy with cpuset is mounted")?;
    let dir = join(root, prefix);
    if !dir.is_dir() {
        return Err(format!("{} does not exist", dir.display()));
    }
    // v2: a cgroup where cpuset is not enabled has no file; its nearest ancestor's applies.
    let text = up_to(root, &dir)
        .iter()
        .find_map(|d| files.iter().find_map(|f| read(d, f)))
        .ok_or_else(|| format!("cannot read the cpuset of {}", dir.display()))?;
    let cpus: CpuSet = text
        .parse()
        .map_err(|e| format!("cpuset of {}: {e}", dir.display()))?;
    if cpus.is_empty() {
        return Err(format!("the cpuset of {} is empty", dir.display()));
    }
    let (quota_cpus, weight) = if v2 {
        let w = read(&dir, "cpu.weight").and_then(|t| t.trim().parse().ok());
        (min_quota(root, &dir, true), w.unwrap_or(100))
    } else {
        match (mounts.cpu.as_ref(), cpu_prefix) {
            (Some(croot), Some(cp)) => {
                let cdir = join(croot, cp);
                let shares = read(&cdir, "cpu.shares").and_then(|t| t.trim().parse().ok());
                (
                    min_quota(croot, &cdir, false),
                    shares.map_or(100, weight_from_shares),
                )
            }
            _ => (None, 100),
        }
    };
    Ok(Limits {
        cpus,
        quota_cpus,
        weight,
    })
}

/// Where a program's cgroup puts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The rule that matched.
    pub rule: usize,
    /// The partition's name.
    pub name: String,
    /// The partition's cgroup (hierarchy-relative path).
    pub prefix: String,
    /// Its limits.
    pub limits: Limits,
}

/// Which path rules look at: the v1 cpuset hierarchy's when one is mounted and the process
/// is in it, else the unified one's.
fn path_to_match<'a>(mounts: &Mounts, pc: &'a ProcCgroup) -> Option<(bool, &'a str)> {
    match (&mounts.cpuset, &pc.cpuset) {
        (Some(_), Some(p)) => Some((false, p)),
        _ => Some((true, pc.v2.as_deref()?)),
    }
}

/// Read `pid`'s cgroup and place it: `Ok(None)` when no rule matches (the program goes by the
/// configured partitions), `Err(why)` when its cgroup or limits cannot be read or its cpuset is
/// empty (the caller places it in `default` and logs why).
pub fn locate(pid: i32, rules: &[Compiled], mounts: &Mounts) -> Result<Option<Found>, String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .map_err(|e| format!("cannot read /proc/{pid}/cgroup: {e}"))?;
    locate_in(&parse_proc_cgroup(&text), rules, mounts)
}

/// [`locate`] from an already parsed `/proc/<pid>/cgroup`.
pub fn locate_in(
    pc: &ProcCgroup,
    rules: &[Compiled],
    mounts: &Mounts,
) -> Result<Option<Found>, String> {
    let Some((v2, path)) = path_to_match(mounts, pc) else {
        return Err("the process is in no cgroup hierarchy with cpuset".into());
    };
    // A program in another cgroup namespace's subtree is seen as `/../…`: its directory is
    // not below this manager's mount, whatever a rule would make of the path.
    if path.split('/').any(|c| c == "..") {
        return Err(format!(
            "its cgroup {path} is outside the manager's cgroup namespace (run the manager in \
             the host's cgroup namespace)"
        ));
    }
    let Some(m) = match_path(rules, path) else {
        return Ok(None);
    };
    // v1: the quota lives in the cpu hierarchy, whose path may differ; the same rule must
    // find the same partition there.
    let cpu_match = pc.cpu.as_deref().and_then(|p| match_path(rules, p));
    let cpu_prefix = cpu_match
        .as_ref()
        .filter(|c| c.name == m.name)
        .map(|c| c.prefix.as_str());
    let limits = read_limits(mounts, v2, &m.prefix, cpu_prefix)?;
    Ok(Some(Found {
        rule: m.rule,
        name: m.name,
        prefix: m.prefix,
        limits,
    }))
}

/// The mounts of this process's mount namespace (empty when unreadable).
pub fn mounts() -> Mounts {
    std::fs::read_to_string("/proc/self/mounts")
        .map(|t| parse_mounts(&t))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;
