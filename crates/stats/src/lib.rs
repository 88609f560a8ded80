//! # partita-stats
//!
//! The order statistics Partita's measurements report: [`median`] (what every table states,
//! "median of N runs") and [`percentile`] (latency tails). One definition, so a ratio in one
//! table means the same as in another. NaN samples sort last (`f64::total_cmp`) instead of
//! panicking.
#![warn(missing_docs)]

/// Median of `xs`: the middle value, the mean of the middle two for an even count, 0 for none.
///
/// ```
/// use partita_stats::median;
/// assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
/// assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
/// assert_eq!(median(&[]), 0.0);
/// ```
pub fn median(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    let v = sorted(xs);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The `q`-quantile of `xs` (`q` in 0..=1, clamped) by the nearest rank on the sorted
/// samples; NaN for none.
///
/// ```
/// use partita_stats::percentile;
/// let v = [5.0, 1.0, 4.0, 2.0, 3.0];
/// assert_eq!(percentile(&v, 0.0), 1.0);
/// assert_eq!(percentile(&v, 0.5), 3.0);
/// assert_eq!(percentile(&v, 1.0), 5.0);
/// assert!(percentile(&[], 0.5).is_nan());
/// ```
pub fn percentile(xs: &[f64], q: f64) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    let v = sorted(xs);
    let q = if q.is_nan() { 0.5 } else { q.clamp(0.0, 1.0) };
    v[((v.len() - 1) as f64 * q).round() as usize]
}

fn sorted(xs: &[f64]) -> Vec<f64> {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// As many samples lie at or below the median as at or above it, and it lies within
        /// the samples' range.
        #[test]
        fn median_splits_the_samples(xs in prop::collection::vec(-1e6f64..1e6, 1..50)) {
            let m = median(&xs);
            let below = xs.iter().filter(|&&x| x <= m).count();
            let above = xs.iter().filter(|&&x| x >= m).count();
            prop_assert!(2 * below >= xs.len() && 2 * above >= xs.len());
            let (lo, hi) = xs.iter().fold((f64::MAX, f64::MIN), |(l, h), &x| (l.min(x), h.max(x)));
            prop_assert!(lo <= m && m <= hi);
        }

        /// Percentiles are samples, and grow with q.
        #[test]
        fn percentiles_are_monotone_samples(
            xs in prop::collection::vec(-1e6f64..1e6, 1..50),
            a in 0.0f64..1.0,
            b in 0.0f64..1.0,
        ) {
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            let (pl, ph) = (percentile(&xs, lo), percentile(&xs, hi));
            prop_assert!(pl <= ph);
            prop_assert!(xs.contains(&pl) && xs.contains(&ph));
        }
    }

    #[test]
    fn the_median_of_an_odd_count_is_a_sample() {
        assert_eq!(median(&[10.0, -1.0, 7.0, 3.0, 3.0]), 3.0);
    }
}
