//! Pinning a worker to the CPU set of its allocation (`sched_setaffinity` on the calling
//! thread). The only syscall wrapper of the runtime; errors name the call.

use nix::sched::{sched_setaffinity, CpuSet};
use nix::unistd::Pid;

/// A failed affinity change.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AffinityError {
    /// A CPU index does not fit the kernel's CPU mask.
    #[error("sched_setaffinity: CPU {0} is out of range")]
    OutOfRange(usize),
    /// The kernel refused the mask (e.g. no allowed CPU is online).
    #[error("sched_setaffinity failed: {0}")]
    Syscall(#[from] nix::Error),
}

/// The CPUs the calling thread may run on now (`sched_getaffinity`): what `taskset`, a
/// container or a cgroup cpuset allows. A pool reads it once when it starts and never pins a
/// worker outside it. Every configured CPU if the call fails.
pub(crate) fn allowed_cpus() -> Vec<usize> {
    match nix::sched::sched_getaffinity(Pid::from_raw(0)) {
        Ok(set) => (0..CpuSet::count())
            .filter(|&c| set.is_set(c).unwrap_or(false))
            .collect(),
        Err(_) => (0..configured_cpus()).collect(),
    }
}

/// Confine the calling thread to `cpus` ∩ `allowed`, or to `allowed` when `cpus` is `None`
/// or the intersection is empty (a manager's set is never allowed to widen the pool beyond
/// the mask it started with).
pub(crate) fn pin_current_thread(
    cpus: Option<&[usize]>,
    allowed: &[usize],
) -> Result<(), AffinityError> {
    let mut set = CpuSet::new();
    let mut any = false;
    for &c in cpus.unwrap_or(&[]) {
        if allowed.contains(&c) {
            set.set(c).map_err(|_| AffinityError::OutOfRange(c))?;
            any = true;
        } else if c >= CpuSet::count() {
            return Err(AffinityError::OutOfRange(c));
        }
    }
    if !any {
        for &c in allowed {
            set.set(c).map_err(|_| AffinityError::OutOfRange(c))?;
        }
    }
    sched_setaffinity(Pid::from_raw(0), &set)?;
    Ok(())
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
            let set = nix::sched::sched_getaffinity(Pid::from_raw(0)).unwrap();
            assert!(set.is_set(0).unwrap());
            for c in 1..configured_cpus() {
                assert!(!set.is_set(c).unwrap());
            }
            pin_current_thread(None, &all).unwrap();
            let set = nix::sched::sched_getaffinity(Pid::from_raw(0)).unwrap();
            assert!(set.is_set(0).unwrap());
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
    fn out_of_range_is_an_error() {
        let err = pin_current_thread(Some(&[1 << 20]), &[0]).unwrap_err();
        assert!(err.to_string().contains("sched_setaffinity"));
    }
}
