//! The system calls the protocol needs, as small safe wrappers (all `unsafe` of the crate),
//! and the ones every crate of the workspace shares (the clock, [`affinity`](get_affinity),
//! [`futex`](futex_wait)): the one low-level layer (docs/design/README.md, "One low-level
//! layer").

mod affinity;
mod futex;

pub use affinity::{get_affinity, set_affinity, AffinityError};
pub use futex::{futex_wait, futex_waitv, futex_wake, FutexError, FutexScope};

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::time::Duration;

fn cvt(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// A memfd of `size` bytes, close-on-exec, sealed against shrinking and growing (so a peer
/// cannot truncate it under the other side's mapping and make it fault).
pub(crate) fn memfd_sealed_page(size: usize) -> io::Result<OwnedFd> {
    let name = c"partita-control-page";
    // SAFETY: `name` is a valid NUL-terminated string; the flags are valid.
    let fd = cvt(unsafe {
        libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING)
    })?;
    // SAFETY: memfd_create just returned this fd and nothing else owns it.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: plain syscall on an fd we own.
    cvt(unsafe { libc::ftruncate(fd.as_raw_fd(), size as libc::off_t) })?;
    // SAFETY: plain fcntl on an fd we own; F_ADD_SEALS takes an int argument.
    cvt(unsafe {
        libc::fcntl(
            fd.as_raw_fd(),
            libc::F_ADD_SEALS,
            libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL,
        )
    })?;
    Ok(fd)
}

/// Size of the file behind `fd`.
pub(crate) fn file_size(fd: BorrowedFd<'_>) -> io::Result<u64> {
    // SAFETY: zeroed `stat` is a valid out-parameter.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fd is valid for the borrow; `st` is a valid pointer.
    cvt(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) })?;
    Ok(st.st_size as u64)
}

/// A shared read-write mapping, unmapped on drop.
#[derive(Debug)]
pub(crate) struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain shared memory accessed only through atomics (see page.rs).
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Mapping {
    pub(crate) fn new(fd: BorrowedFd<'_>, len: usize) -> io::Result<Mapping> {
        // SAFETY: a fresh mapping at an address the kernel chooses; fd is valid.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping {
            // mmap never returns null on success (MAP_FIXED is not used).
            ptr: NonNull::new(p as *mut u8)
                .ok_or_else(|| io::Error::other("mmap returned null"))?,
            len,
        })
    }

    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: ptr/len are exactly what mmap returned; no reference outlives `self`
        // (PageMap hands out references tied to its own lifetime).
        unsafe {
            libc::munmap(self.ptr.as_ptr() as *mut libc::c_void, self.len);
        }
    }
}

/// `CLOCK_MONOTONIC` now, in nanoseconds: the clock of the page's `heartbeat` and
/// `quantum_end`, of the manager's hand-over deadlines and of the `partita::hop` stamps
/// (comparable across processes). Also `page::monotonic_ns`.
///
/// ```
/// let a = partita_protocol::sys::monotonic_ns();
/// assert!(partita_protocol::sys::monotonic_ns() >= a);
/// ```
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out-pointer; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A zeroed, 8-aligned control-message buffer with room for `fds` descriptors.
fn cmsg_buffer(fds: usize) -> Vec<u64> {
    // SAFETY: CMSG_SPACE is a pure computation.
    let space = unsafe { libc::CMSG_SPACE((fds * std::mem::size_of::<RawFd>()) as u32) } as usize;
    vec![0u64; space.div_ceil(8)]
}

/// A `msghdr` over the one buffer `iov` and the control buffer `cbuf` (of [`cmsg_buffer`]):
/// it points into both, so use it while they live.
fn msghdr(iov: &mut libc::iovec, cbuf: &mut [u64]) -> libc::msghdr {
    // SAFETY: a zeroed msghdr is valid (no name, no flags); the rest is filled below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = std::mem::size_of_val(cbuf) as _;
    msg
}

/// Send `bytes` on a connected Unix stream socket with `fd` attached (SCM_RIGHTS).
/// Returns the number of bytes sent (the fd goes with the first byte).
///
/// ```
/// use partita_protocol::sys::{send_with_fd, recv_with_fd};
/// use std::os::fd::AsFd;
/// let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
/// let file = std::fs::File::open("/dev/null").unwrap();
/// send_with_fd(a.as_fd(), b"hi", file.as_fd()).unwrap();
/// let mut buf = [0u8; 8];
/// let (n, fd) = recv_with_fd(b.as_fd(), &mut buf).unwrap();
/// assert_eq!(&buf[..n], b"hi");
/// assert!(fd.is_some());
/// ```
pub fn send_with_fd(sock: BorrowedFd<'_>, bytes: &[u8], fd: BorrowedFd<'_>) -> io::Result<usize> {
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr() as *mut libc::c_void,
        iov_len: bytes.len(),
    };
    let mut cbuf = cmsg_buffer(1);
    let msg = msghdr(&mut iov, &mut cbuf);
    // SAFETY: msg_control points to a buffer (8-aligned) with room for one cmsg with one fd;
    // CMSG_FIRSTHDR is therefore non-null and CMSG_DATA has room for a RawFd.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg) as *mut RawFd, fd.as_raw_fd());
    }
    // SAFETY: msg and everything it points to are valid for the call.
    let n = unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Receive into `buf` from a Unix stream socket, collecting at most one fd passed with
/// SCM_RIGHTS (extra fds are closed). Blocking or not depending on the socket.
///
/// ```
/// use std::io::Write;
/// use std::os::fd::AsFd;
/// let (mut a, b) = std::os::unix::net::UnixStream::pair().unwrap();
/// a.write_all(b"x").unwrap();
/// let mut buf = [0u8; 4];
/// let (n, fd) = partita_protocol::sys::recv_with_fd(b.as_fd(), &mut buf).unwrap();
/// assert_eq!((n, fd.is_none()), (1, true));
/// ```
pub fn recv_with_fd(sock: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<(usize, Option<OwnedFd>)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    let mut cbuf = cmsg_buffer(4);
    let mut msg = msghdr(&mut iov, &mut cbuf);
    // SAFETY: msg points to valid buffers for the call; MSG_CMSG_CLOEXEC marks received fds.
    let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut got: Option<OwnedFd> = None;
    // SAFETY: walking the control messages the kernel wrote into `cbuf`, with the libc macros
    // that bound every step by msg_controllen; each SCM_RIGHTS payload holds whole RawFds that
    // the kernel installed in our table and that we now own.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg) as *const RawFd;
                let bytes = (*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                for i in 0..bytes / std::mem::size_of::<RawFd>() {
                    let fd = OwnedFd::from_raw_fd(std::ptr::read_unaligned(data.add(i)));
                    if got.is_none() {
                        got = Some(fd);
                    } // else: dropped, i.e. closed.
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    Ok((n as usize, got))
}

/// Credentials of the peer of a Unix socket (SO_PEERCRED): the kernel's view, never the
/// peer's claim.
///
/// ```
/// use std::os::fd::AsFd;
/// let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
/// let cred = partita_protocol::sys::peer_cred(a.as_fd()).unwrap();
/// assert_eq!(cred.pid as u32, std::process::id());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerCred {
    /// Process id at connect time.
    pub pid: i32,
    /// User id.
    pub uid: u32,
    /// Group id.
    pub gid: u32,
}

/// Read SO_PEERCRED of a connected Unix socket (see [`PeerCred`]).
pub fn peer_cred(sock: BorrowedFd<'_>) -> io::Result<PeerCred> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: valid out-pointer and length for SO_PEERCRED.
    cvt(unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            &mut cred as *mut libc::ucred as *mut libc::c_void,
            &mut len,
        )
    })?;
    Ok(PeerCred {
        pid: cred.pid,
        uid: cred.uid,
        gid: cred.gid,
    })
}

/// `pidfd_open(pid)`: an fd that becomes readable when the process exits.
///
/// ```
/// let fd = partita_protocol::sys::pidfd_open(std::process::id() as i32).unwrap();
/// # drop(fd);
/// ```
pub fn pidfd_open(pid: i32) -> io::Result<OwnedFd> {
    // SAFETY: plain syscall with integer arguments.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel returned a new fd we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// `SO_PEERPIDFD` (Linux 6.5): a pidfd of the process that called `connect()`, taken by the
/// kernel at connect time, so it cannot refer to a process that later reused the pid.
const SO_PEERPIDFD: libc::c_int = 77;

/// A pidfd for the peer of a connected Unix socket: `SO_PEERPIDFD` where the kernel has it,
/// else `pidfd_open(cred.pid)`. Either way the result is checked to be alive and (for the
/// `pidfd_open` fallback) to be the same process as the credentials (same pid, same uid, and
/// started no later than `accepted_boot_ticks`), so it never names a process that reused a
/// dead peer's pid. Errors: the peer is gone (`ESRCH`), has pid 0 (it lives in a pid namespace
/// this process cannot see: `EINVAL`), or the kernel refused.
///
/// ```
/// use std::os::fd::AsFd;
/// let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
/// let cred = partita_protocol::sys::peer_cred(a.as_fd()).unwrap();
/// let fd = partita_protocol::sys::peer_pidfd(a.as_fd(), &cred).unwrap();
/// assert!(partita_protocol::sys::pidfd_alive(fd.as_fd()));
/// ```
pub fn peer_pidfd(sock: BorrowedFd<'_>, cred: &PeerCred) -> io::Result<OwnedFd> {
    if cred.pid <= 0 {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    let mut fd: libc::c_int = -1;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: valid out-pointer and length for an int-valued socket option.
    let r = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_PEERPIDFD,
            &mut fd as *mut libc::c_int as *mut libc::c_void,
            &mut len,
        )
    };
    let (fd, exact) = if r == 0 && fd >= 0 {
        // SAFETY: the kernel installed a new fd for us.
        (unsafe { OwnedFd::from_raw_fd(fd) }, true)
    } else {
        let e = io::Error::last_os_error();
        if r == 0 || e.raw_os_error() != Some(libc::ENOPROTOOPT) {
            // ESRCH: the connecting process is gone.
            return Err(if r == 0 {
                io::Error::from_raw_os_error(libc::ESRCH)
            } else {
                e
            });
        }
        (pidfd_open(cred.pid)?, false)
    };
    if !pidfd_alive(fd.as_fd()) {
        return Err(io::Error::from_raw_os_error(libc::ESRCH));
    }
    if !exact && !same_process(cred) {
        return Err(io::Error::from_raw_os_error(libc::ESRCH));
    }
    Ok(fd)
}

/// For the `pidfd_open` fallback: `/proc/<pid>` still belongs to the peer's uid and started
/// before now (a process that reused the pid after our pidfd was opened cannot be the one the
/// pidfd names, and the alive check above was done on the pidfd).
fn same_process(cred: &PeerCred) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{}/status", cred.pid)) else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u32>().ok())
        == Some(cred.uid)
}

/// Whether the process a pidfd refers to is still running (`pidfd_send_signal(fd, 0)`).
///
/// ```
/// use std::os::fd::AsFd;
/// let fd = partita_protocol::sys::pidfd_open(std::process::id() as i32).unwrap();
/// assert!(partita_protocol::sys::pidfd_alive(fd.as_fd()));
/// ```
pub fn pidfd_alive(fd: BorrowedFd<'_>) -> bool {
    // SAFETY: plain syscall; signal 0 only checks existence and permission; null siginfo.
    let r = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            fd.as_raw_fd(),
            0,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    // EPERM: it exists but belongs to someone we may not signal.
    r == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// The seals of a memfd (`F_GET_SEALS`), e.g. to check that a page received from a peer
/// cannot be shrunk under its mapping.
///
/// ```
/// let f = std::fs::File::open("/dev/null").unwrap();
/// use std::os::fd::AsFd;
/// assert!(partita_protocol::sys::file_seals(f.as_fd()).is_err()); // not a memfd
/// ```
pub fn file_seals(fd: BorrowedFd<'_>) -> io::Result<i32> {
    // SAFETY: plain fcntl on a valid fd.
    cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS) })
}

/// Ask the scheduler for a short time slice for the calling thread (`sched_setattr` with
/// `sched_runtime` under a fair policy: EEVDF, Linux ≥ 6.12). A thread that sleeps most of
/// the time and must act as soon as it is woken — a manager's doorbell handler or
/// reallocator, a client watching its page — then preempts a CPU-bound thread on wake-up
/// instead of waiting for that thread's slice to end. Its share of CPU time does not grow, so
/// no privilege is needed; its policy and nice value are kept. Threads under a real-time or
/// deadline policy are left alone. The slice is clamped to the kernel's 100 µs … 100 ms.
///
/// ```
/// // Older kernels may refuse it; either way the thread keeps running as before.
/// let _ = partita_protocol::sys::request_short_slice(std::time::Duration::from_micros(100));
/// ```
pub fn request_short_slice(slice: Duration) -> io::Result<()> {
    let size = std::mem::size_of::<libc::sched_attr>() as u32;
    // SAFETY: a zeroed sched_attr is a valid out-parameter (plain integers).
    let mut attr: libc::sched_attr = unsafe { std::mem::zeroed() };
    // SAFETY: `attr` is valid for `size` bytes; pid 0 is the calling thread; flags 0.
    let r = unsafe { libc::syscall(libc::SYS_sched_getattr, 0, &mut attr, size, 0) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    if attr.sched_policy != libc::SCHED_OTHER as u32
        && attr.sched_policy != libc::SCHED_BATCH as u32
    {
        return Ok(());
    }
    attr.size = size;
    attr.sched_flags = 0;
    attr.sched_runtime = slice.as_nanos().clamp(100_000, 100_000_000) as u64;
    // SAFETY: `attr` is a valid sched_attr of `size` bytes; pid 0 is the calling thread.
    let r = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr, 0) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
