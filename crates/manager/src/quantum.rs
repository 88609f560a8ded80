//! Plumbing of the bandwidth policy: once per quantum read the counters, run the pure schedule
//! ([`crate::alloc::quantum`]) for every partition whose policy is `bandwidth`, and remember
//! which applications are parked (zero quantum) until the next quantum, or until a running one
//! leaves or goes idle: before every reallocation, CPUs freed mid-quantum go to parked ones at
//! once ([`Bandwidth::top_up`]), so the policy is work-conserving. The registry zeroes a
//! parked application's demand before allocating, so the selected ones share the partition's
//! CPUs; the page's `quantum_end` tells a parked client when to resume on its own should the
//! manager stop updating it.

use crate::alloc::quantum::{self, QuantumApp, QuantumParams, QuantumState};
use crate::alloc::AppId;
use crate::config::{BandwidthConfig, Config, PartitionConfig, PolicyKind};
use crate::counters::{AppRef, Chain, Skipped};
use std::collections::{BTreeMap, BTreeSet};

/// What the quantum tick needs to know about one registered application.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TickApp {
    pub id: AppId,
    pub pid: i32,
    pub partition: usize,
    pub demand: u32,
    pub reported_bytes: u64,
}

/// Where the capacity came from.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Capacity {
    /// Bytes per second, and its origin (`config` or the state file's path).
    Known(f64, String),
    /// Neither configured nor calibrated: why.
    Unknown(String),
}

/// The bandwidth policy's state across quanta.
#[derive(Debug)]
pub(crate) struct Bandwidth {
    config: BandwidthConfig,
    /// Partitions with `policy = "bandwidth"`.
    partitions: BTreeSet<usize>,
    capacity: Capacity,
    chain: Option<Chain>,
    states: BTreeMap<usize, QuantumState>,
    parked: BTreeSet<AppId>,
    ran: BTreeSet<AppId>,
    rates: BTreeMap<AppId, f64>,
    quantum_end_ns: u64,
    quanta: u64,
    /// Applications unparked between quanta by [`Bandwidth::top_up`] (shown by status).
    top_ups: u64,
}

/// Partition `k`'s applications as the selection sees them, each with the rate `sample`
/// gives it.
fn members_of<'a>(
    apps: impl Iterator<Item = &'a TickApp>,
    k: usize,
    sample: impl Fn(AppId) -> Option<f64>,
) -> Vec<QuantumApp> {
    apps.filter(|a| a.partition == k)
        .map(|a| QuantumApp {
            id: a.id,
            threads: a.demand,
            sample: sample(a.id),
        })
        .collect()
}

/// How stale an application's reports may get in a partition of this policy, µs (the page's
/// `report_period_us`). The bandwidth policy turns successive traffic readings into a rate
/// once per quantum, so a reading a client tick old skews that rate by tick / quantum: it
/// gets a twentieth of its quantum (10 ms for the paper's 200 ms). Every other policy reads
/// only the demand, which the client rings at once, and `partita status` and `top` show the
/// rest (`top` calls a heartbeat older than 1 s stale): 100 ms, so that a busy pool's client
/// does not wake onto its workers' CPUs a hundred times a second for nothing.
pub(crate) fn report_period_us(policy: PolicyKind, bandwidth_quantum_ms: u64) -> u32 {
    const STATUS_US: u64 = 100_000;
    let us = match policy {
        PolicyKind::Bandwidth => {
            (bandwidth_quantum_ms.saturating_mul(1000) / 20).clamp(1000, STATUS_US)
        }
        _ => STATUS_US,
    };
    us as u32
}

/// Slack added to `quantum_end` so a manager tick that is a little late does not make parked
/// clients resume for a moment: a client resumes on its own only when the manager missed its
/// tick by more than this.
fn slack_ns(quantum_ms: u64) -> u64 {
    (quantum_ms / 2).max(50) * 1_000_000
}

impl Bandwidth {
    pub fn new(config: &Config, partitions: &[PartitionConfig]) -> Bandwidth {
        let bw: BTreeSet<usize> = partitions
            .iter()
            .enumerate()
            .filter(|(_, p)| p.policy == PolicyKind::Bandwidth)
            .map(|(k, _)| k)
            .collect();
        // Counters are opened only when some partition uses them.
        let chain = (!bw.is_empty()).then(|| Chain::detect(&config.bandwidth.sources));
        Bandwidth {
            capacity: capacity(&config.bandwidth),
            config: config.bandwidth.clone(),
            partitions: bw,
            chain,
            states: BTreeMap::new(),
            parked: BTreeSet::new(),
            ran: BTreeSet::new(),
            rates: BTreeMap::new(),
            quantum_end_ns: 0,
            quanta: 0,
            top_ups: 0,
        }
    }

    /// The tick period, when some partition uses the policy.
    pub fn period_ms(&self) -> Option<u64> {
        (!self.partitions.is_empty()).then_some(self.config.quantum_ms)
    }

    /// The demand to allocate for an application: 0 while it is parked.
    pub fn demand(&self, id: AppId, demand: u32) -> u32 {
        if self.parked.contains(&id) {
            0
        } else {
            demand
        }
    }

    /// `quantum_end` for an application's page: the deadline of its zero quantum, else 0.
    pub fn quantum_end(&self, id: AppId) -> u64 {
        if self.parked.contains(&id) {
            self.quantum_end_ns
        } else {
            0
        }
    }

    /// The capacity the selection divides, unless the policy is degraded to equipartition.
    fn usable_capacity(&self) -> Option<f64> {
        match (&self.capacity, self.degraded()) {
            (Capacity::Known(c, _), None) => Some(*c),
            _ => None,
        }
    }

    /// The selection's parameters for partition `k` holding `cpus[k]` CPUs.
    fn params(&self, cpus: &[u32], k: usize, capacity: f64) -> QuantumParams {
        QuantumParams {
            cpus: cpus.get(k).copied().unwrap_or(1).max(1),
            capacity,
            variant: self.config.variant,
            window: self.config.window,
        }
    }

    /// Why the policy runs as equipartition, if it does.
    fn degraded(&self) -> Option<String> {
        let chain = self.chain.as_ref()?;
        if chain.source() == crate::counters::NONE {
            return Some("no counter source: equipartition".into());
        }
        match &self.capacity {
            Capacity::Unknown(why) => Some(format!("{why}: equipartition")),
            Capacity::Known(..) => None,
        }
    }

    /// One quantum. `cpus[k]` is partition k's CPU count. Returns whether the parked set
    /// changed (the caller then reallocates).
    pub fn tick(&mut self, apps: &[TickApp], cpus: &[u32], now_ns: u64) -> bool {
        let Some(chain) = self.chain.as_mut() else {
            return false;
        };
        let ours: Vec<&TickApp> = apps
            .iter()
            .filter(|a| self.partitions.contains(&a.partition))
            .collect();
        let refs: Vec<AppRef> = ours
            .iter()
            .map(|a| AppRef {
                id: a.id,
                pid: a.pid,
                reported_bytes: a.reported_bytes,
            })
            .collect();
        let measured = chain.sample(&refs, now_ns);
        self.quanta += 1;
        let mut parked = BTreeSet::new();
        let mut ran = BTreeSet::new();
        let capacity = self.usable_capacity();
        for &k in &self.partitions {
            // Only a quantum in which it ran measures its rate.
            let members = members_of(ours.iter().copied(), k, |id| {
                measured
                    .get(&id)
                    .copied()
                    .filter(|_| self.ran.contains(&id))
            });
            let Some(capacity) = capacity else {
                // Degraded: nobody is parked.
                ran.extend(members.iter().map(|a| a.id));
                continue;
            };
            let p = self.params(cpus, k, capacity);
            let state = self.states.entry(k).or_default();
            let selected = quantum::step(state, &p, &members);
            for (id, r) in quantum::estimates(state, &p, &members) {
                self.rates.insert(id, r);
            }
            for a in &members {
                if selected.contains(&a.id) {
                    ran.insert(a.id);
                } else if a.threads > 0 {
                    parked.insert(a.id);
                }
            }
        }
        self.rates.retain(|id, _| apps.iter().any(|a| a.id == *id));
        self.ran = ran;
        self.quantum_end_ns =
            now_ns + self.config.quantum_ms * 1_000_000 + slack_ns(self.config.quantum_ms);
        let changed = parked != self.parked;
        self.parked = parked;
        changed
    }

    /// Whether some application is parked (only then can [`Bandwidth::top_up`] change
    /// anything).
    pub fn any_parked(&self) -> bool {
        !self.parked.is_empty()
    }

    /// Work conservation between quanta: when running applications of a bandwidth partition
    /// left or went idle, unpark the applications the selection elects for the CPUs they freed
    /// (as an arrival runs at once, a departure must not leave its CPUs idle until the
    /// quantum ends). The unparked ones bring no sample at the next quantum (they ran part of
    /// it) and keep their place in the list. Returns whether anyone was unparked.
    pub fn top_up(&mut self, apps: &[TickApp], cpus: &[u32]) -> bool {
        let Some(capacity) = self.usable_capacity() else {
            return false;
        };
        if self.parked.is_empty() {
            return false;
        }
        let mut unparked = Vec::new();
        for &k in &self.partitions {
            let Some(state) = self.states.get(&k) else {
                continue;
            };
            let members = members_of(apps.iter(), k, |_| None);
            if !members.iter().any(|a| self.parked.contains(&a.id)) {
                continue;
            }
            let running: Vec<AppId> = members
                .iter()
                .filter(|a| a.threads > 0 && !self.parked.contains(&a.id))
                .map(|a| a.id)
                .collect();
            let p = self.params(cpus, k, capacity);
            unparked.extend(quantum::top_up(state, &p, &members, &running));
        }
        for id in &unparked {
            self.parked.remove(id);
        }
        self.top_ups += unparked.len() as u64;
        !unparked.is_empty()
    }

    /// For `partita status`: the counter source of partition `k` (`None`: not a bandwidth
    /// partition), the skipped sources, and a one-line description of the policy's state.
    pub fn partition_status(&self, k: usize) -> Option<(String, Vec<Skipped>, String)> {
        if !self.partitions.contains(&k) {
            return None;
        }
        let chain = self.chain.as_ref()?;
        let c = &self.config;
        let mut line = format!(
            "{} quantum {} ms window {}",
            match c.variant {
                crate::config::BandwidthVariant::LatestQuantum => "latest-quantum",
                crate::config::BandwidthVariant::QuantaWindow => "quanta-window",
            },
            c.quantum_ms,
            c.window
        );
        match &self.capacity {
            Capacity::Known(b, from) => line += &format!(", capacity {:.2} GB/s ({from})", b / 1e9),
            Capacity::Unknown(_) => {}
        }
        if let Some(d) = self.degraded() {
            line += &format!("; {d}");
        }
        line += &format!("; quanta {}, top-ups {}", self.quanta, self.top_ups);
        Some((chain.source().to_string(), chain.skipped().to_vec(), line))
    }

    /// For `partita status`: an application's estimated rate (bytes/s) and whether it is parked.
    pub fn app_status(&self, id: AppId) -> (Option<f64>, bool) {
        (self.rates.get(&id).copied(), self.parked.contains(&id))
    }
}

/// The capacity: the configuration key, else the state file of `partita calibrate`.
fn capacity(c: &BandwidthConfig) -> Capacity {
    if let Some(g) = c.capacity_gbps {
        return Capacity::Known(g * 1e9, "bandwidth.capacity_gbps".into());
    }
    let path = c
        .state_file
        .clone()
        .unwrap_or_else(partita_numa::triad::default_state_path);
    match partita_numa::triad::Calibration::load(&path) {
        Ok(cal) => Capacity::Known(cal.gbps * 1e9, path.display().to_string()),
        Err(e) => Capacity::Unknown(format!(
            "no capacity ({e}; run `partita calibrate` or set bandwidth.capacity_gbps)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_bandwidth_policy_needs_fresh_reports() {
        assert_eq!(report_period_us(PolicyKind::Bandwidth, 200), 10_000);
        assert_eq!(report_period_us(PolicyKind::Bandwidth, 5), 1000, "floor");
        assert_eq!(report_period_us(PolicyKind::Bandwidth, 60_000), 100_000);
        for p in [
            PolicyKind::Equipartition,
            PolicyKind::UsageDecay,
            PolicyKind::Dss,
            PolicyKind::Batch,
        ] {
            assert_eq!(report_period_us(p, 200), 100_000, "{p}");
        }
    }

    fn config(capacity: Option<f64>, sources: &[&str]) -> Config {
        let mut c = Config::from_toml_str(
            "[[partition]]\nname = \"mem\"\npolicy = \"bandwidth\"\nmembers = { names = [\"x\"] }",
        )
        .unwrap();
        c.bandwidth.capacity_gbps = capacity;
        c.bandwidth.sources = sources.iter().map(|s| s.to_string()).collect();
        c
    }

    fn app(id: AppId, bytes: u64) -> TickApp {
        TickApp {
            id,
            pid: 1,
            partition: 1,
            demand: 2,
            reported_bytes: bytes,
        }
    }

    #[test]
    fn parks_all_but_the_selected_and_rotates() {
        let c = config(Some(10.0), &["self-report"]);
        let mut b = Bandwidth::new(&c, &c.partition_list());
        assert_eq!(b.period_ms(), Some(200));
        let apps = [app(1, 0), app(2, 0), app(3, 0)];
        let mut seen = BTreeSet::new();
        for q in 0..3u64 {
            b.tick(&apps, &[0, 2], q * 200_000_000);
            let running: Vec<AppId> = (1..=3).filter(|id| !b.parked.contains(id)).collect();
            assert_eq!(running.len(), 1, "2 CPUs, gangs of 2: one runs");
            seen.extend(running.iter().copied());
            for id in 1..=3 {
                let end = b.quantum_end(id);
                assert_eq!(end != 0, b.parked.contains(&id));
                assert!(end == 0 || end > q * 200_000_000 + 200_000_000);
            }
            assert_eq!(b.demand(running[0], 2), 2);
        }
        assert_eq!(seen.len(), 3, "everyone ran within 3 quanta");
    }

    fn one(id: AppId, demand: u32) -> TickApp {
        TickApp {
            demand,
            ..app(id, 0)
        }
    }

    /// Work conservation: a CPU freed by a departing application goes to a waiting one in the
    /// very next reallocation (one `top_up`), not at the quantum's end (no `tick` between).
    #[test]
    fn a_departure_unparks_a_waiting_app_within_one_reallocation() {
        let c = config(Some(10.0), &["self-report"]);
        let mut b = Bandwidth::new(&c, &c.partition_list());
        let apps = [one(1, 1), one(2, 1), one(3, 1)];
        b.tick(&apps, &[0, 2], 0);
        let waiting: Vec<AppId> = b.parked.iter().copied().collect();
        assert_eq!(waiting.len(), 1, "2 CPUs, 3 single-thread apps: one waits");
        assert_eq!(b.demand(waiting[0], 1), 0);
        // Nothing freed: the top-up changes nothing.
        assert!(!b.top_up(&apps, &[0, 2]));
        // A running one leaves.
        let gone = (1..=3).find(|id| !waiting.contains(id)).unwrap();
        let left: Vec<TickApp> = apps.iter().copied().filter(|a| a.id != gone).collect();
        assert!(b.top_up(&left, &[0, 2]));
        assert!(b.parked.is_empty());
        assert_eq!(b.demand(waiting[0], 1), 1);
        assert_eq!(b.quantum_end(waiting[0]), 0, "no zero quantum left to end");
        assert_eq!((b.quanta, b.top_ups), (1, 1), "within the same quantum");
        // It ran part of the quantum only: no sample from it at the next quantum.
        b.tick(&left, &[0, 2], 200_000_000);
        assert!(b.parked.is_empty(), "2 apps, 2 CPUs: both run");
        assert!(b.states[&1].rate(waiting[0]).is_none());
    }

    /// A running application whose demand falls to 0 frees its CPU for a waiting one at once,
    /// and gangs stay whole: a waiting 2-thread application does not get 1 freed CPU.
    #[test]
    fn a_demand_drop_unparks_only_what_fits() {
        let c = config(Some(10.0), &["self-report"]);
        let mut b = Bandwidth::new(&c, &c.partition_list());
        // 3 CPUs: 1 (one thread, head of the list) and one of the 2-thread apps 2, 3 run.
        let apps = [one(1, 1), one(2, 2), one(3, 2)];
        b.tick(&apps, &[0, 3], 0);
        assert!(!b.parked.contains(&1));
        let waiting = *b.parked.iter().next().unwrap();
        let running = 5 - waiting;
        let drop = |id: AppId| -> Vec<TickApp> {
            apps.iter()
                .map(|a| if a.id == id { one(id, 0) } else { *a })
                .collect()
        };
        // 1 goes idle: 1 CPU free, the waiting gang needs 2.
        assert!(!b.top_up(&drop(1), &[0, 3]));
        assert!(b.parked.contains(&waiting));
        // The running gang goes idle: 2 CPUs free, the waiting gang runs.
        assert!(b.top_up(&drop(running), &[0, 3]));
        assert!(b.parked.is_empty());
    }

    #[test]
    fn without_capacity_or_source_nobody_is_parked() {
        for c in [config(None, &["self-report"]), config(Some(5.0), &[])] {
            let mut c = c;
            c.bandwidth.state_file = Some("/nonexistent/partita-bw.state".into());
            let mut b = Bandwidth::new(&c, &c.partition_list());
            b.tick(&[app(1, 0), app(2, 0), app(3, 0)], &[0, 2], 1);
            assert!(b.parked.is_empty());
            let (_, _, line) = b.partition_status(1).unwrap();
            assert!(line.contains("equipartition"), "{line}");
        }
    }

    #[test]
    fn other_partitions_are_untouched() {
        let c = config(Some(10.0), &["self-report"]);
        let mut b = Bandwidth::new(&c, &c.partition_list());
        let mut a = app(1, 0);
        a.partition = 0;
        assert!(!b.tick(&[a, a], &[2, 2], 1));
        assert!(b.partition_status(0).is_none());
        assert_eq!(b.demand(1, 3), 3);
    }
}
