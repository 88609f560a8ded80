//! Where and at what priority the mover's thread moves pages: on a CPU of the destination
//! node, above the applications' workers there. The copy is the application's cost (as the
//! kernel's own NUMA balancing migrates in the faulting task's context), so it is taken from
//! the node the application now runs on rather than from whichever CPU the scheduler picked
//! (another application's, possibly), and the copy's writes are local to that CPU.

use partita_protocol::CpuSet;

/// The nice value of the mover's thread (the applications' workers run at 0): about nine
/// tenths of a CPU it shares with one busy worker.
pub const NICE: i32 = -10;

/// Gives the calling thread [`NICE`] (needs `CAP_SYS_NICE`); the error otherwise.
pub fn raise_priority() -> Result<(), crate::sys::SysError> {
    crate::sys::set_thread_nice(NICE)
}

/// The CPUs of `node` (`/sys/devices/system/node/nodeN/cpulist`); empty when unknown.
pub fn node_cpus(node: u32) -> CpuSet {
    let path = format!("/sys/devices/system/node/node{node}/cpulist");
    let mut set = CpuSet::new();
    let list = std::fs::read_to_string(path).unwrap_or_default();
    for c in partita_numa::parse_cpu_list(list.trim()).unwrap_or_default() {
        set.insert(c as usize);
    }
    set
}

/// While it lives, the calling thread runs on `node`'s CPUs (those of them it may use);
/// its affinity is restored when dropped. Does nothing when that set would be empty or the
/// calls fail (the move then runs wherever the thread is).
pub struct OnNode {
    saved: Option<CpuSet>,
}

impl OnNode {
    /// Moves the calling thread to `node`'s CPUs.
    pub fn enter(node: u32) -> OnNode {
        let Ok(own) = crate::sys::get_affinity(0) else {
            return OnNode { saved: None };
        };
        let there: CpuSet = node_cpus(node)
            .iter()
            .filter(|c| own.contains(*c))
            .collect();
        if there.is_empty() || there == own || crate::sys::set_affinity(0, &there).is_err() {
            return OnNode { saved: None };
        }
        OnNode { saved: Some(own) }
    }
}

impl Drop for OnNode {
    fn drop(&mut self) {
        if let Some(own) = &self.saved {
            let _ = crate::sys::set_affinity(0, own);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn on_node_runs_there_and_restores_the_affinity() {
        let own = crate::sys::get_affinity(0).unwrap();
        let node0 = node_cpus(0);
        assert!(!node0.is_empty(), "node 0 has CPUs");
        {
            let _there = OnNode::enter(0);
            let now = crate::sys::get_affinity(0).unwrap();
            assert!(now.iter().all(|c| node0.contains(c) && own.contains(c)));
        }
        assert_eq!(crate::sys::get_affinity(0).unwrap(), own);
        // A node that does not exist changes nothing.
        drop(OnNode::enter(4000));
        assert_eq!(crate::sys::get_affinity(0).unwrap(), own);
        assert!(node_cpus(4000).is_empty());
    }
}
