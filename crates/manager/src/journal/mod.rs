//! The journal: what a manager changed outside itself, written down *before* it changes it,
//! so that a later manager (or `partita serve --cleanup`) can undo it when this one dies
//! without cleaning up (SIGKILL, OOM kill, power cut of the manager alone).
//!
//! One file per manager in its state directory (the socket's directory), named like its
//! cgroup directory, `partita-mgr-<pid>-<start time>-<n>.journal` (`n` tells apart managers
//! run inside one process), rewritten whole (write + rename) at each change. Lines:
//!
//! ```text
//! partita-journal 1
//! affinity <pid> <start time> <cpu list>   the process's original mask (every thread's,
//!                                           threads created later included)
//! moved <pid> <start time> <cgroup dir>    moved out of this cgroup into a partition's
//! root <cgroup dir>                        the manager's own cgroup directory
//! subtree <cgroup dir>                     where it wrote `+cpuset` into subtree_control
//! ```
//!
//! [`sweep`] undoes the journal of every manager that is gone: affinities and cgroup moves of
//! processes that are still the *same* process (a pidfd opened first, then its start time
//! compared, then the pidfd checked alive), then removes the cgroup directory and undoes
//! `+cpuset`. Journals are trusted only when owned by this user and writable by no one else:
//! a journal names processes to act on.
//!
//! # Children the dead manager never saw
//!
//! A child forked by a confined process after the manager's last walk inherited the narrowed
//! mask and is not in the journal. So the sweep also restores, below every journalled process
//! that is still the same process (its *anchor*), the descendants the journal does not list:
//! it reads each anchor's mask as the dead manager left it (its main thread's) *before*
//! restoring the anchor, restores the anchors, then walks their trees (current children of
//! every thread, recursively, each child's pidfd verified against its parent:
//! `proc_ref::walk`, the manager's own walk) and gives every thread of such a descendant
//! whose mask is still its nearest anchor's left mask that anchor's original mask
//! ([`unseen_restores`], a pure function). Walking after the anchors are restored means a
//! child an anchor forks while the sweep runs either is in the walk or inherited the
//! original mask.
//!
//! Deliberately not handled (the journal cannot prove these are the manager's doing, and a
//! wrong guess would change a process the manager never touched):
//!
//! - An orphan: a child whose parent (the anchor, or an unlisted process in between) exited
//!   is reparented (to init or a subreaper) and is out of the walk; its parent pid no longer
//!   says where it came from. The same for the descendants of a journalled process that
//!   exited or whose pid names another process now (its entry is discarded, its tree is
//!   never walked). They keep the mask they inherited.
//! - A process or thread that changed its own mask afterwards (`taskset`,
//!   `sched_setaffinity`): its mask is no longer the anchor's left mask, so it is left alone,
//!   and so are the descendants it forked after the change (they inherited its choice). One
//!   forked before the change still carries the confinement and is restored.
//! - A mask chosen to equal the confinement exactly cannot be told from the confinement and
//!   is restored. Likewise an anchor that changed its own mask after the last walk is
//!   restored (as before) and its children forked since, carrying that mask, with it: the
//!   journal records originals, not the masks the manager gave. So is a descendant that a
//!   live manager confined to exactly that mask; that manager narrows it again at its next
//!   walk.
//! - The anchor's main thread stands for all its threads: a child forked by a thread that
//!   pinned itself inherited that pin and is left alone.
//! - A descendant that sets its own mask between the sweep's read and its write gets the
//!   original over it, and a child that an unlisted descendant forks after the walk keeps
//!   the confinement (the live manager's restore at exit has the same windows).

use crate::cgroup;
use crate::proc_ref::{walk, ProcRef};
use crate::sys;
use partita_protocol::CpuSet;
use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

mod retire;
mod unseen;
pub use unseen::{unseen_restores, Anchor, Found, Restore};

const HEADER: &str = "partita-journal 1";
const SUFFIX: &str = ".journal";

/// What one manager changed (the content of one journal file).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Record {
    /// Original affinity per process: pid → (start time, mask).
    pub affinity: BTreeMap<i32, (u64, CpuSet)>,
    /// Processes moved into a partition cgroup: pid → (start time, the cgroup they left).
    pub moved: BTreeMap<i32, (u64, PathBuf)>,
    /// The manager's own cgroup directory, once created.
    pub root: Option<PathBuf>,
    /// Where the manager added `+cpuset` to `cgroup.subtree_control`.
    pub subtree: Option<PathBuf>,
}

/// A journal line that does not parse (the file is then ignored whole).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("journal line {line}: {reason}")]
pub struct ParseError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub reason: String,
}

impl Record {
    /// Nothing to undo.
    pub fn is_empty(&self) -> bool {
        self.affinity.is_empty()
            && self.moved.is_empty()
            && self.root.is_none()
            && self.subtree.is_none()
    }

    /// The file's text. Paths containing a newline are never recorded (see [`Journal`]).
    ///
    /// ```
    /// use partita_manager::journal::Record;
    /// let mut r = Record::default();
    /// r.affinity.insert(7, (99, "0-3".parse().unwrap()));
    /// r.root = Some("/sys/fs/cgroup/x y".into());
    /// assert_eq!(Record::parse(&r.to_text()).unwrap(), r);
    /// ```
    pub fn to_text(&self) -> String {
        let mut s = format!("{HEADER}\n");
        for (pid, (start, mask)) in &self.affinity {
            s.push_str(&format!("affinity {pid} {start} {mask}\n"));
        }
        for (pid, (start, dir)) in &self.moved {
            s.push_str(&format!("moved {pid} {start} {}\n", dir.display()));
        }
        if let Some(r) = &self.root {
            s.push_str(&format!("root {}\n", r.display()));
        }
        if let Some(d) = &self.subtree {
            s.push_str(&format!("subtree {}\n", d.display()));
        }
        s
    }

    /// Parse a journal's text.
    ///
    /// ```
    /// use partita_manager::journal::Record;
    /// assert!(Record::parse("partita-journal 1\naffinity 1 2 0-1\n").is_ok());
    /// assert_eq!(Record::parse("partita-journal 1\naffinity x 2 0\n").unwrap_err().line, 2);
    /// assert!(Record::parse("something else\n").is_err());
    /// ```
    pub fn parse(text: &str) -> Result<Record, ParseError> {
        let mut r = Record::default();
        let mut lines = text.lines().enumerate();
        if lines.next().map(|(_, l)| l) != Some(HEADER) {
            return Err(bad(1, "not a partita journal"));
        }
        for (i, line) in lines {
            let n = i + 1;
            let (kind, rest) = line.split_once(' ').unwrap_or((line, ""));
            match kind {
                "affinity" => {
                    let (pid, start, tail) = pid_start(rest).ok_or_else(|| bad(n, "pid"))?;
                    let mask: CpuSet = tail.parse().map_err(|_| bad(n, "cpu list"))?;
                    r.affinity.insert(pid, (start, mask));
                }
                "moved" => {
                    let (pid, start, tail) = pid_start(rest).ok_or_else(|| bad(n, "pid"))?;
                    r.moved.insert(pid, (start, absolute(tail, n)?));
                }
                "root" => r.root = Some(absolute(rest, n)?),
                "subtree" => r.subtree = Some(absolute(rest, n)?),
                "" => {}
                other => return Err(bad(n, &format!("unknown entry {other:?}"))),
            }
        }
        Ok(r)
    }
}

fn bad(line: usize, reason: &str) -> ParseError {
    ParseError {
        line,
        reason: reason.to_string(),
    }
}

fn pid_start(s: &str) -> Option<(i32, u64, &str)> {
    let mut f = s.splitn(3, ' ');
    let pid: i32 = f.next()?.parse().ok().filter(|&p| p > 0)?;
    let start: u64 = f.next()?.parse().ok()?;
    Some((pid, start, f.next()?))
}

fn absolute(s: &str, line: usize) -> Result<PathBuf, ParseError> {
    let p = PathBuf::from(s);
    if p.is_absolute() {
        Ok(p)
    } else {
        Err(bad(line, "not an absolute path"))
    }
}

/// This manager's journal: the [`Record`] in memory and its file, kept equal.
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    record: Record,
    warned: bool,
    /// Entries not written yet ([`Journal::affinity_deferred`]).
    dirty: bool,
}

impl Journal {
    /// The journal of this manager in `dir` (the file appears at the first entry).
    ///
    /// ```
    /// let j = partita_manager::journal::Journal::new(&std::env::temp_dir());
    /// assert!(j.path().to_string_lossy().ends_with(".journal"));
    /// ```
    pub fn new(dir: &Path) -> Journal {
        static SEQ: AtomicUsize = AtomicUsize::new(0);
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let name = format!("{}-{n}{SUFFIX}", cgroup::own_dir_name());
        Journal {
            path: dir.join(name),
            record: Record::default(),
            warned: false,
            dirty: false,
        }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Record `proc`'s original affinity (before narrowing it). `false` if the process is
    /// gone (its start time unreadable).
    pub fn affinity(&mut self, proc: &ProcRef, mask: &CpuSet) -> bool {
        let Some(start) = start_of(proc) else {
            return false;
        };
        self.record.affinity.insert(proc.pid(), (start, *mask));
        self.flush();
        true
    }

    /// [`Journal::affinity`] for a process the manager is not changing now (a child that
    /// inherited its parent's confinement): the file is written with the next entry or
    /// [`Journal::sync`], so that a walk over a large process tree writes it once.
    pub fn affinity_deferred(&mut self, proc: &ProcRef, mask: &CpuSet) -> bool {
        let Some(start) = start_of(proc) else {
            return false;
        };
        self.record.affinity.insert(proc.pid(), (start, *mask));
        self.dirty = true;
        true
    }

    /// Write what [`Journal::affinity_deferred`] recorded.
    pub fn sync(&mut self) {
        if self.dirty {
            self.flush();
        }
    }

    /// Record that `proc` leaves cgroup `origin` (before moving it).
    pub fn moved(&mut self, proc: &ProcRef, origin: &Path) -> bool {
        let Some(start) = start_of(proc) else {
            return false;
        };
        if recordable(origin) {
            self.record
                .moved
                .insert(proc.pid(), (start, origin.to_path_buf()));
            self.flush();
        }
        true
    }

    /// Record the manager's cgroup directory (before creating it).
    pub fn root(&mut self, dir: &Path) {
        if recordable(dir) {
            self.record.root = Some(dir.to_path_buf());
            self.flush();
        }
    }

    /// Record that `+cpuset` is being added to `dir`'s `subtree_control`.
    pub fn subtree(&mut self, dir: &Path) {
        if recordable(dir) {
            self.record.subtree = Some(dir.to_path_buf());
            self.flush();
        }
    }

    /// Writing `+cpuset` failed: nothing to undo there.
    pub fn subtree_not_added(&mut self) {
        if self.record.subtree.take().is_some() {
            self.flush();
        }
    }

    /// Forget a process (its affinity was restored or it left its cgroup).
    pub fn forget(&mut self, pid: i32) {
        let a = self.record.affinity.remove(&pid).is_some();
        let m = self.record.moved.remove(&pid).is_some();
        if a || m {
            self.flush();
        }
    }

    /// Keep only the affinities of processes for which `affinity(pid)` holds and the moves of
    /// those for which `moved(pid)` does.
    pub fn retain(&mut self, affinity: impl Fn(i32) -> bool, moved: impl Fn(i32) -> bool) {
        let before = (self.record.affinity.len(), self.record.moved.len());
        self.record.affinity.retain(|p, _| affinity(*p));
        self.record.moved.retain(|p, _| moved(*p));
        if before != (self.record.affinity.len(), self.record.moved.len()) {
            self.flush();
        }
    }

    /// Everything was undone: remove the file.
    pub fn clear(&mut self) {
        self.record = Record::default();
        self.flush();
    }

    /// What is recorded now.
    pub fn record(&self) -> &Record {
        &self.record
    }

    /// Make the file say what the record says: rewrite it (a temporary file renamed over it,
    /// so a reader never sees half a journal), or remove it when there is nothing to undo;
    /// neither waits for the disk ([`retire`]).
    /// Failures are logged once: the manager keeps working, it just cannot be undone after a
    /// crash.
    fn flush(&mut self) {
        self.dirty = false;
        // The file being replaced or removed is closed off this thread ([`retire`]).
        let old = retire::hold(&self.path);
        let r = if self.record.is_empty() {
            match std::fs::remove_file(&self.path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
                _ => Ok(()),
            }
        } else {
            write_atomic(&self.path, &self.record.to_text())
        };
        retire::close_later(old);
        if let Err(e) = r {
            if !self.warned {
                self.warned = true;
                tracing::warn!(journal = %self.path.display(), error = %e, "cannot write the journal: what this manager changes will not be undone if it is killed");
            }
        }
    }
}

fn start_of(proc: &ProcRef) -> Option<u64> {
    let start = sys::start_time(proc.pid())?;
    proc.alive().then_some(start)
}

fn recordable(p: &Path) -> bool {
    p.is_absolute() && !p.to_string_lossy().contains('\n')
}

fn write_atomic(path: &Path, text: &str) -> std::io::Result<()> {
    let tmp = path.with_extension("journal.tmp");
    let _ = std::fs::remove_file(&tmp);
    // create_new: never write through a file (or symlink) someone else put there.
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(text.as_bytes())?;
    drop(f);
    std::fs::rename(&tmp, path)
}

/// What a [`sweep`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Swept {
    /// Journals of dead managers undone (and removed).
    pub journals: usize,
    /// Processes whose affinity was restored.
    pub restored: usize,
    /// Descendants the journal did not list (forked after the dead manager's last walk)
    /// whose affinity was restored: see [the module docs](self).
    pub children: usize,
    /// Processes moved back to the cgroup they came from.
    pub moved_back: usize,
    /// Entries discarded: the process exited (or its pid names another process now).
    pub discarded: usize,
    /// Journals ignored: not this user's, writable by others, or unreadable.
    pub untrusted: usize,
    /// Dead managers' cgroup directories removed by the cgroup sweep (see
    /// [`crate::cleanup`]; a journal's own directory is counted in `journals`).
    pub cgroups: usize,
}

/// The owner (`partita-mgr-<pid>-<start>`) of a journal file name.
fn owner_of(file: &str) -> Option<&str> {
    let stem = file.strip_suffix(SUFFIX)?;
    let (owner, seq) = stem.rsplit_once('-')?;
    seq.parse::<u64>().ok()?;
    owner.starts_with(cgroup::PREFIX).then_some(owner)
}

/// Undo the journal of every dead manager in `dir` and remove it.
///
/// ```
/// let s = partita_manager::journal::sweep(std::path::Path::new("/nonexistent"));
/// assert_eq!(s.journals, 0);
/// ```
pub fn sweep(dir: &Path) -> Swept {
    let mut swept = Swept::default();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return swept;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(owner) = owner_of(&name) else {
            continue;
        };
        if !cgroup::owner_dead(owner) {
            continue;
        }
        let path = e.path();
        match read_trusted(&path) {
            Some(record) => {
                undo(&record, owner, &mut swept);
                swept.journals += 1;
                tracing::info!(journal = %path.display(), "undid a dead manager's journal");
            }
            None => {
                swept.untrusted += 1;
                tracing::warn!(journal = %path.display(), "ignored a journal (not this user's, writable by others, or not a journal)");
                continue;
            }
        }
        let _ = std::fs::remove_file(&path);
    }
    swept
}

/// The record of a journal file owned by this user and writable by no one else.
fn read_trusted(path: &Path) -> Option<Record> {
    let md = std::fs::symlink_metadata(path).ok()?;
    if !md.file_type().is_file() || md.uid() != sys::euid() || md.mode() & 0o022 != 0 {
        return None;
    }
    Record::parse(&std::fs::read_to_string(path).ok()?).ok()
}

/// `pid` opened by pidfd and checked to be the process that started at `start`.
fn same_process(pid: i32, start: u64) -> Option<ProcRef> {
    let p = ProcRef::open(pid).ok()?;
    (sys::start_time(pid) == Some(start) && p.alive()).then_some(p)
}

/// Undo one dead manager's record.
fn undo(r: &Record, owner: &str, swept: &mut Swept) {
    undo_affinities(r, swept);
    for (&pid, (start, origin)) in &r.moved {
        let back = same_process(pid, *start).is_some_and(|_| {
            in_owner_cgroup(pid, owner)
                && std::fs::write(origin.join("cgroup.procs"), pid.to_string()).is_ok()
        });
        if back {
            swept.moved_back += 1;
        } else {
            swept.discarded += 1;
        }
    }
    if let Some(root) = &r.root {
        // What is left (processes forked inside a partition) goes to the dead manager's own
        // cgroup, the directory its cgroup was created in.
        if root.exists() {
            if let Some(parent) = root.parent() {
                cgroup::drain_and_remove(root, parent);
            }
        }
    }
    if let Some(dir) = &r.subtree {
        // Fails (EBUSY) while another cgroup below still uses cpuset: then it stays.
        let _ = std::fs::write(dir.join("cgroup.subtree_control"), "-cpuset");
    }
}

/// Restore the journalled affinities of processes that are still the same ones, then those
/// of their descendants that still carry the confinement (see the module docs).
fn undo_affinities(r: &Record, swept: &mut Swept) {
    let mut anchors = BTreeMap::new();
    let mut procs = Vec::new();
    for (&pid, &(start, original)) in &r.affinity {
        match same_process(pid, start) {
            Some(p) => {
                // Before the restore below: the mask the dead manager left.
                let left = sys::get_affinity(pid).ok();
                anchors.insert(pid, Anchor { original, left });
                procs.push((p, original));
            }
            None => swept.discarded += 1,
        }
    }
    for (p, original) in &procs {
        set_threads(p, sys::threads(p.pid()).unwrap_or_default(), original);
        swept.restored += 1;
    }
    let roots: Vec<ProcRef> = procs.into_iter().map(|(p, _)| p).collect();
    let mut refs = BTreeMap::new();
    let mut found = Vec::new();
    for (p, parent) in walk(&roots) {
        // `None`: an anchor (the walk's start), restored above.
        let Some(parent) = parent else {
            continue;
        };
        let threads = sys::threads(p.pid())
            .unwrap_or_default()
            .into_iter()
            .filter_map(|t| Some((t, sys::get_affinity(t).ok()?)))
            .collect();
        found.push(Found {
            pid: p.pid(),
            parent,
            threads,
        });
        refs.insert(p.pid(), p);
    }
    for r in unseen_restores(&anchors, &found) {
        if let Some(p) = refs.get(&r.pid) {
            set_threads(p, r.tids, &r.mask);
            swept.children += 1;
        }
    }
}

/// Set `tids` of `p` to `mask`, each only while `p` is still alive (its tids are its own).
fn set_threads(p: &ProcRef, tids: Vec<i32>, mask: &CpuSet) {
    for tid in tids {
        if p.alive() {
            let _ = sys::set_affinity(tid, mask);
        }
    }
}

/// Whether `pid` sits in a cgroup of the manager named `owner` (in any hierarchy).
fn in_owner_cgroup(pid: i32, owner: &str) -> bool {
    let needle = format!("/{owner}/");
    std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .unwrap_or_default()
        .lines()
        .any(|l| l.splitn(3, ':').nth(2).is_some_and(|p| p.contains(&needle)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn records_round_trip(
            aff in proptest::collection::btree_map(1i32..i32::MAX, (any::<u64>(), proptest::collection::btree_set(0usize..64, 1..8)), 0..8),
            moved in proptest::collection::btree_map(1i32..i32::MAX, (any::<u64>(), "/[a-z .]{0,12}"), 0..4),
            root in proptest::option::of("/[a-z_ -]{0,12}"),
        ) {
            let r = Record {
                affinity: aff.into_iter().map(|(p, (s, m))| (p, (s, m.into_iter().collect()))).collect(),
                moved: moved.into_iter().map(|(p, (s, d))| (p, (s, PathBuf::from(d)))).collect(),
                root: root.map(PathBuf::from),
                subtree: None,
            };
            prop_assert_eq!(Record::parse(&r.to_text()).unwrap(), r);
        }

        #[test]
        fn any_text_parses_or_errs_without_panicking(text in ".{0,200}") {
            let _ = Record::parse(&format!("{HEADER}\n{text}"));
        }
    }

    #[test]
    fn owners_are_taken_from_file_names() {
        assert_eq!(
            owner_of("partita-mgr-12-345-0.journal"),
            Some("partita-mgr-12-345")
        );
        assert_eq!(owner_of("partita-mgr-12-345-x.journal"), None);
        assert_eq!(owner_of("partita-mgr-12-345-0.journal.tmp"), None);
        assert_eq!(owner_of("other-1.journal"), None);
    }

    fn temp_dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("partita-journal-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn the_file_follows_the_record_and_goes_away_when_empty() {
        let d = temp_dir("file");
        let mut j = Journal::new(&d);
        let me = ProcRef::open(std::process::id() as i32).unwrap();
        assert!(j.affinity(&me, &"0".parse().unwrap()));
        let text = std::fs::read_to_string(j.path()).unwrap();
        assert_eq!(Record::parse(&text).unwrap(), *j.record());
        let mode = std::fs::metadata(j.path()).unwrap().mode();
        assert_eq!(mode & 0o077, 0, "journal readable by others: {mode:o}");
        j.forget(me.pid());
        assert!(!j.path().exists());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_live_managers_journal_is_left_alone_and_a_foreign_one_is_not_trusted() {
        let d = temp_dir("live");
        let mut j = Journal::new(&d);
        j.root(Path::new("/nonexistent/partita-mgr-x"));
        assert_eq!(
            sweep(&d),
            Swept::default(),
            "swept a live manager's journal"
        );
        assert!(j.path().exists());
        // A dead manager's journal writable by others is not acted on.
        let dead = d.join("partita-mgr-999999999-1-0.journal");
        std::fs::write(&dead, format!("{HEADER}\naffinity 1 1 0\n")).unwrap();
        std::fs::set_permissions(&dead, std::os::unix::fs::PermissionsExt::from_mode(0o666))
            .unwrap();
        assert_eq!(sweep(&d).untrusted, 1);
        let _ = std::fs::remove_dir_all(&d);
    }
}
