//! The status snapshot (`partita status`, `/metrics`): the registry's state as a viewer may
//! see it, taken under the lock.

use super::{App, Registry};
use crate::alloc::MemberId;
use crate::config::DEFAULT_PARTITION;
use crate::status::{AppStatus, PartitionStatus, Status};
use partita_protocol::page::monotonic_ns;
use partita_protocol::CpuSet;
use std::sync::atomic::Ordering;

impl Registry {
    /// A status snapshot as `viewer` may see it: root (or `None`, the in-process handle) sees
    /// everything, any other uid only its own applications and processes.
    pub(crate) fn status(&self, viewer: Option<u32>) -> Status {
        let visible = |uid: u32| viewer.is_none_or(|v| v == 0 || v == uid);
        let mut partitions: Vec<PartitionStatus> = (0..self.partitions.len())
            .map(|k| self.partition_status(k, &visible))
            .collect();
        self.cgroups.annotate(&mut partitions);
        if partitions.is_empty() {
            partitions.push(PartitionStatus {
                name: DEFAULT_PARTITION.into(),
                ..Default::default()
            });
        }
        let now_ns = monotonic_ns();
        let applications = self
            .apps
            .values()
            .filter(|a| visible(a.uid))
            .map(|a| self.app_status(a, now_ns))
            .collect();
        Status {
            timestamp_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            control: self.config.control,
            cpus: self.cpus.clone(),
            cpus_managed: self.cpus.len(),
            reallocations: self.reallocations,
            samples: self.samples,
            last_moves: self.last.moves,
            confinement: self.confinement.into(),
            partitions,
            applications,
            refusals: self.telemetry.refusal_counts(),
            memory: Default::default(),
        }
    }

    /// Partition `k` in the status; `visible` filters its tracked processes by uid.
    fn partition_status(&self, k: usize, visible: &dyn Fn(u32) -> bool) -> PartitionStatus {
        let p = &self.partitions[k];
        let a = self.last.partitions.get(k).cloned().unwrap_or_default();
        let (counter_source, counter_skipped, bandwidth) = self
            .bandwidth
            .partition_status(k)
            .map(|(s, skipped, line)| (s, skipped.iter().map(|x| x.to_string()).collect(), line))
            .unwrap_or_else(|| ("none".into(), Vec::new(), String::new()));
        PartitionStatus {
            counter_source,
            counter_skipped,
            bandwidth,
            name: p.name.clone(),
            share: p.share,
            fixed_cpus: p.cpus,
            sharing: p.sharing,
            policy: p.policy,
            entitlement: a.entitlement,
            demand: a.demand,
            allocation: a.allocation,
            lent: a.lent,
            borrowed: a.borrowed,
            uncontrolled_runnable: self.runnable[k].now,
            uncontrolled_average: self.runnable[k].avg,
            uncontrolled_cpus: self.last.cpus(MemberId::Uncontrolled(k)).to_vec(),
            uncontrolled_pids: self
                .tracked
                .iter()
                .filter(|t| t.partition == k && visible(t.uid))
                .map(|t| t.pid)
                .collect(),
            ..Default::default()
        }
    }

    /// One application in the status.
    fn app_status(&self, a: &App, now_ns: u64) -> AppStatus {
        let (target, cpus) = a.published.unwrap_or((a.pool_size, CpuSet::new()));
        let hb = a.page.app.heartbeat.load(Ordering::Relaxed);
        let (rate, parked) = self.bandwidth.app_status(a.id);
        AppStatus {
            id: a.id,
            pid: a.pid,
            uid: a.uid,
            name: a.name.clone(),
            partition: self.partitions[a.partition].name.clone(),
            pool_size: a.pool_size,
            demand: a.page.app.demand.load(Ordering::Relaxed),
            target,
            shared: a.shared,
            allocations: a.allocations,
            active: a.page.app.active.load(Ordering::Relaxed),
            nodes: self.nodes_of(&cpus),
            cpus: cpus.to_vec(),
            policy: self.partitions[a.partition].policy,
            counter_source: self
                .bandwidth
                .partition_status(a.partition)
                .map_or_else(|| "none".into(), |s| s.0),
            runtime_traffic: match a.page.app.traffic_status.load(Ordering::Relaxed) {
                0 => String::new(),
                code => partita_protocol::traffic::describe(code),
            },
            rate_gbps: rate.map(|r| r / 1e9),
            parked,
            tasks_run: a.page.app.tasks_run.load(Ordering::Relaxed),
            heartbeat_age_ms: now_ns.saturating_sub(hb) / 1_000_000,
            jobserver_tokens: a
                .jobserver
                .then(|| a.page.app.active.load(Ordering::Relaxed)),
            ..Default::default()
        }
    }
}
