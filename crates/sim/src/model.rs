//! The slowdown model: the bus as a queueing server shared by the running threads (a closed
//! queueing network solved by exact mean value analysis, Reiser & Lavenberg 1980).
//!
//! Each thread loops: compute, then one bus transaction. A transaction costs the bus a service
//! time `S = 1 / CAPACITY` (the bus saturates at the STREAM rate, §3 of Antonopoulos et al.)
//! plus a latency `L` that does not occupy the bus (one streaming thread alone reaches only
//! 23.6 tx/µs, BBMA in §3, below the 29.5 four threads reach: `L = 1/23.6 − S`). A thread whose
//! rate alone is `r` therefore spends `D = 1/r − S` per transaction off the bus (compute plus
//! latency). Running together, threads queue for the bus; a thread's speed is its throughput
//! relative to its rate alone. Every parameter comes from a measurement in the paper: the
//! capacity (STREAM), BBMA's rate, and each application's rate when it runs alone (Fig. 1A,
//! black bars), which the model reproduces exactly. Nothing is fitted to Fig. 1B or Fig. 2.

/// Sustained bus capacity (transactions/µs; STREAM with all four processors issuing, §3: 29.5).
pub const CAPACITY: f64 = 29.5;
/// Rate of one thread that does nothing but stream from memory, alone (BBMA, §3: 23.6 tx/µs).
/// No thread can issue more.
pub const STREAM_THREAD_RATE: f64 = 23.6;

/// Bus service time per transaction (µs).
const SERVICE: f64 = 1.0 / CAPACITY;

/// Threads below this rate (tx/µs) never touch the bus in the model (speed 1, no traffic).
const NEGLIGIBLE: f64 = 1e-9;

/// Exact MVA visits every subset of the threads; beyond this many, Schweitzer's approximation.
const EXACT_MAX: usize = 16;

/// A running thread as the model sees it: its bus rate when it runs alone.
///
/// ```
/// let t = partita_sim::model::Thread { rate: 23.6 };
/// assert!((t.off_bus_us() - (1.0 / 23.6 - 1.0 / 29.5)).abs() < 1e-12);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Thread {
    /// Transactions/µs it issues when running alone (capped at [`STREAM_THREAD_RATE`]).
    pub rate: f64,
}

impl Thread {
    fn solo_rate(&self) -> f64 {
        if self.rate.is_finite() {
            self.rate.clamp(0.0, STREAM_THREAD_RATE)
        } else {
            0.0
        }
    }

    /// Time per transaction spent off the bus (compute and latency), µs.
    pub fn off_bus_us(&self) -> f64 {
        1.0 / self.solo_rate() - SERVICE
    }
}

/// Speeds (throughput relative to running alone) of threads running together, and the bus
/// traffic they issue (transactions/µs).
///
/// ```
/// use partita_sim::model::{speeds, Thread};
/// let (alone, traffic) = speeds(&[Thread { rate: 10.0 }]);
/// assert!((alone[0] - 1.0).abs() < 1e-12 && (traffic - 10.0).abs() < 1e-9);
/// let (crowded, _) = speeds(&[Thread { rate: 10.0 }, Thread { rate: 23.6 }, Thread { rate: 23.6 }]);
/// assert!(crowded[0] < alone[0]);
/// ```
pub fn speeds(threads: &[Thread]) -> (Vec<f64>, f64) {
    // Only threads that use the bus take part in the network.
    let bus: Vec<usize> = (0..threads.len())
        .filter(|&k| threads[k].solo_rate() > NEGLIGIBLE)
        .collect();
    let d: Vec<f64> = bus.iter().map(|&k| threads[k].off_bus_us()).collect();
    let x = if bus.len() <= EXACT_MAX {
        exact_mva(&d)
    } else {
        schweitzer_mva(&d)
    };
    let mut v = vec![1.0; threads.len()];
    for (i, &k) in bus.iter().enumerate() {
        v[k] = (x[i] / threads[k].solo_rate()).min(1.0);
    }
    (v, x.iter().sum())
}

/// The rate alone of each of `threads` identical threads such that together, with nothing
/// else running, they issue `app_rate` (the paper's solo rates are of whole two-thread
/// applications, whose threads already share the bus). Capped where even streaming threads
/// cannot reach `app_rate`.
///
/// ```
/// use partita_sim::model::{speeds, thread_rate_for, Thread};
/// let r = thread_rate_for(23.31, 2);
/// let (_, traffic) = speeds(&[Thread { rate: r }; 2]);
/// assert!((traffic - 23.31).abs() < 1e-6);
/// ```
pub fn thread_rate_for(app_rate: f64, threads: u32) -> f64 {
    let n = threads.max(1) as usize;
    let traffic = |r: f64| speeds(&vec![Thread { rate: r }; n]).1;
    if app_rate.is_nan() || app_rate <= 0.0 {
        return 0.0;
    }
    let (mut lo, mut hi) = (0.0, STREAM_THREAD_RATE);
    if traffic(hi) <= app_rate {
        return hi;
    }
    for _ in 0..60 {
        let mid = 0.5 * (lo + hi);
        if traffic(mid) < app_rate {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// Exact MVA, one customer per class: over every subset `M` of the threads (by increasing
/// mask), `R_k(M) = S·(1 + Q(M∖k))`, `X_k = 1/(D_k + R_k)`, `Q(M) = Σ X_k·R_k`. Returns the
/// throughputs of the full population.
fn exact_mva(d: &[f64]) -> Vec<f64> {
    let n = d.len();
    let mut queue = vec![0.0f64; 1 << n];
    let mut x = vec![0.0; n];
    for mask in 1usize..(1 << n) {
        let mut q = 0.0;
        for k in (0..n).filter(|k| mask & (1 << k) != 0) {
            let r = SERVICE * (1.0 + queue[mask & !(1 << k)]);
            let xk = 1.0 / (d[k] + r);
            q += xk * r;
            if mask == (1 << n) - 1 {
                x[k] = xk;
            }
        }
        queue[mask] = q;
    }
    x
}

/// Schweitzer's approximate MVA for many threads: a thread arriving at the bus sees the
/// others' mean queue.
fn schweitzer_mva(d: &[f64]) -> Vec<f64> {
    let n = d.len();
    let mut q = vec![1.0 / n as f64; n];
    let mut x = vec![0.0; n];
    for _ in 0..10_000 {
        let total: f64 = q.iter().sum();
        let mut change = 0.0f64;
        for k in 0..n {
            let r = SERVICE * (1.0 + total - q[k]);
            x[k] = 1.0 / (d[k] + r);
            let nq = x[k] * r;
            change = change.max((nq - q[k]).abs());
            q[k] = nq;
        }
        if change < 1e-12 {
            break;
        }
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn stream_saturates_at_capacity_and_bbma_alone_is_its_rate() {
        let (v, t) = speeds(&[Thread { rate: 23.6 }]);
        assert!((v[0] - 1.0).abs() < 1e-12 && (t - 23.6).abs() < 1e-9);
        // Many streaming threads approach, never exceed, the STREAM capacity.
        let (_, t) = speeds(&[Thread { rate: 23.6 }; 12]);
        assert!(t < CAPACITY && t > 0.97 * CAPACITY, "{t}");
    }

    #[test]
    fn exact_and_approximate_mva_agree_roughly() {
        let d: Vec<f64> = [23.6, 11.0, 5.0, 0.5, 23.6]
            .iter()
            .map(|&r| Thread { rate: r }.off_bus_us())
            .collect();
        let (a, b) = (exact_mva(&d), schweitzer_mva(&d));
        for (x, y) in a.iter().zip(&b) {
            assert!((x - y).abs() / x < 0.1, "{a:?} {b:?}");
        }
    }

    proptest! {
        /// Adding a co-runner never speeds anyone up, traffic never exceeds capacity, a thread
        /// alone runs at its own rate.
        #[test]
        fn more_load_is_never_faster(rates in prop::collection::vec(0.0f64..30.0, 1..8), extra in 0.0f64..30.0) {
            let ts: Vec<Thread> = rates.iter().map(|&rate| Thread { rate }).collect();
            let (before, traffic) = speeds(&ts);
            prop_assert!(traffic <= CAPACITY + 1e-9);
            let mut more = ts.clone();
            more.push(Thread { rate: extra });
            let (after, _) = speeds(&more);
            for (a, b) in after.iter().zip(&before) {
                prop_assert!(*a <= *b + 1e-9);
                prop_assert!(*a > 0.0 && *b <= 1.0);
            }
            let (_, more_traffic) = speeds(&more);
            prop_assert!(more_traffic >= traffic - 1e-9, "a co-runner lowered the total traffic");
            let (alone, t) = speeds(&ts[..1]);
            prop_assert!((alone[0] - 1.0).abs() < 1e-9);
            prop_assert!((t - ts[0].rate.min(STREAM_THREAD_RATE)).abs() < 1e-9 || ts[0].rate <= NEGLIGIBLE);
        }
    }
}
