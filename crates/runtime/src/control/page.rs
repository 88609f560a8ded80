//! The manager's control page as workers apply it: at a safe point, inside a wait, or suspended.
//!
//! The manager publishes a new allocation into the control page and wakes the pool's client
//! thread, which applies it (`set_target_workers`, `set_cpus`). On a machine whose CPUs are
//! all taken by workers, that thread's wake-up can wait for a CPU (p99 240–530 µs, hop "B
//! notices" of `cargo run --release --example reaction -- 300`, docs/bench/manager.md §2)
//! while the worker that must park is running anyway. So a worker also looks at the page at
//! each safe point of its main loop: one relaxed load of the page's seqlock epoch (a line the
//! manager writes only when the allocation changes) compared with the epoch this worker saw
//! last. When it moved, the worker applies the page itself, exactly as the client would
//! ([`ManagerPage::catch_up`], the code the client thread runs too), and then parks at once if the new target
//! excludes it. The client thread still wakes and finds the change applied.
//!
//! A worker waiting inside a job (`wait_until`) looks too, between the jobs it runs
//! meanwhile: it cannot park there, but it can apply the change, so a revocation's target is
//! set even while the job holding the worker lasts (the probe's rounds: ≈ 1 ms).
//!
//! Who applies is serialised by the page (`ManagerPage`'s lock over the allocation applied,
//! taken with `try_lock` by workers, so a safe point never blocks); whatever applies re-reads the page under it, so an older
//! allocation is never applied after a newer one, and none after the session ended (the
//! client then reverts the pool to standalone). The pool holds the live session's [`ManagerPage`]
//! ([`PageSlot`]); each worker keeps its own reference ([`PageView`]), refreshed when the
//! slot's generation moves, so the page stays mapped while a worker may read it.
//!
//! A *suspended* worker follows the page too, from its wait (`Sleep::suspend`): before each
//! wait it reads the page's futex word (`wake`), applies the page if its epoch moved, and
//! then blocks on its own wake-up word and on the page's word at once (`futex_waitv`). The
//! manager's `FUTEX_WAKE` after a grow therefore wakes the worker that is to resume directly,
//! and it applies the new target itself (which resumes it and the other workers the target
//! now includes), without waiting for the client thread to be scheduled: one thread wake-up
//! between the manager and a resumed worker instead of two. Reading the word before the
//! epoch is what makes it safe: the manager bumps the word after writing the epoch, so a
//! publish the look missed changes the word and the wait does not block. Without
//! `futex_waitv` (Linux < 5.16) suspended workers wait on their own word only and the client
//! thread resumes them, as before. While a suspended worker watches the page, the client
//! thread waits for its tick only ([`PageSlot::watched_by_a_worker`]): the watcher applies
//! every change, and a second woken thread would compete for a CPU just when a grow needs
//! one.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::ManagerPage;
use crate::registry::Registry;
use crate::worker::WorkerThread;

/// The live session's page, as the pool hands it to its workers (part of `Control`).
#[derive(Default)]
pub(crate) struct PageSlot {
    /// Bumped at every change of `watch`; workers compare it with their copy.
    generation: AtomicU64,
    watch: Mutex<Option<Arc<ManagerPage>>>,
    /// A watch is installed (read without the lock by target changes).
    live: AtomicBool,
    /// Suspended workers never watch the page (tests force the fallback with it).
    no_page_wait: AtomicBool,
    /// Suspended workers waiting on the page's word right now.
    watchers: AtomicUsize,
}

impl PageSlot {
    /// Install (`Some`) or remove the session's watch.
    pub(crate) fn set(&self, watch: Option<Arc<ManagerPage>>) {
        let mut w = self.watch.lock().unwrap_or_else(|p| p.into_inner());
        self.live.store(watch.is_some(), Ordering::Relaxed);
        *w = watch;
        // Under the lock: a worker that sees the new generation reads the new watch.
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// Suspended workers wait on the live session's page word too: a session is live and
    /// the kernel has `futex_waitv`.
    pub(crate) fn watched(&self) -> bool {
        // Relaxed: a stale answer only costs one wake-up, or one client-thread hop.
        self.live.load(Ordering::Relaxed) && self.page_wait()
    }

    /// A suspended worker waits on the page's word now: it will apply the next change, so
    /// the client thread need not wake for it (it waits for its tick instead). Advisory:
    /// a worker may resume (locally) just after; a change then waits for a running
    /// worker's safe point or the client's next tick.
    pub(crate) fn watched_by_a_worker(&self) -> bool {
        self.watchers.load(Ordering::Relaxed) > 0
    }

    fn page_wait(&self) -> bool {
        !self.no_page_wait.load(Ordering::Relaxed) && crate::sleep::page_wait_supported()
    }

    /// Make suspended workers of this pool wait on their own word only, as on a kernel
    /// without `futex_waitv` (for the fallback's tests).
    #[cfg(test)]
    pub(crate) fn force_fallback(&self) {
        self.no_page_wait.store(true, Ordering::Relaxed);
    }
}

/// The page's futex word, kept mapped by the watch it belongs to; a suspended worker is
/// counted as watching the page while it holds one (see [`PageSlot::watched_by_a_worker`]).
pub(crate) struct PageFutex<'a> {
    watch: Arc<ManagerPage>,
    watchers: &'a AtomicUsize,
}

impl<'a> PageFutex<'a> {
    fn new(watch: Arc<ManagerPage>, watchers: &'a AtomicUsize) -> Self {
        // Relaxed: the count only chooses how the client thread waits (a stale read costs
        // one redundant wake-up, or a page change left to a tick or a safe point).
        watchers.fetch_add(1, Ordering::Relaxed);
        PageFutex { watch, watchers }
    }
}

impl Drop for PageFutex<'_> {
    fn drop(&mut self) {
        self.watchers.fetch_sub(1, Ordering::Relaxed);
    }
}

impl std::ops::Deref for PageFutex<'_> {
    type Target = AtomicU32;
    fn deref(&self) -> &AtomicU32 {
        self.watch.futex()
    }
}

/// A worker's copy of the pool's page slot (only its worker touches it).
pub(crate) struct PageView {
    /// The `PageSlot` generation `watch` was taken at.
    generation: Cell<u64>,
    /// Keeps `word` valid.
    watch: RefCell<Option<Arc<ManagerPage>>>,
    /// `watch`'s word (null: no session).
    word: Cell<*const AtomicU64>,
    /// The word's value when this worker last caught up (or found nothing to do).
    seen: Cell<u64>,
}

impl Default for PageView {
    fn default() -> Self {
        PageView {
            generation: Cell::new(0),
            watch: RefCell::new(None),
            word: Cell::new(std::ptr::null()),
            seen: Cell::new(u64::MAX),
        }
    }
}

impl WorkerThread {
    /// Safe point: apply an allocation the manager published and the client thread has not
    /// applied yet. Two relaxed loads and two compares when nothing changed.
    #[inline]
    pub(crate) fn apply_page(&self) {
        let f = &self.page;
        if self
            .registry
            .control
            .page
            .generation
            .load(Ordering::Relaxed)
            != f.generation.get()
        {
            self.refresh_watch();
        }
        let word = f.word.get();
        if word.is_null() {
            return;
        }
        // SAFETY: `word` points into the watch held by `f.watch`, and both are replaced only
        // together, by this thread (`refresh_watch`); the watch lives while it is held.
        let now = unsafe { &*word }.load(Ordering::Relaxed);
        if now != f.seen.get() {
            self.catch_up(now);
        }
    }

    /// Between two waits of a suspended worker: the page's futex word to wait on as well, with
    /// its value read *before* applying any page change (so a publish after the look changes
    /// it), or `None` (no session, or no `futex_waitv`). Applies a changed page first, like a
    /// safe point; that may resume this worker (`set_target` notifies it).
    pub(crate) fn page_while_suspended(&self) -> Option<(PageFutex<'_>, u32)> {
        let slot = &self.registry.control.page;
        if slot.generation.load(Ordering::Relaxed) != self.page.generation.get() {
            self.refresh_watch();
        }
        let page = if slot.page_wait() {
            let w = self.page.watch.borrow().clone()?;
            // Acquire: pairs with the manager's Release bump after its epoch write, so the
            // epoch read below is at least as new as this value.
            let seen = w.futex().load(Ordering::Acquire);
            Some((PageFutex::new(w, &slot.watchers), seen))
        } else {
            None
        };
        self.apply_page();
        page
    }

    #[cold]
    fn refresh_watch(&self) {
        let slot = &self.registry.control.page;
        let (generation, w) = {
            let w = slot.watch.lock().unwrap_or_else(|p| p.into_inner());
            // Under the lock, as its writer bumps it: the pair is consistent.
            (slot.generation.load(Ordering::Relaxed), w.clone())
        };
        let f = &self.page;
        f.generation.set(generation);
        f.word.set(
            w.as_ref()
                .map_or(std::ptr::null(), |w| w.word() as *const _),
        );
        *f.watch.borrow_mut() = w;
        f.seen.set(u64::MAX);
    }

    /// We resumed: the manager's page must not keep the count from before. The client's tick
    /// rewrites it only every 10 ms while the pool asks for all its workers, and a revocation
    /// that reads a stale low count hands the CPU over at once while the worker that is to
    /// park still runs there (docs/bench/manager.md §10: shrink p99 2.0–2.3 ms without this,
    /// 0.9–1.0 ms with the old 1 ms tick, `reaction 300`). Through our
    /// own copy of the watch: no lock a preempted client thread could hold. Not when we
    /// resumed only to finish a step of a job while the target still excludes us: we park
    /// again at our next wait, and the manager is to go on counting us out.
    pub(crate) fn note_resumed(&self) {
        if self.should_suspend() {
            return;
        }
        let slot = &self.registry.control.page;
        if slot.generation.load(Ordering::Relaxed) != self.page.generation.get() {
            self.refresh_watch();
        }
        if let Some(w) = self.page.watch.borrow().as_ref() {
            w.resumed(&|| self.registry.active() as u32);
        }
    }

    #[cold]
    fn catch_up(&self, now: u64) {
        let f = &self.page;
        let applied = f.watch.borrow().as_ref().is_none_or(|w| w.catch_up());
        if applied {
            f.seen.set(now);
        }
    }
}

impl Registry {
    /// Hand the pool the live session's page (`Some`: the client, when a session starts), or
    /// take it back (`None`: when it ends). Reports go to it (`report.rs`) and workers apply
    /// it at their safe points, inside waits and while suspended.
    pub(crate) fn set_manager_page(&self, page: Option<Arc<ManagerPage>>) {
        self.set_report_page(page.clone());
        self.control.page.set(page);
        // Workers already suspended look again, so they watch the new page (or stop
        // watching the old one).
        self.sleep.nudge_suspended();
    }
}

#[cfg(all(test, not(loom), partita_linux))] // a manager's page: Linux only
mod tests {
    //! A suspended worker follows a real control page (a memfd mapping, the manager's own
    //! `publish`: seqlock write, then a shared `FUTEX_WAKE`) with no client thread at all:
    //! whatever resumes it is the page word. Assertions are on targets and counts; the only
    //! times are generous timeouts that a passing run never reaches, and one short pause
    //! that gives a wrong wake-up the chance to happen.
    use super::*;
    use crate::{ProcessControl, ThreadPool, ThreadPoolBuilder};
    use partita_protocol::CpuSet;
    use std::os::unix::net::UnixStream;
    use std::time::{Duration, Instant};

    fn pool(fallback: bool) -> ThreadPool {
        let pool = ThreadPoolBuilder::new()
            .process_control(ProcessControl::Manual)
            .num_threads(2)
            .thread_name(|i| format!("page-test-worker-{i}"))
            .build()
            .unwrap();
        if fallback {
            pool.registry.control.page.force_fallback();
        }
        pool
    }

    /// A session's page with no client thread (the page says "all workers", as a manager's
    /// welcome does), and the other end of its ring's socket (kept open).
    fn session(pool: &ThreadPool) -> (Arc<ManagerPage>, UnixStream) {
        ManagerPage::for_test(&pool.registry)
    }

    fn wait_for(what: &str, cond: impl Fn() -> bool) {
        let start = Instant::now();
        while !cond() {
            assert!(start.elapsed() < Duration::from_secs(20), "{what}");
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    fn appliers(s: &ManagerPage) -> Vec<String> {
        s.applied_by()
    }

    /// Shrink through the page (applied by the test thread, as the client would), then grow
    /// by publishing only: the suspended worker wakes on the page word and applies it.
    #[test]
    fn a_suspended_worker_resumes_on_the_page_word_alone() {
        if !crate::sleep::page_wait_supported() {
            return; // the fallback's test covers such kernels
        }
        let pool = pool(false);
        let (s, _manager_end) = session(&pool);
        pool.registry.set_manager_page(Some(s.clone()));
        s.page().manager.publish(1, &CpuSet::new());
        assert!(s.catch_up());
        wait_for("worker 1 to suspend", || pool.active_workers() == 1);
        let slot = &pool.registry.control.page;
        for round in 0..20 {
            // The client thread would now leave the page to the suspended worker.
            wait_for("worker 1 to watch the page", || slot.watched_by_a_worker());
            let before = appliers(&s).len();
            s.page().manager.publish(2, &CpuSet::new());
            wait_for("the page's grow to resume worker 1", || {
                pool.active_workers() == 2
            });
            // It counts as watching only while it waits.
            assert!(!slot.watched_by_a_worker());
            // A worker applied it: nobody else looks at the page here.
            let who = appliers(&s);
            assert_eq!(who.len(), before + 1, "round {round}: {who:?}");
            assert!(who[before].starts_with("page-test-worker-"), "{who:?}");
            s.page().manager.publish(1, &CpuSet::new());
            assert!(s.catch_up());
            wait_for("worker 1 to suspend again", || pool.active_workers() == 1);
        }
        // Local unparks still work while the worker watches the page, and so does the end.
        pool.set_target_workers(2);
        wait_for("a local unpark", || pool.active_workers() == 2);
        pool.set_target_workers(1);
        wait_for("worker 1 to suspend", || pool.active_workers() == 1);
        let reg = pool.registry.clone();
        drop(pool);
        reg.wait_until_stopped();
    }

    /// A worker waiting inside a job (a scope, before running its task) applies a page change
    /// between two jobs: a pool of one, no client thread, and no main-loop safe point until
    /// the scope ends. The zero quantum it applied parks it right there, before the scope's
    /// task (a zero quantum stops the whole application, mid-job included), and a publish
    /// alone resumes it to finish the scope.
    #[test]
    fn a_worker_inside_a_job_applies_the_page_between_jobs() {
        let pool = Arc::new(
            ThreadPoolBuilder::new()
                .process_control(ProcessControl::Manual)
                .num_threads(1)
                .build()
                .unwrap(),
        );
        let (s, _manager_end) = session(&pool);
        pool.registry.set_manager_page(Some(s.clone()));
        let ran = Arc::new(AtomicBool::new(false));
        let job = {
            let (pool, s, ran) = (pool.clone(), s.clone(), ran.clone());
            std::thread::spawn(move || {
                pool.install(|| {
                    crate::scope(|sc| {
                        s.page().manager.publish(0, &CpuSet::new());
                        // Runs after the scope's body, in the same top-level job.
                        sc.spawn(|_| ran.store(true, Ordering::SeqCst));
                    })
                })
            })
        };
        wait_for(
            "the zero quantum to park the worker inside the scope",
            || pool.registry.target() == 0 && pool.active_workers() == 0,
        );
        assert!(!ran.load(Ordering::SeqCst), "a task ran in a zero quantum");
        s.page().manager.publish(1, &CpuSet::new());
        job.join().unwrap();
        assert!(ran.load(Ordering::SeqCst));
        wait_for("the page to resume it", || pool.active_workers() == 1);
    }

    /// A worker suspended before the session began watches its page once the watch is set.
    #[test]
    fn a_worker_suspended_before_the_session_watches_its_page() {
        if !crate::sleep::page_wait_supported() {
            return;
        }
        let pool = pool(false);
        pool.set_target_workers(1);
        wait_for("worker 1 to suspend", || pool.active_workers() == 1);
        let (s, _manager_end) = session(&pool);
        s.page().manager.publish(1, &CpuSet::new());
        pool.registry.set_manager_page(Some(s.clone()));
        s.page().manager.publish(2, &CpuSet::new());
        wait_for("the page's grow to resume worker 1", || {
            pool.active_workers() == 2
        });
        assert!(appliers(&s)
            .iter()
            .all(|w| w.starts_with("page-test-worker-")));
    }

    /// Without `futex_waitv` (forced here) a suspended worker waits on its own word only: a
    /// publish alone does not resume it; a local unpark (the client thread's) does. Both
    /// workers are asleep before the shrink, so worker 1 is suspended in place and, with
    /// no page to watch, left asleep (a worker suspending itself would look at the page once
    /// more on its way into the wait, and could apply the publish below from there).
    #[test]
    fn the_fallback_resumes_on_local_unparks_only() {
        let pool = pool(true);
        let (s, _manager_end) = session(&pool);
        pool.registry.set_manager_page(Some(s.clone()));
        wait_for("both workers to sleep", || {
            pool.registry.sleep.snapshot() == (2, 0)
        });
        s.page().manager.publish(1, &CpuSet::new());
        assert!(s.catch_up());
        wait_for("worker 1 to suspend", || pool.active_workers() == 1);
        // (A worker may have applied the page's first epoch before it fell asleep.)
        let before = appliers(&s).len();
        s.page().manager.publish(2, &CpuSet::new());
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(pool.active_workers(), 1, "resumed by the page word");
        assert!(!pool.registry.control.page.watched_by_a_worker());
        assert_eq!(pool.target_workers(), 1);
        // The client thread's part: apply the page, which unparks locally.
        assert!(s.catch_up());
        wait_for("the local unpark", || pool.active_workers() == 2);
        let who = appliers(&s);
        assert_eq!(who.len(), before + 1, "{who:?}");
        assert!(!who[before].starts_with("page-test-"), "{who:?}");
    }
}
