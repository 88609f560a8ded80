//! System calls and /proc readers the manager needs, as typed, safe wrappers (all of the
//! manager's `unsafe`). Errors name the call. Affinity is partita-protocol's (re-exported).

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

/// Sets the calling thread's nice value (`setpriority(PRIO_PROCESS, 0, nice)`: nice values
/// are per thread on Linux). Lowering it below the current value needs `CAP_SYS_NICE`.
pub fn set_thread_nice(nice: i32) -> Result<(), SysError> {
    // SAFETY: setpriority takes plain integers and touches no memory of ours; `0` names the
    // calling thread.
    let r = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice) };
    if r == 0 {
        Ok(())
    } else {
        Err(sys_err(format!("setpriority(0, {nice})"))(
            io::Error::last_os_error(),
        ))
    }
}

/// A thread's CPU affinity: partita-protocol's wrappers (the workspace's one
/// `sched_getaffinity` / `sched_setaffinity`), re-exported where the manager's other system
/// calls are. Their [`AffinityError`] names the call and the thread, and converts into
/// [`SysError`].
pub use partita_protocol::sys::{get_affinity, set_affinity, AffinityError};

impl From<AffinityError> for SysError {
    fn from(e: AffinityError) -> SysError {
        SysError {
            call: format!("{}({})", e.call, e.tid),
            source: e.source,
        }
    }
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

/// What Partita reads from `/proc/<pid>/stat` or `/proc/<pid>/task/<tid>/stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    /// Scheduler state letter (`R` running or runnable, `S`, `D`, `Z`, …).
    pub state: char,
    /// `utime + stime + cutime + cstime`, in clock ticks: CPU time of the process (or thread)
    /// and of the children it has reaped.
    pub cpu_ticks: u64,
    /// The user part of it (`utime + cutime`).
    pub user_ticks: u64,
    /// Its nice value (field 19; of the thread, or of the main thread for a process).
    pub nice: i64,
}

impl ProcStat {
    /// Its CPU time split as the kernel splits the system's in `/proc/stat`: user time of a
    /// task at positive nice is counted in the `nice` column, all system time in `system`.
    /// Classified by this (main) thread's nice; threads of other nice values are rare.
    ///
    /// ```
    /// use partita_manager::sys::parse_proc_stat;
    /// let s = "42 (x) R 1 2 3 4 5 6 7 8 9 10 100 20 3 4 20 5 1 0";
    /// let c = parse_proc_stat(s).unwrap().split();
    /// assert_eq!((c.user, c.nice, c.other), (0, 103, 24));
    /// ```
    pub fn split(&self) -> CpuSplit {
        let user = self.user_ticks.min(self.cpu_ticks);
        let other = self.cpu_ticks - user;
        if self.nice > 0 {
            CpuSplit {
                user: 0,
                nice: user,
                other,
            }
        } else {
            CpuSplit {
                user,
                nice: 0,
                other,
            }
        }
    }
}

/// CPU time in clock ticks, split as `/proc/stat`'s `cpu` line: user time at nice ≤ 0,
/// user time at positive nice, and the rest of the busy time (system, irq, softirq, steal).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuSplit {
    /// `user` (guest time included): user time of tasks at nice ≤ 0.
    pub user: u64,
    /// `nice` (guest_nice included): user time of tasks at positive nice.
    pub nice: u64,
    /// `system + irq + softirq + steal`, whatever the task's nice.
    pub other: u64,
}

impl CpuSplit {
    /// All of it.
    pub fn total(&self) -> u64 {
        self.user + self.nice + self.other
    }

    /// Whether no component is below `before`'s (cumulative counters that only grew).
    pub fn at_least(&self, before: &CpuSplit) -> bool {
        self.user >= before.user && self.nice >= before.nice && self.other >= before.other
    }
}

impl std::ops::Add for CpuSplit {
    type Output = CpuSplit;

    /// Component-wise sum.
    fn add(self, o: CpuSplit) -> CpuSplit {
        CpuSplit {
            user: self.user + o.user,
            nice: self.nice + o.nice,
            other: self.other + o.other,
        }
    }
}

/// Parse the text of a `/proc/<pid>/stat` file. The command name (field 2) is in parentheses
/// and may itself contain spaces and parentheses, so fields are counted from the last `)`.
/// `None` for text that is not a complete stat line.
///
/// ```
/// use partita_manager::sys::{parse_proc_stat, ProcStat};
/// let s = "42 (my (odd) name) R 1 2 3 4 5 6 7 8 9 10 100 20 3 4 20 0 1 0";
/// assert_eq!(
///     parse_proc_stat(s),
///     Some(ProcStat { state: 'R', cpu_ticks: 127, user_ticks: 103, nice: 0 })
/// );
/// assert_eq!(parse_proc_stat("garbage"), None);
/// ```
pub fn parse_proc_stat(text: &str) -> Option<ProcStat> {
    let close = text.rfind(')')?;
    let f: Vec<&str> = text[close + 1..].split_whitespace().collect();
    let state = f.first()?.chars().next()?;
    // utime, stime, cutime, cstime are fields 14..=17, i.e. indices 11..=14 after the name;
    // nice is field 19, index 16.
    let field = |i: usize| -> Option<u64> {
        let v: i64 = f.get(i)?.parse().ok()?;
        Some(v.max(0) as u64)
    };
    let mut cpu_ticks = 0u64;
    for i in 11..=14 {
        cpu_ticks = cpu_ticks.saturating_add(field(i)?);
    }
    let user_ticks = field(11)?.saturating_add(field(13)?);
    // Kernels have printed 44+ fields for decades; a line cut before `nice` reads as nice 0.
    let nice = f.get(16).and_then(|v| v.parse().ok()).unwrap_or(0);
    Some(ProcStat {
        state,
        cpu_ticks,
        user_ticks,
        nice,
    })
}

/// Read a `/proc` file whole. `/proc` files report size 0, so `read_to_string` sizes its
/// buffer with a `statx` and then probes with small reads (about ten calls for a 300-byte
/// stat file); one large buffer reads it in one call and sees the end in a second.
pub fn read_proc(path: &str) -> Option<String> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).ok()?;
    let mut out = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        match f.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    String::from_utf8(out).ok()
}

/// Read and parse `/proc/<pid>/stat` (`tid`: `/proc/<pid>/task/<tid>/stat`); `None` when the
/// process or thread is gone.
///
/// ```
/// let me = std::process::id() as i32;
/// assert!(partita_manager::sys::read_proc_stat(me, None).is_some());
/// assert!(partita_manager::sys::read_proc_stat(i32::MAX, None).is_none());
/// ```
pub fn read_proc_stat(pid: i32, tid: Option<i32>) -> Option<ProcStat> {
    let path = match tid {
        Some(t) => format!("/proc/{pid}/task/{t}/stat"),
        None => format!("/proc/{pid}/stat"),
    };
    parse_proc_stat(&read_proc(&path)?)
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
        .filter(|&t| read_proc_stat(pid, Some(t)).is_some_and(|s| s.state == 'R'))
        .count() as u32
}

/// A process as one walk of `/proc` sees it ([`foreground_runnable`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcRunnable {
    /// The process.
    pub pid: i32,
    /// Its parent (0 when unknown).
    pub ppid: i32,
    /// Its threads that are runnable (state `R`) at nice ≤ 0: each wants a CPU against a
    /// managed program's workers (a niced one gets a few percent of a contended CPU).
    pub foreground: u32,
}

/// Every process of the system with its runnable threads at nice ≤ 0: one read of
/// `/proc/<pid>/stat` and of each `/proc/<pid>/task/<tid>/stat` (a few hundred small reads on
/// a typical machine, so for registrations, not for every sample). Processes and threads
/// that exit during the walk are skipped, and so are kernel threads (`kthreadd`, pid 2, and
/// its children): a writeback or block-layer worker runnable across the three readings of a
/// busy disk is not a process that wants a CPU against a program (they were the only nice-0
/// threads in 7 of 300 walks beside a build).
///
/// ```
/// let me = std::process::id() as i32;
/// let all = partita_manager::sys::foreground_runnable();
/// // This thread is running while it walks, at the test's nice.
/// let mine = all.iter().find(|p| p.pid == me).unwrap();
/// assert!(mine.ppid > 0);
/// ```
pub fn foreground_runnable() -> Vec<ProcRunnable> {
    /// The kernel's thread creator, parent of every kernel thread.
    const KTHREADD: i32 = 2;
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let number = |e: std::fs::DirEntry| e.file_name().to_str()?.parse::<i32>().ok();
    let mut out = Vec::new();
    for pid in procs.flatten().filter_map(number) {
        let Some(ppid) = parent_pid(pid) else {
            continue;
        };
        if pid == KTHREADD || ppid == KTHREADD {
            continue;
        }
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        let foreground = tasks
            .flatten()
            .filter_map(number)
            .filter(|&t| {
                read_proc_stat(pid, Some(t)).is_some_and(|s| s.state == 'R' && s.nice <= 0)
            })
            .count() as u32;
        out.push(ProcRunnable {
            pid,
            ppid,
            foreground,
        });
    }
    out
}

/// Runnable threads of a process, and of its descendants too when `tree` is set.
///
/// ```
/// use std::process::Command;
/// // An idle shell whose child spins: the spinning thread is the tree's, not the shell's.
/// let mut sh = Command::new("sh").args(["-c", "sh -c 'while :; do :; done' & wait"]).spawn().unwrap();
/// let pid = sh.id() as i32;
/// while partita_manager::sys::descendants(pid).is_empty() {
///     std::thread::sleep(std::time::Duration::from_millis(5));
/// }
/// std::thread::sleep(std::time::Duration::from_millis(50)); // let the child reach its loop
/// assert_eq!(partita_manager::sys::runnable_in(pid, false), 0);
/// assert!(partita_manager::sys::runnable_in(pid, true) >= 1);
/// for c in partita_manager::sys::descendants(pid) {
///     let _ = Command::new("kill").arg(c.to_string()).status();
/// }
/// sh.wait().unwrap();
/// ```
pub fn runnable_in(pid: i32, tree: bool) -> u32 {
    let own = runnable_threads(pid);
    if !tree {
        return own;
    }
    own + descendants(pid)
        .into_iter()
        .map(runnable_threads)
        .sum::<u32>()
}

/// CPU ticks of a process (its threads' and its reaped children's, [`ProcStat::cpu_ticks`]),
/// and of its live descendants too when `tree` is set; 0 for a process that is gone. The
/// CPU-time counterpart of [`runnable_in`].
///
/// ```
/// let me = std::process::id() as i32;
/// let own = partita_manager::sys::cpu_ticks_in(me, false);
/// assert!(partita_manager::sys::cpu_ticks_in(me, true) >= own);
/// ```
pub fn cpu_ticks_in(pid: i32, tree: bool) -> u64 {
    cpu_split_in(pid, tree).total()
}

/// [`cpu_ticks_in`], split by [`ProcStat::split`] (one `/proc/<pid>/stat` read a process).
///
/// ```
/// let me = std::process::id() as i32;
/// let own = partita_manager::sys::cpu_split_in(me, false);
/// assert!(partita_manager::sys::cpu_split_in(me, true).at_least(&own));
/// ```
pub fn cpu_split_in(pid: i32, tree: bool) -> CpuSplit {
    let split = |p: i32| read_proc_stat(p, None).map_or_else(CpuSplit::default, |s| s.split());
    let own = split(pid);
    if !tree {
        return own;
    }
    descendants(pid)
        .into_iter()
        .map(split)
        .fold(own, |a, b| a + b)
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
            if let Some(text) = read_proc(&format!("/proc/{p}/task/{t}/children")) {
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
    let text = read_proc("/proc/stat")
        .ok_or_else(|| sys_err("read /proc/stat")(io::Error::from(io::ErrorKind::NotFound)))?;
    text.lines()
        .find_map(|l| l.strip_prefix("procs_running "))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| {
            sys_err("parse /proc/stat procs_running")(io::Error::from(io::ErrorKind::InvalidData))
        })
}

/// CPU time the whole system spent busy, in clock ticks, split by [`CpuSplit`]'s columns,
/// from the first line of `/proc/stat`.
///
/// ```
/// let a = partita_manager::sys::system_cpu().unwrap();
/// assert!(partita_manager::sys::system_cpu().unwrap().at_least(&a));
/// ```
pub fn system_cpu() -> Result<CpuSplit, SysError> {
    let text = read_proc("/proc/stat")
        .ok_or_else(|| sys_err("read /proc/stat")(io::Error::from(io::ErrorKind::NotFound)))?;
    parse_cpu_split(&text)
        .ok_or_else(|| sys_err("parse /proc/stat cpu")(io::Error::from(io::ErrorKind::InvalidData)))
}

/// The busy ticks of a `/proc/stat` text (`cpu` line: user nice system idle iowait irq
/// softirq steal …; idle and iowait are not busy; guest and guest_nice are already in user
/// and nice).
///
/// ```
/// let t = "cpu  10 1 5 900 7 2 3 4 0 0\ncpu0 5 0 2 450 3 1 1 2 0 0\n";
/// let c = partita_manager::sys::parse_cpu_split(t).unwrap();
/// assert_eq!((c.user, c.nice, c.other), (10, 1, 5 + 2 + 3 + 4));
/// assert_eq!(partita_manager::sys::parse_cpu_split("cpu  1 2\n"), None);
/// ```
pub fn parse_cpu_split(stat: &str) -> Option<CpuSplit> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|v| v.parse().ok())
        .collect::<Option<_>>()?;
    let at = |i: usize| f.get(i).copied().unwrap_or(0);
    (f.len() >= 4).then(|| CpuSplit {
        user: at(0),
        nice: at(1),
        other: at(2) + at(5) + at(6) + at(7),
    })
}

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`), the unit of [`system_cpu`] and
/// [`ProcStat::cpu_ticks`]; 100 where the call fails (Linux's fixed USER_HZ).
pub fn ticks_per_second() -> u64 {
    match nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK) {
        Ok(Some(t)) if t > 0 => t as u64,
        _ => 100,
    }
}

/// Whether a process exists (and is not a zombie).
///
/// ```
/// assert!(partita_manager::sys::alive(std::process::id() as i32));
/// assert!(!partita_manager::sys::alive(i32::MAX));
/// ```
pub fn alive(pid: i32) -> bool {
    read_proc_stat(pid, None).is_some_and(|s| s.state != 'Z' && s.state != 'X')
}

/// Parent pid of a process from `/proc/<pid>/stat` (field 4); `None` when it is gone.
///
/// ```
/// assert_eq!(partita_manager::sys::parent_pid(std::process::id() as i32), Some(std::os::unix::process::parent_id() as i32));
/// ```
pub fn parent_pid(pid: i32) -> Option<i32> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let close = text.rfind(')')?;
    text[close + 1..].split_whitespace().nth(1)?.parse().ok()
}

/// Start time of a process (`/proc/<pid>/stat` field 22, clock ticks since boot): with the
/// pid, a name no later process can share.
///
/// ```
/// assert!(partita_manager::sys::start_time(std::process::id() as i32).is_some());
/// ```
pub fn start_time(pid: i32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let close = text.rfind(')')?;
    text[close + 1..].split_whitespace().nth(19)?.parse().ok()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_of_this_thread_parses() {
        // The calling thread is running while it reads its own stat, so its state is R; the
        // process-level /proc/self/stat shows the main thread, which may be asleep.
        let text = read_proc("/proc/thread-self/stat").unwrap();
        assert_eq!(parse_proc_stat(&text).unwrap().state, 'R');
    }

    #[test]
    fn truncated_or_garbled_stat_is_rejected() {
        assert_eq!(parse_proc_stat("1 (x) R 1 2 3"), None);
        assert_eq!(
            parse_proc_stat("1 (x) R 1 2 3 4 5 6 7 8 9 10 x 20 3 4"),
            None
        );
        assert_eq!(parse_proc_stat("1 (x)"), None);
        assert_eq!(parse_proc_stat(""), None);
    }

    #[test]
    fn negative_child_times_count_as_zero() {
        let s = parse_proc_stat("7 (a) S 1 2 3 4 5 6 7 8 9 10 5 5 -3 0 20").unwrap();
        assert_eq!(
            s,
            ProcStat {
                state: 'S',
                cpu_ticks: 10,
                user_ticks: 5,
                nice: 0
            }
        );
    }

    #[test]
    fn user_time_of_a_niced_task_is_in_the_nice_column() {
        // utime 7, stime 2, cutime 1, cstime 0, priority 30, nice 10.
        let niced = parse_proc_stat("7 (a) R 1 2 3 4 5 6 7 8 9 10 7 2 1 0 30 10 1").unwrap();
        assert_eq!(niced.nice, 10);
        let c = niced.split();
        assert_eq!((c.user, c.nice, c.other), (0, 8, 2));
        // Nice 0 and negative nice: user.
        for (line, nice) in [
            ("7 (a) R 1 2 3 4 5 6 7 8 9 10 7 2 1 0 20 0 1", 0),
            ("7 (a) R 1 2 3 4 5 6 7 8 9 10 7 2 1 0 15 -5 1", -5),
        ] {
            let s = parse_proc_stat(line).unwrap();
            assert_eq!(s.nice, nice);
            let c = s.split();
            assert_eq!((c.user, c.nice, c.other), (8, 0, 2));
        }
        // This thread, whatever the nice it runs at: the split adds up.
        let me = read_proc("/proc/thread-self/stat").and_then(|t| parse_proc_stat(&t));
        let me = me.expect("own stat");
        assert_eq!(me.split().total(), me.cpu_ticks);
    }
}
