//! Replacing or removing the journal file without waiting for the disk.
//!
//! The journal is rewritten whole (a temporary file renamed over it) while the manager holds
//! the enforcer's lock, so every stall there stalls the manager: status, registrations,
//! `partita run`. Renaming over a file, or unlinking it, drops the old file's last
//! reference, and the kernel then evicts its inode *in that call* — on ext4 waiting for any
//! writeback of its pages still in flight (`truncate_inode_partial_folio` →
//! `folio_wait_writeback`; ext4 starts that writeback itself when a file is renamed over
//! another, `auto_da_alloc`). With a build writing gigabytes beside it, that wait was over
//! 10 s here (`rename` in D state, kernel stack in `docs/bench/manager.md`), and a status
//! request timed out.
//!
//! So the old file is opened before it is replaced, and that descriptor — the inode's last
//! reference once the name is gone — is closed on a thread of its own, where the eviction
//! may wait as long as the disk likes. Durability is not the point of the journal (a reboot
//! ends the processes it describes), so nothing here syncs.

use std::fs::File;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::mpsc::{self, Sender};
use std::sync::{Mutex, OnceLock};

/// Open `path` so that it outlives its name: `None` if there is no such regular file. Never
/// blocks on what someone may have put there (a FIFO opens non-blocking; a symlink is not
/// followed).
pub(super) fn hold(path: &Path) -> Option<File> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
        .open(path)
        .ok()?;
    f.metadata().ok()?.is_file().then_some(f)
}

/// Close `file` on the closer thread (inline if that thread cannot be started).
pub(super) fn close_later(file: Option<File>) {
    let Some(file) = file else { return };
    static CLOSER: OnceLock<Option<Mutex<Sender<File>>>> = OnceLock::new();
    let closer = CLOSER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<File>();
        std::thread::Builder::new()
            .name("partita-journal-closer".into())
            .spawn(move || {
                // Each drop may wait for the disk; the sender never does.
                for f in rx {
                    drop(f);
                }
            })
            .ok()
            .map(|_| Mutex::new(tx))
    });
    if let Some(tx) = closer {
        let tx = crate::sync::lock(tx);
        // A send fails only if the thread is gone; the file is then dropped here.
        let _ = tx.send(file);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn a_held_file_outlives_its_name_until_closed() {
        let dir = std::env::temp_dir().join(format!("partita-retire-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("j");
        std::fs::write(&path, "old").unwrap();
        let held = hold(&path).expect("a regular file");
        std::fs::write(dir.join("new"), "new").unwrap();
        std::fs::rename(dir.join("new"), &path).unwrap();
        // The replaced inode is still alive (no link, one open file), so the rename did not
        // evict it; closing it later does.
        assert_eq!(held.metadata().unwrap().nlink(), 0);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        close_later(Some(held));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn nothing_or_a_non_file_is_not_held() {
        let dir = std::env::temp_dir().join(format!("partita-retire-nf-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert!(hold(&dir.join("missing")).is_none());
        let fifo = dir.join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        // Non-blocking: a FIFO with no writer does not hang the manager; it is not held.
        assert!(hold(&fifo).is_none());
        std::os::unix::fs::symlink(&fifo, dir.join("link")).unwrap();
        assert!(hold(&dir.join("link")).is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
