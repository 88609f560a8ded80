//! Reading the build's process tree from `/proc`: how many tasks run, and how many are blocked
//! waiting for a token.
//!
//! A client waiting for a token is blocked in a system call on the jobserver fifo: `read` on
//! it (most clients), or `poll`/`ppoll`/`select`/`pselect6` with it in the read set (GNU make
//! waits in `pselect`, the `jobserver` crate in `poll`). `/proc/PID/task/TID/syscall` shows the
//! call and its arguments; for the poll family the descriptor set is read from
//! `/proc/PID/mem`, and `/proc/PID/fd/N` is compared with the fifo's `(device, inode)`. The
//! server is the build's parent, so it may read these (ptrace access of an ancestor or of the
//! same user). What cannot be seen (another user's process, a busy-polling client) counts as
//! not waiting: the estimate errs low, never high.
//!
//! Tokens a live client can justify: a client (a process with the fifo open) runs one job
//! without a token and one per token, and its jobs are its child processes (make, cargo) or
//! its threads (rustc's codegen threads). So a client with `c` children and `t` threads holds
//! at most `c + t - 2` tokens (`c - 1` for single-threaded make); the sum over live clients
//! bounds the tokens that can legitimately be out. More out than that, for long enough, means
//! a client died holding tokens.

use std::collections::HashMap;
use std::os::unix::fs::{FileExt, MetadataExt};

/// What one scan of the build's tree found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TreeScan {
    /// Processes in the tree (the command and its descendants).
    pub processes: u32,
    /// Processes with the jobserver fifo open.
    pub clients: u32,
    /// Most tokens the live clients can hold: Σ over clients of `children + threads - 2`.
    pub tokens_justified: u32,
    /// Tasks blocked waiting for a token.
    pub waiting: u32,
    /// Whether the system-call state of some client could be read (if not, `waiting` is 0
    /// because nothing could be seen, and [`crate::policy::waiting`] falls back).
    pub waiters_visible: bool,
}

/// Pids of `root` and its descendants (empty if `root` is gone).
pub fn tree(root: i32) -> Vec<i32> {
    tree_with_children(root).0
}

/// The tree and each of its processes' children.
fn tree_with_children(root: i32) -> (Vec<i32>, HashMap<i32, Vec<i32>>) {
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return (Vec::new(), children);
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if let Some(ppid) = parent_of(pid) {
            children.entry(ppid).or_default().push(pid);
        }
    }
    if !std::path::Path::new(&format!("/proc/{root}")).exists() {
        return (Vec::new(), children);
    }
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        if let Some(c) = children.get(&out[i]) {
            out.extend_from_slice(c);
        }
        i += 1;
    }
    (out, children)
}

/// Parent pid from `/proc/PID/stat` (the command name may contain spaces and parentheses).
fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// Threads of `pid`.
pub fn tasks(pid: i32) -> Vec<i32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Scan the tree under `root` for tasks and token waiters on the fifo `fifo` (device, inode).
pub fn scan(root: i32, fifo: (u64, u64)) -> TreeScan {
    let mut s = TreeScan::default();
    let (pids, children) = tree_with_children(root);
    for pid in pids {
        s.processes += 1;
        let mut is_ours: HashMap<i32, bool> = HashMap::new();
        let threads = tasks(pid);
        for &tid in &threads {
            if waits_for_token(pid, tid, fifo, &mut is_ours) {
                s.waiting += 1;
            }
        }
        if has_open(pid, fifo) {
            s.clients += 1;
            s.waiters_visible |= std::fs::read(format!("/proc/{pid}/syscall")).is_ok();
            let c = children.get(&pid).map_or(0, Vec::len) + threads.len();
            s.tokens_justified += c.saturating_sub(2) as u32;
        }
    }
    s
}

/// Whether `pid` has the fifo open on some descriptor.
fn has_open(pid: i32, fifo: (u64, u64)) -> bool {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    dir.flatten()
        .any(|e| std::fs::metadata(e.path()).is_ok_and(|m| (m.dev(), m.ino()) == fifo))
}

/// The system call a task is blocked in: number and the first three arguments.
fn blocked_call(pid: i32, tid: i32) -> Option<(i64, [u64; 3])> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/syscall")).ok()?;
    let mut it = text.split_whitespace();
    let nr: i64 = it.next()?.parse().ok()?; // "running" and "-1" (not in a call) end here
    let mut args = [0u64; 3];
    for a in &mut args {
        *a = u64::from_str_radix(it.next()?.trim_start_matches("0x"), 16).ok()?;
    }
    Some((nr, args))
}

fn fd_is(pid: i32, fd: i32, fifo: (u64, u64), cache: &mut HashMap<i32, bool>) -> bool {
    *cache.entry(fd).or_insert_with(|| {
        std::fs::metadata(format!("/proc/{pid}/fd/{fd}"))
            .map(|m| (m.dev(), m.ino()) == fifo)
            .unwrap_or(false)
    })
}

fn read_mem(pid: i32, addr: u64, len: usize) -> Option<Vec<u8>> {
    let f = std::fs::File::open(format!("/proc/{pid}/mem")).ok()?;
    let mut buf = vec![0u8; len];
    f.read_exact_at(&mut buf, addr).ok()?;
    Some(buf)
}

fn waits_for_token(pid: i32, tid: i32, fifo: (u64, u64), cache: &mut HashMap<i32, bool>) -> bool {
    let Some((nr, [a0, a1, _])) = blocked_call(pid, tid) else {
        return false;
    };
    if nr == libc::SYS_read {
        return fd_is(pid, a0 as i32, fifo, cache);
    }
    if is_poll(nr) {
        // struct pollfd { int fd; short events; short revents; }
        let n = a1.min(256) as usize;
        let Some(mem) = read_mem(pid, a0, n * 8) else {
            return false;
        };
        return mem.chunks_exact(8).any(|p| {
            let fd = i32::from_ne_bytes([p[0], p[1], p[2], p[3]]);
            let events = i16::from_ne_bytes([p[4], p[5]]);
            events & libc::POLLIN != 0 && fd >= 0 && fd_is(pid, fd, fifo, cache)
        });
    }
    if is_select(nr) && a1 != 0 {
        let nfds = a0.min(1024) as usize;
        let Some(mem) = read_mem(pid, a1, nfds.div_ceil(64) * 8) else {
            return false;
        };
        return (0..nfds)
            .any(|fd| mem[fd / 8] & (1 << (fd % 8)) != 0 && fd_is(pid, fd as i32, fifo, cache));
    }
    false
}

#[cfg(target_arch = "x86_64")]
fn is_poll(nr: i64) -> bool {
    nr == libc::SYS_poll || nr == libc::SYS_ppoll
}
#[cfg(not(target_arch = "x86_64"))]
fn is_poll(nr: i64) -> bool {
    nr == libc::SYS_ppoll
}
#[cfg(target_arch = "x86_64")]
fn is_select(nr: i64) -> bool {
    nr == libc::SYS_select || nr == libc::SYS_pselect6
}
#[cfg(not(target_arch = "x86_64"))]
fn is_select(nr: i64) -> bool {
    nr == libc::SYS_pselect6
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn a_blocked_reader_of_the_fifo_counts_as_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let pipe = crate::fifo::TokenPipe::create(&dir.path().join("f")).unwrap();
        // `sh` runs `head`, which blocks reading one byte from the empty fifo.
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "head -c 1 {} >/dev/null; sleep 0.2",
                pipe.path().display()
            ))
            .spawn()
            .unwrap();
        let root = child.id() as i32;
        let mut seen = TreeScan::default();
        for _ in 0..200 {
            seen = scan(root, pipe.identity());
            if seen.waiting == 1 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(seen.waiting, 1, "{seen:?}");
        assert!(seen.waiters_visible);
        // `head` has the fifo open and no job: it may hold no token.
        assert_eq!(
            (seen.processes, seen.clients, seen.tokens_justified),
            (2, 1, 0),
            "{seen:?}"
        );
        // Give it its token: it stops waiting.
        pipe.put(1).unwrap();
        for _ in 0..200 {
            seen = scan(root, pipe.identity());
            if seen.waiting == 0 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(seen.waiting, 0);
        child.wait().unwrap();
        assert_eq!(scan(root, pipe.identity()), TreeScan::default());
    }
}
