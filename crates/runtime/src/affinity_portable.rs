//! The portable build's affinity: none. Re-pinning a worker to its allocation's CPUs is for
//! a manager's allocation, and the manager client is Linux-only (`affinity.rs` is the Linux
//! module); here no allocation ever arrives, so the workers run wherever the OS puts them.

/// A pin request the portable build cannot carry out.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AffinityError {
    /// Only reachable if a CPU set is ever given here (the manager client, which gives one,
    /// is not built).
    #[error("pinning a thread to CPUs {0:?} is Linux-only (sched_setaffinity)")]
    Unsupported(Vec<usize>),
}

/// The CPUs the pool may use: `0..available_parallelism` (std's count, which follows the
/// process's affinity or job limits where the OS has them).
pub(crate) fn allowed_cpus() -> Vec<usize> {
    (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect()
}

/// No allocation (`None` or empty) needs nothing; an allocation cannot be applied.
pub(crate) fn pin_current_thread(
    cpus: Option<&[usize]>,
    _allowed: &[usize],
) -> Result<(), AffinityError> {
    match cpus {
        Some(c) if !c.is_empty() => Err(AffinityError::Unsupported(c.to_vec())),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_allocation_is_fine_and_an_allocation_is_refused_with_the_call() {
        assert!(!allowed_cpus().is_empty());
        pin_current_thread(None, &allowed_cpus()).unwrap();
        pin_current_thread(Some(&[]), &allowed_cpus()).unwrap();
        let e = pin_current_thread(Some(&[0]), &[0]).unwrap_err();
        assert!(e.to_string().contains("sched_setaffinity"), "{e}");
    }
}
