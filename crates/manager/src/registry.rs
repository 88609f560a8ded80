//! The manager's state: registered applications, processes started with `partita run`, the
//! allocator's history, and the reallocation that turns them into published pages and CPU
//! sets. Synchronous and lock-protected; the daemon's tasks call into it.

use crate::alloc::{self, AllocInput, AllocOutput, AppDemand, AppId, History, MemberId};
use crate::config::{Config, Control, PartitionConfig, Uncontrolled, DEFAULT_PARTITION};
use crate::enforce::Enforcer;
use crate::proc_ref::ProcRef;
use crate::status::{AppStatus, PartitionStatus, Status};
use crate::sys;
use partita_protocol::page::{monotonic_ns, PageMap};
use partita_protocol::wire::ErrorCode;
use partita_protocol::CpuSet;
use std::collections::BTreeMap;

/// Who is on the other end of a connection (kernel credentials and a pidfd).
#[derive(Debug, Clone)]
pub(crate) struct Peer {
    /// The peer's process.
    pub proc: ProcRef,
    /// Its uid.
    pub uid: u32,
    /// Its gid.
    pub gid: u32,
}
use std::os::fd::OwnedFd;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// A registered application.
#[derive(Debug)]
struct App {
    id: AppId,
    pid: i32,
    proc: ProcRef,
    uid: u32,
    name: String,
    partition: usize,
    pool_size: u32,
    partition_only: bool,
    page: PageMap,
    published: Option<(u32, CpuSet)>,
}

/// A process started with `partita run`.
#[derive(Debug, Clone)]
struct Tracked {
    pid: i32,
    uid: u32,
    proc: ProcRef,
    partition: usize,
}

/// Runnable-thread measurements of a partition's uncontrolled processes.
#[derive(Debug, Clone, Copy, Default)]
struct Runnable {
    now: u32,
    avg: f64,
}

/// Who asks to register (identity from SO_PEERCRED, the rest from the hello).
#[derive(Debug, Clone)]
pub(crate) struct Registration {
    /// The peer's pid (from the socket, never from a message).
    pub pid: i32,
    /// The peer's pidfd (from the socket).
    pub proc: ProcRef,
    /// The peer's uid.
    pub uid: u32,
    /// The peer's gid.
    pub gid: u32,
    /// Application name from the hello.
    pub name: String,
    /// Partition hint from the hello (empty: none).
    pub hint: String,
    /// Worker threads in its pool.
    pub pool_size: u32,
    /// The hello's partition-only flag.
    pub partition_only: bool,
}

/// The daemon's periods, from the configuration.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Periods {
    /// How long a client may stay silent before its first message.
    pub hello_timeout: Duration,
    /// Runnable-thread sampling of uncontrolled processes.
    pub sample: Duration,
    /// The periodic reallocation tick: the shortest of the policies' periods.
    pub tick: Duration,
}

/// What the sampler measures outside the lock.
#[derive(Debug, Clone)]
pub(crate) struct SampleRequest {
    /// (partition, pid) of every tracked process.
    pub tracked: Vec<(usize, i32)>,
    /// Pids of the registered applications.
    pub app_pids: Vec<i32>,
    /// Number of partitions.
    pub partitions: usize,
    /// Whether the default partition counts every runnable thread of the system.
    pub system_wide: bool,
}

/// Everything behind the manager's lock.
#[derive(Debug)]
pub(crate) struct Registry {
    config: Config,
    partitions: Vec<PartitionConfig>,
    cpus: Vec<usize>,
    domains: Vec<u32>,
    managed: CpuSet,
    apps: BTreeMap<AppId, App>,
    next_id: AppId,
    tracked: Vec<Tracked>,
    runnable: Vec<Runnable>,
    history: History,
    last: AllocOutput,
    uncontrolled_sets: Vec<CpuSet>,
    reallocations: u64,
    /// Refusals since start, per error code.
    refusals: BTreeMap<String, u64>,
    enforcer: Enforcer,
    start: Instant,
    /// Whether the manager may set affinities of other users' processes.
    privileged: bool,
    euid: u32,
}

impl Registry {
    pub(crate) fn new(config: Config, managed: CpuSet) -> Registry {
        let partitions = config.partition_list();
        let cpus = managed.to_vec();
        let domains = cpus.iter().map(|&c| cache_domain(c)).collect();
        let enforcer = Enforcer::new(config.cgroups, managed);
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
            refusals: BTreeMap::new(),
            enforcer,
            start: Instant::now(),
            privileged: euid == 0,
            euid,
        }
    }

    /// The daemon's periods.
    pub(crate) fn periods(&self) -> Periods {
        let c = &self.config;
        let tick = c
            .realloc_period_ms
            .min(c.usage_decay.period_ms)
            .min(c.dss.quantum_ms)
            .max(1);
        Periods {
            hello_timeout: Duration::from_millis(c.hello_timeout_ms),
            sample: Duration::from_millis(c.sample_period_ms),
            tick: Duration::from_millis(tick),
        }
    }

    /// The CPUs this manager hands out.
    pub(crate) fn managed(&self) -> CpuSet {
        self.managed
    }

    /// Forget every application and undo every confinement (shutdown).
    pub(crate) fn shutdown(&mut self) {
        self.apps.clear();
        self.enforcer.restore_all();
    }

    /// The welcome for a registered application: its partition's name and a copy of its
    /// page's fd. `None` if it is gone.
    pub(crate) fn welcome(&self, id: AppId) -> Option<std::io::Result<(String, OwnedFd)>> {
        let app = self.apps.get(&id)?;
        let partition = self.partitions[app.partition].name.clone();
        Some(app.page.fd().try_clone_to_owned().map(|fd| (partition, fd)))
    }

    /// Confine the process `pid` to the partition named `partition` as uncontrolled
    /// (`partita run`): the partition's name and the CPUs it is confined to.
    /// The partition must admit the caller as a member (its hint rule, uid or gid; `default`
    /// admits everyone), the caller must be one this manager serves, and at most
    /// `max_applications` processes are tracked.
    pub(crate) fn confine(
        &mut self,
        peer: &Peer,
        partition: &str,
    ) -> Result<(String, CpuSet), (ErrorCode, String)> {
        if !self.privileged && peer.uid != self.euid {
            return Err((
                ErrorCode::PermissionDenied,
                format!("this manager serves uid {} only", self.euid),
            ));
        }
        let k = self.partition_index(partition).ok_or_else(|| {
            (
                ErrorCode::UnknownPartition,
                format!("no partition named {partition:?}"),
            )
        })?;
        let m = &self.partitions[k].members;
        if k != 0 && !m.hint && !m.uids.contains(&peer.uid) && !m.gids.contains(&peer.gid) {
            return Err((
                ErrorCode::PermissionDenied,
                format!(
                    "partition {partition:?} does not admit uid {} / gid {}",
                    peer.uid, peer.gid
                ),
            ));
        }
        self.tracked.retain(|t| t.proc.alive());
        let already = self.tracked.iter().any(|t| t.pid == peer.proc.pid());
        if !already && self.tracked.len() >= self.config.max_applications {
            return Err((
                ErrorCode::TooManyApplications,
                format!(
                    "the manager already tracks {} processes (max_applications)",
                    self.tracked.len()
                ),
            ));
        }
        let cpus = self
            .track(peer, k)
            .map_err(|e| (ErrorCode::PermissionDenied, e))?;
        Ok((self.partitions[k].name.clone(), cpus))
    }

    /// Count a refusal (shown in status).
    pub(crate) fn count_refusal(&mut self, code: ErrorCode) {
        *self.refusals.entry(format!("{code:?}")).or_default() += 1;
    }

    /// What the sampler must measure.
    pub(crate) fn sample_request(&self) -> SampleRequest {
        SampleRequest {
            tracked: self
                .tracked
                .iter()
                .filter(|t| t.proc.alive())
                .map(|t| (t.partition, t.pid))
                .collect(),
            app_pids: self.apps.values().map(|a| a.pid).collect(),
            partitions: self.partitions.len(),
            system_wide: self.config.uncontrolled == Uncontrolled::System,
        }
    }

    /// Index of a partition by name (empty: default).
    fn partition_index(&self, name: &str) -> Option<usize> {
        if name.is_empty() {
            return Some(0);
        }
        self.partitions.iter().position(|p| p.name == name)
    }

    /// Where an application goes: its hint if the partition admits hints, else the first
    /// partition whose rule matches, else `default`.
    fn choose_partition(
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
    pub(crate) fn register(&mut self, req: Registration) -> Result<AppId, (ErrorCode, String)> {
        self.admit(&req)?;
        let partition = self.choose_partition(&req.name, req.uid, req.gid, &req.hint)?;
        let id = self.next_id;
        // Ids are never reused within one manager: at the end of the range, refuse.
        let next = self.next_id.checked_add(1).ok_or((
            ErrorCode::TooManyApplications,
            "application ids are exhausted; restart the manager".to_string(),
        ))?;
        let page = PageMap::create(id, req.pool_size)
            .map_err(|e| (ErrorCode::Internal, format!("control page: {e}")))?;
        let partition_only = req.partition_only || self.config.control == Control::PartitionOnly;
        page.manager
            .partition_only
            .store(partition_only as u32, Ordering::Relaxed);
        // Until the application reports, assume it wants its whole pool.
        page.app.demand.store(req.pool_size, Ordering::Relaxed);
        page.app.heartbeat.store(monotonic_ns(), Ordering::Relaxed);
        self.next_id = next;
        self.apps.insert(
            id,
            App {
                id,
                pid: req.pid,
                proc: req.proc,
                uid: req.uid,
                name: req.name,
                partition,
                pool_size: req.pool_size,
                partition_only,
                page,
                published: None,
            },
        );
        self.reallocate();
        Ok(id)
    }

    /// Refuse another user's process (unless privileged), a full manager, a second
    /// registration of the same process.
    fn admit(&self, req: &Registration) -> Result<(), (ErrorCode, String)> {
        if !self.privileged && req.uid != self.euid {
            return Err((
                ErrorCode::PermissionDenied,
                format!("this manager serves uid {} only", self.euid),
            ));
        }
        if !req.proc.alive() {
            return Err((
                ErrorCode::PermissionDenied,
                format!("process {} has exited", req.pid),
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
        if self.apps.values().any(|a| a.pid == req.pid) {
            return Err((
                ErrorCode::OutOfOrder,
                format!("process {} is already registered", req.pid),
            ));
        }
        Ok(())
    }

    /// Remove an application; restores its affinity if it is still running.
    pub(crate) fn unregister(&mut self, id: AppId) {
        if let Some(app) = self.apps.remove(&id) {
            if app.proc.alive() {
                self.enforcer.restore_process(&app.proc);
            } else {
                self.enforcer.forget_dead();
            }
            self.reallocate();
        }
    }

    /// Track a process started with `partita run`; returns its CPU set, or why it could not
    /// be confined (it is then not tracked).
    fn track(&mut self, peer: &Peer, partition: usize) -> Result<CpuSet, String> {
        let pid = peer.proc.pid();
        self.tracked.retain(|t| t.pid != pid);
        // "When one appears it gets one CPU at once."
        let r = &mut self.runnable[partition];
        r.now = r.now.max(1);
        self.reallocate();
        let mut set = self.uncontrolled_sets[partition];
        if set.is_empty() {
            set = self.managed;
        }
        let name = self.partitions[partition].name.clone();
        match self.enforcer.confine_uncontrolled(&name, &peer.proc, &set) {
            Ok(applied) => {
                self.tracked.push(Tracked {
                    pid,
                    uid: peer.uid,
                    proc: peer.proc.clone(),
                    partition,
                });
                Ok(applied)
            }
            Err(e) => {
                tracing::warn!(pid, partition = %name, error = %e, "could not confine process");
                self.reallocate();
                Err(format!("cannot confine process {pid}: {e}"))
            }
        }
    }

    /// Recompute the allocation and publish every change.
    pub(crate) fn reallocate(&mut self) {
        let input = self.alloc_input();
        let out = alloc::allocate(&input, &mut self.history);
        self.reallocations += 1;
        self.publish_apps(&out);
        self.confine_uncontrolled(&out);
        tracing::trace!(moves = out.moves, total = out.total(), "reallocated");
        self.last = out;
    }

    /// The allocator's input: CPUs, partitions, demands read from the pages now.
    fn alloc_input(&self) -> AllocInput {
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
            input.apps.push(AppDemand {
                id: app.id,
                partition: app.partition,
                demand,
                pool_size: app.pool_size,
            });
        }
        input
    }

    /// Publish each application's new `(target, cpus)` if it changed, and set its affinity
    /// when its CPU set changed.
    fn publish_apps(&mut self, out: &AllocOutput) {
        // Union of CPUs per partition (for partition-only applications given 0).
        let mut partition_sets = vec![CpuSet::new(); self.partitions.len()];
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
                    if let Err(e) = self.enforcer.confine_process(&app.proc, &cpus, false) {
                        tracing::debug!(pid = app.pid, error = %e, "affinity not applied");
                    }
                }
            }
        }
    }

    /// Move each partition's tracked processes to the partition's new uncontrolled set.
    fn confine_uncontrolled(&mut self, out: &AllocOutput) {
        for k in 0..self.partitions.len() {
            let set = out.cpus(MemberId::Uncontrolled(k));
            if set != self.uncontrolled_sets[k] && !set.is_empty() {
                let procs: Vec<ProcRef> = self
                    .tracked
                    .iter()
                    .filter(|t| t.partition == k)
                    .map(|t| t.proc.clone())
                    .collect();
                if !procs.is_empty() {
                    let name = self.partitions[k].name.clone();
                    if let Err(e) = self.enforcer.update_uncontrolled(&name, &procs, &set) {
                        tracing::debug!(partition = %name, error = %e, "confinement not updated");
                    }
                }
                self.uncontrolled_sets[k] = set;
            }
        }
    }

    /// Take new runnable measurements (computed outside the lock); returns whether any
    /// partition's uncontrolled demand changed.
    pub(crate) fn update_runnable(&mut self, now: &[u32], alpha: f64) -> bool {
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
    pub(crate) fn reap_tracked(&mut self) -> bool {
        let before = self.tracked.len();
        let enforcer = &self.enforcer;
        let names: Vec<String> = self.partitions.iter().map(|p| p.name.clone()).collect();
        self.tracked
            .retain(|t| t.proc.alive() || !enforcer.cgroup_pids(&names[t.partition]).is_empty());
        before != self.tracked.len()
    }

    /// A status snapshot as `viewer` may see it: root (or `None`, the in-process handle) sees
    /// everything, any other uid only its own applications and processes.
    pub(crate) fn status(&self, viewer: Option<u32>) -> Status {
        let visible = |uid: u32| viewer.is_none_or(|v| v == 0 || v == uid);
        let now_ns = monotonic_ns();
        let mut partitions: Vec<PartitionStatus> = self
            .partitions
            .iter()
            .enumerate()
            .map(|(k, p)| {
                let a = self.last.partitions.get(k).cloned().unwrap_or_default();
                PartitionStatus {
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
            .filter(|a| visible(a.uid))
            .map(|a| {
                let (target, cpus) = a.published.unwrap_or((a.pool_size, CpuSet::new()));
                let hb = a.page.app.heartbeat.load(Ordering::Relaxed);
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
                    counter_source: "self-report".into(),
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
            refusals: self.refusals.clone(),
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
