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

/// Confine the calling thread to `cpus`, or to every CPU when `None`.
pub(crate) fn pin_current_thread(cpus: Option<&[usize]>) -> Result<(), AffinityError> {
    let mut set = CpuSet::new();
    match cpus {
        Some(cpus) => {
            for &c in cpus {
                set.set(c).map_err(|_| AffinityError::OutOfRange(c))?;
            }
        }
        None => {
            let n = std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
                .max(configured_cpus());
            for c in 0..n.min(CpuSet::count()) {
                set.set(c).map_err(|_| AffinityError::OutOfRange(c))?;
            }
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
            pin_current_thread(Some(&[0])).unwrap();
            let set = nix::sched::sched_getaffinity(Pid::from_raw(0)).unwrap();
            assert!(set.is_set(0).unwrap());
            for c in 1..configured_cpus() {
                assert!(!set.is_set(c).unwrap());
            }
            pin_current_thread(None).unwrap();
            let set = nix::sched::sched_getaffinity(Pid::from_raw(0)).unwrap();
            assert!(set.is_set(0).unwrap());
        })
        .join()
        .unwrap();
    }

    #[test]
    fn out_of_range_is_an_error() {
        let err = pin_current_thread(Some(&[1 << 20])).unwrap_err();
        assert!(err.to_string().contains("sched_setaffinity"));
    }
}
