//! Enforcement: confining processes to CPU sets, and undoing it.
//!
//! - Applications: the runtime pins its own workers; the manager also sets the affinity of every
//!   thread of the application when it may (same uid or root), so a misbehaving application is
//!   still confined.
//! - Uncontrolled processes started with `partita run`: a cpuset cgroup per partition, nested
//!   under the manager's own cgroup (see [`crate::cgroup`]), when the program's own cgroup is
//!   an ancestor of it (then the program stays under every limit it had: cgroup limits are
//!   hierarchical); otherwise `sched_setaffinity` on every thread of it and its descendants.
//! - Always within the allocation ([`narrowed`]): a process runs on the allocated CPUs its
//!   own mask allows, or on all of them when it allows none (a child that pinned itself
//!   elsewhere does not escape). The mask it had when the manager first touched it (one per
//!   process, not per thread; a child forked under a confinement inherits its parent's) is
//!   what every thread, including threads created later, gets back.
//! - A confined process tree (a partition's `partita run` programs) is a *group*: every
//!   process in it, children that outlived their parent included, is re-checked by
//!   [`Enforcer::reconfine`] (the sampler calls it), so a child that sets its own affinity
//!   outside the group's CPUs is narrowed again within one sampling period.
//! - Every process is named by a [`ProcRef`] (pid + pidfd) and checked alive before each act.
//! - Nothing survives the manager: [`Enforcer::restore_all`] puts back every affinity, moves
//!   every process back to the cgroup it came from, removes every cgroup it created and
//!   undoes the `+cpuset` it added to `cgroup.subtree_control`. Each of these changes is
//!   written to the [`Journal`] before it is made, so that when the manager dies without
//!   cleaning up (SIGKILL), the next one undoes them ([`journal::sweep`]).

use crate::cgroup::{self, Hierarchy};
use crate::journal::{self, Journal};
use crate::proc_ref::{walk, ProcRef};
use crate::sys::{self, SysError};
use partita_protocol::CpuSet;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

mod migrate;
pub use migrate::{PendingMove, Prepared};

/// How uncontrolled processes are confined.
///
/// ```
/// assert_eq!(partita_manager::enforce::Confinement::CgroupV1("/x".into()).name(), "cgroup-v1");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Confinement {
    /// A cgroup-v2 directory (the manager's, created on first use) with `cpuset.cpus`.
    CgroupV2(PathBuf),
    /// A cgroup-v1 cpuset directory (the manager's, created on first use).
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

/// What the manager changed about one process's affinity.
#[derive(Debug)]
struct Original {
    proc: ProcRef,
    /// Its mask before the manager first narrowed it: what it gets back.
    mask: CpuSet,
    /// The sets the manager applied to it, newest last (at most [`APPLIED_HISTORY`]): a
    /// child found with one of them inherited it, so the child's original is this `mask`.
    applied: Vec<CpuSet>,
    /// The group (confined process tree) it belongs to; `None` for an application's own
    /// process, which follows its application's allocation instead.
    group: Option<String>,
}

/// How many applied sets a process remembers: a child forked just before its parent moved
/// is found with the previous set, so a few suffice.
const APPLIED_HISTORY: usize = 4;

/// How [`Enforcer::confine_one`] treats the threads of a process it already confined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// The set changed: every thread gets it.
    Apply,
    /// Re-checking: only threads with a CPU outside the set are narrowed; a thread inside it
    /// (placed by the manager, or narrower by its own choice) is left alone.
    Check,
}

/// The CPUs a process whose own mask is `own` may run on while its program is allocated
/// `cpus`: the allocated CPUs its mask allows, or all of them when it allows none. The
/// manager decides where a program runs; a process pinned elsewhere does not escape, and
/// gets its own mask back when the manager lets go.
///
/// ```
/// use partita_manager::enforce::narrowed;
/// use partita_protocol::CpuSet;
/// let set = |s: &str| s.parse::<CpuSet>().unwrap();
/// assert_eq!(narrowed(&set("0-1"), &set("1-3")), set("1"));
/// assert_eq!(narrowed(&set("0"), &set("1")), set("0"));
/// ```
pub fn narrowed(cpus: &CpuSet, own: &CpuSet) -> CpuSet {
    cpus.narrowed(own)
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
    hierarchy: Option<Hierarchy>,
    /// Cgroups created, per partition.
    cgroups: BTreeMap<String, PathBuf>,
    /// Original affinity of every process whose affinity was changed.
    original: BTreeMap<i32, Original>,
    /// Groups confined by affinity: their CPU set, re-checked by [`Enforcer::reconfine`].
    groups: BTreeMap<String, CpuSet>,
    /// Processes moved into a cgroup, with the cgroup they came from.
    moved: BTreeMap<i32, (ProcRef, PathBuf)>,
    /// Where this manager wrote `+cpuset` into `cgroup.subtree_control` (v2), to undo it.
    added_subtree: Option<PathBuf>,
    managed: CpuSet,
    /// Every change above, persisted before it is made (none: nothing survives a SIGKILL).
    journal: Option<Journal>,
    /// Closed by the restore, so no cgroup move written outside the lock comes after it.
    move_gate: migrate::MoveGate,
}

impl Enforcer {
    /// Choose the confinement mechanism. `use_cgroups = false` forces affinity. With cgroups,
    /// first [sweep](crate::cgroup) what dead managers left under this one's cgroup.
    ///
    /// ```
    /// let e = partita_manager::enforce::Enforcer::new(false, [0].into_iter().collect());
    /// assert_eq!(e.confinement().name(), "affinity");
    /// ```
    pub fn new(use_cgroups: bool, managed: CpuSet) -> Enforcer {
        Enforcer::with_journal(use_cgroups, managed, None)
    }

    /// [`Enforcer::new`] with a journal in `state_dir` (the socket's directory): first undo
    /// the journals dead managers left there ([`journal::sweep`]), then sweep cgroups, then
    /// journal every change this one makes.
    ///
    /// ```
    /// let dir = std::env::temp_dir();
    /// let e = partita_manager::enforce::Enforcer::with_journal(false, [0].into_iter().collect(), Some(&dir));
    /// assert_eq!(e.confinement().name(), "affinity");
    /// ```
    pub fn with_journal(use_cgroups: bool, managed: CpuSet, state_dir: Option<&Path>) -> Enforcer {
        if let Some(dir) = state_dir {
            let s = journal::sweep(dir);
            if s != journal::Swept::default() {
                tracing::info!(?s, "undid what dead managers left");
            }
        }
        let hierarchy = if use_cgroups { cgroup::detect() } else { None };
        let hierarchy = hierarchy.filter(|h| {
            cgroup::sweep(&h.own);
            writable(&h.own)
        });
        let confinement = match &hierarchy {
            Some(h) if h.v2 => Confinement::CgroupV2(h.own.join(cgroup::own_dir_name())),
            Some(h) => Confinement::CgroupV1(h.own.join(cgroup::own_dir_name())),
            None => Confinement::Affinity,
        };
        Enforcer {
            confinement,
            hierarchy,
            cgroups: BTreeMap::new(),
            original: BTreeMap::new(),
            groups: BTreeMap::new(),
            moved: BTreeMap::new(),
            added_subtree: None,
            managed,
            journal: state_dir.map(Journal::new),
            move_gate: Default::default(),
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

    /// Set the affinity of every thread of `proc` to [`narrowed`]`(cpus, its original mask)`,
    /// remembering the original. With `tree`, its descendants too, as an unnamed group kept
    /// confined by [`Enforcer::reconfine`]. Returns the set applied to `proc`; errors if the
    /// process is gone or a thread refused (the first error, after trying all).
    ///
    /// ```
    /// use partita_manager::{enforce::Enforcer, proc_ref::ProcRef, sys};
    /// let mine = sys::get_affinity(0).unwrap();
    /// let mut e = Enforcer::new(false, mine);
    /// let mut child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
    /// let p = ProcRef::open(child.id() as i32).unwrap();
    /// let one: partita_protocol::CpuSet = [mine.to_vec()[0]].into_iter().collect();
    /// e.confine_process(&p, &one, false).unwrap();
    /// assert_eq!(sys::get_affinity(child.id() as i32).unwrap(), one);
    /// e.restore_all();
    /// assert_eq!(sys::get_affinity(child.id() as i32).unwrap(), mine);
    /// child.kill().unwrap();
    /// child.wait().unwrap();
    /// ```
    pub fn confine_process(
        &mut self,
        proc: &ProcRef,
        cpus: &CpuSet,
        tree: bool,
    ) -> Result<CpuSet, SysError> {
        if tree {
            return self.confine_group("", std::slice::from_ref(proc), cpus, Mode::Apply);
        }
        self.prune_dead();
        self.confine_one(proc, cpus, None, None, Mode::Apply)
    }

    /// Confine `roots`, the processes already in `group` and all their descendants to `cpus`
    /// (each [`narrowed`] by its own original mask); the group's set becomes `cpus`. Returns
    /// the set applied to `roots[0]` (`cpus` without roots); the first error of a root. A
    /// descendant that cannot be confined (it exited meanwhile, or the kernel refuses its
    /// set: its own cpuset cgroup allows none of `cpus`) does not fail its root.
    fn confine_group(
        &mut self,
        group: &str,
        roots: &[ProcRef],
        cpus: &CpuSet,
        mode: Mode,
    ) -> Result<CpuSet, SysError> {
        self.prune_dead();
        let mut start = roots.to_vec();
        start.extend(
            self.original
                .values()
                .filter(|o| o.group.as_deref() == Some(group))
                .map(|o| o.proc.clone()),
        );
        if start.is_empty() {
            self.groups.remove(group);
            return Ok(*cpus);
        }
        self.groups.insert(group.to_string(), *cpus);
        let is_root = |pid: i32| roots.iter().any(|r| r.pid() == pid);
        let mut applied = Ok(*cpus);
        let mut first_err = None;
        for (p, parent) in walk(&start) {
            // An application's own process follows its application's allocation.
            let app = self
                .original
                .get(&p.pid())
                .is_some_and(|o| o.group.is_none());
            if app && !is_root(p.pid()) {
                continue;
            }
            let r = self.confine_one(&p, cpus, parent, Some(group), mode);
            match r {
                Ok(set) if roots.first().is_some_and(|r| r.pid() == p.pid()) => {
                    applied = Ok(set);
                }
                Ok(_) => {}
                Err(e) if is_root(p.pid()) => {
                    first_err.get_or_insert(e);
                }
                Err(e) => {
                    tracing::debug!(pid = p.pid(), error = %e, "descendant not confined");
                }
            }
        }
        if let Some(j) = &mut self.journal {
            j.sync();
        }
        first_err.map_or(applied, Err)
    }

    /// Whether [`Enforcer::reconfine`] has anything to check: a group, or an application
    /// whose affinity the manager set.
    pub fn has_confined(&self) -> bool {
        !self.groups.is_empty() || self.original.values().any(|o| o.group.is_none())
    }

    /// Keep everything it confined inside its CPUs. Every group: narrow again every thread
    /// of its processes that has a CPU outside the group's set (a child that called
    /// `sched_setaffinity` or was started with `taskset`), and confine descendants that
    /// appeared since. Every application the manager set the affinity of: narrow again every
    /// thread with a CPU outside the set last applied, which is how a thread created after
    /// that (from a thread that still had the old mask, or by the application itself later)
    /// is caught. The sampler calls this once per sampling period; nothing to do without
    /// groups or confined applications.
    ///
    /// ```
    /// let mut e = partita_manager::enforce::Enforcer::new(false, [0].into_iter().collect());
    /// e.reconfine(); // nothing confined: no-op
    /// ```
    pub fn reconfine(&mut self) {
        let groups: Vec<(String, CpuSet)> =
            self.groups.iter().map(|(g, c)| (g.clone(), *c)).collect();
        for (group, cpus) in groups {
            let _ = self.confine_group(&group, &[], &cpus, Mode::Check);
        }
        for o in self.original.values().filter(|o| o.group.is_none()) {
            if let Some(set) = o.applied.last() {
                // A process that exited is pruned at the next confinement.
                let _ = set_threads(&o.proc, set, true);
            }
        }
    }

    /// Confine every thread of `p` to [`narrowed`]`(cpus, original)`, recording its original
    /// mask at first touch: its parent's (a process of `group` found under `parent`) if it
    /// still has a mask the manager gave that parent (it inherited the confinement), else its
    /// own; later, the mask its main thread chose itself, if it did.
    fn confine_one(
        &mut self,
        p: &ProcRef,
        cpus: &CpuSet,
        parent: Option<i32>,
        group: Option<&str>,
        mode: Mode,
    ) -> Result<CpuSet, SysError> {
        if !p.alive() {
            return Err(gone(p));
        }
        let stale = self.original.get(&p.pid()).is_some_and(|o| !o.proc.alive());
        let new = stale || !self.original.contains_key(&p.pid());
        if new {
            self.first_touch(p, cpus, parent, group)?;
        }
        let Some(o) = self.original.get_mut(&p.pid()) else {
            return Err(gone(p)); // Inserted by `first_touch` when missing: not reached.
        };
        o.group = group.map(str::to_string);
        // A main thread on a mask the manager never gave it: the process chose it itself
        // (`taskset`, `sched_setaffinity`) after the manager first saw it. That is what it gets
        // back on release, as it would have without the manager.
        let own = (!new).then(|| sys::get_affinity(p.pid()).ok()).flatten();
        if let Some(own) = own.filter(|m| !o.applied.contains(m) && *m != o.mask) {
            if let Some(j) = &mut self.journal {
                if !j.affinity(p, &own) {
                    return Err(gone(p));
                }
            }
            o.mask = own;
        }
        let set = narrowed(cpus, &o.mask);
        if o.applied.last() != Some(&set) {
            o.applied.retain(|s| *s != set);
            o.applied.push(set);
            if o.applied.len() > APPLIED_HISTORY {
                o.applied.remove(0);
            }
        }
        set_threads(p, &set, mode == Mode::Check && !new)
    }

    /// Record the original mask of a process seen for the first time (journalled before any
    /// narrowing, so that a later manager can undo it).
    fn first_touch(
        &mut self,
        p: &ProcRef,
        cpus: &CpuSet,
        parent: Option<i32>,
        group: Option<&str>,
    ) -> Result<(), SysError> {
        let own = sys::get_affinity(p.pid())?;
        let inherited = parent
            .and_then(|pp| self.original.get(&pp))
            .filter(|o| o.proc.alive() && o.group.as_deref() == group)
            .filter(|o| o.applied.contains(&own))
            .map(|o| o.mask);
        let mask = inherited.unwrap_or(own);
        if let Some(j) = &mut self.journal {
            // A child already inside what it inherited is not narrowed now: its entry is
            // written once for the whole walk.
            let unchanged = inherited.is_some() && narrowed(cpus, &mask) == own;
            let ok = if unchanged {
                j.affinity_deferred(p, &mask)
            } else {
                j.affinity(p, &mask)
            };
            if !ok {
                return Err(gone(p));
            }
        }
        let orig = Original {
            proc: p.clone(),
            mask,
            applied: Vec::new(),
            group: None,
        };
        self.original.insert(p.pid(), orig);
        Ok(())
    }

    /// Change the CPU set of a partition's uncontrolled processes: its cgroup's, and the
    /// affinity of those of `procs` that are not in it. An empty set leaves them where they
    /// are.
    ///
    /// ```
    /// let mut e = partita_manager::enforce::Enforcer::new(false, [0].into_iter().collect());
    /// e.update_uncontrolled("default", &[], &partita_protocol::CpuSet::new()).unwrap();
    /// ```
    pub fn update_uncontrolled(
        &mut self,
        partition: &str,
        procs: &[ProcRef],
        cpus: &CpuSet,
    ) -> Result<(), SysError> {
        if cpus.is_empty() {
            return Ok(()); // Nothing runnable: leave them where they are.
        }
        let mut r = Ok(());
        if let Some(dir) = self.cgroups.get(partition).cloned() {
            r = self.set_cgroup_cpus(&dir, cpus);
        }
        let roots: Vec<ProcRef> = procs
            .iter()
            .filter(|p| !self.moved.contains_key(&p.pid()))
            .cloned()
            .collect();
        // The group's other processes (children that outlived a root) follow too.
        if let Err(e) = self.confine_group(partition, &roots, cpus, Mode::Apply) {
            r = Err(e);
        }
        r
    }

    /// Processes in a partition's cgroup (empty with the affinity mechanism).
    ///
    /// ```
    /// let e = partita_manager::enforce::Enforcer::new(false, [0].into_iter().collect());
    /// assert!(e.cgroup_pids("default").is_empty());
    /// ```
    pub fn cgroup_pids(&self, partition: &str) -> Vec<i32> {
        self.cgroups
            .get(partition)
            .map(|d| cgroup::procs(d))
            .unwrap_or_default()
    }

    /// Forget what was recorded about processes that exited.
    ///
    /// ```
    /// let mut e = partita_manager::enforce::Enforcer::new(false, [0].into_iter().collect());
    /// e.forget_dead();
    /// ```
    pub fn forget_dead(&mut self) {
        self.prune_dead();
    }

    /// Drop what was recorded about processes that exited (and their journal entries), so
    /// neither grows with every process ever confined.
    fn prune_dead(&mut self) {
        let before = (self.original.len(), self.moved.len());
        self.original.retain(|_, o| o.proc.alive());
        self.moved.retain(|_, (p, _)| p.alive());
        if (self.original.len(), self.moved.len()) != before {
            let (original, moved) = (&self.original, &self.moved);
            if let Some(j) = &mut self.journal {
                j.retain(
                    |pid| original.contains_key(&pid),
                    |pid| moved.contains_key(&pid),
                );
            }
        }
    }

    /// Restore the affinity of every thread of `proc` to the process's original mask (an
    /// application that unregisters but keeps running).
    ///
    /// ```
    /// let mut e = partita_manager::enforce::Enforcer::new(false, [0].into_iter().collect());
    /// let me = partita_manager::proc_ref::ProcRef::open(std::process::id() as i32).unwrap();
    /// e.restore_process(&me); // nothing was changed: no-op
    /// ```
    pub fn restore_process(&mut self, proc: &ProcRef) {
        if let Some(o) = self.original.remove(&proc.pid()) {
            restore_affinity(&o);
            if let Some(j) = &mut self.journal {
                let pid = proc.pid();
                j.retain(|p| p != pid, |_| true);
            }
        }
    }

    /// Children forked since the last walk inherited a confined mask the manager never
    /// recorded; find them (one walk from every recorded process, parents first) so that each
    /// gets its parent's original mask back with the rest. A child whose mask is not one the
    /// manager gave its parent chose it itself and is left alone.
    fn adopt_unseen_children(&mut self) {
        let start: Vec<ProcRef> = self.original.values().map(|o| o.proc.clone()).collect();
        for (p, parent) in walk(&start) {
            let Some(parent) = parent.filter(|_| !self.original.contains_key(&p.pid())) else {
                continue;
            };
            let Ok(own) = sys::get_affinity(p.pid()) else {
                continue;
            };
            let Some(o) = self
                .original
                .get(&parent)
                .filter(|o| o.applied.contains(&own))
            else {
                continue;
            };
            let (mask, group) = (o.mask, o.group.clone());
            let applied = vec![own];
            let proc = p.clone();
            self.original.insert(
                p.pid(),
                Original {
                    proc,
                    mask,
                    applied,
                    group,
                },
            );
        }
    }

    /// Undo everything: restore every changed affinity, move processes back to the cgroups
    /// they came from, remove the cgroups created, undo `+cpuset`.
    ///
    /// ```
    /// let mut e = partita_manager::enforce::Enforcer::new(true, partita_manager::sys::get_affinity(0).unwrap());
    /// e.restore_all(); // nothing created yet: no-op
    /// ```
    pub fn restore_all(&mut self) {
        // First, so that a cgroup move written outside the lock is made before this (and
        // undone below) or not at all.
        self.move_gate.close();
        self.groups.clear();
        self.adopt_unseen_children();
        for (_, o) in std::mem::take(&mut self.original) {
            restore_affinity(&o);
        }
        let moved = std::mem::take(&mut self.moved);
        for (p, origin) in moved.values() {
            if p.alive() {
                let _ = std::fs::write(origin.join("cgroup.procs"), p.pid().to_string());
            }
        }
        let own = self.hierarchy.as_ref().map(|h| h.own.clone());
        if let (Some(own), Confinement::CgroupV1(root) | Confinement::CgroupV2(root)) =
            (own, &self.confinement)
        {
            // Processes forked inside a partition cgroup go where their tracked ancestor came
            // from; anything else to the manager's own cgroup.
            for dir in self.cgroups.values() {
                for pid in cgroup::procs(dir) {
                    let to = origin_of(&moved, pid).unwrap_or_else(|| own.clone());
                    if let Ok(p) = ProcRef::open(pid) {
                        if p.alive() {
                            let _ = std::fs::write(to.join("cgroup.procs"), pid.to_string());
                        }
                    }
                }
            }
            if root.exists() {
                cgroup::drain_and_remove(root, &own);
            }
        }
        self.cgroups.clear();
        if let Some(dir) = self.added_subtree.take() {
            let _ = std::fs::write(dir.join("cgroup.subtree_control"), "-cpuset");
        }
        if let Some(j) = &mut self.journal {
            j.clear();
        }
    }

    fn partition_cgroup(&mut self, root: &Path, partition: &str) -> Result<PathBuf, SysError> {
        if let Some(d) = self.cgroups.get(partition) {
            return Ok(d.clone());
        }
        if !root.exists() {
            if let (Confinement::CgroupV2(_), Some(parent)) = (&self.confinement, root.parent()) {
                let ctl = parent.join("cgroup.subtree_control");
                let had = std::fs::read_to_string(&ctl).unwrap_or_default();
                if !had.split_whitespace().any(|c| c == "cpuset") {
                    if let Some(j) = &mut self.journal {
                        j.subtree(parent);
                    }
                    if let Err(e) = sys::write_file(&ctl, "+cpuset") {
                        if let Some(j) = &mut self.journal {
                            j.subtree_not_added();
                        }
                        return Err(e);
                    }
                    self.added_subtree = Some(parent.to_path_buf());
                }
            }
            if let Some(j) = &mut self.journal {
                j.root(root);
            }
            std::fs::create_dir(root).map_err(|source| SysError {
                call: format!("mkdir {}", root.display()),
                source,
            })?;
            self.init_cpuset(root)?;
        }
        let dir = root.join(cgroup::encode_name(partition));
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
            Confinement::CgroupV2(root) => {
                // Below a cgroup with processes (the manager's own, unless it is the
                // hierarchy's root) enabling cpuset made that cgroup a thread root: children
                // must be threaded (they stay in its resource domain, so a process moved in
                // keeps its memory and pids limits).
                if self
                    .hierarchy
                    .as_ref()
                    .is_some_and(|h| cgroup::mount_of(&h.own) != h.own)
                {
                    sys::write_file(&dir.join("cgroup.type"), "threaded")?;
                }
                // Our own root has no processes, so it may enable cpuset for its children.
                if dir == root {
                    sys::write_file(&dir.join("cgroup.subtree_control"), "+cpuset")?;
                }
                sys::write_file(&dir.join("cpuset.cpus"), &self.managed.to_string())
            }
            Confinement::Affinity => Ok(()),
        }
    }

    fn set_cgroup_cpus(&self, dir: &Path, cpus: &CpuSet) -> Result<(), SysError> {
        sys::write_file(&dir.join("cpuset.cpus"), &cpus.to_string())
    }
}

/// The error for a process that is gone.
fn gone(p: &ProcRef) -> SysError {
    SysError {
        call: format!("sched_setaffinity({})", p.pid()),
        source: std::io::Error::from_raw_os_error(libc::ESRCH),
    }
}

/// Set every thread of `p` to `set`; with `only_outside`, only threads with a CPU outside
/// it. Returns `set`, or the first error after trying all (a thread that exited after the
/// listing is not one: nothing left to confine).
fn set_threads(p: &ProcRef, set: &CpuSet, only_outside: bool) -> Result<CpuSet, SysError> {
    let mut first_err = None;
    for tid in sys::threads(p.pid()).unwrap_or_default() {
        if !p.alive() {
            return Err(gone(p));
        }
        let inside = |m: CpuSet| m.iter().all(|c| set.contains(c));
        if only_outside && sys::get_affinity(tid).is_ok_and(inside) {
            continue;
        }
        match sys::set_affinity(tid, set) {
            Err(e) if e.source.raw_os_error() == Some(libc::ESRCH) => {}
            Err(e) => {
                first_err.get_or_insert(e.into());
            }
            Ok(()) => {}
        }
    }
    first_err.map_or(Ok(*set), Err)
}

/// Every thread of the process back to its original mask, if it is still the same process.
fn restore_affinity(o: &Original) {
    for tid in sys::threads(o.proc.pid()).unwrap_or_default() {
        if o.proc.alive() {
            let _ = sys::set_affinity(tid, &o.mask);
        }
    }
}

/// The origin cgroup of `pid` or of its nearest tracked ancestor.
fn origin_of(moved: &BTreeMap<i32, (ProcRef, PathBuf)>, pid: i32) -> Option<PathBuf> {
    let mut cur = pid;
    for _ in 0..64 {
        if let Some((_, o)) = moved.get(&cur) {
            return Some(o.clone());
        }
        cur = sys::parent_pid(cur).filter(|&p| p > 0)?;
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
