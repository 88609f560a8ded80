//! System calls and /proc readers the manager needs, as typed, safe wrappers (all of the
//! manager's `unsafe`). Errors name the call.

use partita_protocol::CpuSet;
use std::io;
use std::path::Path;

/// A failed system call or /proc read, naming what was attempted.
///
/// ```
/// let e = partita_manager::sys::set_affinity(0, &partita_protocol::CpuSet::new()).unwrap_err();
/// assert!(e.to_string().starts_with("sched_setaffinity"));
/// ```
#[derive(Debug, thiserror::Error)]
#[error("{call}: {source}")]
pub struct SysError {
    /// The call (`sched_setaffinity(1234)`, `read /proc/stat`, …).
    pub call: String,
    /// The OS error.
    pub source: io::Error,
}

fn sys_err(call: impl Into<String>) -> impl FnOnce(io::Error) -> SysError {
    let call = call.into();
    move |source| SysError { call, source }
}

/// CPU affinity of a thread (0: the calling thread).
///
/// ```
/// let s = partita_manager::sys::get_affinity(0).unwrap();
/// assert!(!s.is_empty());
/// ```
pub fn get_affinity(tid: i32) -> Result<CpuSet, SysError> {
    // SAFETY: cpu_set_t is plain data; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer and size for the call.
    let r =
        unsafe { libc::sched_getaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if r != 0 {
        return Err(sys_err(format!("sched_getaffinity({tid})"))(
            io::Error::last_os_error(),
        ));
    }
    let mut out = CpuSet::new();
    for c in 0..partita_protocol::MAX_CPUS.min(libc::CPU_SETSIZE as usize) {
        // SAFETY: c < CPU_SETSIZE, within the set.
        if unsafe { libc::CPU_ISSET(c, &set) } {
            out.insert(c);
        }
    }
    Ok(out)
}

/// Set the CPU affinity of a thread (0: the calling thread). An empty set is refused (EINVAL).
///
/// ```
/// let s = partita_manager::sys::get_affinity(0).unwrap();
/// partita_manager::sys::set_affinity(0, &s).unwrap();
/// assert!(partita_manager::sys::set_affinity(0, &partita_protocol::CpuSet::new()).is_err());
/// ```
pub fn set_affinity(tid: i32, cpus: &CpuSet) -> Result<(), SysError> {
    if cpus.is_empty() {
        return Err(sys_err(format!("sched_setaffinity({tid})"))(
            io::Error::from_raw_os_error(libc::EINVAL),
        ));
    }
    // SAFETY: zeroed cpu_set_t is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for c in cpus.iter() {
        if c < libc::CPU_SETSIZE as usize {
            // SAFETY: c < CPU_SETSIZE.
            unsafe { libc::CPU_SET(c, &mut set) };
        }
    }
    // SAFETY: valid pointer and size.
    let r = unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if r != 0 {
        return Err(sys_err(format!("sched_setaffinity({tid})"))(
            io::Error::last_os_error(),
        ));
    }
    Ok(())
}

/// Thread ids of a process.
///
/// ```
/// let t = partita_manager::sys::threads(std::process::id() as i32).unwrap();
/// assert!(t.contains(&(std::process::id() as i32)));
/// ```
pub fn threads(pid: i32) -> Result<Vec<i32>, SysError> {
    let dir = format!("/proc/{pid}/task");
    let rd = std::fs::read_dir(&dir).map_err(sys_err(format!("read_dir {dir}")))?;
    Ok(rd
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect())
}

/// Scheduler state letter of a thread (`R`, `S`, `D`, …), from `/proc/PID/task/TID/stat`.
fn thread_state(pid: i32, tid: i32) -> Option<char> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")).ok()?;
    // The command name is in parentheses and may contain spaces; the state follows the last ')'.
    let after = &text[text.rfind(')')? + 1..];
    after.trim_start().chars().next()
}

/// Number of runnable (state `R`) threads of a process; 0 if it is gone.
///
/// ```
/// // This thread is running while it counts.
/// assert!(partita_manager::sys::runnable_threads(std::process::id() as i32) >= 1);
/// ```
pub fn runnable_threads(pid: i32) -> u32 {
    threads(pid)
        .unwrap_or_default()
        .into_iter()
        .filter(|&t| thread_state(pid, t) == Some('R'))
        .count() as u32
}

/// Direct and indirect children of a process (via `/proc/PID/task/TID/children`).
///
/// ```
/// let mut child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
/// let d = partita_manager::sys::descendants(std::process::id() as i32);
/// assert!(d.contains(&(child.id() as i32)));
/// child.kill().unwrap();
/// child.wait().unwrap();
/// ```
pub fn descendants(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let mut stack = vec![pid];
    while let Some(p) = stack.pop() {
        for t in threads(p).unwrap_or_default() {
            if let Ok(text) = std::fs::read_to_string(format!("/proc/{p}/task/{t}/children")) {
                for c in text
                    .split_whitespace()
                    .filter_map(|x| x.parse::<i32>().ok())
                {
                    if !out.contains(&c) && out.len() < 100_000 {
                        out.push(c);
                        stack.push(c);
                    }
                }
            }
        }
    }
    out
}

/// `procs_running` from `/proc/stat`: runnable threads system-wide.
///
/// ```
/// assert!(partita_manager::sys::procs_running().unwrap() >= 1);
/// ```
pub fn procs_running() -> Result<u32, SysError> {
    let text = std::fs::read_to_string("/proc/stat").map_err(sys_err("read /proc/stat"))?;
    text.lines()
        .find_map(|l| l.strip_prefix("procs_running "))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| {
            sys_err("parse /proc/stat procs_running")(io::Error::from(io::ErrorKind::InvalidData))
        })
}

/// Whether a process exists (and is not a zombie).
///
/// ```
/// assert!(partita_manager::sys::alive(std::process::id() as i32));
/// assert!(!partita_manager::sys::alive(i32::MAX));
/// ```
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(text) => text
            .rfind(')')
            .and_then(|i| text[i + 1..].trim_start().chars().next())
            .is_some_and(|s| s != 'Z' && s != 'X'),
        Err(_) => false,
    }
}

/// Effective user id of this process.
///
/// ```
/// let _ = partita_manager::sys::euid();
/// ```
pub fn euid() -> u32 {
    // SAFETY: geteuid has no failure mode.
    unsafe { libc::geteuid() }
}

/// Write a file, naming it in the error.
pub(crate) fn write_file(path: &Path, text: &str) -> Result<(), SysError> {
    std::fs::write(path, text).map_err(sys_err(format!("write {}", path.display())))
}
