//! A thread's CPU affinity (`sched_getaffinity`, `sched_setaffinity`): the one wrapper of
//! the workspace. The manager confines processes with it, the runtime pins its workers and
//! client threads, the jobserver confines its build's tree, and partita-numa first-touches
//! pages from a node's CPUs. It lives here, in the lowest crate of ours that has syscalls,
//! because every one of those crates may depend on partita-protocol without a cycle
//! (partita-protocol depends on none of ours; docs/design/README.md §Layout lists the
//! order), and the set it takes is the protocol's [`CpuSet`], the one the manager publishes.

use crate::{CpuSet, MAX_CPUS};
use std::io;

// Every CPU a `CpuSet` can hold fits the kernel's mask: no CPU is silently dropped.
const _: () = assert!(MAX_CPUS <= libc::CPU_SETSIZE as usize);

/// A failed affinity call, naming the call and the thread.
///
/// ```
/// let e = partita_protocol::sys::set_affinity(0, &partita_protocol::CpuSet::new()).unwrap_err();
/// assert_eq!(e.to_string(), "sched_setaffinity(0): Invalid argument (os error 22)");
/// ```
#[derive(Debug, thiserror::Error)]
#[error("{call}({tid}): {source}")]
pub struct AffinityError {
    /// `sched_setaffinity` or `sched_getaffinity`.
    pub call: &'static str,
    /// The thread (0: the calling thread).
    pub tid: i32,
    /// What the kernel answered (`EINVAL` also for an empty set; `ESRCH` for a thread that
    /// is gone).
    pub source: io::Error,
}

/// The CPUs thread `tid` (0: the calling thread) may run on.
///
/// ```
/// let s = partita_protocol::sys::get_affinity(0).unwrap();
/// assert!(!s.is_empty());
/// ```
pub fn get_affinity(tid: i32) -> Result<CpuSet, AffinityError> {
    // SAFETY: cpu_set_t is plain bits; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid cpu_set_t of the size passed.
    let r =
        unsafe { libc::sched_getaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if r != 0 {
        return Err(AffinityError {
            call: "sched_getaffinity",
            tid,
            source: io::Error::last_os_error(),
        });
    }
    Ok((0..MAX_CPUS)
        .filter(|&c| {
            // SAFETY: c < MAX_CPUS <= CPU_SETSIZE, within the set.
            unsafe { libc::CPU_ISSET(c, &set) }
        })
        .collect())
}

/// Confine thread `tid` (0: the calling thread) to `cpus`. An empty set is refused
/// (`EINVAL`), as is a set with no CPU the thread's cpuset allows.
///
/// ```
/// use partita_protocol::sys::{get_affinity, set_affinity};
/// let s = get_affinity(0).unwrap();
/// set_affinity(0, &s).unwrap();
/// assert!(set_affinity(0, &partita_protocol::CpuSet::new()).is_err());
/// ```
pub fn set_affinity(tid: i32, cpus: &CpuSet) -> Result<(), AffinityError> {
    let err = |source| AffinityError {
        call: "sched_setaffinity",
        tid,
        source,
    };
    if cpus.is_empty() {
        return Err(err(io::Error::from_raw_os_error(libc::EINVAL)));
    }
    // SAFETY: cpu_set_t is plain bits; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for c in cpus.iter() {
        // SAFETY: c < MAX_CPUS <= CPU_SETSIZE, within the set.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: `set` is a valid cpu_set_t of the size passed.
    let r = unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if r != 0 {
        return Err(err(io::Error::last_os_error()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_that_is_gone_is_named_with_the_call() {
        // Thread ids are below pid_max (at most 2^22): i32::MAX is never a thread.
        let e = get_affinity(i32::MAX).unwrap_err();
        assert_eq!(e.source.raw_os_error(), Some(libc::ESRCH));
        assert!(
            e.to_string().starts_with("sched_getaffinity(2147483647): "),
            "{e}"
        );
        let e = set_affinity(i32::MAX, &get_affinity(0).unwrap()).unwrap_err();
        assert_eq!(e.source.raw_os_error(), Some(libc::ESRCH));
        assert!(
            e.to_string().starts_with("sched_setaffinity(2147483647): "),
            "{e}"
        );
    }

    #[test]
    fn a_thread_pinned_to_one_allowed_cpu_reads_it_back() {
        let all = get_affinity(0).unwrap();
        let one: CpuSet = all.iter().take(1).collect();
        // On a thread of its own, so the test harness's thread keeps its mask.
        std::thread::spawn(move || {
            set_affinity(0, &one).unwrap();
            assert_eq!(get_affinity(0).unwrap(), one);
        })
        .join()
        .unwrap();
    }
}
