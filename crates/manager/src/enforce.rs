//! Enforcement: confining processes to CPU sets.
//!
//! - Applications: the runtime pins its own workers; the manager also sets the affinity of every
//!   thread of the application when it may (same uid or root), so a misbehaving application is
//!   still confined.
//! - Uncontrolled processes started with `partita run`: a cpuset cgroup per partition (v2 under
//!   the manager's own cgroup-v2 mount, else v1 under the cpuset hierarchy) when the manager can
//!   create one; else `sched_setaffinity` on every thread of the process and its descendants.
//! - Nothing survives the manager: [`Enforcer::restore_all`] puts back every affinity it
//!   changed and removes every cgroup it created.

use crate::sys::{self, SysError};
use partita_protocol::CpuSet;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// How uncontrolled processes are confined.
///
/// ```
/// assert_eq!(partita_manager::enforce::Confinement::CgroupV1("/x".into()).name(), "cgroup-v1");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Confinement {
    /// A cgroup-v2 directory with `cpuset.cpus`.
    CgroupV2(PathBuf),
    /// A cgroup-v1 cpuset hierarchy directory.
    CgroupV1(PathBuf),
    /// `sched_setaffinity` on every thread.
    Affinity,
}

impl Confinement {
    /// Short name for status.
    ///
    /// ```
    /// assert_eq!(partita_manager::enforce::Confinement::Affinity.name(), "affinity");
    /// ```
    pub fn name(&self) -> &'static str {
        match self {
            Confinement::CgroupV2(_) => "cgroup-v2",
            Confinement::CgroupV1(_) => "cgroup-v1",
            Confinement::Affinity => "affinity",
        }
    }
}

/// Applies CPU sets and remembers what it changed, to undo it.
///
/// ```
/// let e = partita_manager::enforce::Enforcer::new(false, [0].into_iter().collect());
/// assert_eq!(e.confinement().name(), "affinity");
/// ```
#[derive(Debug)]
pub struct Enforcer {
    confinement: Confinement,
    /// Cgroups created, per partition.
    cgroups: BTreeMap<String, PathBuf>,
    /// Original affinity of every thread whose affinity was changed.
    original: BTreeMap<i32, CpuSet>,
    managed: CpuSet,
}

impl Enforcer {
    /// Choose the confinement mechanism. `use_cgroups = false` forces affinity. A private
    /// root directory name (`partita-<pid>`) keeps concurrent managers apart.
    ///
    /// ```
    /// let e = partita_manager::enforce::Enforcer::new(false, [0].into_iter().collect());
    /// assert_eq!(e.confinement().name(), "affinity");
    /// ```
    pub fn new(use_cgroups: bool, managed: CpuSet) -> Enforcer {
        let confinement = if use_cgroups {
            detect_cgroup(&managed).unwrap_or(Confinement::Affinity)
        } else {
            Confinement::Affinity
        };
        Enforcer {
            confinement,
            cgroups: BTreeMap::new(),
            original: BTreeMap::new(),
            managed,
        }
    }

    /// The mechanism in use.
    ///
    /// ```
    /// let e = partita_manager::enforce::Enforcer::new(false, [0].into_iter().collect());
    /// assert_eq!(*e.confinement(), partita_manager::enforce::Confinement::Affinity);
    /// ```
    pub fn confinement(&self) -> &Confinement {
        &self.confinement
    }

    /// Set the affinity of every thread of `pid` (and of its descendants when `tree`),
    /// remembering originals. Errors on individual threads (gone, not permitted) are skipped;
    /// the first error is returned after trying all.
    ///
    /// ```
    /// use partita_manager::{enforce::Enforcer, sys};
    /// let mine = sys::get_affinity(0).unwrap();
    /// let mut e = Enforcer::new(false, mine);
    /// let mut child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
    /// let one: partita_protocol::CpuSet = [mine.to_vec()[0]].into_iter().collect();
    /// e.confine_process(child.id() as i32, &one, false).unwrap();
    /// assert_eq!(sys::get_affinity(child.id() as i32).unwrap(), one);
    /// e.restore_all();
    /// assert_eq!(sys::get_affinity(child.id() as i32).unwrap(), mine);
    /// child.kill().unwrap();
    /// child.wait().unwrap();
    /// ```
    pub fn confine_process(&mut self, pid: i32, cpus: &CpuSet, tree: bool) -> Result<(), SysError> {
        let mut pids = vec![pid];
        if tree {
            pids.extend(sys::descendants(pid));
        }
        let mut first_err = None;
        for p in pids {
            for tid in sys::threads(p).unwrap_or_default() {
                if let std::collections::btree_map::Entry::Vacant(slot) = self.original.entry(tid) {
                    match sys::get_affinity(tid) {
                        Ok(orig) => {
                            slot.insert(orig);
                        }
                        Err(e) => {
                            first_err.get_or_insert(e);
                            continue;
                        }
                    }
                }
                if let Err(e) = sys::set_affinity(tid, cpus) {
                    first_err.get_or_insert(e);
                }
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    /// Put `pid` into the partition's cgroup (creating it) with this CPU set; with the affinity
    /// mechanism, set the affinity of its threads and descendants instead.
    ///
    /// ```
    /// use partita_manager::{enforce::Enforcer, sys};
    /// let mine = sys::get_affinity(0).unwrap();
    /// let mut e = Enforcer::new(false, mine); // affinity mechanism
    /// let mut child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
    /// e.confine_uncontrolled("default", child.id() as i32, &mine).unwrap();
    /// e.restore_all();
    /// child.kill().unwrap();
    /// child.wait().unwrap();
    /// ```
    pub fn confine_uncontrolled(
        &mut self,
        partition: &str,
        pid: i32,
        cpus: &CpuSet,
    ) -> Result<(), SysError> {
        match self.confinement.clone() {
            Confinement::Affinity => self.confine_process(pid, cpus, true),
            Confinement::CgroupV1(root) | Confinement::CgroupV2(root) => {
                let dir = self.partition_cgroup(&root, partition)?;
                self.set_cgroup_cpus(&dir, cpus)?;
                sys::write_file(&dir.join("cgroup.procs"), &pid.to_string())
            }
        }
    }

    /// Change the CPU set of a partition's uncontrolled processes (`pids` are used with the
    /// affinity mechanism). An empty set leaves them where they are.
    ///
    /// ```
    /// let mut e = partita_manager::enforce::Enforcer::new(false, [0].into_iter().collect());
    /// e.update_uncontrolled("default", &[], &partita_protocol::CpuSet::new()).unwrap();
    /// ```
    pub fn update_uncontrolled(
        &mut self,
        partition: &str,
        pids: &[i32],
        cpus: &CpuSet,
    ) -> Result<(), SysError> {
        if cpus.is_empty() {
            return Ok(()); // Nothing runnable: leave them where they are.
        }
        match self.confinement.clone() {
            Confinement::Affinity => {
                let mut r = Ok(());
                for &p in pids {
                    if let Err(e) = self.confine_process(p, cpus, true) {
                        r = Err(e);
                    }
                }
                r
            }
            Confinement::CgroupV1(_) | Confinement::CgroupV2(_) => {
                match self.cgroups.get(partition) {
                    Some(dir) => {
                        let dir = dir.clone();
                        self.set_cgroup_cpus(&dir, cpus)
                    }
                    None => Ok(()),
                }
            }
        }
    }

    /// Processes in a partition's cgroup (empty with the affinity mechanism).
    ///
    /// ```
    /// let e = partita_manager::enforce::Enforcer::new(false, [0].into_iter().collect());
    /// assert!(e.cgroup_pids("default").is_empty());
    /// ```
    pub fn cgroup_pids(&self, partition: &str) -> Vec<i32> {
        let Some(dir) = self.cgroups.get(partition) else {
            return Vec::new();
        };
        std::fs::read_to_string(dir.join("cgroup.procs"))
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|x| x.parse().ok())
            .collect()
    }

    /// Forget the original affinity of threads that no longer exist (process exited).
    ///
    /// ```
    /// let mut e = partita_manager::enforce::Enforcer::new(false, [0].into_iter().collect());
    /// e.forget_process(i32::MAX);
    /// ```
    pub fn forget_process(&mut self, pid: i32) {
        let live: Vec<i32> = sys::threads(pid).unwrap_or_default();
        self.original
            .retain(|tid, _| live.contains(tid) || sys::alive(*tid));
    }

    /// Restore the affinity of `pid`'s threads to what they were (used when an application
    /// unregisters but keeps running).
    ///
    /// ```
    /// let mut e = partita_manager::enforce::Enforcer::new(false, [0].into_iter().collect());
    /// e.restore_process(std::process::id() as i32); // nothing was changed: no-op
    /// ```
    pub fn restore_process(&mut self, pid: i32) {
        for tid in sys::threads(pid).unwrap_or_default() {
            if let Some(orig) = self.original.remove(&tid) {
                let _ = sys::set_affinity(tid, &orig);
            }
        }
    }

    /// Undo everything: restore every changed affinity, move processes out of the cgroups
    /// created and remove them.
    ///
    /// ```
    /// let mut e = partita_manager::enforce::Enforcer::new(true, partita_manager::sys::get_affinity(0).unwrap());
    /// e.restore_all(); // nothing created yet: no-op
    /// ```
    pub fn restore_all(&mut self) {
        for (tid, orig) in std::mem::take(&mut self.original) {
            let _ = sys::set_affinity(tid, &orig);
        }
        let root = match &self.confinement {
            Confinement::CgroupV1(r) | Confinement::CgroupV2(r) => Some(r.clone()),
            Confinement::Affinity => None,
        };
        for (_, dir) in std::mem::take(&mut self.cgroups) {
            // Move survivors back to the parent of our root, then remove the directory.
            if let Some(parent) = root.as_ref().and_then(|r| r.parent()) {
                for p in std::fs::read_to_string(dir.join("cgroup.procs"))
                    .unwrap_or_default()
                    .split_whitespace()
                {
                    let _ = std::fs::write(parent.join("cgroup.procs"), p);
                }
            }
            let _ = std::fs::remove_dir(&dir);
        }
        if let Some(r) = root {
            let _ = std::fs::remove_dir(&r);
        }
    }

    fn partition_cgroup(&mut self, root: &Path, partition: &str) -> Result<PathBuf, SysError> {
        if let Some(d) = self.cgroups.get(partition) {
            return Ok(d.clone());
        }
        if !root.exists() {
            std::fs::create_dir(root).map_err(|source| SysError {
                call: format!("mkdir {}", root.display()),
                source,
            })?;
            self.init_cpuset(root)?;
        }
        let dir = root.join(sanitize(partition));
        if !dir.exists() {
            std::fs::create_dir(&dir).map_err(|source| SysError {
                call: format!("mkdir {}", dir.display()),
                source,
            })?;
        }
        self.init_cpuset(&dir)?;
        self.cgroups.insert(partition.to_string(), dir.clone());
        Ok(dir)
    }

    fn init_cpuset(&self, dir: &Path) -> Result<(), SysError> {
        match &self.confinement {
            Confinement::CgroupV1(_) => {
                // v1 needs cpus and mems set before tasks can join; inherit mems from the parent.
                let parent = dir.parent().unwrap_or(dir);
                let mems = std::fs::read_to_string(parent.join("cpuset.mems")).unwrap_or_default();
                sys::write_file(&dir.join("cpuset.mems"), mems.trim())?;
                sys::write_file(&dir.join("cpuset.cpus"), &self.managed.to_string())
            }
            Confinement::CgroupV2(_) => {
                // Enable the cpuset controller for children; harmless if already enabled.
                let _ = std::fs::write(dir.join("cgroup.subtree_control"), "+cpuset");
                sys::write_file(&dir.join("cpuset.cpus"), &self.managed.to_string())
            }
            Confinement::Affinity => Ok(()),
        }
    }

    fn set_cgroup_cpus(&self, dir: &Path, cpus: &CpuSet) -> Result<(), SysError> {
        sys::write_file(&dir.join("cpuset.cpus"), &cpus.to_string())
    }
}

fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Find a cpuset cgroup hierarchy we can create directories in: v2 first (the unified mount,
/// with `cpuset` in its controllers), then v1. The directory is `partita-<pid>` under the
/// hierarchy's root, so that concurrent managers (tests) do not collide.
fn detect_cgroup(managed: &CpuSet) -> Option<Confinement> {
    let name = format!("partita-{}", std::process::id());
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    let mut v2 = None;
    let mut v1 = None;
    for line in mounts.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 4 {
            continue;
        }
        if f[2] == "cgroup2" && v2.is_none() {
            let root = PathBuf::from(f[1]);
            let ctrl = std::fs::read_to_string(root.join("cgroup.controllers")).unwrap_or_default();
            if ctrl.split_whitespace().any(|c| c == "cpuset") {
                v2 = Some(root);
            }
        } else if f[2] == "cgroup" && f[3].split(',').any(|o| o == "cpuset") && v1.is_none() {
            v1 = Some(PathBuf::from(f[1]));
        }
    }
    let _ = managed;
    if let Some(root) = v2 {
        let _ = std::fs::write(root.join("cgroup.subtree_control"), "+cpuset");
        if writable(&root) {
            return Some(Confinement::CgroupV2(root.join(name)));
        }
    }
    if let Some(root) = v1 {
        if writable(&root) {
            return Some(Confinement::CgroupV1(root.join(name)));
        }
    }
    None
}

fn writable(dir: &Path) -> bool {
    let probe = dir.join(format!("partita-probe-{}", std::process::id()));
    match std::fs::create_dir(&probe) {
        Ok(()) => {
            let _ = std::fs::remove_dir(&probe);
            true
        }
        Err(_) => false,
    }
}
