//! Pinning a thread of the pool to the CPU set of its allocation: the workers pin themselves
//! at their safe points; the manager client pins its own threads (the client and the socket
//! watch) by thread id. The syscalls are partita-protocol's (`sys::set_affinity`,
//! `sys::get_affinity`, the workspace's one wrapper); this module holds the runtime's rule of
//! where a worker may run.

use partita_protocol::sys::{get_affinity, set_affinity};
use partita_protocol::{CpuSet, MAX_CPUS};

/// A failed affinity change.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AffinityError {
    /// A CPU index does not fit the kernel's CPU mask.
    #[error("sched_setaffinity: CPU {0} is out of range")]
    OutOfRange(usize),
    /// The kernel refused the mask (e.g. no allowed CPU is online); names the call.
    #[error(transparent)]
    Syscall(#[from] partita_protocol::sys::AffinityError),
}

/// The CPUs the calling thread may run on now (`sched_getaffinity`): what `taskset`, a
/// container or a cgroup cpuset allows. A pool reads it once when it starts and never pins a
/// worker outside it. Every configured CPU if the call fails.
pub(crate) fn allowed_cpus() -> Vec<usize> {
    match get_affinity(0) {
        Ok(set) => set.to_vec(),
        Err(_) => (0..configured_cpus()).collect(),
    }
}

/// The CPUs a worker runs on while its pool is allocated `cpus` (`None` or empty: no
/// allocation, its starting mask `allowed`): [`partita_protocol::CpuSet::narrowed`], the manager's rule for
/// every process it confines (docs/design/manager.md, "No process escapes its program's
/// allocation") — it narrows the process's threads there itself, so a pool that pinned back
/// to its own mask would only fight it.
pub(crate) fn worker_cpus(cpus: Option<&[usize]>, allowed: &[usize]) -> Vec<usize> {
    let Some(cpus) = cpus.filter(|c| !c.is_empty()) else {
        return allowed.to_vec();
    };
    let set = |v: &[usize]| v.iter().copied().collect::<CpuSet>();
    set(cpus).narrowed(&set(allowed)).iter().collect()
}

/// Confine the calling thread to [`worker_cpus`]`(cpus, allowed)`: [`pin_thread`] of itself.
pub(crate) fn pin_current_thread(
    cpus: Option<&[usize]>,
    allowed: &[usize],
) -> Result<(), AffinityError> {
    pin_thread(0, cpus, allowed)
}

/// Confine thread `tid` of this process (0: the calling thread) to
/// [`worker_cpus`]`(cpus, allowed)`. When that lies outside `allowed` and the kernel refuses
/// it (a cpuset cgroup allows none of those CPUs), to `allowed`: the pool keeps running where
/// it may.
pub(crate) fn pin_thread(
    tid: i32,
    cpus: Option<&[usize]>,
    allowed: &[usize],
) -> Result<(), AffinityError> {
    // Out of the kernel's range is an error, not a CPU the allocation silently loses.
    if let Some(&c) = cpus.into_iter().flatten().find(|&&c| c >= MAX_CPUS) {
        return Err(AffinityError::OutOfRange(c));
    }
    let wanted = worker_cpus(cpus, allowed);
    match set_thread(tid, &wanted) {
        Err(AffinityError::Syscall(e))
            if e.source.raw_os_error() == Some(libc::EINVAL)
                && wanted.iter().all(|c| !allowed.contains(c)) =>
        {
            set_thread(tid, allowed)
        }
        r => r,
    }
}

/// The calling thread's id (what [`pin_thread`] takes to pin it from another thread).
pub(crate) fn current_tid() -> i32 {
    nix::unistd::gettid().as_raw()
}

fn set_thread(tid: i32, cpus: &[usize]) -> Result<(), AffinityError> {
    if let Some(&c) = cpus.iter().find(|&&c| c >= MAX_CPUS) {
        return Err(AffinityError::OutOfRange(c));
    }
    Ok(set_affinity(tid, &cpus.iter().copied().collect())?)
}

fn configured_cpus() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) };
    if n > 0 {
        n as usize
    } else {
        1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pin_and_unpin_current_thread() {
        std::thread::spawn(|| {
            let all: Vec<usize> = (0..configured_cpus()).collect();
            pin_current_thread(Some(&[0]), &all).unwrap();
            assert_eq!(allowed_cpus(), vec![0]);
            pin_current_thread(None, &all).unwrap();
            assert!(allowed_cpus().contains(&0));
            // Never beyond the allowed mask, whatever the manager says.
            pin_current_thread(None, &[0]).unwrap();
            assert_eq!(allowed_cpus(), vec![0]);
            pin_current_thread(Some(&all), &[0]).unwrap();
            assert_eq!(allowed_cpus(), vec![0]);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn worker_cpus_follow_the_managers_rule() {
        // Allocated CPUs the starting mask allows; all of them when it allows none.
        assert_eq!(worker_cpus(Some(&[0, 1]), &[1, 2, 3]), vec![1]);
        assert_eq!(worker_cpus(Some(&[0]), &[1]), vec![0]);
        assert_eq!(worker_cpus(None, &[1, 2]), vec![1, 2]);
        assert_eq!(worker_cpus(Some(&[]), &[1, 2]), vec![1, 2]);
    }

    #[test]
    fn a_disjoint_allocation_wins_over_the_starting_mask() {
        if configured_cpus() < 2 {
            return; // needs two CPUs to be disjoint
        }
        std::thread::spawn(|| {
            // Started on CPU 0, allocated CPU 1 only: the worker goes where the manager
            // confines the process (it would otherwise be pinned back, against the manager).
            pin_current_thread(Some(&[1]), &[0]).unwrap();
            assert_eq!(allowed_cpus(), vec![1]);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn another_thread_is_pinned_by_its_id() {
        if configured_cpus() < 2 {
            return;
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            tx.send(current_tid()).unwrap();
            wait.recv().unwrap();
            allowed_cpus()
        });
        let tid = rx.recv().unwrap();
        let before = allowed_cpus();
        let all: Vec<usize> = (0..configured_cpus()).collect();
        pin_thread(tid, Some(&[1]), &all).unwrap();
        go.send(()).unwrap();
        assert_eq!(t.join().unwrap(), vec![1]);
        assert_eq!(allowed_cpus(), before, "the caller itself is left alone");
    }

    #[test]
    fn out_of_range_is_an_error() {
        let err = pin_current_thread(Some(&[1 << 20]), &[0]).unwrap_err();
        assert!(err.to_string().contains("sched_setaffinity"));
    }
}
