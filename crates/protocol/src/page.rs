//! The shared control page: a 4 KiB memfd mapped by both the manager and the application.
//!
//! Layout (`repr(C)`, atomics only, each writer side on its own cache lines):
//!
//! | part | written by | fields |
//! |---|---|---|
//! | [`Header`] | manager, once | magic, layout version, app id, pool size |
//! | [`ManagerSide`] | manager | epoch (seqlock), target, wake (futex word), quantum end, CPU set |
//! | [`AppSide`] | application | demand, active, tasks run, idle ns, bandwidth, heartbeat, traffic status |
//!
//! The manager is the only writer of `target` and `cpus` and publishes them seqlock-style
//! ([`ManagerSide::publish`]): the epoch is odd while a write is in progress and bumped to the
//! next even value afterwards, so a reader ([`ManagerSide::read`]) retries until it sees the
//! same even epoch before and after reading — a consistent `(target, cpus)` pair. After a
//! change the manager bumps `wake` and `FUTEX_WAKE`s it; the application's client thread waits
//! on it ([`ManagerSide::wait_for_change`]). Wakes are advisory: the epoch is the truth.

use crate::cpuset::{CpuSet, CPUSET_WORDS};
use crate::seqlock;
use crate::sys;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

/// Magic number at the start of every control page ("PARTITA1" little-endian-ish).
pub const PAGE_MAGIC: u64 = 0x3141_5449_5452_4150;
/// Layout version of [`ControlPage`].
pub const LAYOUT_VERSION: u32 = 1;
/// Size of the memfd.
pub const PAGE_SIZE: usize = 4096;

/// Written once by the manager before the page is sent.
///
/// ```
/// let p = partita_protocol::page::PageMap::create(3, 2).unwrap();
/// assert_eq!(p.header.magic.load(std::sync::atomic::Ordering::Relaxed), partita_protocol::page::PAGE_MAGIC);
/// ```
#[repr(C, align(64))]
#[derive(Debug)]
pub struct Header {
    /// [`PAGE_MAGIC`].
    pub magic: AtomicU64,
    /// [`LAYOUT_VERSION`].
    pub layout_version: AtomicU32,
    /// The application's id in the manager.
    pub app_id: AtomicU32,
    /// Pool size announced in the hello.
    pub pool_size: AtomicU32,
}

/// The manager → application half.
///
/// ```
/// let p = partita_protocol::page::PageMap::create(3, 2).unwrap();
/// assert_eq!(p.manager.target.load(std::sync::atomic::Ordering::Relaxed), 2);
/// ```
#[repr(C, align(64))]
#[derive(Debug)]
pub struct ManagerSide {
    /// Seqlock sequence: odd while the manager writes, even when stable.
    pub epoch: AtomicU64,
    /// Number of workers the application should run (0: a granted zero quantum).
    pub target: AtomicU32,
    /// Futex word bumped after every change.
    pub wake: AtomicU32,
    /// End of the current quantum (monotonic ns) for time-sliced policies; 0 when unused.
    pub quantum_end: AtomicU64,
    /// Non-zero when the application should keep its worker target at pool size and only
    /// follow the CPU set (the demo's partitioned mode).
    pub partition_only: AtomicU32,
    /// How stale the manager lets the application's reports (traffic, tasks run, heartbeat)
    /// get, µs: the client samples at least this often even when its demand cannot rise. 0:
    /// not said (a manager that predates the field); the client keeps its own default. Added
    /// to layout 1 in unused space (see the README's versioning rule).
    pub report_period_us: AtomicU32,
    /// CPU set bitset (bit `i % 64` of word `i / 64` is CPU `i`).
    pub cpus: [AtomicU64; CPUSET_WORDS],
}

/// The application → manager half.
///
/// ```
/// let p = partita_protocol::page::PageMap::create(3, 2).unwrap();
/// p.app.demand.store(1, std::sync::atomic::Ordering::Relaxed);
/// ```
#[repr(C, align(64))]
#[derive(Debug)]
pub struct AppSide {
    /// Workers the application could use now.
    pub demand: AtomicU32,
    /// Workers currently active.
    pub active: AtomicU32,
    /// Tasks run since the pool started.
    pub tasks_run: AtomicU64,
    /// Nanoseconds the workers spent idle.
    pub idle_ns: AtomicU64,
    /// Cumulative bytes of memory traffic the application publishes (partita-runtime: the
    /// larger of what it reports with `report_bytes` and what its workers' counters measure);
    /// the manager turns successive readings into a rate. 0 if it neither reports nor measures.
    pub bandwidth: AtomicU64,
    /// `CLOCK_MONOTONIC` nanoseconds of the last report.
    pub heartbeat: AtomicU64,
    /// Whether the runtime measures its own traffic, or why not: a
    /// [`TrafficStatus`](crate::traffic::TrafficStatus) code (0: not reported). Added to
    /// layout 1 in space that was zero (see the README's versioning rule).
    pub traffic_status: AtomicU32,
}

/// The whole page.
///
/// ```
/// assert!(std::mem::size_of::<partita_protocol::page::ControlPage>() <= partita_protocol::page::PAGE_SIZE);
/// ```
#[repr(C)]
#[derive(Debug)]
pub struct ControlPage {
    /// Identity and layout.
    pub header: Header,
    /// Manager → application.
    pub manager: ManagerSide,
    /// Application → manager.
    pub app: AppSide,
}

const _: () = assert!(std::mem::size_of::<ControlPage>() <= PAGE_SIZE);

/// A consistent view of the manager half.
///
/// ```
/// let p = partita_protocol::page::PageMap::create(3, 2).unwrap();
/// let a: partita_protocol::page::Allocation = p.manager.read();
/// assert!(!a.partition_only);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allocation {
    /// The epoch the view was taken at (even).
    pub epoch: u64,
    /// Target workers.
    pub target: u32,
    /// CPU set (empty: no confinement).
    pub cpus: CpuSet,
    /// Whether only the CPU set is to be followed.
    pub partition_only: bool,
}

impl ManagerSide {
    /// Publish a new `(target, cpus)`: seqlock write, then bump `wake` and wake waiters.
    /// Only one thread (the manager) may call this for a given page.
    ///
    /// ```
    /// let page = partita_protocol::page::PageMap::create(1, 4).unwrap();
    /// let cpus: partita_protocol::CpuSet = [0, 1].into_iter().collect();
    /// page.manager.publish(2, &cpus);
    /// let a = page.manager.read();
    /// assert_eq!((a.target, a.cpus), (2, cpus));
    /// assert_eq!(a.epoch, 2);
    /// ```
    pub fn publish(&self, target: u32, cpus: &CpuSet) {
        seqlock::write(&self.epoch, &self.target, &self.cpus, target, cpus.words());
        self.wake.fetch_add(1, Ordering::Release);
        // No error to act on: waiters loop on the word (EFAULT cannot happen for a mapped page).
        let _ = sys::futex_wake(&self.wake, i32::MAX, sys::FutexScope::Shared);
    }

    /// Read a consistent `(target, cpus)` (seqlock read; retries while a write is in progress).
    ///
    /// ```
    /// let page = partita_protocol::page::PageMap::create(1, 4).unwrap();
    /// assert_eq!(page.manager.read().target, 4);
    /// ```
    pub fn read(&self) -> Allocation {
        let mut words = [0u64; CPUSET_WORDS];
        loop {
            if let Some((epoch, target)) =
                seqlock::try_read(&self.epoch, &self.target, &self.cpus, &mut words)
            {
                return Allocation {
                    epoch,
                    target,
                    cpus: CpuSet::from_words(words),
                    partition_only: self.partition_only.load(Ordering::Acquire) != 0,
                };
            }
            std::hint::spin_loop();
        }
    }

    /// Wait until `wake` differs from `seen` or `timeout` passes (spurious returns allowed).
    /// Returns the current value of `wake`.
    ///
    /// ```
    /// let page = partita_protocol::page::PageMap::create(1, 4).unwrap();
    /// let w = page.manager.wake.load(std::sync::atomic::Ordering::Acquire);
    /// // Nothing changes: returns after the timeout with the same value.
    /// assert_eq!(page.manager.wait_for_change(w, std::time::Duration::from_millis(1)), w);
    /// ```
    pub fn wait_for_change(&self, seen: u32, timeout: Duration) -> u32 {
        // EAGAIN, EINTR, ETIMEDOUT: all mean "look again", which the caller does.
        let _ = sys::futex_wait(&self.wake, seen, sys::FutexScope::Shared, Some(timeout));
        self.wake.load(Ordering::Acquire)
    }

    /// Wake every thread in [`wait_for_change`](Self::wait_for_change) without changing
    /// `wake`: the waiter's reason to return is elsewhere (its client is stopping), and the
    /// manager's changes stay the word's only ones. A waiter that has not entered the wait
    /// yet is not woken: check the reason just before waiting.
    pub fn wake_waiters(&self) {
        // No error to act on: waiters loop on the word (EFAULT cannot happen for a mapped page).
        let _ = sys::futex_wake(&self.wake, i32::MAX, sys::FutexScope::Shared);
    }
}

/// A mapped control page (either side). Dereferences to [`ControlPage`]; unmaps on drop.
///
/// ```
/// let p = partita_protocol::page::PageMap::create(1, 1).unwrap();
/// assert_eq!(p.header.app_id.load(std::sync::atomic::Ordering::Relaxed), 1);
/// ```
#[derive(Debug)]
pub struct PageMap {
    map: sys::Mapping,
    fd: OwnedFd,
}

/// Why a received page was refused.
///
/// ```
/// let e = partita_protocol::page::PageError::Layout(9);
/// assert!(e.to_string().contains("layout 9"));
/// ```
#[derive(Debug, thiserror::Error)]
pub enum PageError {
    /// A system call failed.
    #[error("{call}: {source}")]
    Sys {
        /// The call.
        call: &'static str,
        /// The OS error.
        source: io::Error,
    },
    /// The file is smaller than a page.
    #[error("control page too small: {0} bytes")]
    TooSmall(u64),
    /// Wrong magic number.
    #[error("control page has wrong magic {0:#x}")]
    Magic(u64),
    /// Unsupported layout.
    #[error("control page layout {0} unsupported (this side knows {LAYOUT_VERSION})")]
    Layout(u32),
}

impl PageMap {
    /// Create a fresh page (manager side): memfd, sealed against resizing, header filled,
    /// `target = pool_size`, no CPU set.
    ///
    /// ```
    /// let p = partita_protocol::page::PageMap::create(7, 3).unwrap();
    /// assert_eq!(p.header.app_id.load(std::sync::atomic::Ordering::Relaxed), 7);
    /// ```
    pub fn create(app_id: u32, pool_size: u32) -> Result<PageMap, PageError> {
        let fd = sys::memfd_sealed_page(PAGE_SIZE).map_err(|source| PageError::Sys {
            call: "memfd_create",
            source,
        })?;
        let map = sys::Mapping::new(fd.as_fd(), PAGE_SIZE).map_err(|source| PageError::Sys {
            call: "mmap",
            source,
        })?;
        let page = PageMap { map, fd };
        page.header.magic.store(PAGE_MAGIC, Ordering::Relaxed);
        page.header
            .layout_version
            .store(LAYOUT_VERSION, Ordering::Relaxed);
        page.header.app_id.store(app_id, Ordering::Relaxed);
        page.header.pool_size.store(pool_size, Ordering::Relaxed);
        page.manager.target.store(pool_size, Ordering::Relaxed);
        page.manager.epoch.store(0, Ordering::Release);
        Ok(page)
    }

    /// Map a page received from the manager (application side) and validate it.
    ///
    /// ```
    /// use std::os::fd::AsFd;
    /// let m = partita_protocol::page::PageMap::create(1, 2).unwrap();
    /// let fd = m.fd().try_clone_to_owned().unwrap();
    /// let a = partita_protocol::page::PageMap::open(fd).unwrap();
    /// m.manager.publish(1, &partita_protocol::CpuSet::new());
    /// assert_eq!(a.manager.read().target, 1);
    /// ```
    pub fn open(fd: OwnedFd) -> Result<PageMap, PageError> {
        let size = sys::file_size(fd.as_fd()).map_err(|source| PageError::Sys {
            call: "fstat",
            source,
        })?;
        if size < PAGE_SIZE as u64 {
            return Err(PageError::TooSmall(size));
        }
        let map = sys::Mapping::new(fd.as_fd(), PAGE_SIZE).map_err(|source| PageError::Sys {
            call: "mmap",
            source,
        })?;
        let page = PageMap { map, fd };
        let magic = page.header.magic.load(Ordering::Acquire);
        if magic != PAGE_MAGIC {
            return Err(PageError::Magic(magic));
        }
        let layout = page.header.layout_version.load(Ordering::Acquire);
        if layout != LAYOUT_VERSION {
            return Err(PageError::Layout(layout));
        }
        Ok(page)
    }

    /// The memfd (to send with SCM_RIGHTS).
    ///
    /// ```
    /// use std::os::fd::AsRawFd;
    /// let p = partita_protocol::page::PageMap::create(1, 1).unwrap();
    /// assert!(p.fd().as_raw_fd() >= 0);
    /// ```
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl std::ops::Deref for PageMap {
    type Target = ControlPage;
    fn deref(&self) -> &ControlPage {
        // SAFETY: the mapping is PAGE_SIZE bytes, page aligned (so aligned for ControlPage's
        // 64-byte alignment), lives as long as `self`, and ControlPage is made only of atomics,
        // for which every bit pattern is valid and shared mutation from another process is
        // sound (all accesses are atomic).
        unsafe { &*(self.map.as_ptr() as *const ControlPage) }
    }
}

/// `CLOCK_MONOTONIC` now, in nanoseconds (the clock of `heartbeat` and `quantum_end`).
///
/// ```
/// let a = partita_protocol::page::monotonic_ns();
/// assert!(partita_protocol::page::monotonic_ns() >= a);
/// ```
pub use crate::sys::monotonic_ns;

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn seqlock_readers_never_see_torn_writes() {
        let page = Arc::new(PageMap::create(1, 64).unwrap());
        page.manager.publish(0, &CpuSet::new());
        let writer = {
            let page = page.clone();
            std::thread::spawn(move || {
                for i in 0..20_000u32 {
                    let n = (i % 64) as usize;
                    let cpus: CpuSet = (0..n).map(|c| c * 7 % 1024).collect();
                    page.manager.publish(n as u32, &cpus);
                }
            })
        };
        let mut reads = 0;
        while !writer.is_finished() || reads < 1000 {
            let a = page.manager.read();
            // Invariant of the writer: target == number of CPUs in the set.
            assert_eq!(
                a.target as usize,
                a.cpus.len(),
                "torn read at epoch {}",
                a.epoch
            );
            assert_eq!(a.epoch % 2, 0);
            reads += 1;
        }
        writer.join().unwrap();
    }

    #[test]
    fn futex_wakes_a_waiter_in_time() {
        let page = Arc::new(PageMap::create(1, 1).unwrap());
        let seen = page.manager.wake.load(Ordering::Acquire);
        let waiter = {
            let page = page.clone();
            std::thread::spawn(move || {
                let t = std::time::Instant::now();
                let now = page.manager.wait_for_change(seen, Duration::from_secs(10));
                (now, t.elapsed())
            })
        };
        std::thread::sleep(Duration::from_millis(20));
        page.manager.publish(1, &CpuSet::new());
        let (now, waited) = waiter.join().unwrap();
        assert_ne!(now, seen);
        assert!(waited < Duration::from_secs(5), "the wake was lost");
    }

    /// The offsets documented in the crate's README.md.
    #[test]
    fn layout_matches_the_readme() {
        use std::mem::offset_of;
        let m = offset_of!(ControlPage, manager);
        let a = offset_of!(ControlPage, app);
        let got = [
            offset_of!(ControlPage, header) + offset_of!(Header, magic),
            offset_of!(Header, layout_version),
            offset_of!(Header, app_id),
            offset_of!(Header, pool_size),
            m,
            m + offset_of!(ManagerSide, target),
            m + offset_of!(ManagerSide, wake),
            m + offset_of!(ManagerSide, quantum_end),
            m + offset_of!(ManagerSide, partition_only),
            m + offset_of!(ManagerSide, report_period_us),
            m + offset_of!(ManagerSide, cpus),
            a,
            a + offset_of!(AppSide, active),
            a + offset_of!(AppSide, tasks_run),
            a + offset_of!(AppSide, idle_ns),
            a + offset_of!(AppSide, bandwidth),
            a + offset_of!(AppSide, heartbeat),
            a + offset_of!(AppSide, traffic_status),
        ];
        assert_eq!(
            got,
            [0, 8, 12, 16, 64, 72, 76, 80, 88, 92, 96, 256, 260, 264, 272, 280, 288, 296]
        );
        // The application's half still fits its own cache lines, before the page's end.
        assert!(a + std::mem::size_of::<AppSide>() <= PAGE_SIZE);
    }

    /// A fresh page says nothing about the runtime's traffic measurement (what a runtime that
    /// predates the field leaves there), and the other side sees what the runtime writes.
    #[test]
    fn traffic_status_starts_unreported_and_crosses_the_page() {
        use crate::traffic::TrafficStatus;
        let m = PageMap::create(1, 2).unwrap();
        let code = m.app.traffic_status.load(Ordering::Relaxed);
        assert_eq!(
            TrafficStatus::from_code(code),
            Some(TrafficStatus::NotReported)
        );
        let a = PageMap::open(m.fd().try_clone_to_owned().unwrap()).unwrap();
        a.app
            .traffic_status
            .store(TrafficStatus::SkipNoPmu.code(), Ordering::Relaxed);
        assert_eq!(
            m.app.traffic_status.load(Ordering::Relaxed),
            TrafficStatus::SkipNoPmu.code()
        );
    }

    #[test]
    fn open_rejects_foreign_files() {
        let fd = sys::memfd_sealed_page(PAGE_SIZE).unwrap();
        assert!(matches!(PageMap::open(fd), Err(PageError::Magic(0))));
        let small = sys::memfd_sealed_page(100).unwrap();
        assert!(matches!(
            PageMap::open(small),
            Err(PageError::TooSmall(100))
        ));
    }
}
