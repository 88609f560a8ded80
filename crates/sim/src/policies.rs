//! The allocation policies over time: partita-manager's pure allocator run on a scripted
//! scenario (applications arriving, changing demand, leaving) once per reallocation period.

use partita_manager::alloc::{allocate, AllocInput, AppDemand, History, MemberId};
use partita_manager::config::{PartitionConfig, PolicyKind};

/// One application of the scenario: `(id, pool, [(from_s, demand)], leaves_s)`.
type Script = (u32, u32, &'static [(f64, u32)], f64);

/// 8 CPUs; A wants everything throughout; B arrives at 5 s wanting 4, drops to 1 at 20 s;
/// C arrives at 10 s wanting 6 and leaves at 25 s; D arrives at 12 s wanting 2.
const SCENARIO: [Script; 4] = [
    (1, 8, &[(0.0, 8)], 30.0),
    (2, 4, &[(5.0, 4), (20.0, 1)], 30.0),
    (3, 6, &[(10.0, 6)], 25.0),
    (4, 2, &[(12.0, 2)], 30.0),
];

/// CPUs per application at each period, for one policy.
///
/// ```
/// use partita_manager::config::PolicyKind;
/// let (times, per_app) = partita_sim::policies::over_time(PolicyKind::Equipartition, 300);
/// assert_eq!(per_app.len(), 4);
/// for (k, _) in times.iter().enumerate() {
///     assert!(per_app.iter().map(|a| a[k]).sum::<u32>() <= 8);
/// }
/// ```
pub fn over_time(policy: PolicyKind, period_ms: u64) -> (Vec<f64>, Vec<Vec<u32>>) {
    let cpus: Vec<usize> = (0..8).collect();
    let mut p = PartitionConfig::named("default");
    p.policy = policy;
    let mut history = History::default();
    let mut times = Vec::new();
    let mut per_app = vec![Vec::new(); SCENARIO.len()];
    let mut now_ms = 0;
    while now_ms < 30_000 {
        let t = now_ms as f64 / 1000.0;
        let mut input = AllocInput::new(cpus.clone(), vec![p.clone()]);
        input.now_ms = now_ms;
        input.period_ms = period_ms;
        for &(id, pool, demands, leaves) in &SCENARIO {
            let demand = demands
                .iter()
                .rev()
                .find(|(from, _)| *from <= t)
                .map(|d| d.1);
            if let (Some(demand), true) = (demand, t < leaves) {
                input.apps.push(AppDemand {
                    id,
                    partition: 0,
                    demand,
                    pool_size: pool,
                });
            }
        }
        let out = allocate(&input, &mut history);
        times.push(t);
        for (k, &(id, ..)) in SCENARIO.iter().enumerate() {
            per_app[k].push(out.count(MemberId::App(id)));
        }
        now_ms += period_ms;
    }
    (times, per_app)
}
