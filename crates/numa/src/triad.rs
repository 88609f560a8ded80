//! Sustained memory bandwidth, measured the STREAM way: the triad `a[i] = b[i] + s·c[i]` over
//! three arrays several times the last-level cache, one pinned thread per CPU, best of several
//! repetitions (24 bytes moved per element: two loads and one store; write-allocate traffic
//! is not counted, as in STREAM). The result is stored in a small state file that the
//! manager's bandwidth policy reads as its capacity (`partita calibrate` writes it).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Barrier;
use std::time::Instant;

/// One triad measurement.
///
/// ```
/// let r = partita_numa::triad::measure(1, 1 << 20, 2);
/// assert!(r.best_gbps > 0.0 && r.best_gbps >= r.median_gbps);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct TriadResult {
    /// Threads used (each pinned to one CPU).
    pub threads: usize,
    /// Bytes of each of the three arrays.
    pub array_bytes: usize,
    /// Best repetition, GB/s (10^9 bytes per second).
    pub best_gbps: f64,
    /// Median repetition, GB/s.
    pub median_gbps: f64,
    /// Every repetition, GB/s.
    pub runs_gbps: Vec<f64>,
}

/// Size of the largest cache of CPU 0 (bytes), from sysfs; `None` when sysfs does not say.
///
/// ```
/// if let Some(b) = partita_numa::triad::llc_bytes() { assert!(b >= 1024); }
/// ```
pub fn llc_bytes() -> Option<usize> {
    (0..8)
        .filter_map(|i| {
            let s = std::fs::read_to_string(format!(
                "/sys/devices/system/cpu/cpu0/cache/index{i}/size"
            ))
            .ok()?;
            parse_size(s.trim())
        })
        .max()
}

/// Line size (bytes) of the highest cache level sysfs lists for CPU 0: what one last-level
/// cache miss moves ([`TrafficEvent::bytes_per_event`](crate::traffic_event::TrafficEvent::bytes_per_event),
/// for the runtime's and the manager's perf-event traffic counters); `None` when sysfs does
/// not say.
///
/// ```
/// if let Some(line) = partita_numa::triad::llc_line_bytes() {
///     assert!(line.is_power_of_two() && (16..=512).contains(&line));
/// }
/// ```
pub fn llc_line_bytes() -> Option<u64> {
    let read = |p: std::path::PathBuf| std::fs::read_to_string(p).ok()?.trim().parse::<u64>().ok();
    std::fs::read_dir("/sys/devices/system/cpu/cpu0/cache")
        .ok()?
        .filter_map(|e| {
            let p = e.ok()?.path();
            Some((read(p.join("level"))?, read(p.join("coherency_line_size"))?))
        })
        .max()
        .map(|(_, line)| line)
}

/// Parse sysfs cache sizes such as `32K`, `16384K`, `2M`.
///
/// ```
/// assert_eq!(partita_numa::triad::parse_size("32K"), Some(32 * 1024));
/// assert_eq!(partita_numa::triad::parse_size("2M"), Some(2 << 20));
/// assert_eq!(partita_numa::triad::parse_size("x"), None);
/// ```
pub fn parse_size(s: &str) -> Option<usize> {
    let (num, mult) = match s.as_bytes().last()? {
        b'K' => (&s[..s.len() - 1], 1 << 10),
        b'M' => (&s[..s.len() - 1], 1 << 20),
        b'G' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<usize>().ok().map(|n| n * mult)
}

/// Run the triad with `threads` threads (thread `t` pinned to the `t`-th CPU this process may
/// use, when pinning is permitted), arrays of `array_bytes` each, `reps` timed repetitions
/// after one warm-up.
pub fn measure(threads: usize, array_bytes: usize, reps: usize) -> TriadResult {
    let threads = threads.max(1);
    let n = (array_bytes / 8).max(threads);
    let mut a = vec![0.0f64; n];
    let b = vec![1.0f64; n];
    let c = vec![2.0f64; n];
    let cpus = allowed_cpus();
    let chunk = n.div_ceil(threads);
    // Fewer workers than asked when the arrays have fewer elements than threads.
    let spawned = n.div_ceil(chunk);
    let barrier = Barrier::new(spawned + 1);
    let reps = reps.max(1);
    let mut runs = Vec::with_capacity(reps);
    std::thread::scope(|s| {
        for (t, a) in a.chunks_mut(chunk).enumerate() {
            let (b, c) = (&b[t * chunk..], &c[t * chunk..]);
            let cpu = cpus.get(t % cpus.len().max(1)).copied();
            let barrier = &barrier;
            s.spawn(move || {
                if let Some(cpu) = cpu {
                    // Unpinned measurement is still a measurement; pinning only steadies it.
                    let one = std::iter::once(cpu as usize).collect();
                    let _ = partita_protocol::sys::set_affinity(0, &one);
                }
                for _ in 0..=reps {
                    barrier.wait();
                    for ((x, y), z) in a.iter_mut().zip(b).zip(c) {
                        *x = y + 3.0 * z;
                    }
                    std::hint::black_box(&mut *a);
                    barrier.wait();
                }
            });
        }
        for rep in 0..=reps {
            barrier.wait();
            let t = Instant::now();
            barrier.wait();
            let secs = t.elapsed().as_secs_f64();
            if rep > 0 {
                runs.push((3 * 8 * n) as f64 / secs.max(1e-9) / 1e9);
            }
        }
    });
    std::hint::black_box(&a);
    let mut sorted = runs.clone();
    sorted.sort_by(f64::total_cmp);
    TriadResult {
        threads: spawned,
        array_bytes: n * 8,
        best_gbps: sorted.last().copied().unwrap_or(0.0),
        median_gbps: sorted[sorted.len() / 2],
        runs_gbps: runs,
    }
}

fn allowed_cpus() -> Vec<u32> {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return Vec::new();
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .and_then(|l| crate::parse_cpu_list(l.trim()))
        .unwrap_or_default()
}

/// The stored calibration the manager reads.
///
/// ```
/// let p = std::env::temp_dir().join(format!("partita-cal-doc-{}", std::process::id()));
/// let c = partita_numa::triad::Calibration { gbps: 12.5, threads: 2, array_bytes: 1 << 26 };
/// c.save(&p).unwrap();
/// assert_eq!(partita_numa::triad::Calibration::load(&p).unwrap(), c);
/// std::fs::remove_file(&p).unwrap();
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Calibration {
    /// Sustained bandwidth, GB/s.
    pub gbps: f64,
    /// Threads of the measurement.
    pub threads: usize,
    /// Bytes per array of the measurement.
    pub array_bytes: usize,
}

impl Calibration {
    /// Write `key = value` lines (a TOML subset), creating the directory.
    pub fn save(&self, path: &Path) -> io::Result<()> {
        if let Some(dir) = path.parent() {
            if !dir.as_os_str().is_empty() {
                std::fs::create_dir_all(dir)?;
            }
        }
        let text = format!(
            "# written by `partita calibrate` (STREAM-like triad)\ngbps = {}\nthreads = {}\narray_bytes = {}\n",
            self.gbps, self.threads, self.array_bytes
        );
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, path)
    }

    /// Read a file written by [`Calibration::save`]; errors name the file and the line.
    ///
    /// ```
    /// let e = partita_numa::triad::Calibration::load(std::path::Path::new("/nonexistent")).unwrap_err();
    /// assert!(e.to_string().contains("/nonexistent"));
    /// ```
    pub fn load(path: &Path) -> io::Result<Calibration> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        let bad = |what: String| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: {what}", path.display()),
            )
        };
        let (mut gbps, mut threads, mut array_bytes) = (None, 0, 0);
        for line in text.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (k, v) = line
                .split_once('=')
                .ok_or_else(|| bad(format!("not `key = value`: {line:?}")))?;
            let v = v.trim();
            match k.trim() {
                "gbps" => gbps = v.parse::<f64>().ok(),
                "threads" => threads = v.parse().unwrap_or(0),
                "array_bytes" => array_bytes = v.parse().unwrap_or(0),
                _ => {}
            }
        }
        match gbps {
            Some(g) if g.is_finite() && g > 0.0 => Ok(Calibration {
                gbps: g,
                threads,
                array_bytes,
            }),
            _ => Err(bad("no positive `gbps`".into())),
        }
    }
}

/// Where `partita calibrate` stores its result: `PARTITA_STATE_DIR/bandwidth.state` when set;
/// for root `/var/lib/partita/bandwidth.state`; else `$XDG_STATE_HOME/partita/…` or
/// `~/.local/state/partita/…`.
///
/// ```
/// assert!(partita_numa::triad::default_state_path().ends_with("bandwidth.state"));
/// ```
pub fn default_state_path() -> PathBuf {
    const FILE: &str = "bandwidth.state";
    if let Some(d) = std::env::var_os("PARTITA_STATE_DIR") {
        return PathBuf::from(d).join(FILE);
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        return PathBuf::from("/var/lib/partita").join(FILE);
    }
    let base = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("partita").join(FILE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_state_files_are_errors_naming_the_file() {
        let p = std::env::temp_dir().join(format!("partita-cal-bad-{}", std::process::id()));
        for text in ["gbps = -1\n", "threads = 2\n", "what\n"] {
            std::fs::write(&p, text).unwrap();
            let e = Calibration::load(&p).unwrap_err().to_string();
            assert!(e.contains(&p.display().to_string()), "{e}");
        }
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn more_threads_than_elements_still_measures() {
        let r = measure(4, 16, 1);
        assert_eq!(r.runs_gbps.len(), 1);
        assert!(r.best_gbps > 0.0);
    }
}
