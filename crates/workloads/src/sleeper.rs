//! sleeper: an interactive-like process that sleeps for a short period, wakes, does a sliver
//! of work, and measures how late each wake-up was (Tucker §7.2: response time beside parallel
//! jobs). A scheduler that lets spinning threads hog the CPUs delays its wake-ups.

use std::time::{Duration, Instant};

/// The sleep period.
pub const PERIOD: Duration = Duration::from_millis(5);

/// Wake-up lateness samples, in microseconds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Latency {
    /// One sample per wake-up: how much later than asked it woke.
    pub samples_us: Vec<f64>,
}

impl Latency {
    /// The `q`-quantile (0..=1) of the samples (nearest rank), or 0 when empty.
    ///
    /// ```
    /// let l = partita_workloads::sleeper::Latency { samples_us: vec![3.0, 1.0, 2.0] };
    /// assert_eq!(l.quantile(0.5), 2.0);
    /// assert_eq!(l.quantile(1.0), 3.0);
    /// ```
    pub fn quantile(&self, q: f64) -> f64 {
        if self.samples_us.is_empty() {
            return 0.0;
        }
        let mut s = self.samples_us.clone();
        s.sort_by(f64::total_cmp);
        let rank = ((q.clamp(0.0, 1.0) * s.len() as f64).ceil() as usize).clamp(1, s.len());
        s[rank - 1]
    }

    /// `(name, value)` pairs: wake-ups, p50, p99 and max lateness in µs.
    pub fn metrics(&self) -> [(&'static str, f64); 4] {
        [
            ("wakeups", self.samples_us.len() as f64),
            ("wake_p50_us", self.quantile(0.5)),
            ("wake_p99_us", self.quantile(0.99)),
            ("wake_max_us", self.quantile(1.0)),
        ]
    }
}

/// Sleep `period` repeatedly for `duration`, doing ~50 µs of work after each wake-up.
///
/// ```
/// use std::time::Duration;
/// let l = partita_workloads::sleeper::run(Duration::from_millis(30), Duration::from_millis(5));
/// assert!(l.samples_us.len() >= 2);
/// assert!(l.samples_us.iter().all(|&s| s >= 0.0));
/// ```
pub fn run(duration: Duration, period: Duration) -> Latency {
    let start = Instant::now();
    let mut lat = Latency::default();
    while start.elapsed() < duration {
        let asked = Instant::now();
        std::thread::sleep(period);
        let late = asked.elapsed().saturating_sub(period);
        lat.samples_us.push(late.as_secs_f64() * 1e6);
        let work = Instant::now();
        let mut x = 0u64;
        while work.elapsed() < Duration::from_micros(50) {
            x = crate::splitmix(x);
        }
        std::hint::black_box(x);
    }
    lat
}
