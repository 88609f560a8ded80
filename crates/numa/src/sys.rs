//! Raw system calls. The only `unsafe` FFI of the memory-policy layer lives here; the safe
//! wrappers in [`crate::mempolicy`] and [`crate::pages`] validate everything first.
//!
//! None of these calls changes the *contents* of memory: they change placement policy or move
//! physical pages while the virtual mapping and data stay the same, so an arbitrary address
//! cannot corrupt memory — the kernel checks every address and answers `EFAULT`/`ENOMEM`.

use std::os::raw::{c_int, c_long, c_ulong, c_void};

/// `mbind(2)`.
pub(crate) fn mbind(
    addr: usize,
    len: usize,
    mode: c_int,
    mask: *const c_ulong,
    maxnode: c_ulong,
    flags: u32,
) -> c_long {
    // SAFETY: mbind only reads `maxnode - 1` bits from `mask`, which the caller guarantees
    // points to at least that many bits (a `NodeSet`), or is null with maxnode 0. The address
    // range is validated by the kernel; no user memory is written.
    unsafe { libc::syscall(libc::SYS_mbind, addr, len, mode, mask, maxnode, flags) }
}

/// `set_mempolicy(2)`.
pub(crate) fn set_mempolicy(mode: c_int, mask: *const c_ulong, maxnode: c_ulong) -> c_long {
    // SAFETY: reads at most `maxnode - 1` bits from `mask` (a `NodeSet`) or nothing if null.
    unsafe { libc::syscall(libc::SYS_set_mempolicy, mode, mask, maxnode) }
}

/// `get_mempolicy(2)`.
pub(crate) fn get_mempolicy(
    mode: &mut c_int,
    mask: *mut c_ulong,
    maxnode: c_ulong,
    addr: usize,
    flags: c_ulong,
) -> c_long {
    // SAFETY: `mode` is a valid `c_int`; `mask` points to a `NodeSet` with room for
    // `maxnode - 1` bits (or is null with maxnode 0). `addr` is only used as a lookup key.
    unsafe {
        libc::syscall(
            libc::SYS_get_mempolicy,
            mode as *mut c_int,
            mask,
            maxnode,
            addr,
            flags,
        )
    }
}

/// `move_pages(2)` for the calling process. `nodes` is either empty (query) or as long as
/// `pages`; `status` must be as long as `pages`.
pub(crate) fn move_pages(
    pid: c_int,
    pages: &[*mut c_void],
    nodes: &[c_int],
    status: &mut [c_int],
    flags: c_int,
) -> c_long {
    assert_eq!(pages.len(), status.len(), "move_pages: status length");
    assert!(
        nodes.is_empty() || nodes.len() == pages.len(),
        "move_pages: nodes length"
    );
    let nodes_ptr = if nodes.is_empty() {
        std::ptr::null()
    } else {
        nodes.as_ptr()
    };
    // SAFETY: the three arrays are live slices of `pages.len()` elements (asserted above);
    // the kernel writes only `status`. Page addresses are looked up, never dereferenced by us.
    unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            pid,
            pages.len() as c_ulong,
            pages.as_ptr(),
            nodes_ptr,
            status.as_mut_ptr(),
            flags,
        )
    }
}

/// `migrate_pages(2)`.
pub(crate) fn migrate_pages(
    pid: c_int,
    maxnode: c_ulong,
    old: *const c_ulong,
    new: *const c_ulong,
) -> c_long {
    // SAFETY: both masks point to `NodeSet`s holding at least `maxnode - 1` bits.
    unsafe { libc::syscall(libc::SYS_migrate_pages, pid, maxnode, old, new) }
}

/// The node the calling thread is running on (`getcpu(2)`), or `None` if the call fails.
pub(crate) fn current_cpu_and_node() -> Option<(u32, u32)> {
    let mut cpu: u32 = 0;
    let mut node: u32 = 0;
    // SAFETY: both pointers are valid `u32`s on our stack; the third argument (tcache) is
    // unused by Linux and may be null.
    let r = unsafe {
        libc::syscall(
            libc::SYS_getcpu,
            &mut cpu as *mut u32,
            &mut node as *mut u32,
            std::ptr::null_mut::<c_void>(),
        )
    };
    (r == 0).then_some((cpu, node))
}

/// The system page size.
pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 { p as usize } else { 4096 }
}

/// The calling thread's stack: (lowest address, size in bytes), from `pthread_getattr_np(3)`.
pub(crate) fn current_thread_stack() -> std::io::Result<(usize, usize)> {
    // SAFETY: a zeroed pthread_attr_t is only an out-parameter here; pthread_getattr_np
    // initialises it (we destroy it afterwards) and pthread_attr_getstack writes the two
    // out-pointers, which are valid locals.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        let rc = libc::pthread_getattr_np(libc::pthread_self(), &mut attr);
        if rc != 0 {
            return Err(std::io::Error::from_raw_os_error(rc));
        }
        let mut addr: *mut c_void = std::ptr::null_mut();
        let mut size: libc::size_t = 0;
        let rc = libc::pthread_attr_getstack(&attr, &mut addr, &mut size);
        libc::pthread_attr_destroy(&mut attr);
        if rc != 0 {
            return Err(std::io::Error::from_raw_os_error(rc));
        }
        Ok((addr as usize, size))
    }
}
