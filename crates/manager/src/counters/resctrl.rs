//! `resctrl`: memory-bandwidth monitoring (Intel RDT MBM / AMD QoS) through the resctrl file
//! system. One monitoring group per application (`mon_groups/partita-<id>`), its threads
//! written to `tasks`, its traffic the sum of `mon_data/*/mbm_total_bytes` over the domains.
//!
//! Threads created after attach inherit the group from their creator (the kernel assigns new
//! tasks their parent's RMID), so the whole application is counted.

use super::{AppRef, CounterError, CounterSource};
use crate::alloc::AppId;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The `resctrl` counter source rooted at a resctrl mount.
#[derive(Debug)]
pub struct ResctrlSource {
    root: PathBuf,
    groups: BTreeMap<AppId, PathBuf>,
}

impl ResctrlSource {
    /// The system mount `/sys/fs/resctrl`; fails (with the reason) when it is not mounted or
    /// has no memory-bandwidth monitoring.
    ///
    /// ```
    /// if let Err(e) = partita_manager::counters::ResctrlSource::system() {
    ///     println!("resctrl skipped: {e}");
    /// }
    /// ```
    pub fn system() -> Result<ResctrlSource, CounterError> {
        ResctrlSource::at(Path::new("/sys/fs/resctrl"))
    }

    /// A source on the resctrl tree at `root` (a test may point it at a directory laid out
    /// like one).
    pub fn at(root: &Path) -> Result<ResctrlSource, CounterError> {
        if !root.join("info").is_dir() {
            return Err(CounterError::Unavailable(format!(
                "{} is not a mounted resctrl file system (mount -t resctrl resctrl {})",
                root.display(),
                root.display()
            )));
        }
        let features =
            std::fs::read_to_string(root.join("info/L3_MON/mon_features")).map_err(|_| {
                CounterError::Unavailable(format!(
                    "{}: no L3_MON/mon_features: the CPU has no memory-bandwidth monitoring",
                    root.display()
                ))
            })?;
        if !features.lines().any(|l| l.trim() == "mbm_total_bytes") {
            return Err(CounterError::Unavailable(format!(
                "{}: mbm_total_bytes not among the monitoring features",
                root.display()
            )));
        }
        Ok(ResctrlSource {
            root: root.to_path_buf(),
            groups: BTreeMap::new(),
        })
    }

    fn group_dir(&self, id: AppId) -> PathBuf {
        self.root.join("mon_groups").join(format!("partita-{id}"))
    }
}

impl CounterSource for ResctrlSource {
    fn name(&self) -> &'static str {
        "resctrl"
    }

    fn attach(&mut self, app: &AppRef) -> Result<(), CounterError> {
        let dir = self.group_dir(app.id);
        if !dir.is_dir() {
            std::fs::create_dir(&dir)
                .map_err(CounterError::io(format!("mkdir {}", dir.display())))?;
        }
        let tasks = dir.join("tasks");
        let tids = std::fs::read_dir(format!("/proc/{}/task", app.pid))
            .map(|d| {
                d.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
                    .collect::<Vec<_>>()
            })
            .unwrap_or_else(|_| vec![app.pid]);
        for tid in tids {
            // The kernel takes one task id per write.
            if let Err(e) = std::fs::write(&tasks, format!("{tid}\n")) {
                // A thread that exited meanwhile is not an error.
                if e.raw_os_error() != Some(libc::ESRCH) {
                    return Err(CounterError::Io {
                        call: format!("write {}", tasks.display()),
                        source: e,
                    });
                }
            }
        }
        self.groups.insert(app.id, dir);
        Ok(())
    }

    fn read(&mut self, app: &AppRef) -> Result<u64, CounterError> {
        let Some(dir) = self.groups.get(&app.id) else {
            return Ok(0);
        };
        let data = dir.join("mon_data");
        let domains = std::fs::read_dir(&data)
            .map_err(CounterError::io(format!("read_dir {}", data.display())))?;
        let mut sum = 0u64;
        for d in domains.filter_map(Result::ok) {
            let f = d.path().join("mbm_total_bytes");
            let text = std::fs::read_to_string(&f)
                .map_err(CounterError::io(format!("read {}", f.display())))?;
            // "Unavailable" is what the kernel prints while an RMID is not yet counting.
            sum = sum.saturating_add(text.trim().parse::<u64>().unwrap_or(0));
        }
        Ok(sum)
    }

    fn detach(&mut self, id: AppId) {
        if let Some(dir) = self.groups.remove(&id) {
            // Removing a group returns its threads to the parent group.
            if let Err(e) = std::fs::remove_dir(&dir) {
                tracing::debug!(dir = %dir.display(), error = %e, "resctrl group not removed");
            }
        }
    }
}
