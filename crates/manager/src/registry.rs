//! The manager's state: registered applications, processes started with `partita run`, the
//! allocator's history, and the reallocation that turns them into published pages and CPU
//! sets. Synchronous and lock-protected; the daemon's tasks call into it.

use crate::alloc::{self, AllocInput, AllocOutput, AppDemand, AppId, History, MemberId};
use crate::config::{Config, Control, PartitionConfig, Uncontrolled, DEFAULT_PARTITION};
use crate::enforce::Enforcer;
use crate::status::{AppStatus, PartitionStatus, Status};
use crate::sys;
use partita_protocol::page::{monotonic_ns, PageMap};
use partita_protocol::wire::ErrorCode;
use partita_protocol::CpuSet;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// A registered application.
#[derive(Debug)]
pub(crate) struct App {
    pub id: AppId,
    pub pid: i32,
    pub uid: u32,
    pub name: String,
    pub partition: usize,
    pub pool_size: u32,
    pub partition_only: bool,
    pub page: PageMap,
    pub published: Option<(u32, CpuSet)>,
}

/// A process started with `partita run`.
#[derive(Debug, Clone)]
pub(crate) struct Tracked {
    pub pid: i32,
    pub partition: usize,
}

/// Runnable-thread measurements of a partition's uncontrolled processes.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Runnable {
    pub now: u32,
    pub avg: f64,
}

/// Everything behind the manager's lock.
#[derive(Debug)]
pub(crate) struct Registry {
    pub config: Config,
    pub partitions: Vec<PartitionConfig>,
    pub cpus: Vec<usize>,
    pub domains: Vec<u32>,
    pub managed: CpuSet,
    pub apps: BTreeMap<AppId, App>,
    pub next_id: AppId,
    pub tracked: Vec<Tracked>,
    pub runnable: Vec<Runnable>,
    pub history: History,
    pub last: AllocOutput,
    pub uncontrolled_sets: Vec<CpuSet>,
    pub reallocations: u64,
    pub enforcer: Enforcer,
    pub start: Instant,
    /// Whether the manager may set affinities of other users' processes.
    pub privileged: bool,
    pub euid: u32,
    /// Bandwidth policy: counters, per-quantum selection, parked applications.
    pub bandwidth: crate::quantum::Bandwidth,
}

impl Registry {
    pub fn new(config: Config, managed: CpuSet) -> Registry {
        let partitions = config.partition_list();
        let cpus = managed.to_vec();
        let domains = cpus.iter().map(|&c| cache_domain(c)).collect();
        let enforcer = Enforcer::new(config.cgroups, managed);
        let bandwidth = crate::quantum::Bandwidth::new(&config, &partitions);
        let n = partitions.len();
        let euid = sys::euid();
        Registry {
            config,
            partitions,
            cpus,
            domains,
            managed,
            apps: BTreeMap::new(),
            next_id: 1,
            tracked: Vec::new(),
            runnable: vec![Runnable::default(); n],
            history: History::default(),
            last: AllocOutput::default(),
            uncontrolled_sets: vec![CpuSet::new(); n],
            reallocations: 0,
            enforcer,
            start: Instant::now(),
            privileged: euid == 0,
            euid,
            bandwidth,
        }
    }

    /// Index of a partition by name (empty: default).
    pub fn partition_index(&self, name: &str) -> Option<usize> {
        if name.is_empty() {
            return Some(0);
        }
        self.partitions.iter().position(|p| p.name == name)
    }

    /// Where an application goes: its hint if the partition admits hints, else the first
    /// partition whose rule matches, else `default`.
    pub fn choose_partition(
        &self,
        name: &str,
        uid: u32,
        gid: u32,
        hint: &str,
    ) -> Result<usize, (ErrorCode, String)> {
        if !hint.is_empty() {
            return match self.partition_index(hint) {
                Some(k) if self.partitions[k].members.hint || k == 0 => Ok(k),
                Some(_) => Err((
                    ErrorCode::PermissionDenied,
                    format!("partition {hint:?} does not admit applications by hint"),
                )),
                None => Err((
                    ErrorCode::UnknownPartition,
                    format!("no partition named {hint:?}"),
                )),
            };
        }
        for (k, p) in self.partitions.iter().enumerate().skip(1) {
            let m = &p.members;
            if m.names.iter().any(|n| n == name) || m.uids.contains(&uid) || m.gids.contains(&gid) {
                return Ok(k);
            }
        }
        Ok(0)
    }

    /// Register an application (identity from SO_PEERCRED) and give it a page.
    #[allow(clippy::too_many_arguments)]
    pub fn register(
        &mut self,
        pid: i32,
        uid: u32,
        gid: u32,
        name: &str,
        hint: &str,
        pool_size: u32,
        partition_only_flag: bool,
    ) -> Result<AppId, (ErrorCode, String)> {
        if !self.privileged && uid != self.euid {
            return Err((
                ErrorCode::PermissionDenied,
                format!("this manager serves uid {} only", self.euid),
            ));
        }
        if self.apps.len() >= self.config.max_applications {
            return Err((
                ErrorCode::TooManyApplications,
                format!(
                    "the manager already has {} applications (max_applications)",
                    self.apps.len()
                ),
            ));
        }
        if self.apps.values().any(|a| a.pid == pid) {
            return Err((
                ErrorCode::OutOfOrder,
                format!("process {pid} is already registered"),
            ));
        }
        let partition = self.choose_partition(name, uid, gid, hint)?;
        let id = self.next_id;
        let page = PageMap::create(id, pool_size)
            .map_err(|e| (ErrorCode::Internal, format!("control page: {e}")))?;
        let partition_only = partition_only_flag || self.config.control == Control::PartitionOnly;
        page.manager
            .partition_only
            .store(partition_only as u32, Ordering::Relaxed);
        // Until the application reports, assume it wants its whole pool.
        page.app.demand.store(pool_size, Ordering::Relaxed);
        page.app.heartbeat.store(monotonic_ns(), Ordering::Relaxed);
        self.next_id += 1;
        self.apps.insert(
            id,
            App {
                id,
                pid,
                uid,
                name: name.to_string(),
                partition,
                pool_size,
                partition_only,
                page,
                published: None,
            },
        );
        self.reallocate();
        Ok(id)
    }

    /// Remove an application; restores its affinity if it is still running.
    pub fn unregister(&mut self, id: AppId) {
        if let Some(app) = self.apps.remove(&id) {
            if sys::alive(app.pid) {
                self.enforcer.restore_process(app.pid);
            } else {
                self.enforcer.forget_process(app.pid);
            }
            self.reallocate();
        }
    }

    /// Track a process started with `partita run`; returns its CPU set.
    pub fn track(&mut self, pid: i32, partition: usize) -> CpuSet {
        self.tracked.retain(|t| t.pid != pid);
        self.tracked.push(Tracked { pid, partition });
        // "When one appears it gets one CPU at once."
        let r = &mut self.runnable[partition];
        r.now = r.now.max(1);
        self.reallocate();
        let mut set = self.uncontrolled_sets[partition];
        if set.is_empty() {
            set = self.managed;
        }
        let name = self.partitions[partition].name.clone();
        if let Err(e) = self.enforcer.confine_uncontrolled(&name, pid, &set) {
            tracing::warn!(pid, partition = %name, error = %e, "could not confine process");
        }
        set
    }

    /// Recompute the allocation and publish every change.
    pub fn reallocate(&mut self) {
        let n = self.partitions.len();
        let mut input = AllocInput::new(self.cpus.clone(), self.partitions.clone());
        input.domains = self.domains.clone();
        input.now_ms = self.start.elapsed().as_millis() as u64;
        input.period_ms = self.config.realloc_period_ms;
        input.usage_decay = self.config.usage_decay.clone();
        input.dss = self.config.dss.clone();
        input.uncontrolled = (0..n)
            .map(|k| alloc::uncontrolled_demand(self.runnable[k].now, self.runnable[k].avg))
            .collect();
        for app in self.apps.values() {
            let demand = app.page.app.demand.load(Ordering::Relaxed);
            // A parked application (bandwidth policy's zero quantum) asks for nothing.
            let demand = self.bandwidth.demand(app.id, demand);
            input.apps.push(AppDemand {
                id: app.id,
                partition: app.partition,
                demand,
                pool_size: app.pool_size,
            });
        }
        let out = alloc::allocate(&input, &mut self.history);
        self.reallocations += 1;

        // Union of CPUs per partition (for partition-only applications given 0).
        let mut partition_sets = vec![CpuSet::new(); n];
        for (m, (_, set)) in &out.members {
            let k = match m {
                MemberId::Uncontrolled(k) => *k,
                MemberId::App(id) => self.apps.get(id).map_or(0, |a| a.partition),
            };
            for c in set.iter() {
                partition_sets[k].insert(c);
            }
        }
        for app in self.apps.values_mut() {
            let (count, set) = out
                .members
                .get(&MemberId::App(app.id))
                .copied()
                .unwrap_or((0, CpuSet::new()));
            let (target, cpus) = if app.partition_only {
                let cpus = if !set.is_empty() {
                    set
                } else if !partition_sets[app.partition].is_empty() {
                    partition_sets[app.partition]
                } else {
                    self.managed
                };
                (app.pool_size, cpus)
            } else if count == 0 {
                // A zero quantum: workers suspend; keep the previous confinement.
                (0, app.published.map_or(CpuSet::new(), |p| p.1))
            } else {
                (count, set)
            };
            if app.published != Some((target, cpus)) {
                let cpus_changed = app.published.map(|p| p.1) != Some(cpus);
                app.page.manager.publish(target, &cpus);
                app.published = Some((target, cpus));
                if cpus_changed && !cpus.is_empty() && (self.privileged || app.uid == self.euid) {
                    if let Err(e) = self.enforcer.confine_process(app.pid, &cpus, false) {
                        tracing::debug!(pid = app.pid, error = %e, "affinity not applied");
                    }
                }
            }
        }
        for k in 0..n {
            let set = out.cpus(MemberId::Uncontrolled(k));
            if set != self.uncontrolled_sets[k] && !set.is_empty() {
                let pids: Vec<i32> = self
                    .tracked
                    .iter()
                    .filter(|t| t.partition == k)
                    .map(|t| t.pid)
                    .collect();
                if !pids.is_empty() {
                    let name = self.partitions[k].name.clone();
                    if let Err(e) = self.enforcer.update_uncontrolled(&name, &pids, &set) {
                        tracing::debug!(partition = %name, error = %e, "confinement not updated");
                    }
                }
                self.uncontrolled_sets[k] = set;
            }
        }
        tracing::trace!(moves = out.moves, total = out.total(), "reallocated");
        self.last = out;
    }

    /// One quantum of the bandwidth policy: read counters, select, write every page's
    /// `quantum_end` (before the zero targets are published), reallocate when the parked set
    /// changed.
    pub fn bandwidth_quantum(&mut self) {
        let apps: Vec<crate::quantum::TickApp> = self
            .apps
            .values()
            .map(|a| crate::quantum::TickApp {
                id: a.id,
                pid: a.pid,
                partition: a.partition,
                demand: a.page.app.demand.load(Ordering::Relaxed),
                reported_bytes: a.page.app.bandwidth.load(Ordering::Relaxed),
            })
            .collect();
        let cpus: Vec<u32> = (0..self.partitions.len())
            .map(|k| {
                let p = self.last.partitions.get(k).cloned().unwrap_or_default();
                p.entitlement.max(p.allocation)
            })
            .collect();
        let changed = self.bandwidth.tick(&apps, &cpus, monotonic_ns());
        for a in self.apps.values() {
            a.page
                .manager
                .quantum_end
                .store(self.bandwidth.quantum_end(a.id), Ordering::Release);
        }
        if changed {
            self.reallocate();
        }
    }

    /// Pids whose runnable threads count as the uncontrolled demand of each partition.
    pub fn tracked_pids(&self) -> Vec<(usize, i32)> {
        self.tracked.iter().map(|t| (t.partition, t.pid)).collect()
    }

    /// Take new runnable measurements (computed outside the lock); returns whether any
    /// partition's uncontrolled demand changed.
    pub fn update_runnable(&mut self, now: &[u32], alpha: f64) -> bool {
        let mut changed = false;
        for (k, &x) in now.iter().enumerate().take(self.runnable.len()) {
            let r = &mut self.runnable[k];
            let before = alloc::uncontrolled_demand(r.now, r.avg);
            r.avg = r.avg * (1.0 - alpha) + x as f64 * alpha;
            r.now = x;
            changed |= before != alloc::uncontrolled_demand(r.now, r.avg);
        }
        changed
    }

    /// Drop tracked processes that exited (their process tree is empty).
    pub fn reap_tracked(&mut self) -> bool {
        let before = self.tracked.len();
        let enforcer = &self.enforcer;
        let names: Vec<String> = self.partitions.iter().map(|p| p.name.clone()).collect();
        self.tracked
            .retain(|t| sys::alive(t.pid) || !enforcer.cgroup_pids(&names[t.partition]).is_empty());
        before != self.tracked.len()
    }

    /// Whether the default partition's demand is measured system-wide.
    pub fn system_wide(&self) -> bool {
        self.config.uncontrolled == Uncontrolled::System
    }

    /// A status snapshot.
    pub fn status(&self) -> Status {
        let now_ns = monotonic_ns();
        let mut partitions: Vec<PartitionStatus> = self
            .partitions
            .iter()
            .enumerate()
            .map(|(k, p)| {
                let a = self.last.partitions.get(k).cloned().unwrap_or_default();
                let (counter_source, counter_skipped, bandwidth) = self
                    .bandwidth
                    .partition_status(k)
                    .map(|(s, skipped, line)| {
                        (s, skipped.iter().map(|x| x.to_string()).collect(), line)
                    })
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
                        .filter(|t| t.partition == k)
                        .map(|t| t.pid)
                        .collect(),
                }
            })
            .collect();
        if partitions.is_empty() {
            partitions.push(PartitionStatus {
                name: DEFAULT_PARTITION.into(),
                ..Default::default()
            });
        }
        let applications = self
            .apps
            .values()
            .map(|a| {
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
                    active: a.page.app.active.load(Ordering::Relaxed),
                    cpus: cpus.to_vec(),
                    policy: self.partitions[a.partition].policy,
                    counter_source: self
                        .bandwidth
                        .partition_status(a.partition)
                        .map_or_else(|| "none".into(), |s| s.0),
                    rate_gbps: rate.map(|r| r / 1e9),
                    parked,
                    tasks_run: a.page.app.tasks_run.load(Ordering::Relaxed),
                    heartbeat_age_ms: now_ns.saturating_sub(hb) / 1_000_000,
                }
            })
            .collect();
        Status {
            timestamp_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            control: self.config.control,
            cpus: self.cpus.clone(),
            cpus_managed: self.cpus.len(),
            reallocations: self.reallocations,
            last_moves: self.last.moves,
            confinement: self.enforcer.confinement().name().into(),
            partitions,
            applications,
        }
    }
}

/// L3 cache id of a CPU (its cache domain), 0 when sysfs does not say.
fn cache_domain(cpu: usize) -> u32 {
    for idx in (0..5).rev() {
        let base = format!("/sys/devices/system/cpu/cpu{cpu}/cache/index{idx}");
        if let Ok(level) = std::fs::read_to_string(format!("{base}/level")) {
            if level.trim() == "3" {
                if let Ok(id) = std::fs::read_to_string(format!("{base}/id")) {
                    return id.trim().parse().unwrap_or(0);
                }
            }
        }
    }
    0
}
