//! The pool's own per-worker memory on its worker's node (issue 14, "the pool's own
//! structures allocated node-locally").
//!
//! What a worker touches for every task is (a) its stack: the frames of the tasks it runs and
//! its `WorkerThread` (the owner's handle of its deque, its FIFO, victim RNG and ready-queue
//! cursors), with glibc also its thread-locals at the top of the same mapping; (b) its
//! counters slot (`Registry::counters`, one page per worker, `page_aligned.rs`, so no two
//! workers' counters share a page); and (c) its deque (`crate::deque`): the shared page with
//! `front`, `back` and the ring pointer, and its rings, each whole pages of their own, built
//! by the worker on its own thread when it starts. Each worker registers those pages as its
//! *home* when it starts ([`enter`], called from the worker thread), so the first touch of
//! its stack and deque is its own; the follower thread (`mover.rs`) moves homes together
//! with the registered memory whenever the manager moves the pool to another node — before
//! the data, since they are hotter — so a worker placed (or moved) on a node finds its own
//! pages there within the follower's settle time. The deque's rings are listed afresh at
//! each pass (it may have grown; a new ring is first touched by its owner). A worker that
//! exits unregisters its home first ([`HomeGuard`]).
//!
//! Not covered: the worker's broadcast queue (built with the pool, by the thread that builds
//! it, and touched once per `broadcast`), the ready queues and the sleep state (shared by all
//! workers by design, so no one node is theirs), and the heap jobs a worker allocates (the
//! allocator's, first-touched by the worker that spawns them).

use std::sync::Arc;

use partita_numa::{PageRange, PageStatus};

use super::PoolNuma;
use crate::control::ProcessControl;
use crate::deque::Stealer;
use crate::job::JobRef;
use crate::registry::Registry;

/// The registered pages of one worker's own structures.
#[derive(Clone, Debug)]
pub(crate) struct Home {
    pub(crate) worker: usize,
    /// Fixed parts: stack, thread-locals, counters slot.
    fixed: Vec<(&'static str, PageRange)>,
    /// The worker's deque, whose buffers grow: its pages are listed at each use.
    deque: Option<Stealer<JobRef>>,
}

impl Home {
    /// Every part, the deque's shared page (`deque`) and rings (`deque-ring`) as they are now.
    pub(crate) fn parts(&self) -> Vec<(&'static str, PageRange)> {
        let mut out = self.fixed.clone();
        if let Some(d) = &self.deque {
            for (i, (addr, len)) in d.pages().into_iter().enumerate() {
                if let Ok(r) = PageRange::new(addr, len) {
                    out.push((if i == 0 { "deque" } else { "deque-ring" }, r));
                }
            }
        }
        out
    }
}

/// Unregisters a worker's home when the worker leaves its main loop (its stack goes soon
/// after, and the follower must not touch it then).
pub(crate) struct HomeGuard {
    numa: Arc<PoolNuma>,
    worker: usize,
}

impl Drop for HomeGuard {
    fn drop(&mut self) {
        // Under the homes lock: a pass that is moving these pages finishes first.
        self.numa.lock_homes().retain(|h| h.worker != self.worker);
    }
}

thread_local! {
    /// Its address locates this thread's static TLS block.
    static TLS_PROBE: u8 = const { 0 };
}

/// Registers the calling worker's home (stack, thread-locals, counters slot, deque) with its pool
/// and makes sure the follower runs. `None` where following does nothing: one node, a pool
/// that opted out, a pool no manager places (only a manager moves CPU sets), or an
/// unreadable stack (said in the log).
pub(crate) fn enter(registry: &Arc<Registry>, index: usize) -> Option<HomeGuard> {
    let numa = &registry.numa;
    if !numa.follow
        || registry.control.mode != ProcessControl::Manager
        || numa.inactive_reason().is_some()
    {
        return None;
    }
    let stack = match partita_numa::current_thread_stack() {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(worker = index, error = %e, "numa: worker stack unknown; its home is not placed");
            return None;
        }
    };
    let mut parts = vec![("stack", stack)];
    let tls = TLS_PROBE.with(|p| p as *const u8 as usize);
    let ps = partita_numa::page_size();
    if !(stack.start()..stack.start() + stack.len()).contains(&tls) {
        if let Ok(r) = PageRange::new(tls - tls % ps, ps) {
            parts.push(("tls", r));
        }
    }
    if let Ok(r) = PageRange::covering(std::slice::from_ref(&registry.counters[index])) {
        parts.push(("counters", r));
    }
    let deque = registry.thread_infos[index].stealer().cloned();
    numa.lock_homes().push(Home {
        worker: index,
        fixed: parts,
        deque,
    });
    super::mover::ensure_follower(numa, Arc::downgrade(registry));
    Some(HomeGuard {
        numa: Arc::clone(numa),
        worker: index,
    })
}

/// Where one part of a worker's home is (`move_pages` query).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HomePart {
    /// `stack`, `tls`, `counters`, `deque` (its shared page) or `deque-ring` (one per ring).
    pub what: &'static str,
    /// Pages of the part.
    pub pages: usize,
    /// Pages present (faulted in).
    pub present: usize,
    /// `(node, pages)` for every node holding some of the present pages, by node.
    pub nodes: Vec<(u32, usize)>,
}

impl HomePart {
    /// Present pages on `node`.
    pub fn on(&self, node: u32) -> usize {
        self.nodes
            .iter()
            .find(|(n, _)| *n == node)
            .map_or(0, |(_, c)| *c)
    }
}

/// Where the pages of one worker's own structures are ([`crate::ThreadPool::worker_homes`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerHome {
    /// The worker's index.
    pub worker: usize,
    /// Its parts.
    pub parts: Vec<HomePart>,
}

/// Tallies a part's page statuses.
pub(crate) fn tally(what: &'static str, status: &[PageStatus]) -> HomePart {
    let mut nodes: Vec<(u32, usize)> = Vec::new();
    for n in status.iter().filter_map(|s| s.node()) {
        match nodes.iter_mut().find(|(m, _)| *m == n) {
            Some((_, c)) => *c += 1,
            None => nodes.push((n, 1)),
        }
    }
    nodes.sort_unstable();
    HomePart {
        what,
        pages: status.len(),
        present: nodes.iter().map(|(_, c)| c).sum(),
        nodes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_home_lists_its_deque_pages_as_they_grow() {
        let w = crate::deque::Worker::<JobRef>::new_lifo();
        let home = Home {
            worker: 0,
            fixed: Vec::new(),
            deque: Some(w.stealer()),
        };
        let names = |h: &Home| h.parts().iter().map(|(w, _)| *w).collect::<Vec<_>>();
        assert_eq!(names(&home), ["deque", "deque-ring"]);
        let latch = crate::latch::LockLatch::new();
        let job = crate::job::StackJob::new(|_| (), crate::latch::LatchRef::new(&latch));
        for _ in 0..1000 {
            // SAFETY: the refs are popped below and never executed; `job` outlives them.
            w.push(unsafe { job.as_job_ref() });
        }
        // 128 → 256 → 512 → 1024 slots: every ring is still listed (thieves may hold any).
        assert_eq!(
            names(&home),
            [
                "deque",
                "deque-ring",
                "deque-ring",
                "deque-ring",
                "deque-ring"
            ]
        );
        for (_, r) in home.parts() {
            assert_eq!(r.start() % 4096, 0);
        }
        while w.pop().is_some() {}
    }

    #[test]
    fn tally_counts_present_pages_by_node() {
        let st = [
            PageStatus::Node(1),
            PageStatus::NotPresent,
            PageStatus::Node(0),
            PageStatus::Node(1),
        ];
        let p = tally("stack", &st);
        assert_eq!((p.pages, p.present, p.on(1), p.on(0)), (4, 3, 2, 1));
        assert_eq!(p.nodes, vec![(0, 1), (1, 2)]);
    }
}
