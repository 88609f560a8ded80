//! Co-scheduling experiments on the slowdown model: Fig. 1 (an application alone, with a
//! second instance, with two BBMA, with two nBBMA) and Fig. 2 (two instances of an
//! application with four microbenchmarks on four CPUs, under plain time-sharing or the
//! bandwidth policy's two variants, run by partita-manager's own per-quantum schedule).

use crate::model::{speeds, thread_rate_for, Thread, CAPACITY, STREAM_THREAD_RATE};
use crate::workload::{AppSpec, BurstProfile, WorkloadSet, BBMA, BURST_S, NBBMA};
use partita_manager::alloc::quantum::{estimates, step, QuantumApp, QuantumParams, QuantumState};
use partita_manager::config::BandwidthVariant;

/// Fig. 1 for one application: cumulative bus rate and slowdown of the application.
///
/// ```
/// let r = partita_sim::cosched::fig1(&partita_sim::workload::APPS[10]);
/// assert!(r.slowdown_bbma > r.slowdown_pair && r.slowdown_pair > r.slowdown_nbbma);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Fig1Row {
    /// Application.
    pub name: &'static str,
    /// Bus rate alone, with a second instance, with 2 BBMA, with 2 nBBMA (tx/µs).
    pub rates: [f64; 4],
    /// Slowdown (time / solo time) with a second instance.
    pub slowdown_pair: f64,
    /// Slowdown beside two BBMA.
    pub slowdown_bbma: f64,
    /// Slowdown beside two nBBMA.
    pub slowdown_nbbma: f64,
}

/// The threads of an application at its mean solo rate (Fig. 1 reports averages).
fn threads_of(spec: &AppSpec) -> Vec<Thread> {
    let per = thread_rate_for(spec.rate, spec.threads);
    vec![Thread { rate: per }; spec.threads as usize]
}

/// The four Fig. 1 configurations of one application.
pub fn fig1(app: &AppSpec) -> Fig1Row {
    let solo = threads_of(app);
    let n = solo.len();
    let configs: [Vec<Thread>; 4] = [
        solo.clone(),
        [solo.clone(), solo.clone()].concat(),
        [solo.clone(), threads_of(&BBMA), threads_of(&BBMA)].concat(),
        [solo.clone(), threads_of(&NBBMA), threads_of(&NBBMA)].concat(),
    ];
    let mut rates = [0.0; 4];
    let mut speed = [0.0; 4];
    for (k, c) in configs.iter().enumerate() {
        let (v, traffic) = speeds(c);
        rates[k] = traffic;
        speed[k] = v[..n].iter().sum::<f64>() / n as f64;
    }
    Fig1Row {
        name: app.name,
        rates,
        slowdown_pair: speed[0] / speed[1],
        slowdown_bbma: speed[0] / speed[2],
        slowdown_nbbma: speed[0] / speed[3],
    }
}

/// Who decides which threads run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheduler {
    /// The OS alone (Linux 2.4, §5): every 100 ms, four runnable threads, each thread one
    /// slice per epoch in arbitrary order (no gangs, no bandwidth knowledge).
    TimeSharing,
    /// The bandwidth policy, Latest Quantum.
    LatestQuantum,
    /// The bandwidth policy, Quanta Window.
    QuantaWindow,
}

/// How an application's threads wait for each other, which decides what a thread running
/// without its sibling achieves under time-sharing (gangs always run whole). The paper does not
/// say, and Fig. 2 hinges on it, so `partita simulate` reports both ends. Its evidence pulls
/// both ways (docs/bench/bandwidth.md): it credits the set-A gains of gang scheduling to
/// bandwidth, not synchronisation (§5: two low-bandwidth threads beside two BBMA instead of one
/// beside three), and LU CB and Water-nsqr gained nothing from gangs in set B (§5), which
/// favours `Yield`; but every application gained in set A, which only `Barrier` reproduces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coupling {
    /// Waiting threads yield the CPU (Intel OpenMP's default throughput mode): an
    /// application's work advances with the CPU time its threads get, its progress being the
    /// mean of its threads' speeds (a descheduled thread counts 0).
    Yield,
    /// Barrier-coupled threads that spin: an application advances only while all its threads
    /// run, at the pace of the slowest.
    Barrier,
}

/// Parameters of a Fig. 2 run.
///
/// ```
/// let c = partita_sim::cosched::RunConfig::default();
/// assert_eq!((c.cpus, c.quantum_ms, c.window), (4, 200, 5));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunConfig {
    /// CPUs.
    pub cpus: u32,
    /// Manager quantum (the OS quantum is half of it, as in the paper).
    pub quantum_ms: u64,
    /// Quanta Window's window.
    pub window: usize,
    /// Work of each application instance, in seconds of unloaded execution.
    pub work_s: f64,
    /// RNG seed (OS choices and bursts).
    pub seed: u64,
    /// How an application's threads wait for each other, see [`Coupling`].
    pub coupling: Coupling,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            cpus: 4,
            quantum_ms: 200,
            window: 5,
            work_s: 20.0,
            seed: 1,
            coupling: Coupling::Barrier,
        }
    }
}

/// xorshift64*: deterministic, seedable, good enough for scheduling choices.
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

struct Job {
    spec: AppSpec,
    burst: BurstProfile,
    /// Remaining unloaded seconds (infinite for microbenchmarks).
    remaining: f64,
    /// Unloaded seconds done (advances the burst pattern).
    done: f64,
    finished_at: Option<f64>,
    /// Seconds each thread has run (the OS's fairness).
    thread_run_s: Vec<f64>,
    /// Traffic it issued and seconds it ran in the last quantum.
    issued: f64,
    ran_s: f64,
}

impl Job {
    /// Whole-application solo rate now: bursts follow the application's own progress (a
    /// descheduled application does not advance through its phases).
    fn rate_now(&self, seed: u64, index: usize) -> f64 {
        let b = &self.burst;
        if b.p <= 0.0 {
            return b.base;
        }
        let step = (self.done / BURST_S).floor() as u64;
        let mut rng = Rng::new(
            seed ^ (index as u64 + 1).wrapping_mul(0xA24B_AED4_963E_E407)
                ^ step.wrapping_mul(0x9FB2_1C65_1E98_DF25),
        );
        if rng.unit() < b.p {
            b.high
        } else {
            b.base
        }
    }
}

/// Mean turnaround (seconds) of the two application instances in one Fig. 2 run.
///
/// ```
/// use partita_sim::cosched::*;
/// use partita_sim::workload::*;
/// let c = RunConfig { work_s: 2.0, ..Default::default() };
/// let ts = turnaround(&APPS[10], WorkloadSet::A, Scheduler::TimeSharing, &c);
/// let lq = turnaround(&APPS[10], WorkloadSet::A, Scheduler::LatestQuantum, &c);
/// assert!(lq < ts);
/// ```
pub fn turnaround(app: &AppSpec, set: WorkloadSet, sched: Scheduler, cfg: &RunConfig) -> f64 {
    run(app, set, sched, cfg, None)
}

/// One quantum of the bandwidth policy as [`trace`] records it.
#[derive(Debug, Clone, PartialEq)]
pub struct QuantumTrace {
    /// Start of the quantum (s).
    pub t: f64,
    /// The list before the selection, head first (job indices: 0 and 1 the application's
    /// instances, 2–5 the microbenchmarks).
    pub order: Vec<u32>,
    /// The sample each job brought into this quantum (its rate over the last quantum, tx/µs
    /// whole application; `None`: it did not run or has finished).
    pub samples: Vec<Option<f64>>,
    /// Each job's estimate (window mean or latest sample, tx/µs whole application; NaN once
    /// it finished).
    pub estimates: Vec<f64>,
    /// Selected jobs, in selection order.
    pub selected: Vec<u32>,
}

/// The bandwidth policy's decisions in the first `quanta` quanta of a Fig. 2 run (for
/// explaining a result; [`turnaround`] runs the same loop).
///
/// ```
/// use partita_sim::cosched::*;
/// use partita_sim::workload::*;
/// let tr = trace(&APPS[6], WorkloadSet::C, Scheduler::QuantaWindow, &RunConfig::default(), 10);
/// assert_eq!(tr.len(), 10);
/// assert!(tr.iter().all(|q| !q.selected.is_empty()));
/// ```
pub fn trace(
    app: &AppSpec,
    set: WorkloadSet,
    sched: Scheduler,
    cfg: &RunConfig,
    quanta: usize,
) -> Vec<QuantumTrace> {
    let mut out = Vec::new();
    run(app, set, sched, cfg, Some((&mut out, quanta)));
    out
}

fn run(
    app: &AppSpec,
    set: WorkloadSet,
    sched: Scheduler,
    cfg: &RunConfig,
    mut trace: Option<(&mut Vec<QuantumTrace>, usize)>,
) -> f64 {
    let mut rng = Rng::new(cfg.seed);
    let mut jobs = new_jobs(app, set, cfg.work_s);
    let mut state = QuantumState::default();
    let params = QuantumParams {
        cpus: cfg.cpus,
        capacity: CAPACITY,
        variant: match sched {
            Scheduler::QuantaWindow => BandwidthVariant::QuantaWindow,
            _ => BandwidthVariant::LatestQuantum,
        },
        window: cfg.window,
    };
    let q = cfg.quantum_ms as f64 / 1000.0;
    let mut t = 0.0;
    while jobs[..2].iter().any(|j| j.finished_at.is_none()) && t < 1e5 {
        // The OS quantum is half the manager's (§5): two OS decisions per manager quantum.
        let sub: Vec<Vec<(usize, usize)>> = match sched {
            Scheduler::TimeSharing => (0..2).map(|_| os_pick(&jobs, cfg.cpus, &mut rng)).collect(),
            _ => match policy_pick(&jobs, &mut state, &params, t, trace.as_mut()) {
                Some(running) => vec![running],
                None => break,
            },
        };
        for j in jobs.iter_mut() {
            j.issued = 0.0;
            j.ran_s = 0.0;
        }
        let dt = q / sub.len() as f64;
        for running in &sub {
            advance(&mut jobs, running, dt, t, cfg);
            t += dt;
        }
    }
    jobs[..2]
        .iter()
        .map(|j| j.finished_at.unwrap_or(t))
        .sum::<f64>()
        / 2.0
}

/// The two application instances (jobs 0 and 1, `work_s` of work each) and the set's four
/// microbenchmarks (jobs 2–5, endless).
fn new_jobs(app: &AppSpec, set: WorkloadSet, work_s: f64) -> Vec<Job> {
    [*app, *app]
        .into_iter()
        .map(|spec| (spec, work_s))
        .chain(
            set.microbenchmarks()
                .into_iter()
                .map(|s| (s, f64::INFINITY)),
        )
        .map(|(spec, remaining)| Job {
            spec,
            burst: BurstProfile::of(&spec),
            remaining,
            done: 0.0,
            finished_at: None,
            thread_run_s: vec![0.0; spec.threads as usize],
            issued: 0.0,
            ran_s: 0.0,
        })
        .collect()
}

/// One quantum of the bandwidth policy: partita-manager's `step` on the rate each job issued
/// in the last quantum (if it ran), recorded in `trace` if given. Returns the `(job, thread)`
/// pairs that run (gangs: every thread of a selected job), or `None` once the trace is full.
fn policy_pick(
    jobs: &[Job],
    state: &mut QuantumState,
    params: &QuantumParams,
    t: f64,
    trace: Option<&mut (&mut Vec<QuantumTrace>, usize)>,
) -> Option<Vec<(usize, usize)>> {
    let apps: Vec<QuantumApp> = jobs
        .iter()
        .enumerate()
        .filter(|(_, j)| j.finished_at.is_none())
        .map(|(i, j)| QuantumApp {
            id: i as u32,
            threads: j.spec.threads,
            sample: (j.ran_s > 0.0).then(|| j.issued / j.ran_s),
        })
        .collect();
    let order = state.order().to_vec();
    let sel = step(state, params, &apps);
    if let Some((out, quanta)) = trace {
        if out.len() >= *quanta {
            return None;
        }
        let est = estimates(state, params, &apps);
        out.push(QuantumTrace {
            t,
            order,
            samples: (0..jobs.len() as u32)
                .map(|i| apps.iter().find(|a| a.id == i).and_then(|a| a.sample))
                .collect(),
            estimates: (0..jobs.len() as u32)
                .map(|i| est.iter().find(|e| e.0 == i).map_or(f64::NAN, |e| e.1))
                .collect(),
            selected: sel.clone(),
        });
    }
    Some(
        sel.iter()
            .flat_map(|&id| {
                (0..jobs[id as usize].spec.threads as usize).map(move |k| (id as usize, k))
            })
            .collect(),
    )
}

/// The OS's choice for one 100 ms quantum (Linux 2.4, §3 and §5): `cpus` runnable threads,
/// those that have run least first, ties at random. Linux 2.4 gives every runnable thread one
/// time slice per epoch, in no particular order, and knows nothing of gangs or bandwidth.
/// Returns `(job, thread)` pairs.
fn os_pick(jobs: &[Job], cpus: u32, rng: &mut Rng) -> Vec<(usize, usize)> {
    let mut threads: Vec<(usize, usize)> = jobs
        .iter()
        .enumerate()
        .filter(|(_, j)| j.finished_at.is_none())
        .flat_map(|(i, j)| (0..j.thread_run_s.len()).map(move |k| (i, k)))
        .collect();
    for k in (1..threads.len()).rev() {
        let r = (rng.next() % (k as u64 + 1)) as usize;
        threads.swap(k, r);
    }
    // Stable: equal run times keep the random order.
    threads.sort_by(|a, b| jobs[a.0].thread_run_s[a.1].total_cmp(&jobs[b.0].thread_run_s[b.1]));
    threads.truncate(cpus as usize);
    threads
}

/// Run for `dt` seconds the listed `(job, thread)` pairs. An application's progress follows
/// [`Coupling`]: the mean of its threads' speeds (a descheduled thread counting 0), or, barrier
/// coupled, the slowest thread's speed and nothing unless every thread runs. Work is counted in
/// seconds of solo execution.
fn advance(jobs: &mut [Job], running: &[(usize, usize)], dt: f64, t: f64, cfg: &RunConfig) {
    // Per-thread rates alone, and the speed the application's threads have when it runs
    // alone (work is counted in seconds of solo execution).
    let per_thread: Vec<(f64, f64)> = (0..jobs.len())
        .map(|i| {
            let n = jobs[i].spec.threads;
            let r = thread_rate_for(jobs[i].rate_now(cfg.seed, i), n);
            (r, speeds(&vec![Thread { rate: r }; n as usize]).0[0])
        })
        .collect();
    let threads: Vec<Thread> = running
        .iter()
        .map(|&(i, _)| Thread {
            rate: per_thread[i].0,
        })
        .collect();
    let (v, _) = speeds(&threads);
    for (i, j) in jobs.iter_mut().enumerate() {
        let mine: Vec<usize> = (0..running.len()).filter(|&k| running[k].0 == i).collect();
        if mine.is_empty() || j.finished_at.is_some() {
            continue;
        }
        for &k in &mine {
            j.thread_run_s[running[k].1] += dt;
        }
        let progress = match cfg.coupling {
            Coupling::Yield => mine.iter().map(|&k| v[k]).sum::<f64>() / j.spec.threads as f64,
            Coupling::Barrier if mine.len() < j.thread_run_s.len() => 0.0,
            Coupling::Barrier => mine.iter().map(|&k| v[k]).fold(f64::INFINITY, f64::min),
        };
        j.issued += mine
            .iter()
            .map(|&k| v[k] * threads[k].rate.min(STREAM_THREAD_RATE))
            .sum::<f64>()
            * dt;
        j.ran_s += dt;
        let progress = progress / per_thread[i].1;
        let done = progress * dt;
        if j.remaining.is_finite() && done >= j.remaining && progress > 0.0 {
            j.finished_at = Some(t + j.remaining / progress);
            j.done += j.remaining;
            j.remaining = 0.0;
        } else {
            j.remaining -= done;
            j.done += done;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::APPS;
    use proptest::prelude::{prop_assert, prop_assert_eq, proptest};

    proptest! {
        /// Linux time-sharing is fair: at every slice, the threads' run times differ by at
        /// most one slice, and exactly `cpus` threads run while enough are runnable.
        #[test]
        fn time_sharing_is_fair(seed in 1u64..10_000, app in 0usize..11, set in 0usize..3, slices in 1usize..200) {
            let set = WorkloadSet::ALL[set];
            let mut jobs: Vec<Job> = [APPS[app], APPS[app]].into_iter().chain(set.microbenchmarks()).map(|spec| Job {
                spec,
                burst: BurstProfile::of(&spec),
                remaining: f64::INFINITY,
                done: 0.0,
                finished_at: None,
                thread_run_s: vec![0.0; spec.threads as usize],
                issued: 0.0,
                ran_s: 0.0,
            }).collect();
            let mut rng = Rng::new(seed);
            for _ in 0..slices {
                let pick = os_pick(&jobs, 4, &mut rng);
                prop_assert_eq!(pick.len(), 4);
                for &(i, k) in &pick {
                    jobs[i].thread_run_s[k] += 0.1;
                }
                let runs: Vec<f64> = jobs.iter().flat_map(|j| j.thread_run_s.iter().copied()).collect();
                let (lo, hi) = runs.iter().fold((f64::INFINITY, 0.0f64), |(a, b), &x| (a.min(x), b.max(x)));
                prop_assert!(hi - lo <= 0.1 + 1e-9, "{runs:?}");
            }
        }
    }
}
