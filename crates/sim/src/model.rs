//! The slowdown model: a thread spends a fraction `m` of its solo time waiting for memory
//! (`m = its solo bus rate / the rate of a thread that only streams`); every memory access
//! takes `σ` times its unloaded time, where the stall factor `σ` grows with the bus
//! utilisation `U` of everything running (`σ = 1 + A·U^k/(1 − U)`, a queueing-style curve that
//! already hurts below saturation, as the paper observed). Each thread then runs at speed
//! `1 / ((1 − m) + m·σ)` and issues `speed × rate` transactions, which feeds back into `U`; the
//! fixed point is found by bisection.

/// Sustained bus capacity (transactions/µs; STREAM on the paper's 4-way Xeon: 29.5).
pub const CAPACITY: f64 = 29.5;
/// Rate of one thread that does nothing but stream from memory (BBMA: 23.6 tx/µs).
pub const STREAM_THREAD_RATE: f64 = 23.6;
/// Contention coefficient of the stall curve (chosen so that the pair and BBMA experiments
/// land in the paper's ranges: 41–61 % and 2–3× for the high-bandwidth applications).
pub const CONTENTION: f64 = 0.35;
/// Exponent of the stall curve: flat at low utilisation, steep towards saturation.
pub const STEEPNESS: i32 = 3;

/// A running thread as the model sees it: its solo (unloaded) bus rate.
///
/// ```
/// let t = partita_sim::model::Thread { rate: 23.6 };
/// assert_eq!(t.memory_fraction(), 1.0);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Thread {
    /// Transactions/µs it issues when running at full speed on an idle bus.
    pub rate: f64,
}

impl Thread {
    /// Fraction of its unloaded time spent on memory.
    pub fn memory_fraction(&self) -> f64 {
        (self.rate / STREAM_THREAD_RATE).clamp(0.0, 1.0)
    }

    fn speed(&self, sigma: f64) -> f64 {
        let m = self.memory_fraction();
        1.0 / ((1.0 - m) + m * sigma)
    }
}

fn stall(u: f64) -> f64 {
    if u >= 0.999 {
        return 1e6;
    }
    1.0 + CONTENTION * u.powi(STEEPNESS) / (1.0 - u)
}

/// Speeds (relative to an idle bus) of threads running together, and the bus traffic they
/// issue (transactions/µs).
///
/// ```
/// use partita_sim::model::{speeds, Thread};
/// let (alone, _) = speeds(&[Thread { rate: 10.0 }]);
/// let (crowded, _) = speeds(&[Thread { rate: 10.0 }, Thread { rate: 23.6 }, Thread { rate: 23.6 }]);
/// assert!(crowded[0] < alone[0]);
/// ```
pub fn speeds(threads: &[Thread]) -> (Vec<f64>, f64) {
    let traffic = |sigma: f64| threads.iter().map(|t| t.speed(sigma) * t.rate).sum::<f64>();
    // g(σ) = σ − stall(U(σ)) is increasing: U falls as σ grows.
    let g = |sigma: f64| sigma - stall(traffic(sigma) / CAPACITY);
    let (mut lo, mut hi) = (1.0f64, 2.0f64);
    while g(hi) < 0.0 && hi < 1e6 {
        lo = hi;
        hi *= 2.0;
    }
    if g(lo) >= 0.0 {
        hi = lo;
    }
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if g(mid) < 0.0 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let sigma = hi;
    (
        threads.iter().map(|t| t.speed(sigma)).collect(),
        traffic(sigma),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Adding a co-runner never speeds anyone up, and traffic never exceeds capacity.
        #[test]
        fn more_load_is_never_faster(rates in prop::collection::vec(0.0f64..23.6, 1..8), extra in 0.0f64..23.6) {
            let ts: Vec<Thread> = rates.iter().map(|&rate| Thread { rate }).collect();
            let (before, traffic) = speeds(&ts);
            prop_assert!(traffic <= CAPACITY + 1e-6);
            let mut more = ts.clone();
            more.push(Thread { rate: extra });
            let (after, _) = speeds(&more);
            for (a, b) in after.iter().zip(&before) {
                prop_assert!(*a <= *b + 1e-9);
                prop_assert!(*a > 0.0 && *b <= 1.0);
            }
        }
    }
}
