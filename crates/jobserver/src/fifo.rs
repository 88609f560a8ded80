//! The token pipe: one named fifo serving both forms of the protocol.
//!
//! The fifo is created with mode 0600 at a fresh path (an existing path is an error and is
//! left untouched). The server keeps one `O_RDWR | O_NONBLOCK` descriptor on it (so the fifo
//! always has a reader and a writer and the server never blocks). Clients of the fifo form
//! (`--jobserver-auth=fifo:PATH`, make ≥ 4.4, the `jobserver` crate used by cargo and rustc)
//! open the path; clients of the pipe form (`--jobserver-auth=R,W`, make 4.2–4.3;
//! `--jobserver-fds=R,W`, older) inherit two descriptors the server opened on the same fifo.
//! Both forms therefore share one pool of tokens. Dropping the pipe removes the fifo.

use crate::error::Error;
use nix::fcntl::{open, OFlag};
use nix::sys::stat::Mode;
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The byte the server writes as a token (make writes back whatever it read).
pub const TOKEN: u8 = b'+';

/// A jobserver fifo and the server's descriptors on it.
#[derive(Debug)]
pub struct TokenPipe {
    path: PathBuf,
    server: std::fs::File,
    client_read: OwnedFd,
    client_write: OwnedFd,
    identity: (u64, u64),
}

impl TokenPipe {
    /// Create the fifo at `path` (which must not exist) and open it.
    ///
    /// ```
    /// let dir = std::env::temp_dir().join(format!("pj-doc-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir).unwrap();
    /// let path = dir.join("jobserver.fifo");
    /// let pipe = partita_jobserver::fifo::TokenPipe::create(&path).unwrap();
    /// assert_eq!(pipe.put(3).unwrap(), 3);
    /// assert_eq!(pipe.available().unwrap(), 3);
    /// // A second jobserver on the same path is refused and the first one is untouched.
    /// assert!(partita_jobserver::fifo::TokenPipe::create(&path).is_err());
    /// drop(pipe);
    /// assert!(!path.exists());
    /// ```
    pub fn create(path: &Path) -> Result<TokenPipe, Error> {
        match nix::unistd::mkfifo(path, Mode::S_IRUSR | Mode::S_IWUSR) {
            Ok(()) => {}
            Err(nix::errno::Errno::EEXIST) => return Err(Error::FifoExists(path.to_path_buf())),
            Err(source) => {
                return Err(Error::Fifo {
                    call: "mkfifo",
                    path: path.to_path_buf(),
                    source,
                })
            }
        }
        // From here on the fifo is ours: remove it if anything below fails.
        Self::open_created(path).inspect_err(|_| {
            let _ = std::fs::remove_file(path);
        })
    }

    fn open_created(path: &Path) -> Result<TokenPipe, Error> {
        let err = |call| {
            let path = path.to_path_buf();
            move |source| Error::Fifo { call, path, source }
        };
        let cloexec = OFlag::O_CLOEXEC;
        let server = open(
            path,
            OFlag::O_RDWR | OFlag::O_NONBLOCK | cloexec,
            Mode::empty(),
        )
        .map_err(err("open (server)"))?;
        // Blocking opens return at once: the server descriptor is both a reader and a writer.
        let client_read = open(path, OFlag::O_RDONLY | cloexec, Mode::empty())
            .map_err(err("open (client read end)"))?;
        let client_write = open(path, OFlag::O_WRONLY | cloexec, Mode::empty())
            .map_err(err("open (client write end)"))?;
        let server = std::fs::File::from(server);
        let meta = server.metadata().map_err(|e| Error::Io {
            call: "fstat jobserver fifo",
            source: e,
        })?;
        Ok(TokenPipe {
            path: path.to_path_buf(),
            server,
            client_read,
            client_write,
            identity: (meta.dev(), meta.ino()),
        })
    }

    /// The fifo's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `(device, inode)` of the fifo, to recognise it among a process's descriptors.
    pub fn identity(&self) -> (u64, u64) {
        self.identity
    }

    /// Descriptor numbers `(read, write)` for the pipe form; they are close-on-exec until
    /// the server clears the flag in the child between fork and exec.
    pub fn client_fds(&self) -> (RawFd, RawFd) {
        (self.client_read.as_raw_fd(), self.client_write.as_raw_fd())
    }

    /// Bytes in the pipe now.
    pub fn available(&self) -> Result<u32, Error> {
        crate::sys::fionread(self.server.as_fd()).map_err(|source| Error::Sys {
            call: "ioctl(FIONREAD) on the jobserver fifo",
            source,
        })
    }

    /// Read up to `n` bytes without blocking; returns what was read.
    pub fn take(&self, n: u32) -> Result<Vec<u8>, Error> {
        let mut buf = vec![0u8; n as usize];
        let mut got = 0;
        while got < buf.len() {
            match (&self.server).read(&mut buf[got..]) {
                Ok(0) => break,
                Ok(k) => got += k,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(source) => {
                    return Err(Error::Io {
                        call: "read from the jobserver fifo",
                        source,
                    })
                }
            }
        }
        buf.truncate(got);
        Ok(buf)
    }

    /// Write `n` tokens without blocking; returns how many were written (fewer only if the
    /// pipe is full, which 64 KiB of tokens never is in practice).
    pub fn put(&self, n: u32) -> Result<u32, Error> {
        let buf = vec![TOKEN; n as usize];
        let mut done = 0;
        while done < buf.len() {
            match (&self.server).write(&buf[done..]) {
                Ok(k) => done += k,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(source) => {
                    return Err(Error::Io {
                        call: "write to the jobserver fifo",
                        source,
                    })
                }
            }
        }
        Ok(done as u32)
    }

    /// Wait until the pipe has bytes or `timeout` passes.
    pub fn wait_readable(&self, timeout: Duration) {
        use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
        let mut fds = [PollFd::new(self.server.as_fd(), PollFlags::POLLIN)];
        let ms = timeout.as_millis().min(u16::MAX as u128) as u16;
        let _ = poll(&mut fds, PollTimeout::from(ms));
    }
}

impl Drop for TokenPipe {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A fresh fifo path for this process: `$XDG_RUNTIME_DIR` if set, else the temporary
/// directory; `partita-jobserver-<pid>-<n>.fifo`. A fifo already there under this name was
/// left by a process that had our pid and was killed before it could remove it (SIGKILL):
/// nobody else names a fifo with our pid, so it is removed. Before, such a leftover made a
/// later `partita run` fail once pids wrapped around ("fifo … already exists", seen in a
/// workspace test run on a machine where tests had killed servers all day).
///
/// ```
/// let a = partita_jobserver::fifo::default_path();
/// assert!(a.to_string_lossy().contains("partita-jobserver-"));
/// ```
pub fn default_path() -> PathBuf {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|d| d.is_dir())
        .unwrap_or_else(std::env::temp_dir);
    fresh_path(&dir, std::process::id(), || {
        N.fetch_add(1, Ordering::Relaxed)
    })
}

/// The first `partita-jobserver-<pid>-<n>.fifo` in `dir` (`n` from `next`) that is free, or
/// held by a leftover fifo, which is removed. Anything else under a name (or a fifo we may
/// not remove) is left alone and the next name tried.
fn fresh_path(dir: &Path, pid: u32, mut next: impl FnMut() -> u32) -> PathBuf {
    use std::os::unix::fs::FileTypeExt;
    loop {
        let path = dir.join(format!("partita-jobserver-{pid}-{}.fifo", next()));
        match std::fs::symlink_metadata(&path) {
            Err(_) => return path,
            Ok(m) if m.file_type().is_fifo() && std::fs::remove_file(&path).is_ok() => return path,
            Ok(_) => {}
        }
    }
}

#[cfg(test)]
mod default_path_tests {
    use super::*;

    #[test]
    fn a_leftover_fifo_is_removed_and_a_regular_file_is_skipped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let named = |k: u32| dir.path().join(format!("partita-jobserver-7-{k}.fifo"));
        nix::unistd::mkfifo(&named(0), Mode::S_IRUSR | Mode::S_IWUSR).expect("mkfifo");
        std::fs::write(named(1), b"not a fifo").expect("write");
        let mut n = 0;
        let mut next = || {
            n += 1;
            n - 1
        };
        // Name 0: a leftover fifo, removed and used.
        assert_eq!(fresh_path(dir.path(), 7, &mut next), named(0));
        assert!(!named(0).exists());
        // Name 1 is a regular file: skipped, not removed; name 2 is free.
        assert_eq!(fresh_path(dir.path(), 7, &mut next), named(2));
        assert!(named(1).exists());
    }
}
