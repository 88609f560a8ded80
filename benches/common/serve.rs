//! The shipped default manager for the benchmarks: a real `partita serve` child started as
//! README says — no `--config` (so the defaults, with system-wide accounting of outside load)
//! — on a private socket (`--socket`, the only flag), which the programs find through
//! `PARTITA_SOCKET`. Its CPU time is reaped like any child's.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub type BoxError = Box<dyn std::error::Error>;

/// A running `partita serve`; stopped (SIGTERM, then waited for) on [`Serve::stop`] or drop.
pub struct Serve {
    child: Option<Child>,
    socket: PathBuf,
    log: PathBuf,
}

impl Serve {
    /// Start `partita serve --socket <dir>/partita.sock` (stderr to `<dir>/serve.log`) and
    /// wait until it answers a status request.
    pub fn start(dir: &Path) -> Result<Serve, BoxError> {
        std::fs::create_dir_all(dir)?;
        let socket = dir.join("partita.sock");
        let log = dir.join("serve.log");
        if Path::new("/etc/partita/partita.toml").exists() {
            return Err(
                "/etc/partita/partita.toml exists: `partita serve` would not run \
                        with the defaults"
                    .into(),
            );
        }
        let child = Command::new(env!("CARGO_BIN_EXE_partita"))
            .arg("serve")
            .arg("--socket")
            .arg(&socket)
            .env_remove("PARTITA_SOCKET")
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()?;
        let mut serve = Serve {
            child: Some(child),
            socket,
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while partita_manager::query_status(&serve.socket).is_err() {
            if let Some(status) = serve.child.as_mut().and_then(|c| c.try_wait().ok()?) {
                return Err(
                    format!("partita serve exited ({status}): {}", serve.log_text()).into(),
                );
            }
            if Instant::now() > deadline {
                return Err(
                    format!("partita serve did not answer in 30 s: {}", serve.log_text()).into(),
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(serve)
    }

    /// The socket programs register at (`PARTITA_SOCKET`).
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The manager's CPU time so far (user + system, from `/proc/<pid>/stat`); zero once
    /// stopped or if the file cannot be read.
    #[allow(dead_code)] // not every benchmark prints it
    pub fn cpu_time(&self) -> Duration {
        let Some(child) = &self.child else {
            return Duration::ZERO;
        };
        let stat =
            std::fs::read_to_string(format!("/proc/{}/stat", child.id())).unwrap_or_default();
        // Fields after the command name (which may hold spaces): utime and stime are the
        // 12th and 13th after the closing parenthesis, in clock ticks.
        let ticks: u64 = stat
            .rsplit_once(')')
            .map(|(_, rest)| {
                rest.split_whitespace()
                    .skip(11)
                    .take(2)
                    .filter_map(|t| t.parse::<u64>().ok())
                    .sum()
            })
            .unwrap_or(0);
        Duration::from_secs_f64(ticks as f64 / partita_manager::sys::ticks_per_second() as f64)
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGTERM and wait; an error if it did not exit cleanly.
    pub fn stop(mut self) -> Result<(), BoxError> {
        self.terminate()
    }

    fn terminate(&mut self) -> Result<(), BoxError> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM)?;
        let status = child.wait()?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("partita serve exited with {status}: {}", self.log_text()).into())
        }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if let Err(e) = self.terminate() {
            eprintln!("{e}");
        }
    }
}
