//! Where the manager's cpuset cgroups live and how a later manager finds a dead one's.
//!
//! The manager nests its cgroups under its *own* cgroup of the cpuset hierarchy (v2: the
//! unified one), in a directory named `partita-mgr-<pid>-<start time>`: the pid and start time
//! name exactly one process ever, so a manager starting later can tell a live sibling's
//! directory from a dead one's and sweep the latter (`sweep`: move its processes back to the
//! manager's own cgroup, remove the directories). Partition directories inside it are
//! [`encode_name`]d so that distinct partition names never share a directory.

use std::path::{Path, PathBuf};

pub mod limits;
pub mod rules;

/// Prefix of every manager's directory.
pub const PREFIX: &str = "partita-mgr-";

/// A cpuset hierarchy the manager can use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hierarchy {
    /// Whether it is cgroup v2.
    pub v2: bool,
    /// The manager's own cgroup directory in it.
    pub own: PathBuf,
}

/// Encode a partition name as a directory name, injectively: ASCII letters, digits and `-`
/// stay, every other byte becomes `_` and two hex digits (so `a.b` → `a_2eb`, `a_b` → `a_5fb`).
///
/// ```
/// use partita_manager::cgroup::encode_name;
/// assert_ne!(encode_name("a.b"), encode_name("a_b"));
/// assert_eq!(encode_name("batch-1"), "batch-1");
/// ```
pub fn encode_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b == b'-' {
            out.push(b as char);
        } else {
            out.push_str(&format!("_{b:02x}"));
        }
    }
    out
}

/// This manager's directory name.
pub(crate) fn own_dir_name() -> String {
    let pid = std::process::id() as i32;
    let start = crate::sys::start_time(pid).unwrap_or(0);
    format!("{PREFIX}{pid}-{start}")
}

/// Parse `partita-mgr-<pid>-<start>`, or the older `partita-<pid>` (start unknown).
fn owner(name: &str) -> Option<(i32, Option<u64>)> {
    if let Some(rest) = name.strip_prefix(PREFIX) {
        let (pid, start) = rest.split_once('-')?;
        return Some((pid.parse().ok()?, Some(start.parse().ok()?)));
    }
    let pid = name.strip_prefix("partita-")?;
    Some((pid.parse().ok()?, None))
}

/// Whether the manager that created directory `name` is gone.
pub(crate) fn owner_dead(name: &str) -> bool {
    match owner(name) {
        Some((pid, start)) => {
            let now = crate::sys::start_time(pid);
            match start {
                Some(s) => now != Some(s),
                None => now.is_none(),
            }
        }
        None => false,
    }
}

/// Find the cpuset hierarchy (v2 with `cpuset` available to this process's cgroup first, then
/// v1) and this process's own cgroup in it, from `/proc/self/mounts` and `/proc/self/cgroup`.
pub(crate) fn detect() -> Option<Hierarchy> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let own_path = |v2: bool| -> Option<String> {
        cgroups.lines().find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (id, ctrl, path) = (f.next()?, f.next()?, f.next()?);
            let hit = if v2 {
                id == "0" && ctrl.is_empty()
            } else {
                ctrl.split(',').any(|c| c == "cpuset")
            };
            hit.then(|| path.to_string())
        })
    };
    let mut v1 = None;
    for line in mounts.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 4 {
            continue;
        }
        if f[2] == "cgroup2" {
            // Usable when cpuset is available to the manager's own cgroup (its parent
            // delegates it), not merely mounted: only then can it be enabled below.
            if let Some(p) = own_path(true) {
                let own = join_cgroup(Path::new(f[1]), &p);
                let ctrl =
                    std::fs::read_to_string(own.join("cgroup.controllers")).unwrap_or_default();
                if ctrl.split_whitespace().any(|c| c == "cpuset") {
                    return Some(Hierarchy { v2: true, own });
                }
            }
        } else if f[2] == "cgroup" && f[3].split(',').any(|o| o == "cpuset") && v1.is_none() {
            if let Some(p) = own_path(false) {
                v1 = Some(Hierarchy {
                    v2: false,
                    own: join_cgroup(Path::new(f[1]), &p),
                });
            }
        }
    }
    v1
}

fn join_cgroup(root: &Path, path: &str) -> PathBuf {
    root.join(path.trim_start_matches('/'))
}

/// The cgroup directory of `pid` in hierarchy `h` (`None` if gone or unreadable).
pub(crate) fn cgroup_of(h: &Hierarchy, mount: &Path, pid: i32) -> Option<PathBuf> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    text.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (id, ctrl, path) = (f.next()?, f.next()?, f.next()?);
        let hit = if h.v2 {
            id == "0" && ctrl.is_empty()
        } else {
            ctrl.split(',').any(|c| c == "cpuset")
        };
        hit.then(|| join_cgroup(mount, path))
    })
}

/// The mount point of the hierarchy `own` belongs to (found by walking up to the directory
/// holding `cgroup.procs` whose parent does not).
pub(crate) fn mount_of(own: &Path) -> PathBuf {
    let mut cur = own.to_path_buf();
    while let Some(parent) = cur.parent() {
        if !parent.join("cgroup.procs").exists() {
            break;
        }
        cur = parent.to_path_buf();
    }
    cur
}

/// Processes in a cgroup directory. A threaded v2 cgroup refuses to list `cgroup.procs`
/// (EOPNOTSUPP): then the processes of the threads in `cgroup.threads`.
pub(crate) fn procs(dir: &Path) -> Vec<i32> {
    let ids = |file: &str| -> Option<Vec<i32>> {
        let text = std::fs::read_to_string(dir.join(file)).ok()?;
        Some(
            text.split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect(),
        )
    };
    if let Some(p) = ids("cgroup.procs") {
        return p;
    }
    let mut out: Vec<i32> = ids("cgroup.threads")
        .unwrap_or_default()
        .into_iter()
        .filter_map(tgid)
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// The process (thread group) a thread belongs to.
fn tgid(tid: i32) -> Option<i32> {
    let text = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Move every process of `dir` (and its subdirectories) to `to`, then remove the directories,
/// deepest first. Best effort: returns whether `dir` is gone.
pub(crate) fn drain_and_remove(dir: &Path, to: &Path) -> bool {
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                drain_and_remove(&e.path(), to);
            }
        }
    }
    // rmdir fails with EBUSY while a task that was in the cgroup is still exiting (it is
    // released after its last reference, after `procs` stopped listing it), or when a fork
    // raced the drain: drain again and retry for a bounded time (≤ 100 ms), as runc and
    // systemd do.
    for _ in 0..50 {
        for p in procs(dir) {
            let _ = std::fs::write(to.join("cgroup.procs"), p.to_string());
        }
        match std::fs::remove_dir(dir) {
            Ok(()) => return true,
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            Err(_) => break,
        }
    }
    !dir.exists()
}

/// Remove what dead managers left under `own`: every `partita-mgr-*` (and older
/// `partita-<pid>`) directory whose manager is gone. Returns the directories removed.
pub(crate) fn sweep(own: &Path) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    let Ok(rd) = std::fs::read_dir(own) else {
        return removed;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if e.file_type().is_ok_and(|t| t.is_dir()) && owner_dead(&name) {
            let dir = e.path();
            if drain_and_remove(&dir, own) {
                tracing::info!(dir = %dir.display(), "removed a dead manager's cgroup");
                removed.push(dir);
            }
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_injective_on_tricky_pairs() {
        let names = ["a.b", "a_b", "a-b", "a b", "a/b", "a_2eb", "é", "_", "__"];
        let enc: std::collections::HashSet<String> = names.iter().map(|n| encode_name(n)).collect();
        assert_eq!(enc.len(), names.len());
        assert!(enc.iter().all(|e| !e.contains('/') && !e.starts_with('.')));
    }

    #[test]
    fn owners_are_parsed_and_judged() {
        assert_eq!(owner("partita-mgr-12-345"), Some((12, Some(345))));
        assert_eq!(owner("partita-77"), Some((77, None)));
        assert_eq!(owner("other"), None);
        assert!(!owner_dead(&own_dir_name()));
        let me = std::process::id();
        assert!(owner_dead(&format!("{PREFIX}{me}-1"))); // same pid, other start: dead
        assert!(!owner_dead("unrelated"));
    }
}
