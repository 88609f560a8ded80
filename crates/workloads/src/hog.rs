//! hog: an uncontrolled CPU-bound process (one thread, never blocks) for the fairness
//! scenario (Tucker Fig. 7.3): how much CPU does it get beside controlled applications?

use std::time::{Duration, Instant};

/// Spin on arithmetic for `duration`; returns the number of work iterations done (a
/// throughput measure: fewer iterations means less CPU was given to the hog).
///
/// ```
/// let n = partita_workloads::hog::run(std::time::Duration::from_millis(5));
/// assert!(n > 0);
/// ```
pub fn run(duration: Duration) -> u64 {
    let start = Instant::now();
    let mut x = 1u64;
    let mut iterations = 0u64;
    while start.elapsed() < duration {
        for _ in 0..10_000 {
            x = crate::splitmix(x);
        }
        iterations += 1;
    }
    std::hint::black_box(x);
    iterations
}
