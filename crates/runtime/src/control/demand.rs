//! The demand a pool reports to a manager: its *runnable average* (Tucker 1989: the number of
//! runnable threads, averaged over a short window), as a pure computation over plain samples.
//!
//! A sample is what the pool can observe cheaply: the cumulative worker-time spent busy
//! (exact, kept by the workers at the edges of their idle episodes) and the number of queued
//! tasks at that instant. The busy part of the average is exact over the window whatever the
//! sampling rate; the queued part is a step function between samples.
//!
//! The average is taken over a short window ([`WINDOW_NS`], 10 ms), so a demand rises within a
//! few milliseconds of a phase starting, and a loop of regions much shorter than the window
//! averages out to a steady value instead of dropping to 0 between regions. It is rounded
//! with hysteresis (an average hovering near an integer does not flap), and the report holds
//! its value for [`HOLD_NS`] (100 ms) after the rounded average last reached it: a lower
//! value is reported only once the average has stayed below the band for that long. So a
//! program whose bursts are irregular (a loaded machine stretching some regions) reports its
//! recent peak rather than flapping between two values. An idle pool reports exactly 0 within
//! `WINDOW_NS + HOLD_NS` (110 ms) of going idle, well inside one reallocation period (300 ms).

use std::collections::VecDeque;

/// The window of the runnable average: how fast a rising demand is seen.
pub(crate) const WINDOW_NS: u64 = 10_000_000;
/// How long the report holds a value the average no longer reaches.
pub(crate) const HOLD_NS: u64 = 100_000_000;
/// How far (in workers) the average must move beyond the current report to change it.
pub(crate) const HYSTERESIS: f64 = 0.25;
/// Samples kept at most (ticks come every millisecond, events at most every 500 µs: about 30
/// in the window).
const MAX_SAMPLES: usize = 256;

/// One observation of a pool.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Sample {
    /// When it was taken (ns on a monotonic clock).
    pub(crate) at_ns: u64,
    /// Worker-nanoseconds spent busy since the pool started (non-decreasing).
    pub(crate) busy_ns: u64,
    /// Tasks waiting in the pool's queues at `at_ns`.
    pub(crate) queued: usize,
}

/// The runnable average over the `window_ns` that end at the newest sample, capped at `size`:
/// busy workers (from the growth of `busy_ns`, interpolated linearly at the window's start)
/// plus queued tasks (each sample's count standing for the time since the previous sample).
/// With a single sample (or none covering any time) it is that sample's queued count.
/// `samples` are in time order.
pub(crate) fn runnable_average(samples: &[Sample], window_ns: u64, size: usize) -> f64 {
    let Some(last) = samples.last() else {
        return 0.0;
    };
    let size_f = size as f64;
    let start = last.at_ns.saturating_sub(window_ns);
    let first = samples[0];
    let from = start.max(first.at_ns);
    let span = last.at_ns - from;
    if span == 0 {
        return (last.queued as f64).min(size_f);
    }
    let busy_at_from = busy_at(samples, from);
    let busy = (last.busy_ns.saturating_sub(busy_at_from)) as f64 / span as f64;
    let mut queued_time = 0.0;
    for pair in samples.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        if b.at_ns <= from {
            continue;
        }
        let dur = b.at_ns - a.at_ns.max(from);
        queued_time += (b.queued as f64).min(size_f) * dur as f64;
    }
    (busy + queued_time / span as f64).min(size_f)
}

/// `busy_ns` at time `t` (first sample ≤ t ≤ last sample), linear between samples.
fn busy_at(samples: &[Sample], t: u64) -> u64 {
    // The first sample at or after t.
    let i = samples.partition_point(|s| s.at_ns < t);
    if i == 0 {
        return samples[0].busy_ns;
    }
    let (a, b) = (samples[i - 1], samples[i]);
    let dt = b.at_ns - a.at_ns;
    if dt == 0 {
        return b.busy_ns;
    }
    let grown = b.busy_ns.saturating_sub(a.busy_ns) as f64 * (t - a.at_ns) as f64 / dt as f64;
    a.busy_ns + grown as u64
}

/// Round an average to a whole number of workers with hysteresis around `prev`: 0 only when
/// the average is 0; otherwise 1..=size, moving up only once the average exceeds
/// `prev + HYSTERESIS` and down only once it is below `prev - 1 - HYSTERESIS`.
pub(crate) fn quantize(avg: f64, prev: u32, size: usize) -> u32 {
    if avg <= 0.0 || size == 0 {
        return 0;
    }
    let up = (avg - HYSTERESIS).ceil();
    let down = (avg + HYSTERESIS).ceil();
    let p = f64::from(prev);
    let v = if up > p {
        up
    } else if down < p {
        down
    } else {
        p
    };
    (v as usize).clamp(1, size) as u32
}

/// The demand estimate of one pool: recent samples and the current (unlimited) report.
#[derive(Debug, Default)]
pub(crate) struct DemandEstimate {
    samples: VecDeque<Sample>,
    report: u32,
    /// When the rounded average last reached `report` (ns).
    confirmed_ns: u64,
}

impl DemandEstimate {
    /// A new pool's estimate: its whole size, held like any report (until [`HOLD_NS`] after
    /// the pool started, the clock's 0). A manager takes a registering pool's demand to be
    /// its size until the pool reports; without this the first samples of a pool that has
    /// just started (nothing run yet, a window barely begun) reported less, the manager
    /// lowered the target, and a worker parked for the moment the estimate took to rise. A
    /// pool that registers later than that reports what it measured at once.
    pub(crate) fn starting_full(size: usize) -> DemandEstimate {
        DemandEstimate {
            samples: VecDeque::new(),
            report: size as u32,
            confirmed_ns: 0,
        }
    }

    /// Add a sample and return the demand to report, at most `limit` (the application's
    /// `Need`) and `size`. Samples older than the newest are ignored.
    pub(crate) fn observe(&mut self, s: Sample, size: usize, limit: usize) -> u32 {
        match self.samples.back() {
            Some(b) if s.at_ns < b.at_ns || s.busy_ns < b.busy_ns => {}
            _ => self.samples.push_back(s),
        }
        // Keep one sample at or before the window's start, for interpolation.
        let newest = self.samples.back().map_or(0, |b| b.at_ns);
        let start = newest.saturating_sub(WINDOW_NS);
        while self.samples.len() > 2 && self.samples[1].at_ns <= start
            || self.samples.len() > MAX_SAMPLES
        {
            self.samples.pop_front();
        }
        let avg = runnable_average(self.samples.make_contiguous(), WINDOW_NS, size);
        let q = quantize(avg, self.report, size);
        if q >= self.report {
            self.report = q;
            self.confirmed_ns = newest;
        } else if newest >= self.confirmed_ns + HOLD_NS {
            // Below the band for a whole hold period: follow it down.
            self.report = q;
            self.confirmed_ns = newest;
        }
        self.report.min(limit as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn a_new_pool_reports_its_size_until_the_hold_after_its_start() {
        let idle = |at_ns| Sample {
            at_ns,
            busy_ns: 0,
            queued: 0,
        };
        let mut e = DemandEstimate::starting_full(4);
        assert_eq!(
            e.observe(idle(MS), 4, 4),
            4,
            "a just-started pool dropped its demand"
        );
        assert_eq!(e.observe(idle(HOLD_NS - MS), 4, 4), 4);
        assert_eq!(
            e.observe(idle(HOLD_NS + MS), 4, 4),
            0,
            "an idle pool held its CPUs"
        );
        // Registering long after its start, a pool reports what it measured at once.
        let mut late = DemandEstimate::starting_full(4);
        assert_eq!(late.observe(idle(10 * HOLD_NS), 4, 4), 0);
    }

    #[test]
    fn busy_average_is_exact() {
        // From nothing at 0 to `busy_ns` of work and `queued` waiting at 10 ms.
        let after_10ms = |busy_ns, queued| {
            [
                Sample {
                    at_ns: 0,
                    busy_ns: 0,
                    queued: 0,
                },
                Sample {
                    at_ns: 10 * MS,
                    busy_ns,
                    queued,
                },
            ]
        };
        // Two workers busy for the whole 10 ms: average 2.
        let s = after_10ms(20 * MS, 0);
        assert_eq!(runnable_average(&s, 10 * MS, 4), 2.0);
        // Half the window: the first half is outside it (interpolated).
        assert_eq!(runnable_average(&s, 5 * MS, 4), 2.0);
        // Queued work counts, capped at the pool size.
        let s = after_10ms(10 * MS, 9);
        assert_eq!(runnable_average(&s, 10 * MS, 4), 4.0);
        assert_eq!(runnable_average(&s[..1], 10 * MS, 4), 0.0);
    }

    #[test]
    fn quantize_examples() {
        assert_eq!(quantize(0.0, 3, 4), 0);
        assert_eq!(quantize(0.01, 0, 4), 1);
        assert_eq!(quantize(1.2, 1, 4), 1); // inside the band
        assert_eq!(quantize(1.3, 1, 4), 2);
        assert_eq!(quantize(0.8, 2, 4), 2); // inside the band
        assert_eq!(quantize(0.7, 2, 4), 1);
        assert_eq!(quantize(9.0, 1, 4), 4);
    }

    /// Drive an estimate with a square wave: `height` workers busy for `duty` of every
    /// `period_ns`, sampled every millisecond (as the client's tick does) and at edges at
    /// most every 500 µs (as the pool's rate-bounded events do), for `total_ns`. Returns the
    /// reports, one per sample.
    fn square_wave(
        height: usize,
        duty: f64,
        period_ns: u64,
        size: usize,
        total_ns: u64,
    ) -> Vec<(u64, u32)> {
        let mut est = DemandEstimate::default();
        let on_ns = ((period_ns as f64 * duty) as u64).max(1);
        let busy_until = |t: u64| -> u64 {
            let (k, r) = (t / period_ns, t % period_ns);
            height as u64 * (k * on_ns + r.min(on_ns))
        };
        let mut times: Vec<u64> = (0..=total_ns / MS).map(|k| k * MS).collect();
        let mut k = 0;
        while k * period_ns <= total_ns {
            times.push(k * period_ns);
            times.push(k * period_ns + on_ns);
            k += 1;
        }
        times.sort_unstable();
        times.dedup();
        let mut last_event = 0;
        times
            .into_iter()
            .filter(|&t| t <= total_ns)
            .filter(|&t| {
                let tick = t % MS == 0;
                let keep = tick || t >= last_event + MS / 2;
                if keep && !tick {
                    last_event = t;
                }
                keep
            })
            .map(|t| {
                let s = Sample {
                    at_ns: t,
                    busy_ns: busy_until(t),
                    queued: 0,
                };
                (t, est.observe(s, size, size))
            })
            .collect()
    }

    proptest! {
        /// A loop of short regions (period ≤ 1 ms, any duty and width) reports a steady
        /// demand: after the long window has filled, it changes at most twice in half a
        /// second (a settling step), never at the rate of the regions.
        #[test]
        fn steady_under_a_square_wave_of_short_regions(
            size in 1usize..=8,
            height_frac in 0.0f64..=1.0,
            duty in 0.05f64..=1.0,
            period_us in 20u64..=1000,
        ) {
            let height = ((size as f64 * height_frac).ceil() as usize).clamp(1, size);
            let reports = square_wave(height, duty, period_us * 1000, size, 600 * MS);
            let settled: Vec<u32> = reports
                .iter()
                .filter(|(t, _)| *t >= WINDOW_NS + HOLD_NS)
                .map(|&(_, d)| d)
                .collect();
            let changes = settled.windows(2).filter(|w| w[0] != w[1]).count();
            prop_assert!(changes <= 2, "{changes} changes: {:?}", &settled[..20.min(settled.len())]);
            // Never 0 while the loop runs, and near the true average.
            let want = height as f64 * duty;
            for &d in &settled {
                prop_assert!(d >= 1);
                prop_assert!(f64::from(d) <= (want + 1.0 + HYSTERESIS).ceil());
                prop_assert!(f64::from(d) >= (want - 1.0 - HYSTERESIS).ceil().max(1.0) - 1.0);
            }
        }

        /// A loop disturbed by stalls (a loaded machine descheduling workers for up to half
        /// the hold time, with work in between) keeps its report: stalls do not make it flap.
        #[test]
        fn stalls_shorter_than_the_hold_do_not_flap(
            size in 2usize..=8,
            stall_lens in prop::collection::vec(1u64..50, 1..8),
        ) {
            // Stall i starts at 30 + 70 i ms: at least 20 ms of work between two stalls.
            let stalls: Vec<(u64, u64)> =
                stall_lens.iter().enumerate().map(|(i, &len)| (30 + 70 * i as u64, len)).collect();
            let mut est = DemandEstimate::default();
            let (mut busy, mut reports) = (0u64, Vec::new());
            for ms in 0..600u64 {
                let stalled = stalls.iter().any(|&(at, len)| (at..at + len).contains(&ms));
                if !stalled {
                    busy += size as u64 * MS;
                }
                let d = est.observe(Sample { at_ns: (ms + 1) * MS, busy_ns: busy, queued: 0 }, size, size);
                if ms >= 20 {
                    reports.push(d);
                }
            }
            prop_assert!(reports.iter().all(|&d| d as usize == size), "{:?}", reports);
        }

        /// After the pool goes idle (busy time stops growing, nothing queued), the report
        /// reaches exactly 0 within the window plus the hold time, whatever came before.
        #[test]
        fn decays_to_zero_within_the_window_when_idle(
            size in 1usize..=8,
            history in prop::collection::vec((1u64..5_000_000, 0u64..=8, 0usize..20), 1..200),
            idle_step in 100_000u64..20_000_000,
        ) {
            let mut est = DemandEstimate::default();
            let (mut t, mut busy) = (0u64, 0u64);
            for (dt, busy_workers, queued) in history {
                t += dt;
                busy += busy_workers.min(size as u64) * dt;
                est.observe(Sample { at_ns: t, busy_ns: busy, queued }, size, size);
            }
            let idle_from = t;
            let mut last = u32::MAX;
            let released = idle_from + WINDOW_NS + HOLD_NS;
            while t < released + idle_step {
                t += idle_step;
                last = est.observe(Sample { at_ns: t, busy_ns: busy, queued: 0 }, size, size);
                if t >= released {
                    prop_assert_eq!(last, 0, "still {} at {} ns idle", last, t - idle_from);
                }
            }
            prop_assert_eq!(last, 0);
        }

        /// The report never exceeds the limit or the pool size, is 0 only with nothing
        /// busy or queued in the window, and rises from 0 at the first sample with work.
        #[test]
        fn bounded_and_prompt(
            size in 1usize..=8,
            limit in 0usize..=10,
            steps in prop::collection::vec((1u64..2_000_000, 0u64..=8, 0usize..20), 1..100),
        ) {
            let mut est = DemandEstimate::default();
            let (mut t, mut busy) = (0u64, 0u64);
            for (dt, busy_workers, queued) in steps {
                t += dt;
                busy += busy_workers.min(size as u64) * dt;
                let d = est.observe(Sample { at_ns: t, busy_ns: busy, queued }, size, limit);
                prop_assert!(d as usize <= size.min(limit));
                if queued > 0 && limit > 0 {
                    prop_assert!(d >= 1, "work queued but demand 0");
                }
            }
        }
    }
}
