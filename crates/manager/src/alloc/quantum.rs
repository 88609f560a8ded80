//! The bandwidth policy's per-quantum schedule (pure): rate estimates from the samples of the
//! applications that ran (Latest Quantum or Quanta Window), new applications at the mean rate
//! of the partition, then [`bandwidth::select`] over the list kept across quanta.
//!
//! Guarantees (checked by the property tests below): gangs are all-or-nothing (a selected
//! application gets `threads` CPUs, the others none), the selection never exceeds the CPUs,
//! and every application with demand runs at least once in any N consecutive quanta
//! (N = the number of such applications). An application wider than the partition is run
//! with as many threads as there are CPUs (process control lets it shrink), so every
//! application fits and none can be skipped for ever.

use super::bandwidth::{self, BwApp};
use super::AppId;
use crate::config::BandwidthVariant;
use std::collections::BTreeMap;

/// One application at the start of a quantum.
///
/// ```
/// let a = partita_manager::alloc::quantum::QuantumApp { id: 1, threads: 2, sample: Some(3.0) };
/// assert_eq!(a.threads, 2);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QuantumApp {
    /// Application id.
    pub id: AppId,
    /// CPUs it wants (its demand; 0: no work, not scheduled).
    pub threads: u32,
    /// Its rate over the quantum that just ended, if it ran then (bytes/s).
    pub sample: Option<f64>,
}

/// Everything the schedule remembers between quanta.
///
/// ```
/// let s = partita_manager::alloc::quantum::QuantumState::default();
/// assert!(s.rate(1).is_none());
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QuantumState {
    order: Vec<AppId>,
    samples: BTreeMap<AppId, Vec<f64>>,
}

/// Most samples kept per application (Quanta Window never needs more than its window).
const MAX_SAMPLES: usize = 64;

impl QuantumState {
    /// The application list, head first (the selected ones moved to the tail).
    pub fn order(&self) -> &[AppId] {
        &self.order
    }

    /// The latest sample of an application, if any.
    pub fn rate(&self, id: AppId) -> Option<f64> {
        self.samples.get(&id).and_then(|s| s.last().copied())
    }
}

/// The policy's parameters for one quantum.
///
/// ```
/// use partita_manager::alloc::quantum::QuantumParams;
/// use partita_manager::config::BandwidthVariant;
/// let p = QuantumParams { cpus: 4, capacity: 10e9, variant: BandwidthVariant::QuantaWindow, window: 5 };
/// assert_eq!(p.samples(), 5);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QuantumParams {
    /// CPUs of the partition.
    pub cpus: u32,
    /// Sustained bandwidth (bytes/s).
    pub capacity: f64,
    /// Latest Quantum or Quanta Window.
    pub variant: BandwidthVariant,
    /// Quanta Window's window.
    pub window: usize,
}

impl QuantumParams {
    /// Samples averaged for an estimate.
    pub fn samples(&self) -> usize {
        match self.variant {
            BandwidthVariant::LatestQuantum => 1,
            BandwidthVariant::QuantaWindow => self.window.max(1),
        }
    }
}

/// The rate estimate of every application: its window mean, or for one never measured the
/// mean of the measured ones (0 when none is).
///
/// ```
/// use partita_manager::alloc::quantum::*;
/// use partita_manager::config::BandwidthVariant;
/// let mut s = QuantumState::default();
/// let p = QuantumParams { cpus: 2, capacity: 1.0, variant: BandwidthVariant::LatestQuantum, window: 5 };
/// let apps = [QuantumApp { id: 1, threads: 1, sample: Some(4.0) }, QuantumApp { id: 2, threads: 1, sample: None }];
/// step(&mut s, &p, &apps);
/// assert_eq!(estimates(&s, &p, &apps), vec![(1, 4.0), (2, 4.0)]);
/// ```
pub fn estimates(
    state: &QuantumState,
    p: &QuantumParams,
    apps: &[QuantumApp],
) -> Vec<(AppId, f64)> {
    let known: Vec<f64> = apps
        .iter()
        .filter_map(|a| state.samples.get(&a.id))
        .filter(|s| !s.is_empty())
        .map(|s| bandwidth::window_mean(s, p.samples()))
        .collect();
    let mean = if known.is_empty() {
        0.0
    } else {
        known.iter().sum::<f64>() / known.len() as f64
    };
    apps.iter()
        .map(|a| {
            let r = match state.samples.get(&a.id) {
                Some(s) if !s.is_empty() => bandwidth::window_mean(s, p.samples()),
                _ => mean,
            };
            (a.id, r)
        })
        .collect()
}

/// One quantum: record the samples, estimate the rates, select. Returns the ids that run
/// this quantum (every other application with demand gets a zero quantum). Applications
/// without demand are neither selected nor kept in the list.
///
/// ```
/// use partita_manager::alloc::quantum::*;
/// use partita_manager::config::BandwidthVariant;
/// let mut s = QuantumState::default();
/// let p = QuantumParams { cpus: 2, capacity: 10.0, variant: BandwidthVariant::LatestQuantum, window: 5 };
/// let apps = [QuantumApp { id: 1, threads: 2, sample: None }, QuantumApp { id: 2, threads: 2, sample: None }];
/// assert_eq!(step(&mut s, &p, &apps), vec![1]);
/// assert_eq!(step(&mut s, &p, &apps), vec![2]);
/// ```
pub fn step(state: &mut QuantumState, p: &QuantumParams, apps: &[QuantumApp]) -> Vec<AppId> {
    state
        .samples
        .retain(|id, _| apps.iter().any(|a| a.id == *id));
    for a in apps {
        if let Some(x) = a.sample.filter(|x| x.is_finite() && *x >= 0.0) {
            let s = state.samples.entry(a.id).or_default();
            s.push(x);
            if s.len() > MAX_SAMPLES {
                s.remove(0);
            }
        }
    }
    let bw = gangs(state, p, apps);
    bandwidth::select(p.cpus.max(1), p.capacity, &bw, &mut state.order)
}

/// The applications with demand as the selection sees them: estimated rates, gangs no wider
/// than the partition.
fn gangs(state: &QuantumState, p: &QuantumParams, apps: &[QuantumApp]) -> Vec<BwApp> {
    let cpus = p.cpus.max(1);
    let wanting: Vec<QuantumApp> = apps.iter().filter(|a| a.threads > 0).copied().collect();
    let rates = estimates(state, p, &wanting);
    wanting
        .iter()
        .zip(rates)
        .map(|(a, (_, rate))| BwApp {
            id: a.id,
            threads: a.threads.min(cpus),
            rate,
        })
        .collect()
}

/// Mid-quantum top-up: the applications of `running` hold CPUs this quantum; when some left or
/// went idle, the free CPUs go to the others by the same election as [`step`]'s
/// ([`bandwidth::top_up`]), on the current estimates. Records no sample and does not move the
/// list: the quantum goes on, and the next [`step`] closes it. Returns the newly elected ids.
///
/// ```
/// use partita_manager::alloc::quantum::*;
/// use partita_manager::config::BandwidthVariant;
/// let mut s = QuantumState::default();
/// let p = QuantumParams { cpus: 2, capacity: 10.0, variant: BandwidthVariant::LatestQuantum, window: 5 };
/// let app = |id| QuantumApp { id, threads: 1, sample: None };
/// assert_eq!(step(&mut s, &p, &[app(1), app(2), app(3)]), vec![1, 2]);
/// // 1 leaves mid-quantum: 3 gets its CPU at once; the list is as the quantum left it.
/// assert_eq!(top_up(&s, &p, &[app(2), app(3)], &[2]), vec![3]);
/// assert_eq!(s.order(), &[3, 1, 2]);
/// ```
pub fn top_up(
    state: &QuantumState,
    p: &QuantumParams,
    apps: &[QuantumApp],
    running: &[AppId],
) -> Vec<AppId> {
    let bw = gangs(state, p, apps);
    bandwidth::top_up(p.cpus.max(1), p.capacity, &bw, &state.order, running)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn params() -> impl Strategy<Value = QuantumParams> {
        (1u32..9, 0.0f64..100.0, any::<bool>(), 1usize..8).prop_map(
            |(cpus, capacity, qw, window)| QuantumParams {
                cpus,
                capacity,
                variant: if qw {
                    BandwidthVariant::QuantaWindow
                } else {
                    BandwidthVariant::LatestQuantum
                },
                window,
            },
        )
    }

    proptest! {
        /// Invariant 9 over time, with rates that change every quantum: the selection fits,
        /// and every application with demand runs in every N consecutive quanta.
        #[test]
        fn every_app_runs_once_every_n_quanta(
            p in params(),
            threads in prop::collection::vec(1u32..12, 1..7),
            rates in prop::collection::vec(prop::collection::vec(0.0f64..60.0, 7), 1..30),
        ) {
            let n = threads.len();
            let mut state = QuantumState::default();
            let mut ran_at: Vec<Vec<usize>> = vec![Vec::new(); n];
            let mut last: Vec<AppId> = Vec::new();
            for (q, r) in rates.iter().enumerate() {
                let apps: Vec<QuantumApp> = threads.iter().enumerate().map(|(i, &t)| QuantumApp {
                    id: i as AppId + 1,
                    threads: t,
                    sample: last.contains(&(i as AppId + 1)).then_some(r[i]),
                }).collect();
                let sel = step(&mut state, &p, &apps);
                let used: u32 = sel.iter().map(|id| threads[*id as usize - 1].min(p.cpus)).sum();
                prop_assert!(used <= p.cpus.max(1));
                prop_assert!(!sel.is_empty());
                for id in &sel { ran_at[*id as usize - 1].push(q); }
                last = sel;
            }
            let quanta = rates.len();
            for (i, at) in ran_at.iter().enumerate() {
                // Gaps between runs (and from the start / to the end) are at most N quanta.
                let mut prev: isize = -1;
                for &q in at {
                    prop_assert!(q as isize - prev <= n as isize, "app {} waited {} quanta", i + 1, q as isize - prev);
                    prev = q as isize;
                }
                prop_assert!(quanta as isize - 1 - prev < n as isize, "app {} starved at the end", i + 1);
            }
        }

        /// Applications without demand are never selected.
        #[test]
        fn idle_apps_are_not_selected(p in params(), threads in prop::collection::vec(0u32..4, 1..7)) {
            let apps: Vec<QuantumApp> = threads.iter().enumerate()
                .map(|(i, &t)| QuantumApp { id: i as AppId + 1, threads: t, sample: None }).collect();
            let sel = step(&mut QuantumState::default(), &p, &apps);
            for id in sel { prop_assert!(threads[id as usize - 1] > 0); }
        }
    }

    /// Quanta Window smooths a burst: with a window, one high sample moves the estimate by a
    /// fraction of the burst; Latest Quantum takes it whole.
    #[test]
    fn window_smooths_bursts() {
        let mut s = QuantumState::default();
        let mut p = QuantumParams {
            cpus: 1,
            capacity: 10.0,
            variant: BandwidthVariant::QuantaWindow,
            window: 5,
        };
        for x in [1.0, 1.0, 1.0, 1.0, 21.0] {
            step(
                &mut s,
                &p,
                &[QuantumApp {
                    id: 1,
                    threads: 1,
                    sample: Some(x),
                }],
            );
        }
        let apps = [QuantumApp {
            id: 1,
            threads: 1,
            sample: None,
        }];
        assert_eq!(estimates(&s, &p, &apps), vec![(1, 5.0)]);
        p.variant = BandwidthVariant::LatestQuantum;
        assert_eq!(estimates(&s, &p, &apps), vec![(1, 21.0)]);
    }

    /// The paper's example: with capacity for one heavy and one light application, a heavy and
    /// a light one are co-scheduled rather than two heavy ones.
    #[test]
    fn pairs_heavy_with_light() {
        let mut s = QuantumState::default();
        let p = QuantumParams {
            cpus: 2,
            capacity: 12.0,
            variant: BandwidthVariant::LatestQuantum,
            window: 5,
        };
        let rates = [10.0, 10.0, 1.0, 1.0];
        let apps: Vec<QuantumApp> = (0..4)
            .map(|i| QuantumApp {
                id: i + 1,
                threads: 1,
                sample: Some(rates[i as usize]),
            })
            .collect();
        let sel = step(&mut s, &p, &apps);
        assert_eq!(sel.len(), 2);
        let heavy = sel.iter().filter(|id| **id <= 2).count();
        assert_eq!(heavy, 1, "{sel:?}");
    }
}
