//! What a report says about where and how it was made: the machine (CPU model, CPUs, memory,
//! kernel), the date in ISO 8601 (UTC) and the exact command, quoted so it can be pasted back
//! into a shell. Parsers are plain functions over the `/proc` files' text.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The machine a report was measured on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// CPU model name (`/proc/cpuinfo`), or `unknown CPU`.
    pub cpu_model: String,
    /// CPUs this process may run on (its affinity): what the demo's applications share.
    pub cpus_available: usize,
    /// CPUs online in the machine.
    pub cpus_online: usize,
    /// Physical memory, bytes (`MemTotal` of `/proc/meminfo`; 0 when unknown).
    pub memory_bytes: u64,
    /// Kernel release (`/proc/sys/kernel/osrelease`).
    pub kernel: String,
}

impl Machine {
    /// Describe this machine.
    ///
    /// ```
    /// let m = partita_demo::machine::Machine::this();
    /// assert!(m.cpus_available >= 1 && m.cpus_online >= m.cpus_available.min(m.cpus_online));
    /// assert!(m.to_string().contains("CPUs"));
    /// ```
    pub fn this() -> Machine {
        let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
        // SAFETY: sysconf has no memory-safety preconditions.
        let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
        Machine {
            cpu_model: cpu_model(&read("/proc/cpuinfo")).unwrap_or_else(|| "unknown CPU".into()),
            cpus_available: crate::mode::available_cpus(),
            cpus_online: usize::try_from(online).unwrap_or(0).max(1),
            memory_bytes: mem_total(&read("/proc/meminfo")).unwrap_or(0),
            kernel: read("/proc/sys/kernel/osrelease").trim().to_string(),
        }
    }
}

impl fmt::Display for Machine {
    /// `2 of 8 CPUs (Model), 15.6 GiB, Linux 6.1.0`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} of {} CPUs ({}), {:.1} GiB, Linux {}",
            self.cpus_available,
            self.cpus_online,
            self.cpu_model,
            self.memory_bytes as f64 / (1u64 << 30) as f64,
            self.kernel
        )
    }
}

/// The first `model name` of `/proc/cpuinfo` text (x86; other architectures name it
/// `Model`, `cpu model` or `uarch`).
///
/// ```
/// let t = "processor\t: 0\nmodel name\t: AMD EPYC 7B13\nflags\t: fpu\n";
/// assert_eq!(partita_demo::machine::cpu_model(t).as_deref(), Some("AMD EPYC 7B13"));
/// assert_eq!(partita_demo::machine::cpu_model("processor : 0\n"), None);
/// ```
pub fn cpu_model(cpuinfo: &str) -> Option<String> {
    ["model name", "Model", "cpu model", "uarch"]
        .iter()
        .find_map(|key| {
            cpuinfo.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == *key && !v.trim().is_empty()).then(|| v.trim().to_string())
            })
        })
}

/// `MemTotal` of `/proc/meminfo` text, in bytes.
///
/// ```
/// let t = "MemTotal:       16318480 kB\nMemFree:  1 kB\n";
/// assert_eq!(partita_demo::machine::mem_total(t), Some(16318480 * 1024));
/// assert_eq!(partita_demo::machine::mem_total("MemTotal: lots"), None);
/// ```
pub fn mem_total(meminfo: &str) -> Option<u64> {
    let v = meminfo.lines().find_map(|l| l.strip_prefix("MemTotal:"))?;
    let kib: u64 = v.trim().strip_suffix("kB")?.trim().parse().ok()?;
    kib.checked_mul(1024)
}

/// `t` as an ISO 8601 date and time in UTC, to the second (`2026-11-25T21:50:03Z`).
///
/// ```
/// let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_795_470_603);
/// assert_eq!(partita_demo::machine::iso8601(t), "2026-11-23T21:50:03Z");
/// ```
pub fn iso8601(t: std::time::SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

/// `args` as one shell command line, each word quoted where the shell needs it.
///
/// ```
/// let c = partita_demo::machine::command_line(["partita", "demo", "--out", "my dir"]);
/// assert_eq!(c, "partita demo --out 'my dir'");
/// ```
pub fn command_line<I, S>(args: I) -> String
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    args.into_iter()
        .map(|a| {
            let a = a.as_ref();
            // Only a NUL byte cannot be quoted; show such a word as Rust would.
            shlex::try_quote(a).map_or_else(|_| format!("{a:?}"), |q| q.into_owned())
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_commands_split_back_into_the_same_words() {
        let words = [
            "partita", "demo", "--apps", "a b", "it's", "$HOME", "x;y", "",
        ];
        let line = command_line(words);
        assert_eq!(shlex::split(&line).unwrap(), words);
    }

    #[test]
    fn other_architectures_name_their_model_differently() {
        assert_eq!(
            cpu_model("Model\t: Raspberry Pi 4\n").as_deref(),
            Some("Raspberry Pi 4")
        );
        assert_eq!(
            cpu_model("model name\t:\nModel : X\n").as_deref(),
            Some("X")
        );
    }
}
