//! Moving a `partita run` program into its partition's cpuset cgroup, in three steps so the
//! slow one runs outside the enforcer's lock.
//!
//! A write to `cgroup.procs` waits for an RCU grace period in the kernel (cgroup v1, and v2
//! without `favordynmods`: `cgroup_procs_write_start` → `rcu_sync_enter` →
//! `synchronize_rcu`), up to 3.2 s on this machine under load. Under the enforcer's lock that
//! wait stalled every status request, confinement and reallocation (docs/bench/manager.md §6).
//!
//! 1. [`Enforcer::prepare_uncontrolled`], under the lock: create the partition's cgroup with
//!    its CPUs, journal the move (before it is made, for a SIGKILLed manager's successor) and
//!    record it, so that a restore that runs from now on moves the process back.
//! 2. [`PendingMove::write`], outside it: the write, under the [`MoveGate`] only.
//! 3. [`Enforcer::finish_uncontrolled`], under the lock again: on failure forget the move and
//!    confine by affinity instead (or report the process gone).
//!
//! Why nothing survives a shutdown in between: [`Enforcer::restore_all`] first closes the
//! gate, which waits for a write in flight; a write that comes later finds it closed and is
//! not made. So the process is either moved before the restore (which moves it back, the move
//! being recorded in step 1) or not at all.

use super::{Confinement, Enforcer, Mode};
use crate::cgroup;
use crate::proc_ref::ProcRef;
use crate::sys::{self, SysError};
use partita_protocol::CpuSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Closed by [`Enforcer::restore_all`]; held by a cgroup write in flight.
#[derive(Debug, Clone, Default)]
pub(crate) struct MoveGate(Arc<Mutex<bool>>);

impl MoveGate {
    /// Close the gate, after the write in flight (if any) is done.
    pub(crate) fn close(&self) {
        *crate::sync::lock(&self.0) = true;
    }
}

/// A move into a partition cgroup, recorded but not yet made.
#[derive(Debug)]
pub struct PendingMove {
    dir: PathBuf,
    proc: ProcRef,
    partition: String,
    cpus: CpuSet,
    gate: MoveGate,
}

impl PendingMove {
    /// Write the process into its cgroup, unless the enforcer restored everything meanwhile.
    /// Takes no lock of the manager's but the gate.
    pub fn write(&self) -> Result<(), SysError> {
        let procs = self.dir.join("cgroup.procs");
        let closed = crate::sync::lock(&self.gate.0);
        if *closed || !self.proc.alive() {
            let errno = if *closed {
                libc::ECANCELED
            } else {
                libc::ESRCH
            };
            return Err(SysError {
                call: format!("write {}", procs.display()),
                source: std::io::Error::from_raw_os_error(errno),
            });
        }
        sys::write_file(&procs, &self.proc.pid().to_string())
    }
}

/// What [`Enforcer::prepare_uncontrolled`] decided.
#[derive(Debug)]
pub enum Prepared {
    /// Confined already (by affinity), or failed: the result.
    Done(Result<CpuSet, SysError>),
    /// A cgroup move: [`PendingMove::write`] it, then [`Enforcer::finish_uncontrolled`].
    Move(PendingMove),
}

impl Enforcer {
    /// Confine an uncontrolled process (started with `partita run`) to its partition's CPUs:
    /// the partition's cgroup, created on first use, if the process's own cgroup contains
    /// the manager's; affinity otherwise. Returns the set applied. The three steps in one
    /// (the daemon runs the cgroup write outside the enforcer's lock; see the module).
    ///
    /// ```
    /// use partita_manager::{enforce::Enforcer, proc_ref::ProcRef, sys};
    /// let mine = sys::get_affinity(0).unwrap();
    /// let mut e = Enforcer::new(false, mine);
    /// let mut child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
    /// let p = ProcRef::open(child.id() as i32).unwrap();
    /// e.confine_uncontrolled("default", &p, &mine).unwrap();
    /// e.restore_all();
    /// child.kill().unwrap();
    /// child.wait().unwrap();
    /// ```
    pub fn confine_uncontrolled(
        &mut self,
        partition: &str,
        proc: &ProcRef,
        cpus: &CpuSet,
    ) -> Result<CpuSet, SysError> {
        match self.prepare_uncontrolled(partition, proc, cpus) {
            Prepared::Done(r) => r,
            Prepared::Move(mv) => {
                let written = mv.write();
                self.finish_uncontrolled(mv, written)
            }
        }
    }

    /// Step 1: confine by affinity at once, or record a cgroup move to be written.
    pub fn prepare_uncontrolled(
        &mut self,
        partition: &str,
        proc: &ProcRef,
        cpus: &CpuSet,
    ) -> Prepared {
        let root = match &self.confinement {
            Confinement::Affinity => None,
            Confinement::CgroupV1(r) | Confinement::CgroupV2(r) => Some(r.clone()),
        };
        let one = std::slice::from_ref(proc);
        let (Some(root), Some(h)) = (root, self.hierarchy.clone()) else {
            return Prepared::Done(self.confine_group(partition, one, cpus, Mode::Apply));
        };
        let mount = cgroup::mount_of(&h.own);
        let origin = cgroup::cgroup_of(&h, &mount, proc.pid());
        let Some(origin) = origin.filter(|o| root.starts_with(o)) else {
            // Moving it would take it out of its own cgroup's limits: affinity instead.
            return Prepared::Done(self.confine_group(partition, one, cpus, Mode::Apply));
        };
        match self.record_move(&root, partition, proc, cpus, origin) {
            Ok(dir) => Prepared::Move(PendingMove {
                dir,
                proc: proc.clone(),
                partition: partition.to_string(),
                cpus: *cpus,
                gate: self.move_gate.clone(),
            }),
            Err(e) => Prepared::Done(self.refused(partition, proc, cpus, e)),
        }
    }

    /// Step 3: the write's outcome. A refused move forgets the record and confines by
    /// affinity instead.
    pub fn finish_uncontrolled(
        &mut self,
        mv: PendingMove,
        written: Result<(), SysError>,
    ) -> Result<CpuSet, SysError> {
        match written {
            Ok(()) => Ok(mv.cpus),
            Err(e) => {
                let pid = mv.proc.pid();
                self.moved.remove(&pid);
                if let Some(j) = &mut self.journal {
                    j.forget(pid);
                }
                self.refused(&mv.partition, &mv.proc, &mv.cpus, e)
            }
        }
    }

    /// The partition's cgroup (created with `cpus`), and the move journalled and recorded.
    fn record_move(
        &mut self,
        root: &Path,
        partition: &str,
        proc: &ProcRef,
        cpus: &CpuSet,
        origin: PathBuf,
    ) -> Result<PathBuf, SysError> {
        let dir = self.partition_cgroup(root, partition)?;
        self.set_cgroup_cpus(&dir, cpus)?;
        if !proc.alive() {
            return Err(SysError {
                call: format!("write {}", dir.join("cgroup.procs").display()),
                source: std::io::Error::from_raw_os_error(libc::ESRCH),
            });
        }
        self.prune_dead();
        if let Some(j) = &mut self.journal {
            j.moved(proc, &origin);
        }
        self.moved.insert(proc.pid(), (proc.clone(), origin));
        Ok(dir)
    }

    /// A hierarchy that refuses (say, domain controllers delegated below the manager's
    /// cgroup): the process is still confined, by affinity. A process gone is an error.
    fn refused(
        &mut self,
        partition: &str,
        proc: &ProcRef,
        cpus: &CpuSet,
        e: SysError,
    ) -> Result<CpuSet, SysError> {
        if !proc.alive() {
            return Err(e);
        }
        tracing::warn!(pid = proc.pid(), error = %e, "cannot use the cpuset cgroup; confining by affinity");
        self.confine_group(partition, std::slice::from_ref(proc), cpus, Mode::Apply)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Child, Command};

    /// This process's cpuset cgroup (v1), e.g. "/".
    fn cpuset_of(pid: u32) -> String {
        let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
        text.lines()
            .find_map(|l| {
                let mut f = l.splitn(3, ':');
                let (_, ctl, path) = (f.next()?, f.next()?, f.next()?);
                ctl.split(',')
                    .any(|c| c == "cpuset")
                    .then(|| path.to_string())
            })
            .unwrap_or_default()
    }

    /// Enforcers of one process share its cgroup directory: one test at a time.
    static SERIAL: Mutex<()> = Mutex::new(());

    /// An enforcer on the v1 cpuset hierarchy, or `None` where the test cannot run (not
    /// root, no v1 cpuset, or this process not in the hierarchy's root).
    fn v1_enforcer() -> Option<Enforcer> {
        let all = sys::get_affinity(0).ok()?;
        let e = Enforcer::new(true, all);
        (matches!(e.confinement, Confinement::CgroupV1(_)) && cpuset_of(std::process::id()) == "/")
            .then_some(e)
    }

    fn sleeper() -> (Child, ProcRef) {
        let child = Command::new("sleep").arg("30").spawn().unwrap();
        let p = ProcRef::open(child.id() as i32).unwrap();
        (child, p)
    }

    #[test]
    fn a_move_is_written_outside_and_undone_by_the_restore() {
        let _s = crate::sync::lock(&SERIAL);
        let Some(mut e) = v1_enforcer() else { return };
        let (mut child, p) = sleeper();
        let all = e.managed;
        let Prepared::Move(mv) = e.prepare_uncontrolled("migrate-a", &p, &all) else {
            panic!("a process in the root cgroup is moved by cgroup");
        };
        // Recorded, not yet made: the process is where it was.
        assert_eq!(cpuset_of(child.id()), "/");
        let written = mv.write();
        assert_eq!(e.finish_uncontrolled(mv, written).unwrap(), all);
        assert!(cpuset_of(child.id()).ends_with("/migrate-a"));
        e.restore_all();
        assert_eq!(cpuset_of(child.id()), "/");
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn a_move_prepared_before_the_restore_is_never_made() {
        let _s = crate::sync::lock(&SERIAL);
        let Some(mut e) = v1_enforcer() else { return };
        let (mut child, p) = sleeper();
        let all = e.managed;
        let Prepared::Move(mv) = e.prepare_uncontrolled("migrate-b", &p, &all) else {
            panic!("a process in the root cgroup is moved by cgroup");
        };
        e.restore_all();
        let err = mv.write().unwrap_err();
        assert_eq!(err.source.raw_os_error(), Some(libc::ECANCELED), "{err}");
        assert_eq!(cpuset_of(child.id()), "/", "moved after the restore");
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
